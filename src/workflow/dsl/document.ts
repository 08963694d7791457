/**
 * What convoke checks in a Serverless Workflow document beyond the DSL's schema (checked by
 * src/workflow/dsl/dsl-schema.ts): the task types and features the executor runs, every call and
 * reference resolving, contract calls naming a contract the bundle can vouch for, flow directives
 * naming a task of their own list, and runtime expressions free of non-deterministic jq.
 *
 * Refusals name the task and its JSON Pointer. Pointers are the bundle's (`/workflows/<name>/do/0/
 * review`) inside a bundle, the document's (`/do/0/review`) for a standalone document.
 */
import { assert, invalidInput, unsupported } from '../../contract/errors.js';
import { jsonPointer } from '../../contract/ijson.js';
import { isObject, jsonEquals, type JsonObject, type JsonValue } from '../../contract/json.js';
import { limits } from '../../contract/limits.js';
import type { Interaction } from '../../contract/types.js';
import { compileApplicationSchema, describeErrors } from '../../contract/validation.js';
import { documentSchemas } from '../schemas.js';
import { checkAuthenticationPolicy, checkCallAuthentication } from '../authentication.js';
import { authenticationPlaces, checkSecretUses, valueAt } from '../secrets.js';
import { checkFlowDirective, namesWorkflow, refusedCallTypes, type WorkflowRef } from '../refs.js';
import { workflowDslVersion } from '../version.js';
import { checkContractCallWith, contractFunctionDefinition, contractFunctionDefinitionV1, contractFunctionName } from './contract-function.js';
import { checkDeterministicJq, checkDeterministicText, isRuntimeExpression } from '../jq-determinism.js';

/** The bundle a document is pinned in: what its contract calls may name without a digest. */
export interface EnclosingContract {
  id: string;
  version: string;
  interactions: ReadonlyMap<string, Interaction> | Record<string, Interaction>;
}

/** Task types the executor runs (the first wave); `run` is the one the DSL has beyond these. */
export const supportedTaskTypes = ['call', 'do', 'fork', 'emit', 'for', 'listen', 'raise', 'set', 'switch', 'try', 'wait'] as const;
const taskTypes = [...supportedTaskTypes, 'run'] as const;
/** What the walk learned about a document. */
export interface DocumentFacts {
  /** Whether some task calls the contract function. */
  callsContract: boolean;
  /** The JSON Pointers (in the document) of the tasks that call it. */
  contractCalls: string[];
  tasks: number;
  /** The `run: workflow` tasks: where (the bundle's pointer of `run/workflow`) and the workflow each names. */
  runs: { where: string; ref: WorkflowRef }[];
}

export { namesWorkflow, type WorkflowRef };

/** The message of a `run: workflow` reference that resolves to nothing beside it. */
export const unresolvedRun = (where: string, ref: WorkflowRef, beside: string): string =>
  `${where}: the workflow ${ref.namespace}/${ref.name}@${ref.version ?? 'latest'} is not ${beside}; a child workflow runs from the bundle that pins its parent`;

interface Walk {
  base: string;
  document: JsonObject;
  enclosing: EnclosingContract | undefined;
  facts: DocumentFacts;
}

const at = (base: string, ...segments: (string | number)[]) => base + jsonPointer(segments);
const names = (v: JsonValue | undefined): Set<string> => new Set(isObject(v) ? Object.keys(v) : []);

/**
 * Checks a document's features, references and expressions; throws `unsupported` for a feature
 * convoke does not run, `invalid-input` for anything else, each naming its JSON Pointer.
 */
