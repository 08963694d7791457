/**
 * The layer rules of src/ (docs/architecture.md), checked by `npm run depcheck` and so by `npm test`.
 *
 *   contract → events → machines → projections → domain → runtime core → facades (http, nats-api,
 *   cli) and deployment wiring
 *
 * A module imports only from its own layer and the layers before it. Adapters implement interfaces
 * declared below them and import nothing from the runtime, the facades or the wiring; projections
 * import no adapter. The peer SDK (published as convoke/peer) depends on contract, events and the
 * transport adapters only.
 */

/**
 * TEMPORARY EXCEPTIONS, the only ones. Each is an import that the kernel restructuring (issue 20,
 * items 2 and 4) removes by moving its target down a layer; delete the entry when it lands.
 * - the Clock interface moves from src/runtime/clock.ts to src/contract/clock.ts;
 * - the time guard moves from src/adapters/store/guard.ts to src/events/guard.ts;
 * - machines/decide.ts and machines/admission.ts (deciders, which read projections) move to src/domain/.
 */
const temporaryExceptions = {
  clock: '^src/runtime/clock[.]ts$',
  guard: '^src/adapters/store/guard[.]ts$',
  deciders: '^src/machines/(decide|admission)[.]ts$',
};

const below = {
  contract: ['^src/contract/'],
  events: ['^src/contract/', '^src/events/'],
  machines: ['^src/contract/', '^src/events/', '^src/machines/'],
  projections: ['^src/contract/', '^src/events/', '^src/machines/', '^src/projections/'],
  domain: ['^src/contract/', '^src/events/', '^src/machines/', '^src/projections/', '^src/domain/'],
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
    layer('machines-over-events', '^src/machines/', below.machines, 'machines (legality) import only contract and events.', temporaryExceptions.deciders),
    layer('deciders-over-projections', temporaryExceptions.deciders, below.domain, 'the deciders still in src/machines/ read projections, as src/domain/ will (temporary exception).'),
    layer('projections-over-machines', '^src/projections/', [...below.projections, temporaryExceptions.guard], 'projections import no adapter (the time guard is a temporary exception).'),
    layer('domain-over-projections', '^src/domain/', below.domain, 'deciders import only the layers below them.'),
    layer(
      'adapters-implement-lower-interfaces',
      '^src/adapters/',
      [...below.domain, '^src/adapters/', temporaryExceptions.clock],
      'adapters import nothing from the runtime, the facades, the wiring or the peer SDK (the Clock interface is a temporary exception).',
    ),
    layer(
      'runtime-core-below-facades',
      '^src/runtime/',
      [...below.domain, '^src/adapters/', '^src/runtime/'],
      'the coordinator core imports no facade, no wiring and no peer SDK.',
    ),
    layer('http-facade', '^src/http/', [...below.domain, '^src/adapters/', '^src/runtime/', '^src/http/'], 'the HTTP facade sits on the core; it imports no other facade and no wiring.'),
    layer('nats-command-facade', '^src/nats-api/', [...below.domain, '^src/adapters/', '^src/runtime/', '^src/nats-api/'], 'the NATS command API sits on the core; it imports no other facade and no wiring.'),
    layer('deployment-wiring', '^src/deployment/', ['^src/(contract|events|machines|projections|domain|adapters|runtime|http|nats-api|peer|deployment)/'], 'wiring may start facades and embedded peers, but is not imported by them (only the CLI imports it).'),
    {
      name: 'peer-sdk-standalone',
      comment: 'convoke/peer depends on contract, events and the transport adapters (and the SQLite opener of its effect sink), never on the coordinator (the Clock interface is a temporary exception).',
      severity: 'error',
      from: { path: '^src/peer/' },
      to: {
        path: '^src/',
        pathNot: ['^src/contract/', '^src/events/', '^src/adapters/transport/', '^src/adapters/store/sqlite-open[.]ts$', '^src/peer/', temporaryExceptions.clock],
      },
    },
    {
      name: 'peer-sdk-reaches-no-runtime',
      comment: 'nothing the peer SDK loads, transitively, is part of the coordinator or its wiring.',
      severity: 'error',
      from: { path: '^src/peer/' },
      to: { path: '^src/(machines|projections|domain|runtime|http|nats-api|cli|deployment)/', pathNot: temporaryExceptions.clock, reachable: true },
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
