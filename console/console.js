// The convoke web console: plain DOM, no framework, no build step. Everything shown comes from the
// HTTP API with the bearer token typed in (kept in sessionStorage for this tab only). Every value
// from the API is written as text (textContent, text nodes): a peer's result holding markup shows
// as that markup's text and never runs. Control, bidi and invisible characters and the line and
// paragraph separators in that text are shown as their \uXXXX escapes (shown()), as the CLI shows
// them. Live updates are server-sent events read through fetch, so the token rides in the
// Authorization header as for every other request.
'use strict';

(() => {
  const tokenKey = 'convoke.token';
  const main = document.getElementById('main');
  const status = document.getElementById('status');
  let stopLive = () => {};

  // ── DOM helpers: text only ──────────────────────────────────────────────
  // Characters that would hide or reorder what the page shows rather than be shown: the CLI's
  // terminalText set (src/cli/terminal-text.ts), kept the same by test/unit/console-shown.test.ts.
  // Every C0 control but the newline, DEL, the C1 controls, the bidi marks (U+061C, U+200E,
  // U+200F), embeddings, overrides and isolates (U+202A–U+202E, U+2066–U+2069), the invisible
  // characters that join or part nothing a script or an emoji needs (the zero width space U+200B,
  // U+2060–U+2064, the deprecated format controls U+206A–U+206F, the byte order mark U+FEFF), the
  // line and paragraph separators (U+2028, U+2029), and lone surrogates. A peer's result, a
  // caller's invocation key or a workflow's task name holding U+202E would otherwise show its text
  // reversed, and the rest of its line with it; one holding U+200B would look like another without
  // it, and one holding U+2028 would break its line where nothing shows why.
  const hidden = /[\u0000-\u0009\u000b-\u001f\u007f-\u009f\u061c\u200b\u200e\u200f\u2028\u2029\u202a-\u202e\u2060-\u2064\u2066-\u206f\ufeff\ud800-\udfff]/gu;
  /** `text` with each such character written as its escape `\uXXXX` (JSON's own: a JSON text stays the same value). */
  const shown = (text) => String(text).replace(hidden, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);

  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [name, value] of Object.entries(attrs || {})) {
      if (value === undefined || value === null || value === false) continue;
      if (name === 'class') node.className = value;
      else node.setAttribute(name, value === true ? '' : String(value));
    }
    for (const child of children.flat()) {
      if (child === undefined || child === null) continue;
      node.append(child instanceof Node ? child : document.createTextNode(shown(child)));
    }
    return node;
  }
  const say = (text, isError) => {
    status.textContent = shown(text);
    status.className = isError ? 'error' : '';
  };
  const clear = () => main.replaceChildren();
  const short = (id) => (typeof id === 'string' && id.length > 16 ? id.slice(0, 14) + '…' : String(id));
  const iso = (ms) => (typeof ms === 'number' && Number.isFinite(ms) && ms < 8.64e15 ? new Date(ms).toISOString() : '—');
  const rel = (ms, origin) => {
    if (typeof ms !== 'number' || ms >= Number.MAX_SAFE_INTEGER) return '∞';
    const delta = ms - origin;
    return delta < 0 ? String(delta) : `+${delta}`;
  };
  const json = (value) => {
    const text = JSON.stringify(value);
    return text === undefined ? '' : text;
  };
  const operationHref = (id) => `./?operation=${encodeURIComponent(id)}`;
  const instanceHref = (id) => `./?instance=${encodeURIComponent(id)}`;

  // ── authentication ──────────────────────────────────────────────────────
  const token = () => sessionStorage.getItem(tokenKey);
  class Refused extends Error {}
  class HttpError extends Error {
    constructor(statusCode, body) {
      super(body && typeof body.description === 'string' ? body.description : `HTTP ${statusCode}`);
      this.statusCode = statusCode;
    }
  }

  function refused() {
    sessionStorage.removeItem(tokenKey);
    stopLive();
    clear();
    showSignedIn(false);
    say('Authentication refused: the token was not accepted. Nothing is shown without a valid token.', true);
  }

  function showSignedIn(signedIn) {
    document.getElementById('signin').hidden = signedIn;
    document.getElementById('who').hidden = !signedIn;
    document.getElementById('who-text').textContent = signedIn ? 'signed in' : '';
  }

  async function api(path) {
    const response = await fetch(path, { headers: { authorization: `Bearer ${token()}`, accept: 'application/json' }, cache: 'no-store' });
    if (response.status === 401) throw new Refused();
    const body = await response.json().catch(() => null);
    if (!response.ok) throw new HttpError(response.status, body);
    return body;
  }

  /** Reads a server-sent event stream through fetch; calls onEvent(name, data). Resolves when it ends. */
  async function events(path, onEvent, signal) {
    const response = await fetch(path, { headers: { authorization: `Bearer ${token()}`, accept: 'text/event-stream' }, cache: 'no-store', signal });
    if (response.status === 401) throw new Refused();
    if (!response.ok) throw new HttpError(response.status, await response.json().catch(() => null));
    const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
    let buffer = '';
    try {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) return;
        buffer += value;
        let at;
        while ((at = buffer.indexOf('\n\n')) >= 0) {
          const block = buffer.slice(0, at);
          buffer = buffer.slice(at + 2);
          let name = 'message';
          const data = [];
          for (const line of block.split('\n')) {
            if (line.startsWith('event: ')) name = line.slice(7);
            else if (line.startsWith('data: ')) data.push(line.slice(6));
          }
          if (data.length > 0) onEvent(name, JSON.parse(data.join('\n')));
        }
      }
    } finally {
      // A handler that gave up on the stream (an update out of step) closes it: the server lets its stream go.
      reader.cancel().catch(() => {});
    }
  }

  // ── live inspections: a snapshot, then updates of what changed ─────────
  // An update holds only what changed since the event before it (docs/reference.md "The web
  // console"): a field present replaces the one held; a keyed list's entries replace the entry with
  // the same key or are added; timeline entries are appended. Updates are numbered from 1 after each
  // snapshot: one out of step means something was missed, and the stream is opened again.
  class OutOfStep extends Error {}

  function upsert(held, changed, keyOf) {
    const next = held.slice();
    const where = new Map(next.map((entry, i) => [keyOf(entry), i]));
    for (const entry of changed || []) {
      const at = where.get(keyOf(entry));
      if (at === undefined) {
        where.set(keyOf(entry), next.length);
        next.push(entry);
      } else next[at] = entry;
    }
    return next;
  }

  function applyFields(held, changed, lists) {
    const next = Object.assign({}, held);
    for (const [field, value] of Object.entries(changed || {})) next[field] = lists[field] ? upsert(held[field] || [], value, lists[field]) : value;
    return next;
  }

  /** Keeps what a live inspection stream sent: `apply(state, update)` folds one update in; returns the timeline entries new with each event. */
  function following(apply) {
    let state = null;
    let nextSeq = 1;
    return {
      take(name, data) {
        if (name === 'snapshot') {
          state = data;
          nextSeq = 1;
          return data.timeline;
        }
        if (!state || data.seq !== nextSeq || (data.timeline[0] && data.timeline[0].index !== state.timeline.length))
          throw new OutOfStep('an update was missed');
        state = apply(state, data);
        nextSeq += 1;
        return data.timeline;
      },
      get state() {
        return state;
      },
    };
  }

  const byAt = (entry) => entry.at;
  const byBranch = (entry) => entry.branchId;

  function applyOperationUpdate(held, update) {
    const next = applyFields(held, { branches: update.branches }, { branches: byBranch });
    if (update.result) next.result = applyFields(held.result, update.result, { branches: byBranch });
    for (const field of ['transitionsApplied', 'transitionsVoid']) if (field in update) next[field] = update[field];
    next.timeline = held.timeline.concat(update.timeline);
    return next;
  }

  function applyInstanceUpdate(held, update) {
    const next = applyFields(
      held,
      { tasks: update.tasks, timers: update.timers, children: update.children },
      { tasks: byAt, timers: (t) => t.key, children: byAt },
    );
    if ('lease' in update) next.lease = update.lease;
    if (update.instance) next.instance = applyFields(held.instance, update.instance, { stages: byAt, childInstances: byAt });
    next.timeline = held.timeline.concat(update.timeline);
    const started = new Map(next.tasks.map((t) => [t.at, t.startedSeq]));
    const order = (entry) => (started.has(entry.at) ? started.get(entry.at) : Number.MAX_SAFE_INTEGER);
    next.tasks.sort((a, b) => a.startedSeq - b.startedSeq);
    for (const list of [next.children, next.instance.stages, next.instance.childInstances || []]) list.sort((a, b) => order(a) - order(b));
    return next;
  }

  /** Keeps a stream open: reconnects after it ends or fails, until stopped or refused. */
  function live(path, onEvent, label) {
    const controller = new AbortController();
    let stopped = false;
    const run = async () => {
      while (!stopped) {
        try {
          await events(path, onEvent, controller.signal);
          if (!stopped) say(`${label}: live updates interrupted, reconnecting…`);
        } catch (error) {
          if (stopped) return;
          if (error instanceof Refused) return refused();
          if (error instanceof HttpError && error.statusCode < 500) {
            clear();
            return say(`${label}: ${error.message}`, true);
          }
          say(`${label}: live updates unavailable (${error.message}); retrying…`, true);
        }
        await new Promise((done) => setTimeout(done, 2000));
      }
    };
    run();
    return () => {
      stopped = true;
      controller.abort();
    };
  }

  /**
   * A live inspection's page (one operation, one workflow instance): `sections(inspection)` drawn
   * anew with each event of the stream at `path`, and below them the timeline section, to which
   * each event appends its new transitions (timelineRow, relative to `origin(inspection)`, with
   * their time guards when `guarded`).
   */
  function inspectionPage({ pageId, noun, id, back, path, apply, sections, origin, timeline: { title, caption }, guarded }) {
    const label = `${noun} ${short(id)}`;
    const top = el('div', { id: pageId });
    const head = ['#', 'revision', 'committed (+ms)', ...(guarded ? ['guard (+ms)'] : []), 'state', 'command', 'events'];
    const timeline = tableSection('timeline', title, head, [], { caption });
    const body = timeline.querySelector('tbody');
    main.replaceChildren(el('p', {}, back), top);
    say(`Loading ${short(id)}…`);
    const held = following(apply);
    const render = (name, data) => {
      if (name !== 'snapshot' && name !== 'update') return;
      const fresh = held.take(name, data);
      const inspection = held.state;
      if (name === 'snapshot') body.replaceChildren();
      if (!timeline.isConnected) main.append(timeline);
      top.replaceChildren(...sections(inspection));
      const from = origin(inspection);
      for (const t of fresh) body.append(timelineRow(t, from, guarded));
      say(`${label}: live, ${body.children.length} transitions, updated ${new Date().toLocaleTimeString()}`);
    };
    stopLive = live(path, render, label);
  }

  // ── the operations list ─────────────────────────────────────────────────
  const filterFields = [
    ['phase', ['', 'admitted', 'active', 'closed', 'settled']],
    ['outcome', ['', 'open', 'success', 'partial', 'failed', 'indeterminate']],
    ['settlement', ['', 'pending', 'complete', 'indeterminate']],
    ['stuck', ['', 'true', 'open-past-deadline', 'lease-expired', 'outbox-pending', 'settlement-indeterminate']],
  ];

  /**
   * A list's filter form (operations, workflow instances): selects, then text inputs, then Apply,
   * which navigates to the list with the filled fields (beside `base`, the list's own parameters).
   */
  function listFilterForm(params, { label, idPrefix, selects, inputs, base = [] }) {
    const form = el('form', { class: 'filters', method: 'get', action: './', role: 'search', 'aria-label': label });
    for (const [name, values] of selects) {
      const select = el(
        'select',
        { name, id: `${idPrefix}${name}` },
        values.map((v) => el('option', { value: v, selected: params.get(name) === v }, v === '' ? 'any' : v)),
      );
      form.append(el('label', { for: `${idPrefix}${name}` }, name, select));
    }
    for (const [name, hint, size] of inputs) {
      form.append(
        el(
          'label',
          { for: `${idPrefix}${name}` },
          name,
          el('input', { name, id: `${idPrefix}${name}`, value: params.get(name) || '', placeholder: hint, size }),
        ),
      );
    }
    form.append(el('button', { type: 'submit' }, 'Apply'));
    form.addEventListener('submit', (event) => {
      event.preventDefault();
      const next = new URLSearchParams(base);
      for (const [name, value] of new FormData(form)) if (value !== '') next.set(name, String(value));
      navigate(`./${next.toString() ? '?' + next : ''}`);
    });
    return form;
  }

  const timeInputs = [
    ['since', 'RFC 3339 or ms', 22],
    ['until', 'RFC 3339 or ms', 22],
  ];

  function filterForm(params) {
    return listFilterForm(params, {
      label: 'Filter operations',
      idPrefix: 'f-',
      selects: filterFields,
      inputs: [['interaction', 'interaction id', 16], ...timeInputs],
    });
  }

  function listTable(page) {
    const rows = page.operations.map((op) =>
      el(
        'tr',
        {},
        el('td', { class: 'mono' }, el('a', { href: operationHref(op.operationId), title: op.operationId }, short(op.operationId))),
        el('td', {}, op.interaction),
        el('td', {}, `${op.contractId}@${op.contractVersion}`),
        el('td', {}, op.principalId),
        el('td', {}, op.phase),
        el('td', { class: `outcome-${op.outcome || 'open'}` }, op.outcome || 'open'),
        el('td', {}, op.settlement),
        el('td', { class: 'mono' }, iso(op.admittedAtMs)),
        el('td', { class: 'num' }, op.openBranches),
        el('td', { class: 'stuck' }, (op.stuck || []).join(', ')),
      ),
    );
    const head = ['operation', 'interaction', 'contract', 'principal', 'phase', 'outcome', 'settlement', 'admitted', 'open branches', 'stuck'];
    return pageTable({ id: 'operations', noun: 'operation', head, numeric: 'open branches', rows, nextCursor: page.nextCursor });
  }

  /** One page of a list as a table: its count and whether more follow in the caption, one numeric column. */
  function pageTable({ id, noun, head, numeric, rows, nextCursor }) {
    return el(
      'table',
      { id },
      el('caption', {}, `${rows.length} ${noun}${rows.length === 1 ? '' : 's'}${nextCursor ? ' (more on the next page)' : ''}`),
      el(
        'thead',
        {},
        el(
          'tr',
          {},
          head.map((h) => el('th', { scope: 'col', class: h === numeric ? 'num' : undefined }, h)),
        ),
      ),
      el('tbody', {}, rows),
    );
  }

  function listPage(params) {
    const query = new URLSearchParams();
    for (const [name, value] of params) if (name !== 'operation' && value !== '') query.set(name, value);
    const results = el('div', { id: 'results' });
    const lookup = el(
      'form',
      { class: 'filters', 'aria-label': 'Open an operation' },
      el('label', { for: 'open-id' }, 'operation id', el('input', { id: 'open-id', name: 'operation', size: 40, placeholder: 'op… (full id)' })),
      el('button', { type: 'submit' }, 'Open'),
    );
    lookup.addEventListener('submit', (event) => {
      event.preventDefault();
      const id = String(new FormData(lookup).get('operation') || '').trim();
      if (id !== '') navigate(operationHref(id));
    });
    main.replaceChildren(el('h2', {}, 'Operations'), filterForm(params), results, lookup);
    const render = (page) => {
      const next = page.nextCursor
        ? el('p', {}, el('a', { href: `./?${new URLSearchParams([...query, ['cursor', page.nextCursor]])}`, id: 'next-page' }, 'Next page'))
        : null;
      results.replaceChildren(listTable(page), next || '');
      say(`Operations: live, updated ${new Date().toLocaleTimeString()}`);
    };
    stopLive = live(`/contract-invocations/events?${query}`, (name, data) => name === 'page' && render(data), 'Operations');
  }

  // ── one operation ───────────────────────────────────────────────────────
  function facts(pairs) {
    return el(
      'dl',
      { class: 'facts' },
      pairs.flatMap(([k, v]) => [el('dt', {}, k), el('dd', {}, v)]),
    );
  }

  /**
   * A titled section holding one scrolling table, named `${label} table` (label: the title unless
   * given): `summary` (optional) between the title and the table, `caption` (optional) on the
   * table, the `numeric` columns' headers marked as numbers.
   */
  function tableSection(id, title, head, rows, { label = title, caption, summary, numeric = [] } = {}) {
    return el(
      'section',
      { 'aria-labelledby': `h-${id}` },
      el('h2', { id: `h-${id}` }, title),
      summary,
      el(
        'div',
        { class: 'scroll', tabindex: 0, role: 'region', 'aria-label': `${label} table` },
        el(
          'table',
          { id },
          caption ? el('caption', {}, caption) : null,
          el(
            'thead',
            {},
            el(
              'tr',
              {},
              head.map((h) => el('th', { scope: 'col', class: numeric.includes(h) ? 'num' : undefined }, h)),
            ),
          ),
          el('tbody', {}, rows),
        ),
      ),
    );
  }

  function summarySection(inspection) {
    const r = inspection.result;
    const d = r.decision;
    return el(
      'section',
      { 'aria-labelledby': 'h-summary' },
      el('h2', { id: 'h-summary' }, 'Operation ', el('code', {}, r.operationId)),
      facts([
        ['principal', inspection.principalId],
        ['contract', `${r.contract.id}@${r.contract.version}`],
        ['interaction', r.interaction],
        ['invocation key', r.invocationKey],
        ['phase', r.phase],
        ['admitted', iso(r.admittedAtMs)],
        ['deadline', `${iso(r.deadlineMs)} (${rel(r.deadlineMs, r.admittedAtMs)} ms)`],
      ]),
      el('h3', {}, 'Decision'),
      d
        ? facts([
            ['outcome', el('strong', { class: `outcome-${d.outcome}`, id: 'outcome' }, d.outcome)],
            ['reason', d.reason],
            ['votes', `${d.successVotes} success of ${d.units} units (threshold ${d.threshold}); ${d.failedUnits} failed`],
            ['closed', `${iso(d.closedAtMs)} (${rel(d.closedAtMs, r.admittedAtMs)} ms)`],
          ])
        : el('p', { id: 'outcome' }, 'open: no decision yet'),
      el('h3', {}, 'Output'),
      r.outputError
        ? el('p', { class: 'void' }, `${r.outputError.kind}: ${r.outputError.description || ''}`)
        : el('pre', { id: 'output' }, JSON.stringify(r.output, null, 2)),
      el('h3', {}, 'Settlement'),
      facts([
        ['status', el('span', { id: 'settlement' }, r.settlement.status)],
        [
          'siblings',
          r.settlement.siblings.length === 0
            ? 'none'
            : r.settlement.siblings.map((s) => `${s.branchId}: ${s.disposition}${s.outcome ? ' → ' + s.outcome : ''}`).join('; '),
        ],
      ]),
    );
  }

  function branchesSection(inspection) {
    const origin = inspection.result.admittedAtMs;
    const counts = new Map();
    for (const b of inspection.branches) counts.set(b.status, (counts.get(b.status) || 0) + 1);
    const rows = inspection.branches.map((b) =>
      el(
        'tr',
        {},
        el('td', { class: 'mono' }, b.branchId),
        el('td', {}, b.peerId),
        el('td', { class: `st-${b.status}` }, b.status),
        el('td', { class: 'num' }, b.attempt),
        el('td', { class: 'num' }, b.fence),
        el('td', { class: 'num' }, rel(b.leaseUntilMs, origin)),
        el('td', {}, b.disposition || ''),
        el('td', {}, b.cancelOutcome || ''),
        el('td', {}, 'result' in b ? el('code', { class: 'result' }, json(b.result)) : ''),
      ),
    );
    const head = ['branch', 'peer', 'status', 'attempt', 'fence', 'lease until (+ms)', 'disposition', 'cancel', 'result'];
    return tableSection('branches', `Branches (${inspection.branches.length})`, head, rows, {
      label: 'Branches',
      summary: el(
        'p',
        { class: 'summary' },
        [...counts].map(([s, n]) => el('span', { class: `st-${s}` }, `${n} ${s}`)),
      ),
      numeric: ['attempt', 'fence', 'lease until (+ms)'],
    });
  }

  /** An event: its type and scalar facts on one line; the whole event, as JSON text, folded below. */
  function eventCell(event) {
    const { type, v: _v, ...rest } = event;
    const facts = Object.entries(rest)
      .filter(([, value]) => value === null || typeof value !== 'object')
      .map(([key, value]) => `${key}=${typeof value === 'string' ? value : json(value)}`)
      .join(' ');
    const line = facts.length > 160 ? facts.slice(0, 159) + '…' : facts;
    return el('details', {}, el('summary', {}, el('strong', {}, type), line ? ` ${line}` : ''), el('pre', {}, JSON.stringify(rest, null, 2)));
  }

  /** One stored transition of a timeline, its instants relative to `origin`; its time guard only where the page shows one (an operation's). */
  function timelineRow(t, origin, guarded) {
    const g = t.timeGuard;
    return el(
      'tr',
      { 'data-index': t.index },
      el('td', { class: 'num' }, t.index),
      el('td', { class: 'mono' }, t.revision),
      el('td', { class: 'mono' }, `${iso(t.committedAtMs)} (${rel(t.committedAtMs, origin)})`),
      guarded ? el('td', { class: 'mono' }, `[${rel(g.notBeforeMs, origin)}, ${rel(g.notAfterMs, origin)})`) : null,
      el('td', { class: t.applied ? 'applied' : 'void' }, t.applied ? 'applied' : 'void'),
      el('td', {}, t.command),
      el('td', { class: 'events' }, t.events.map(eventCell)),
    );
  }

  function operationPage(operationId) {
    inspectionPage({
      pageId: 'operation',
      noun: 'Operation',
      id: operationId,
      back: el('a', { href: './' }, '← Operations'),
      path: `/contract-invocations/${encodeURIComponent(operationId)}/events`,
      apply: applyOperationUpdate,
      sections: (inspection) => [summarySection(inspection), branchesSection(inspection)],
      origin: (inspection) => inspection.result.admittedAtMs,
      timeline: { title: 'Timeline', caption: "Every stored transition of the operation's stream; times relative to admission" },
      guarded: true,
    });
  }

  // ── workflow instances ──────────────────────────────────────────────────
  const instanceFilterFields = [
    ['status', ['', 'running', 'completed', 'faulted', 'cancelled']],
    ['stuck', ['', 'true', 'past-timeout', 'timer-overdue', 'lease-expired']],
  ];

  function instanceFilterForm(params) {
    return listFilterForm(params, {
      label: 'Filter workflow instances',
      idPrefix: 'wf-',
      selects: instanceFilterFields,
      inputs: [['workflow', 'workflow name', 16], ...timeInputs],
      base: [['view', 'workflows']],
    });
  }

  function instancesTable(page) {
    const rows = page.instances.map((wf) =>
      el(
        'tr',
        {},
        el('td', { class: 'mono' }, el('a', { href: instanceHref(wf.instanceId), title: wf.instanceId }, short(wf.instanceId))),
        el('td', {}, wf.workflowName),
        el('td', {}, wf.principalId),
        el('td', { class: `st-${wf.status}` }, wf.status),
        el('td', { class: 'mono' }, wf.currentTask ? wf.currentTask.name : ''),
        el('td', { class: 'mono' }, iso(wf.startedAtMs)),
        el('td', { class: 'mono' }, wf.endedAtMs === null ? '' : iso(wf.endedAtMs)),
        el('td', { class: 'mono' }, wf.nextDueMs === null ? '' : iso(wf.nextDueMs)),
        el('td', { class: 'num' }, wf.childOperations),
        el('td', {}, wf.lastError ? `${wf.lastError.status} ${wf.lastError.title || wf.lastError.type}` : ''),
        el('td', { class: 'stuck' }, (wf.stuck || []).join(', ')),
      ),
    );
    const head = ['instance', 'workflow', 'principal', 'status', 'task', 'started', 'ended', 'next due', 'children', 'last error', 'stuck'];
    return pageTable({ id: 'instances', noun: 'instance', head, numeric: 'children', rows, nextCursor: page.nextCursor });
  }

  function instancesPage(params) {
    const query = new URLSearchParams();
    for (const [name, value] of params) if (name !== 'view' && value !== '') query.set(name, value);
    const results = el('div', { id: 'results' });
    main.replaceChildren(el('h2', {}, 'Workflow instances'), instanceFilterForm(params), results);
    const render = (page) => {
      const next = page.nextCursor
        ? el(
            'p',
            {},
            el('a', { href: `./?${new URLSearchParams([['view', 'workflows'], ...query, ['cursor', page.nextCursor]])}`, id: 'next-page' }, 'Next page'),
          )
        : null;
      results.replaceChildren(instancesTable(page), next || '');
      say(`Workflow instances: live, updated ${new Date().toLocaleTimeString()}`);
    };
    stopLive = live(`/workflow-instances/events?${query}`, (name, data) => name === 'page' && render(data), 'Workflow instances');
  }

  function instanceSummary(inspection) {
    const wf = inspection.instance;
    const origin = wf.startedAtMs;
    const lease = inspection.lease;
    return el(
      'section',
      { 'aria-labelledby': 'h-instance' },
      el('h2', { id: 'h-instance' }, 'Workflow instance ', el('code', {}, wf.instanceId)),
      facts([
        ['status', el('strong', { class: `st-${wf.status}`, id: 'instance-status' }, wf.status)],
        ['workflow', wf.workflow],
        ['bundle', `${wf.bundle.id}@${wf.bundle.version} (${wf.bundle.digest})`],
        ['principal', inspection.principalId],
        ['invocation key', wf.invocationKey],
        ['started', iso(wf.startedAtMs)],
        ['ended', wf.endedAtMs === null ? 'running' : `${iso(wf.endedAtMs)} (${rel(wf.endedAtMs, origin)} ms)`],
        ['timeout', inspection.deadlineMs === null ? 'none' : `${iso(inspection.deadlineMs)} (${rel(inspection.deadlineMs, origin)} ms)`],
        ['current task', wf.currentTask ? `${wf.currentTask.name} (${wf.currentTask.at})` : 'none'],
        [
          'parent',
          wf.parent
            ? el(
                'span',
                {},
                el('a', { href: instanceHref(wf.parent.instanceId), title: wf.parent.instanceId, id: 'instance-parent' }, short(wf.parent.instanceId)),
                ` at ${wf.parent.at}`,
              )
            : 'none (started on its own)',
        ],
        ['lease', lease ? `${lease.worker}, epoch ${lease.epoch}, until ${iso(lease.untilMs)}` : 'none held'],
      ]),
      el('h3', {}, 'Input'),
      el('pre', { id: 'instance-input' }, JSON.stringify(inspection.input, null, 2)),
      wf.error
        ? el('div', {}, el('h3', {}, 'Error'), el('pre', { id: 'instance-error', class: 'void' }, JSON.stringify(wf.error, null, 2)))
        : el('div', {}, el('h3', {}, 'Output'), el('pre', { id: 'instance-output' }, wf.status === 'completed' ? JSON.stringify(wf.output, null, 2) : '—')),
    );
  }

  /** Task executions as a tree: each indented under the pointer of the task it runs inside. */
  function tasksSection(inspection) {
    const origin = inspection.instance.startedAtMs;
    const rows = inspection.tasks.map((t) => {
      const depth = Math.max(0, t.at.split('/').filter((part, i, all) => part === 'do' && i < all.length - 1).length - 1);
      return el(
        'tr',
        { 'data-at': t.at },
        el('td', { class: 'mono' }, el('span', { class: 'indent', style: undefined }, '\u00a0\u00a0'.repeat(depth)), t.at),
        el('td', {}, t.name),
        el('td', { class: `st-${t.state}` }, t.state),
        el('td', { class: 'num' }, rel(t.startedAtMs, origin)),
        el('td', {}, t.error ? `${t.error.status} ${t.error.title || t.error.type}` : t.output === null ? '' : el('code', { class: 'result' }, json(t.output))),
      );
    });
    return tableSection('tasks', `Tasks (${inspection.tasks.length})`, ['task (pointer)', 'name', 'state', 'started (+ms)', 'output or error'], rows);
  }

  function timersSection(inspection) {
    const origin = inspection.instance.startedAtMs;
    const rows = inspection.timers.map((t) =>
      el(
        'tr',
        {},
        el('td', { class: 'mono' }, t.key),
        el('td', {}, t.purpose),
        el('td', { class: 'mono' }, `${iso(t.dueAtMs)} (${rel(t.dueAtMs, origin)})`),
        el('td', {}, t.state),
      ),
    );
    return tableSection('timers', `Timers (${inspection.timers.length})`, ['timer', 'purpose', 'due (+ms)', 'state'], rows);
  }

  function childrenSection(inspection) {
    const rows = inspection.children.map((c) =>
      el(
        'tr',
        {},
        el('td', { class: 'mono' }, c.at),
        el('td', { class: 'mono' }, el('a', { href: operationHref(c.operationId), title: c.operationId }, short(c.operationId))),
        el('td', { class: 'mono' }, short(c.invocationKey)),
        el('td', { class: 'num' }, c.attempt),
        el('td', {}, c.disposition || ''),
      ),
    );
    return tableSection(
      'children',
      `Child operations (${inspection.children.length})`,
      ['task', 'operation', 'invocation key', 'attempt', 'disposition'],
      rows,
    );
  }

  /** The child workflow instances its `run: workflow` tasks started, each linked to its own page. */
  function childInstancesSection(inspection) {
    const children = inspection.instance.childInstances || [];
    const rows = children.map((c) =>
      el(
        'tr',
        {},
        el('td', { class: 'mono' }, c.at),
        el('td', { class: 'mono' }, el('a', { href: instanceHref(c.instanceId), title: c.instanceId }, short(c.instanceId))),
        el('td', {}, c.workflow),
        el('td', { class: c.status ? `st-${c.status}` : '' }, c.status || 'not started'),
        el('td', {}, c.disposition || ''),
      ),
    );
    return tableSection('child-instances', `Child workflow instances (${children.length})`, ['task', 'instance', 'workflow', 'status', 'disposition'], rows);
  }

  function instancePage(instanceId) {
    inspectionPage({
      pageId: 'instance',
      noun: 'Workflow instance',
      id: instanceId,
      back: el('a', { href: './?view=workflows' }, '← Workflow instances'),
      path: `/workflow-instances/${encodeURIComponent(instanceId)}/events`,
      apply: applyInstanceUpdate,
      sections: (inspection) => [
        instanceSummary(inspection),
        tasksSection(inspection),
        timersSection(inspection),
        childrenSection(inspection),
        childInstancesSection(inspection),
      ],
      origin: (inspection) => inspection.instance.startedAtMs,
      timeline: { title: 'Event stream', caption: "Every stored transition of the instance's stream; times relative to its start" },
      guarded: false,
    });
  }

  // ── routing ─────────────────────────────────────────────────────────────
  function navigate(href) {
    history.pushState(null, '', href);
    route();
  }

  function route() {
    stopLive();
    stopLive = () => {};
    clear();
    if (!token()) {
      showSignedIn(false);
      say('Sign in with a bearer token to see operations.');
      return;
    }
    showSignedIn(true);
    const params = new URLSearchParams(location.search);
    const operationId = params.get('operation');
    const instanceId = params.get('instance');
    if (operationId) operationPage(operationId);
    else if (instanceId) instancePage(instanceId);
    else if (params.get('view') === 'workflows') instancesPage(params);
    else listPage(params);
  }

  document.getElementById('signin').addEventListener('submit', async (event) => {
    event.preventDefault();
    const input = document.getElementById('token');
    sessionStorage.setItem(tokenKey, input.value.trim());
    input.value = '';
    // One cheap authenticated request decides before anything renders.
    try {
      await api('/contract-invocations?limit=1');
    } catch (error) {
      if (error instanceof Refused) return refused();
    }
    route();
  });
  document.getElementById('signout').addEventListener('click', () => {
    sessionStorage.removeItem(tokenKey);
    route();
  });
  document.addEventListener('click', (event) => {
    const link = event.target instanceof Element ? event.target.closest('a[href^="./"]') : null;
    if (!link || event.button !== 0 || event.metaKey || event.ctrlKey || event.shiftKey) return;
    event.preventDefault();
    navigate(link.getAttribute('href'));
  });
  window.addEventListener('popstate', route);
  route();
})();