export function checkWorkflowDocument(document: JsonObject, base = '', enclosing?: EnclosingContract): DocumentFacts {
  const walk: Walk = { base, document, enclosing, facts: { callsContract: false, contractCalls: [], tasks: 0, runs: [] } };
  checkTopLevel(walk);
  const use = isObject(document.use) ? document.use : {};
  if (use.authentications !== undefined) {
    if (!isObject(use.authentications)) throw invalidInput(`${at(base, 'use', 'authentications')}: must map names to authentication policies`);
    for (const [name, policy] of Object.entries(use.authentications)) checkAuthenticationPolicy(policy, at(base, 'use', 'authentications', name), true);
  }
  if (isObject(use.functions)) {
    for (const [name, task] of Object.entries(use.functions)) {
      const where = at(base, 'use', 'functions', name);
      if (name === contractFunctionName) {
        if (!jsonEquals(task, contractFunctionDefinition) && !jsonEquals(task, contractFunctionDefinitionV1)) {
          throw invalidInput(
            `${where}: "${contractFunctionName}" is convoke's contract function; omit it (it is declared for you) or declare it exactly as docs/workflows.md shows`,
          );
        }
        continue;
      }
      checkTask(walk, name, task, where, new Set());
    }
  }
  if (isObject(use.retries)) for (const [name, retry] of Object.entries(use.retries)) checkRetry(retry, at(base, 'use', 'retries', name));
  checkTaskList(walk, document.do, at(base, 'do'));
  checkBareExpression(isObject(document.input) ? document.input.from : undefined, at(base, 'input', 'from'));
  checkBareExpression(isObject(document.output) ? document.output.as : undefined, at(base, 'output', 'as'));
  checkStrings(document, base);
  checkReferences(walk);
  documentSchemas(document, base);
  // The contract function's declaration reads its secret for other engines; this executor never runs it.
  checkSecretUses(document, base, (path) => path.length === 3 && path[0] === 'use' && path[1] === 'functions' && path[2] === contractFunctionName);
  // A standalone document runs only itself; a bundle's runs are resolved against the bundle (bundle.ts).
  if (enclosing === undefined)
    for (const run of walk.facts.runs) if (!namesWorkflow(document, run.ref)) throw unsupported(unresolvedRun(run.where, run.ref, 'this document'));
  return walk.facts;
}

/** The document's version, and the features outside any task that convoke does not run. */
function checkTopLevel(walk: Walk): void {
  const { document, base } = walk;
  const header = isObject(document.document) ? document.document : {};
  if (header.dsl !== workflowDslVersion) {
    throw unsupported(
      `${at(base, 'document', 'dsl')}: convoke reads Serverless Workflow ${workflowDslVersion} documents, got ${JSON.stringify(header.dsl ?? null)}`,
    );
  }
  const use = isObject(document.use) ? document.use : {};
  if (use.extensions !== undefined) {
    throw unsupported(
      `${at(base, 'use', 'extensions')}: extensions (tasks run before or after others) are not supported: convoke runs the tasks a document declares, nothing else`,
    );
  }
  if (use.catalogs !== undefined) {
    throw unsupported(
      `${at(base, 'use', 'catalogs')}: external catalogs are not supported: every function a bundle runs is declared in it, so its digest pins it`,
    );
  }
  if (document.schedule !== undefined) {
    throw unsupported(`${at(base, 'schedule')}: schedules are not supported: a convoke workflow instance starts when a caller starts it`);
  }
  const evaluate = isObject(document.evaluate) ? document.evaluate : {};
  if (evaluate.language !== undefined && evaluate.language !== 'jq') {
    throw unsupported(`${at(base, 'evaluate', 'language')}: runtime expressions are jq only, got ${JSON.stringify(evaluate.language)}`);
  }
  if (evaluate.mode !== undefined && evaluate.mode !== 'strict') {
    throw unsupported(
      `${at(base, 'evaluate', 'mode')}: only strict evaluation (every expression inside \${ }) is supported, so that every expression is found and checked before anything runs`,
    );
  }
}

/** A task list (`do`, `try`, `fork.branches`, …): each item one named task; flow directives stay in the list. */
function checkTaskList(walk: Walk, list: JsonValue | undefined, where: string): void {
  if (!Array.isArray(list)) throw invalidInput(`${where}: a task list must be an array of single-entry objects`);
  const declared = new Set<string>();
  for (const item of list) if (isObject(item)) for (const name of Object.keys(item)) declared.add(name);
  list.forEach((item, index) => {
    const entries = isObject(item) ? Object.entries(item) : [];
    if (entries.length !== 1) throw invalidInput(`${at(where, index)}: a task list item must have exactly one named task`);
    const [name, task] = entries[0] as [string, JsonValue];
    checkTask(walk, name, task, `${where}${jsonPointer([index, name])}`, declared);
  });
}

/** One task: its type supported, its references resolved, its nested lists walked. */
function checkTask(walk: Walk, name: string, task: JsonValue, where: string, siblings: ReadonlySet<string>): void {
  walk.facts.tasks += 1;
  if (walk.facts.tasks > limits.workflowTasksMax) throw invalidInput(`${where}: a document may declare at most ${limits.workflowTasksMax} tasks`);
  if (!isObject(task)) throw invalidInput(`${where}: task "${name}" must be an object`);
  // A `for` task carries its body in `do`: that `do` is not a second type.
  const types = taskTypes.filter((t) => t in task && !(t === 'do' && 'for' in task));
  if (types.length !== 1) throw invalidInput(`${where}: task "${name}" must have exactly one of ${taskTypes.join(', ')}`);
  const type = types[0] as (typeof taskTypes)[number];
  checkFlowDirective(task.then, siblings, at(where, 'then'));
  checkBareExpression(task.if, at(where, 'if'));
  checkBareExpression(isObject(task.input) ? task.input.from : undefined, at(where, 'input', 'from'));
  checkBareExpression(isObject(task.output) ? task.output.as : undefined, at(where, 'output', 'as'));
  checkBareExpression(isObject(task.export) ? task.export.as : undefined, at(where, 'export', 'as'));
  checkTaskBody(walk, name, type, task, where);
}

