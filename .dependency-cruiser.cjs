/**
 * The layer rules of src/ (docs/architecture.md), checked by `npm run depcheck` and so by `npm test`.
 *
 *   contract → events → machines → projections → domain → kernel → runtime core (and beside it the
 *   workflow executor, src/workflow/exec) → facades (http, nats-api, cli) and deployment wiring;
 *   contract → workflow/dsl (the workflow language) → deployment, cli
 *
 * There are no exceptions.
 *
 * A module imports only from its own layer and the layers before it. Adapters implement interfaces
 * declared below them and import nothing from the runtime, the facades or the wiring; projections
 * import no adapter. The peer SDK (published as convoke/peer) depends on contract, events and the
 * transport adapters only.
 */

const below = {
  contract: ['^src/contract/'],
  events: ['^src/contract/', '^src/events/'],
  machines: ['^src/contract/', '^src/events/', '^src/machines/'],
  projections: ['^src/contract/', '^src/events/', '^src/machines/', '^src/projections/'],
  domain: ['^src/contract/', '^src/events/', '^src/machines/', '^src/projections/', '^src/domain/'],
  kernel: ['^src/contract/', '^src/events/', '^src/kernel/'],
};

/** A rule: modules under `from` may import from src/ only what `allowed` names. */
function layer(name, from, allowed, comment, fromNot) {
  return {
    name,
    comment,
    severity: 'error',
    from: fromNot ? { path: from, pathNot: fromNot } : { path: from },
    to: { path: '^src/', pathNot: allowed },
  };
}

module.exports = {
  forbidden: [
    {
      name: 'no-cycles',
      comment: 'No import cycle anywhere in src/ (type-only imports included).',
      severity: 'error',
      from: { path: '^src/' },
      to: { circular: true },
    },
    layer('contract-is-the-bottom', '^src/contract/', below.contract, 'contract imports nothing else of src/.'),
    layer('events-over-contract', '^src/events/', below.events, 'events import only contract.'),
    layer('machines-over-events', '^src/machines/', below.machines, 'machines (legality) import only contract and events.'),
    layer('projections-over-machines', '^src/projections/', below.projections, 'projections import no adapter.'),
    layer('domain-over-projections', '^src/domain/', below.domain, 'deciders import only the layers below them.'),
    layer('kernel-is-generic', '^src/kernel/', below.kernel, 'the aggregate kernel knows contract and events only: no operation, no machine, no adapter.'),
    layer(
      'adapters-implement-lower-interfaces',
      '^src/adapters/',
      [...below.domain, '^src/adapters/'],
      'adapters import nothing from the kernel, the runtime, the facades, the wiring or the peer SDK.',
    ),
    layer(
      'runtime-core-below-facades',
      '^src/runtime/',
      [...below.domain, '^src/kernel/', '^src/adapters/', '^src/runtime/'],
      'the coordinator core imports no facade, no wiring and no peer SDK.',
    ),
    layer(
      'workflow-identities',
      '^src/workflow/[^/]+[.]ts$',
      ['^src/contract/', '^src/workflow/[^/]+[.]ts$'],
      'workflow identities and the DSL version import only contract.',
    ),
    layer(
      'workflow-executor-beside-the-runtime',
      '^src/workflow/exec/',
      [...below.domain, '^src/kernel/', '^src/adapters/', '^src/runtime/', '^src/workflow/exec/', '^src/workflow/[^/]+[.]ts$'],
      'the workflow executor is an aggregate on the kernel beside the coordinator core: it calls contracts through runtime/service.ts and imports no facade and no wiring.',
    ),
    {
      name: 'workflow-executor-used-by-cli-and-wiring',
      comment: 'only the CLI and the deployment wiring start the workflow executor.',
      severity: 'error',
      from: { path: '^src/', pathNot: '^src/(cli|deployment|workflow/exec)/' },
      to: { path: '^src/workflow/exec/' },
    },
    layer(
      'http-facade',
      '^src/http/',
      [...below.domain, '^src/adapters/', '^src/runtime/', '^src/http/'],
      'the HTTP facade sits on the core; it imports no other facade and no wiring.',
    ),
    layer(
      'nats-command-facade',
      '^src/nats-api/',
      [...below.domain, '^src/adapters/', '^src/runtime/', '^src/nats-api/'],
      'the NATS command API sits on the core; it imports no other facade and no wiring.',
    ),
    layer(
      'workflow-dsl',
      '^src/workflow/dsl/',
      [...below.contract, '^src/workflow/(version|schemas|secrets|authentication|refs|jq-determinism|contract-errors)[.]ts$', '^src/workflow/dsl/'],
      'the workflow language (checks, lowering, the contract function, the SDK) knows the contract, the DSL version, the data schemas, where secrets may be read, which authentication policies are allowed, which jq is refused and what a workflow reference names only: no runtime, no executor.',
    ),
    layer(
      'deployment-wiring',
      '^src/deployment/',
      ['^src/(contract|events|machines|projections|domain|kernel|adapters|runtime|http|nats-api|peer|deployment)/', '^src/workflow/dsl/'],
      'wiring may start facades and embedded peers, but is not imported by them (only the CLI imports it).',
    ),
    {
      name: 'peer-sdk-standalone',
      comment: 'convoke/peer depends on contract, events and the transport adapters (and the SQLite opener of its effect sink), never on the coordinator.',
      severity: 'error',
      from: { path: '^src/peer/' },
      to: {
        path: '^src/',
        pathNot: ['^src/contract/', '^src/events/', '^src/adapters/transport/', '^src/adapters/store/sqlite-open[.]ts$', '^src/peer/'],
      },
    },
    {
      name: 'peer-sdk-reaches-no-runtime',
      comment: 'nothing the peer SDK loads, transitively, is part of the coordinator or its wiring.',
      severity: 'error',
      from: { path: '^src/peer/' },
      to: { path: '^src/(machines|projections|domain|kernel|runtime|http|nats-api|cli|deployment)/', reachable: true },
    },
    {
      name: 'nothing-imports-the-cli',
      severity: 'error',
      from: { path: '^src/', pathNot: '^src/cli/' },
      to: { path: '^src/cli/' },
    },
    {
      name: 'src-imports-no-tests',
      severity: 'error',
      from: { path: '^src/' },
      to: { path: '^(test|bench)/' },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    exclude: { path: '^(dist|node_modules)/' },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    moduleSystems: ['es6'],
  },
};