function checkTaskBody(walk: Walk, name: string, type: (typeof taskTypes)[number], task: JsonObject, where: string): void {
  switch (type) {
    case 'run':
      return checkRun(walk, name, task, where);
    case 'call':
      return checkCall(walk, name, task, where);
    case 'do':
      return checkTaskList(walk, task.do, at(where, 'do'));
    case 'for':
      checkBareExpression(isObject(task.for) ? task.for.in : undefined, at(where, 'for', 'in'));
      checkBareExpression(task.while, at(where, 'while'));
      return checkTaskList(walk, task.do, at(where, 'do'));
    case 'fork':
      return checkTaskList(walk, isObject(task.fork) ? task.fork.branches : undefined, at(where, 'fork', 'branches'));
    case 'try':
      return checkTry(walk, task, where);
    case 'switch':
      return checkSwitch(task, where);
    case 'listen':
      checkBareExpression(isObject(task.listen) && isObject(task.listen.to) ? task.listen.to.until : undefined, at(where, 'listen', 'to', 'until'));
      if (isObject(task.foreach)) checkTaskList(walk, task.foreach.do, at(where, 'foreach', 'do'));
      return;
    case 'emit':
    case 'raise':
    case 'set':
    case 'wait':
      return;
    default: {
      const _exhaustive: never = type;
      assert(false, `unknown task type ${String(_exhaustive)}`);
    }
  }
}

/** `run: workflow` (a child instance of a workflow the bundle pins); processes are refused. */
function checkRun(walk: Walk, name: string, task: JsonObject, where: string): void {
  const run = isObject(task.run) ? task.run : {};
  const kind = ['container', 'shell', 'script', 'workflow'].find((k) => run[k] !== undefined);
  if (kind !== 'workflow')
    throw unsupported(
      `${where}: task "${name}" is run${kind ? ` (${kind})` : ''}: convoke runs no processes, containers or scripts; call a contract or an HTTP service, or run a workflow of the bundle`,
    );
  const workflow = run.workflow;
  const valid =
    isObject(workflow) &&
    typeof workflow.namespace === 'string' &&
    typeof workflow.name === 'string' &&
    (workflow.version === undefined || typeof workflow.version === 'string') &&
    (workflow.input === undefined || isObject(workflow.input));
  if (!valid)
    throw invalidInput(`${at(where, 'run', 'workflow')}: task "${name}" names a workflow by namespace, name and version (strings), with an input object`);
  const version = workflow.version === undefined || workflow.version === 'latest' ? undefined : (workflow.version as string);
  walk.facts.runs.push({ where: at(where, 'run', 'workflow'), ref: { namespace: workflow.namespace as string, name: workflow.name as string, version } });
}

function checkCall(walk: Walk, name: string, task: JsonObject, where: string): void {
  const call = task.call;
  if (typeof call !== 'string') throw invalidInput(`${at(where, 'call')}: task "${name}" must name the function it calls`);
  if (call === 'http') {
    const endpoint = isObject(task.with) ? task.with.endpoint : undefined;
    if (isObject(endpoint) && endpoint.authentication !== undefined)
      checkCallAuthentication(walk.document, endpoint.authentication, at(where, 'with', 'endpoint', 'authentication'));
    return;
  }
  if (call === 'openapi') return checkOpenApiCall(walk, name, task.with, where);
  if (refusedCallTypes.has(call)) {
    throw unsupported(
      `${where}: task "${name}" is call ${call}: convoke calls HTTP services (directly or through their OpenAPI document) and contracts only (grpc, asyncapi, a2a and mcp are not supported)`,
    );
  }
  if (call === contractFunctionName) {
    walk.facts.callsContract = true;
    walk.facts.contractCalls.push(where.slice(walk.base.length));
    return checkContractCall(walk, task.with, where);
  }
  const declared = names(isObject(walk.document.use) ? walk.document.use.functions : undefined);
  if (declared.has(call)) return;
  if (/^[A-Za-z][A-Za-z0-9+.-]*:\/\//.test(call) || call.includes('@')) {
    throw unsupported(
      `${where}: task "${name}" calls the cataloged function ${JSON.stringify(call)}: external catalogs are not supported (declare the function in use.functions so the bundle pins it)`,
    );
  }
  throw invalidInput(
    `${at(where, 'call')}: task "${name}" calls ${JSON.stringify(call)}, which is neither http, ${contractFunctionName} nor a function in use.functions`,
  );
}

/** An OpenAPI call: its document's endpoint and the operation's id, and the authentication policies it names resolve. */
function checkOpenApiCall(walk: Walk, name: string, args: JsonValue | undefined, where: string): void {
  if (!isObject(args) || !isObject(args.document) || args.document.endpoint === undefined)
    throw invalidInput(`${at(where, 'with', 'document')}: task "${name}" is call openapi: with.document.endpoint names the OpenAPI document`);
  if (typeof args.operationId !== 'string')
    throw invalidInput(`${at(where, 'with', 'operationId')}: task "${name}" is call openapi: with.operationId is required`);
  for (const place of authenticationPlaces('openapi')) {
    const policy = valueAt(args, place);
    if (policy !== undefined) checkCallAuthentication(walk.document, policy, at(where, 'with', ...place));
  }
}

/** A contract call: its `with` shape, and, for the enclosing bundle's contract, the interaction and boundary. */
function checkContractCall(walk: Walk, value: JsonValue | undefined, where: string): void {
  const args = checkContractCallWith(value, where);
  const enclosing = walk.enclosing;
  const own = enclosing !== undefined && args.contract.id === enclosing.id && args.contract.version === enclosing.version;
  if (args.contract.digest === undefined && !own) {
    const self = enclosing ? ` (this bundle is ${enclosing.id}@${enclosing.version})` : '';
    throw invalidInput(`${at(where, 'with', 'contract')}: a contract other than the enclosing bundle's is named with its digest${self}`);
  }
  if (!own || args.contract.digest !== undefined) return; // another contract: resolved by digest when it runs
  const interaction = interactionOf(enclosing, args.interaction);
  if (!interaction) {
    throw invalidInput(`${at(where, 'with', 'interaction')}: contract ${enclosing.id}@${enclosing.version} has no interaction "${args.interaction}"`);
  }
  if (interaction.waitFor === 'settled' && args.waitFor === 'decision') {
    throw invalidInput(
      `${at(where, 'with', 'waitFor')}: interaction "${args.interaction}" waits for "settled"; a call may strengthen the boundary, never weaken it to "decision"`,
    );
  }
  // A literal input (no expression anywhere in it) is checked now rather than refused at run time.
  if (!JSON.stringify(args.input).includes('${')) {
    const validate = compileApplicationSchema(interaction.input, `interaction "${args.interaction}" input`);
    if (!validate(args.input))
      throw invalidInput(`${at(where, 'with', 'input')}: not a valid input of interaction "${args.interaction}": ${describeErrors(validate.errors)}`);
  }
}

export function interactionOf(enclosing: EnclosingContract, id: string): Interaction | undefined {
  const all = enclosing.interactions;
  if (all instanceof Map) return all.get(id);
  return Object.prototype.hasOwnProperty.call(all, id) ? (all as Record<string, Interaction>)[id] : undefined;
}

function checkTry(walk: Walk, task: JsonObject, where: string): void {
  checkTaskList(walk, task.try, at(where, 'try'));
  const handler = isObject(task.catch) ? task.catch : {};
  checkBareExpression(handler.when, at(where, 'catch', 'when'));
  checkBareExpression(handler.exceptWhen, at(where, 'catch', 'exceptWhen'));
  if (isObject(handler.retry)) checkRetry(handler.retry, at(where, 'catch', 'retry'));
  if (handler.do !== undefined) checkTaskList(walk, handler.do, at(where, 'catch', 'do'));
}

function checkRetry(retry: JsonValue, where: string): void {
  if (!isObject(retry)) return;
  checkBareExpression(retry.when, at(where, 'when'));
  checkBareExpression(retry.exceptWhen, at(where, 'exceptWhen'));
}

function checkSwitch(task: JsonObject, where: string): void {
  if (!Array.isArray(task.switch)) return;
  task.switch.forEach((item, index) => {
    if (!isObject(item)) return;
    for (const [name, branch] of Object.entries(item)) {
      if (!isObject(branch)) continue;
      checkBareExpression(branch.when, at(where, 'switch', index, name, 'when'));
    }
  });
}

/** An expression field that may be bare jq (`if: .age < 18`) or `${ … }`. */
function checkBareExpression(value: JsonValue | undefined, where: string): void {
  if (typeof value !== 'string') return;
  if (isRuntimeExpression(value)) checkDeterministicText(value, where);
  else checkDeterministicJq(value, where);
}

/** Every `${ … }` anywhere in the document, with its pointer. Iterative: documents nest to 64. */
function checkStrings(document: JsonValue, base: string): void {
  const stack: { value: JsonValue; path: (string | number)[] }[] = [{ value: document, path: [] }];
  for (let entry = stack.pop(); entry !== undefined; entry = stack.pop()) {
    const { value, path } = entry;
    if (typeof value === 'string') {
      if (value.includes('${')) checkDeterministicText(value, base + jsonPointer(path));
    } else if (Array.isArray(value)) {
      value.forEach((v, i) => stack.push({ value: v, path: [...path, i] }));
    } else if (isObject(value)) {
      for (const [k, v] of Object.entries(value)) stack.push({ value: v, path: [...path, k] });
    }
  }
}

/** Named references: errors, retries, timeouts, authentications, secrets, switch targets. */
function checkReferences(walk: Walk): void {
  const use = isObject(walk.document.use) ? walk.document.use : {};
  const declared = {
    errors: names(use.errors),
    retries: names(use.retries),
    timeouts: names(use.timeouts),
    authentications: names(use.authentications),
    secrets: new Set(Array.isArray(use.secrets) ? use.secrets.filter((s): s is string => typeof s === 'string') : []),
  };
  const stack: { value: JsonValue; path: (string | number)[] }[] = [{ value: walk.document, path: [] }];
  for (let entry = stack.pop(); entry !== undefined; entry = stack.pop()) {
    const { value, path } = entry;
    if (Array.isArray(value)) {
      if (path[path.length - 1] === 'switch') checkSwitchTargets(value, path, walk);
      value.forEach((v, i) => stack.push({ value: v, path: [...path, i] }));
    } else if (isObject(value)) {
      checkReferencesIn(value, path, declared, walk.base);
      for (const [k, v] of Object.entries(value)) {
        // The contract function is convoke's declaration; the document declares its secret with it.
        if (path.length === 2 && path[0] === 'use' && path[1] === 'functions' && k === contractFunctionName) continue;
        stack.push({ value: v, path: [...path, k] });
      }
    }
  }
}

type Declared = Record<'errors' | 'retries' | 'timeouts' | 'authentications' | 'secrets', Set<string>>;

function checkReferencesIn(value: JsonObject, path: (string | number)[], declared: Declared, base: string): void {
  const where = (...more: string[]) => base + jsonPointer([...path, ...more]);
  const inTask = typeof path[path.length - 1] === 'string' && typeof path[path.length - 2] === 'number';
  const mustName = (kind: keyof Declared, name: JsonValue | undefined, pointer: string) => {
    if (typeof name === 'string' && !declared[kind].has(name))
      throw invalidInput(`${pointer}: "${name}" names no ${kind === 'secrets' ? 'secret in use.secrets' : `entry of use.${kind}`}`);
  };
  if (inTask && isObject(value.raise)) mustName('errors', value.raise.error, where('raise', 'error'));
  if (inTask && isObject(value.catch)) mustName('retries', value.catch.retry, where('catch', 'retry'));
  if (inTask || path.length === 0) mustName('timeouts', value.timeout, where('timeout'));
  if (isObject(value.authentication) && Object.keys(value.authentication).length === 1)
    mustName('authentications', value.authentication.use, where('authentication', 'use'));
  for (const scheme of ['basic', 'bearer', 'digest', 'oauth2', 'oidc']) {
    const policy = value[scheme];
    if (isObject(policy)) mustName('secrets', policy.use, where(scheme, 'use'));
  }
}

function checkSwitchTargets(cases: JsonValue[], path: (string | number)[], walk: Walk): void {
  // path: [..., listIndex, taskName, 'switch']; the list holding the switch task is two levels up.
  let list: JsonValue | undefined = walk.document;
  for (const segment of path.slice(0, -3)) list = Array.isArray(list) ? list[segment as number] : isObject(list) ? list[segment as string] : undefined;
  const siblings = new Set<string>();
  if (Array.isArray(list)) for (const item of list) if (isObject(item)) for (const name of Object.keys(item)) siblings.add(name);
  cases.forEach((item, index) => {
    if (!isObject(item)) return;
    for (const [name, branch] of Object.entries(item)) {
      if (isObject(branch)) checkFlowDirective(branch.then, siblings, walk.base + jsonPointer([...path, index, name, 'then']));
    }
  });
}
