/**
 * Every bound convoke enforces, in one place. Units are in the names, last. Relations between
 * bounds are asserted at load so a bad edit fails at start-up, not in production. Facts of the
 * platform (setTimeout's 2^31−1 ms in clock.ts, the number format's 2^53 and V8's sliced-string
 * length in ijson.ts) stay where they are used, said so there.
 */
import { assert } from './errors.js';

export const limits = {
  /** Spec: admission has a fixed 10000 ms budget from the trusted request-start clock. */
  admissionBudgetMs: 10_000,
  /** Spec: authorization attempts are in 1..16. */
  attemptsMax: 16,
  branchesMax: 256,
  peerIdBytesMax: 64,
  branchIdBytesMax: 64,
  invocationKeyBytesMax: 256,
  principalIdBytesMax: 256,
  inputBytesMax: 256 * 1024,
  resultBytesMax: 256 * 1024,
  /** The serialized size of one stored transition. */
  transitionBytesMax: 1024 * 1024,
  /** The serialized size of a whole operation record (its admission transition checked before create). */
  recordBytesMax: 4 * 1024 * 1024,
  /**
   * The per-operation transition budget the coordinator enforces before every append. Ordinary
   * transitions stop short of it by the operation's closing reserve (closingTransitionsPerBranch
   * per branch plus closingTransitionsBase), which is kept for the closing transitions: the
   * decision, cancellation facts and settlement. See runtime/log-budget.ts.
   */
  transitionsPerOperationMax: 4096,
  /**
   * What every store reads back in full for one operation, and so the most it accepts: an append
   * past it is refused (docs/design.md §10: a store accepts only what it can read back in full).
   */
  transitionsStoredMax: 8192,
  /** Closing transitions kept per branch: a cancel dispatch (and its retry), its reply, and a late result. */
  closingTransitionsPerBranch: 4,
  /** Closing transitions kept per operation beside those per branch: decision, timeouts, settlement. */
  closingTransitionsBase: 8,
  /** Bytes kept per branch for its closing facts (cancel dispatch, reply, withdrawal). */
  closingBytesPerBranch: 8 * 1024,
  /**
   * Lease renewals an operation may append over its whole timeout, all branches together: the
   * renewal spacing floor is (timeoutMs × branches) / this (domain/decide.ts decideClaim).
   */
  renewalTransitionsPerOperationMax: 1024,
  /** Room a transition needs beside the one result it carries (subject, identities, closure events). */
  transitionOverheadBytesMax: 64 * 1024,
  /** Rejected result messages recorded in an operation's stream; beyond this they are only counted. */
  rejectionsRecordedMax: 64,
  /** Protocol conflicts (a different terminal result for an accepted attempt) recorded per operation; beyond this, counted. */
  protocolConflictsRecordedMax: 16,
  timeoutMsMax: 7 * 24 * 3600 * 1000,
  timeoutMsMin: 1,
  leaseMsMax: 24 * 3600 * 1000,
  retryBackoffMsMax: 3600 * 1000,
  cancelTimeoutMsMax: 3600 * 1000,
  settlementGraceMsMax: 24 * 3600 * 1000,
  waitMsMax: 120_000,
  /** Bounds of the HTTP facade's configurable receive timeouts (headers; whole request). */
  httpReceiveTimeoutMsMin: 100,
  httpReceiveTimeoutMsMax: 300_000,
  jsonDepthMax: 64,
  bundleBytesMax: 1024 * 1024,
  interactionsMax: 64,
  /** Named pipelines in one bundle, and named workflow documents (src/workflow/dsl). */
  pipelinesMax: 64,
  workflowsMax: 64,
  /** Stages in one pipeline, and named input transforms in one pipeline. */
  pipelineStagesMax: 64,
  pipelineTransformsMax: 64,
  /** Tasks one workflow document may declare, nested ones and reusable functions included. */
  workflowTasksMax: 4096,
  /**
   * The characters of a workflow's name and of a task's name (each task execution records its
   * name), and of a task's JSON Pointer. Each execution's key (`at`, recorded in at most 2048
   * characters) is the pointer with a marker per enclosing loop iteration, fork branch, revisit
   * and retry attempt, and a step's phase: a document, at most jsonDepthMax deep, nests at most
   * about 21 tasks, whose markers take at most about 25 characters each, so half of the key's
   * room is kept for them.
   */
  workflowNameCharsMax: 256,
  workflowTaskPointerCharsMax: 1024,
  /** Data schemas (`input`/`output`/`export.schema`) one workflow document may declare, and the serialized size of one. */
  workflowSchemasMax: 256,
  workflowSchemaBytesMax: 64 * 1024,
  /** Secrets a deployment provides to its workflows (config workflowSecrets) and one document may declare, and the bytes of one. */
  workflowSecretsMax: 64,
  workflowSecretBytesMax: 16 * 1024,
  /**
   * The fewest bytes of each credential in a secret (the value, a password, a token): every
   * occurrence of one in a recorded answer is replaced, and a shorter one would be found in data
   * that never held it (corrupting it, and telling the value by what changed).
   */
  workflowSecretBytesMin: 8,
  /**
   * Tasks one workflow instance may run at once: a fork's branches run side by side, a fork in a
   * branch adding its own (a fork of 4 branches each forking 4 runs 16), everything else one at a
   * time. A document past it is refused before it starts (invalid-input). Each may hold a call in
   * flight — an HTTP answer read up to httpContentBytesMax, a contract operation, a child instance
   * — so this bounds what one instance asks of the process and of its peers at one moment, where the
   * task count (workflowTasksMax) let one fork hold thousands of requests and their answers at once.
   */
  workflowConcurrentTasksMax: 256,
  /** Task executions one workflow instance may make (loops through `for`, `then`, `retry`, `listen.foreach` count each); past it a runtime error (500). */
  workflowTaskExecutionsMax: 10_000,
  /**
   * Transitions one workflow instance may append while it runs: past it each further step is
   * refused as a runtime error (500, "Log budget exhausted") and the instance faults. The rest of
   * what a store reads back (transitionsStoredMax) is kept for what comes after: the fault or
   * completion, lease renewals and releases, a cancellation, its children's dispositions. A store
   * holding fewer transitions of a log (its limits.transitionsMax) than twice this lowers it to
   * half of them (executor.ts runningTransitionsMax).
   */
  workflowTransitionsMax: 4096,
  /**
   * Bytes a workflow instance's log may hold while it runs (each transition's JSON body as the
   * store writes it, adapters/store/codec.ts; every transition counts): a step that would take it
   * past is refused as a runtime error (500, "Log budget exhausted") and the instance faults.
   * Every load of an instance (a resume, a takeover, a reload after another worker's append) reads
   * and folds its whole log: a 64 MiB log is read back and folded in 1.3–1.6 s (SQLite, a busy
   * two-core machine), where the transition budget alone let a loop write hundreds of MiB. It is
   * 16 KiB per transition of workflowTransitionsMax on average, or 64 transitions of the largest
   * size (transitionBytesMax): far more than a workflow passing values between its tasks writes.
   * Kept out of it, as the transition budget keeps its own: the closing transitions, let through
   * past it — the fault or completion (at most transitionBytesMax, with its output), and the
   * small lease, cancel and disposal transitions (a lease fact, a reason, a line per child).
   */
  workflowLogBytesMax: 64 * 1024 * 1024,
  /**
   * Facts (a task's start or completion, an expression's result, a re-runnable call's answer) a
   * workflow instance's interpreter holds for its next transition: at this many it commits them.
   * Each carries at most one value not held elsewhere (at most expressionResultBytesMax, or
   * httpContentBytesMax for an answer), so what one instance holds outside its log is bounded, not
   * grown by a loop that commits nothing (a `for` of `set` tasks held every fact of every iteration
   * until its end, past the log budgets, which count only what is committed).
   */
  workflowHeldFactsMax: 64,
  /**
   * JSON bytes of a task's output made by the task itself (recorded nowhere before: a fork's list of
   * its branches' outputs, a listen's events) that its completion may hold for the next transition;
   * a larger one is committed at once, alone, so that a store refusing it as past its transition
   * size faults that task (at its pointer), and not whichever later transition would have carried it.
   * Half the overhead a transition keeps beside one value (transitionOverheadBytesMax): an output
   * held is small beside whatever carries it. A store taking less in a transition (its
   * limits.transitionBytesMax: JetStream's follows the server's max_payload) lowers it: a value is
   * held only when the transition recording its fact alone fits the store (interpreter.ts goesAlone).
   */
  workflowHeldOutputBytesMax: 32 * 1024,
  /**
   * A recorded workflow error (events.ts): the characters of its type, title and instance, and of
   * its detail. Whatever raises one — a document's `raise` with values from the input, a service's
   * reason phrase, a child's error with its context — is cut to these (the type refused instead:
   * filters match it), so every error a task raises can be recorded and end the task.
   */
  workflowErrorTextCharsMax: 4096,
  workflowErrorDetailCharsMax: 16_000,
  /** The latest errors a workflow executor keeps of those that stopped driving an instance (WorkflowExecutor.failures); each is also told to its onFailure. */
  workflowFailuresKeptMax: 256,
  /**
   * Drives of one instance in a row whose run failed the runtime's own check (an AssertionFailure:
   * a decided transition its schema or machine refuses) before the instance is faulted with a
   * runtime error (decideDefectFault): deciding the same step again decides the same transition.
   */
  workflowDefectiveDrivesMax: 3,
  /**
   * How long past a competing fork's losing child operation's deadline a cancel the runtime still
   * refuses `expired` is asked again before the child is recorded detached (losers.ts). Past its
   * deadline a cancel can only be refused so: the child closes by its own timeout, which its kernel
   * retries at most a minute apart (dueRetryMaxMs) while its store refuses it; one its store
   * refuses for good (its log at the store's count) would leave the fork asking for ever.
   */
  workflowLoserCancelExpiredAfterMs: 60_000,
  /** How deep `run: workflow` may nest: a top-level instance is depth 0, its child 1, …; a deeper child is refused (a workflow running itself). */
  workflowDepthMax: 8,
  /**
   * Running workflow instances one principal may hold (its `run: workflow` children included):
   * a start past it is refused before anything is recorded (unavailable, "retry after one ends").
   * Every `convoke serve` holds every running instance in memory — about 18 KB each for a small
   * waiting instance (measured), so the default keeps one principal at about 18 MB per worker
   * before inputs and logs — and each running instance may wake, call and write at any time.
   * A thousand is well above one caller's ordinary concurrent work (each instance is itself a
   * long run: an approval, a pipeline), and far below the store's capacity, which every principal
   * shares. A deployment lowers or raises it (config workflows.runningInstancesPerPrincipal) up to
   * the most, where one principal alone fills ~180 MB of every worker: the bound cannot be turned off.
   */
  workflowRunningPerPrincipalDefault: 1000,
  workflowRunningPerPrincipalMax: 10_000,
  /** One CloudEvent emitted or received (its JSON), and the instances one event may wake. */
  cloudEventBytesMax: 256 * 1024,
  cloudEventMatchesMax: 1024,
  /**
   * How long one delivered CloudEvent waits, in all, for `until` expressions' verdicts on the
   * events before it (a listen takes nothing while one is missing); past it the event is answered
   * unavailable and the publisher sends it again. Inside the admission budget, so a publisher
   * waiting on an answer gets one.
   */
  listenUntilWaitMsMax: 5_000,
  /** A deployment's workflow lease (config workflows.leaseMs): renewed every third of it, waited out after a crash. */
  workflowLeaseMsMin: 300,
  workflowLeaseMsMax: 600_000,
  /** Event types one event publisher may be allowed (config workflows.events.publishers): one subject permission each. */
  workflowEventTypesPerPublisherMax: 64,
  /** Origins a deployment's workflow HTTP calls may be allowed (config workflows.http.allow; one secret's workflowSecrets.<name>.origins), and the characters of one. */
  workflowHttpAllowMax: 256,
  workflowHttpOriginCharsMax: 300,
  /** jq worker threads of one executor (config workflows.jqWorkers; jq.ts): each holds a jq-wasm of its own (about 35 MB). */
  jqWorkersMax: 8,
  /**
   * The V8 heap of one jq worker (MiB, its resourceLimits; jq.ts heapMb): what holds an
   * evaluation's input, variables and result as JavaScript values, none larger than a transition
   * (a few MiB together); a loaded worker uses about 4 MiB. Out of it, the worker dies alone and
   * its evaluation fails; without a bound, V8 lets a worker's heap grow as large as the main
   * one's (a quarter of the machine's memory, up to 4 GiB), every worker at once. Node stops a
   * worker at its limit with 16 MiB of leeway: one allocation larger than that aborts the process,
   * so the least bound stays well above one transition (what an input or variable may be).
   */
  jqHeapMbMin: 16,
  jqHeapMbDefault: 64,
  jqHeapMbMax: 1024,
  /**
   * The WebAssembly memory of one jq worker's jq (MiB; jq.ts memoryMb, jq-bounded.ts): where jq
   * parses its input and builds every value. An evaluation that needs more fails. It never shrinks:
   * it is what a worker keeps after its largest evaluation. jq-wasm's own build stops at 256 MiB.
   */
  jqMemoryMbMin: 16,
  jqMemoryMbDefault: 128,
  jqMemoryMbMax: 256,
  /** The bytes of jq's messages (an error's description) the jq worker keeps of one evaluation: more than a recorded error detail holds. */
  expressionErrorBytesMax: 16 * 1024,
  /** Characters of one runtime expression (a transform's, or one `${ … }` in a workflow). */
  expressionCharsMax: 16 * 1024,
  /**
   * The JSON bytes of one jq result: it is recorded, so one larger than a transition can carry
   * beside its overhead is refused in the jq worker (an expression error, 400) before the runtime
   * parses or holds it.
   */
  expressionResultBytesMax: 1024 * 1024 - 64 * 1024,
  quorumDenominatorMax: 1_000_000,
  /** Durable mode: in-flight messages per peer stream when the deployment sets no maxMsgs (a full stream refuses new work). */
  durableStreamMsgsDefault: 10_000,
  /** Durable mode: the largest message a peer stream stores when the deployment sets no maxMsgBytes. */
  durableMsgBytesDefault: 512 * 1024,
  /** Room a request or result message needs beyond its input or output (ids, attempt, fence, deadlines). */
  wireEnvelopeBytesMax: 16 * 1024,
  /**
   * Durable mode: how long an observation of a peer's presence (its request consumer's state) is
   * reused by admissions before the broker is asked again, so an admission costs no API call per
   * candidate while presence stays fresh within about a second.
   */
  presenceObservationTtlMs: 1_000,
  /** NATS deployment: max-delivery advisory sequences remembered, so a re-emitted advisory is not recorded twice. */
  exhaustedAdvisoriesSeenMax: 10_000,
  // ── bounds of the coordinator core ──
  /** Memory mode's one attempt (runtime/mode.ts): a lost message or log takes what a later attempt was fenced against. */
  memoryModeAttemptsMax: 1,
  /** Commands one transition may carry when decided together (group commit, domain/decide.ts). */
  commandsPerTransitionMax: 16,
  /** Message bytes one group-committed transition may carry: well inside transitionBytesMax with event overhead. */
  groupCommitBatchBytesMax: 512 * 1024,
  /** The longest result batching window a deployment may configure (config `resultBatchMs`). */
  resultBatchMsMax: 1_000,
  /** How often one command is decided again after CAS conflicts before giving up (too many writers; kernel). */
  conflictRetriesMax: 8,
  /** Rows one page of the operations list may ask for (HTTP `limit`, NATS `list`). */
  listLimitMax: 500,
  /** CloudEvents delivered at once by the NATS event intake; past it an event is answered unavailable (the publisher retries). */
  cloudEventsInFlightMax: 256,
  /**
   * Emitted CloudEvents of one principal (its subject, `<emitPrefix>.<P>.<type>`, names it) the NATS
   * event intake delivers at once; past it one waits for a slot of that principal's (emittedRedelivery).
   */
  cloudEventsInFlightPerPrincipalMax: 64,
  /**
   * Outside CloudEvents the NATS event intake delivers at once of the types one set of publishers
   * may publish (workflows.events.publishers); past it one is answered unavailable. A publisher
   * flooding its own types leaves the rest of cloudEventsInFlightMax to the others.
   */
  cloudEventsInFlightPerPublishersMax: 64,
  /**
   * Emitted CloudEvents of one principal the emit stream keeps (workflows.events.streamEventsPerPrincipal,
   * emitted-stream-trim.ts): past it the principal's oldest are purged. The default keeps a principal
   * emitting the largest events (cloudEventBytesMax) within a quarter of the stream convoke makes
   * (emittedStreamBounds.maxBytes, 1 GiB), and one emitting 1 KiB events within 1 MiB.
   */
  emittedStreamEventsPerPrincipalDefault: 1_000,
  emittedStreamEventsPerPrincipalMax: 10_000_000,
  /** Principals one sink remembers the trims of; past it every one is trimmed again at its next event (emitted-stream-trim.ts). */
  emittedStreamTrimPrincipalsMax: 4_096,
  // ── bounds of the adapters, facades and wiring (each read where its name says) ──
  /** HTTP: the largest request body a deployment may allow (http.bodyLimitBytes). */
  httpBodyLimitBytesMax: 16 * 1024 * 1024,
  /** HTTP: the longest drain period a deployment may configure (http.drainMs). */
  httpDrainMsMax: 60_000,
  /** HTTP: server-sent event streams (the console's live updates) one principal may hold open at once, at most (http.events.streamsPerPrincipal). */
  httpEventStreamsPerPrincipalMax: 256,
  /** HTTP: the most CloudEvent deliveries (POST /workflow-events) a deployment may let one principal have in flight at once (http.eventDeliveriesPerPrincipal). */
  httpEventDeliveriesPerPrincipalMax: 4_096,
  /** The most a deployment may let one principal hold waits at once at a facade (http.waitsPerPrincipal). */
  waitsPerPrincipalMax: 100_000,
  /** HTTP: the most a deployment may let all principals hold of each at once (http.waitsMax, http.events.streamsMax, http.eventDeliveriesMax). */
  httpWaitsMax: 1_000_000,
  httpEventStreamsMax: 65_536,
  httpEventDeliveriesMax: 65_536,
  /** HTTP: bounds of the comment line sent on an idle event stream (http.events.heartbeatMs). */
  httpEventHeartbeatMsMin: 100,
  httpEventHeartbeatMsMax: 60_000,
  /** The longest delay of a config's example peers (transport.examplePeers.*.delayMs). */
  examplePeerDelayMsMax: 60_000,
  /** Deployment config: bundle files, publisher attestations and their exceptions, policy rules and the names one rule lists, HTTP principals, operators. */
  configBundlesMax: 64,
  configAttestationsMax: 256,
  configAttestationExceptionsMax: 1024,
  configPolicyRulesMax: 4096,
  configPolicyRuleNamesMax: 1024,
  configPrincipalsMax: 4096,
  configOperatorsMax: 256,
  /** NATS deployment config: command principals that speak as a peer (transport.commandSenders). */
  natsCommandSendersMax: 4096,
  /** NATS deployment config: the most broker deliveries of one message (transport.durable.maxDeliver). */
  natsMaxDeliverMax: 1000,
  /** NATS deployment config: the shortest ack_wait (transport.durable.ackWaitMs; the longest is leaseMsMax). */
  natsAckWaitMsMin: 100,
  /** NATS deployment config: bounds of how often durable resources are re-verified (transport.durabilityCheckIntervalMs). */
  durabilityCheckIntervalMsMin: 100,
  durabilityCheckIntervalMsMax: 600_000,
  /**
   * Start-up (`convoke serve`, and any opening of a JetStream store): how long a server that is not
   * listening yet, or whose JetStream does not answer yet ("jetstream is not enabled" while it
   * starts), is waited out before the start fails as unavailable; tried again after a backoff that
   * doubles from natsStartupBackoffMsMin up to natsStartupBackoffMsMax.
   */
  natsStartupWaitMsMax: 10_000,
  natsStartupBackoffMsMin: 50,
  natsStartupBackoffMsMax: 1_000,
  /** Start-up: how long one probe of JetStream waits for its answer (a request sent while reconnecting waits it out). */
  natsStartupProbeMsMax: 1_000,
  /** HTTP: the longest bearer token read; anything longer is not a credential convoke could hold. */
  bearerTokenCharsMax: 8192,
  /**
   * HTTP: Node checks the headers and request timeouts only on a periodic sweep (every 30 s by default),
   * so a 10 s headers timeout closed connections after 30–40 s. The sweep runs at a tenth of the
   * headers timeout, within these bounds: a slow sender is closed within 10% of its timeout.
   */
  httpConnectionsCheckingIntervalMsMin: 50,
  httpConnectionsCheckingIntervalMsMax: 1_000,
  /**
   * Rejected peer messages logged per second at most (runtime/operation-log.ts): a peer that
   * floods its subjects must not fill the disk through the log; the metrics count every one.
   */
  rejectionLogLinesPerSecondMax: 20,
  /** I-JSON parse errors: keeps error descriptions bounded whatever the input. */
  describedCharsMax: 120,
  /** Pointers get more room: a pointer at the depth limit is 2 × jsonDepthMax chars even with 1-char keys. */
  describedPointerCharsMax: 256,
  /** Peer SDK: branches remembered per peer (their newest fence and result); the oldest are forgotten beyond this. */
  peerBranchesRememberedMax: 10_000,
  /** Peer SDK: keys (and applied effects) the in-process effect sink remembers; older ones are forgotten with their fence. */
  effectSinkKeysMax: 100_000,
  /** `convoke peer`: the longest delay a peer config's rules may name. */
  examplePeerRuleDelayMsMax: 600_000,
  /** `convoke peer`: interactions one peer config serves, and rules per interaction. */
  examplePeerInteractionsMax: 64,
  examplePeerRulesMax: 64,
  /** `convoke peer`: the most keys a peer config may give its in-process effect sink (effectSinkKeys), and its longest provisioning wait. */
  examplePeerEffectSinkKeysMax: 10_000_000,
  examplePeerProvisionWaitMsMax: 3_600_000,
  /** The longest an example peer waits for its SQLite effect sink to open (`convoke peer` config effectSinkWaitMs). */
  examplePeerEffectSinkWaitMsMax: 3_600_000,
  /** CLI: contexts one contexts file may hold, and the characters of one of its URLs or paths. */
  cliContextsMax: 256,
  cliContextTextCharsMax: 4096,
  /** CLI: a password file holds one line; a longer file is not a password file. */
  passwordFileBytesMax: 4096,
  /** CLI: a NATS .creds file is a JWT of a few kilobytes and a 58-character seed; anything much larger is not one. */
  credsFileBytesMax: 64 * 1024,
  /** CLI: a bearer token file holds one token; anything larger is not one. */
  tokenFileBytesMax: 16 * 1024,
  /** Workflow documents in YAML: aliases one document may expand (the `yaml` package's own default, named here). */
  yamlAliasesMax: 100,
  /**
   * `call: openapi`: the bytes of an OpenAPI document a workflow fetches (a larger one is refused
   * unread), and the parsed documents one executor keeps per URI between instances.
   */
  openApiDocumentBytesMax: 4 * 1024 * 1024,
  /** The content a workflow's `call: http` (or an OpenAPI operation) reads of an answer; more is a communication error (502), read no further. */
  httpContentBytesMax: 256 * 1024,
  openApiDocumentsCachedMax: 32,
  /** Recovery: operations read from the store at once when a coordinator starts (their round trips overlap). */
  recoveryReadsMax: 16,
  /** SQLite store: transitions read per follow (tail) query. */
  sqliteFollowBatchMax: 512,
  /** SQLite store: operation ids read per page when listing them. */
  sqliteOperationIdsPageMax: 256,
  /** Stores: how many times a create retries over a log that holds only void transitions. */
  storeCasAttemptsMax: 8,
  /** NATS durability check: how many times a consumer being repaired is looked at before its repair is reported failed. */
  consumerRecreateAttemptsMax: 3,
  /** Stores: operation records kept per store client to derive index rows without reading the log (index-states.ts). */
  indexStatesKeptMax: 1024,
  /** Replay-stamped stores: fold points remembered per store client, so the single-writer path needs no read (on-fold.ts). */
  foldPointsKeptMax: 10_000,
  /**
   * JetStream store: how old a reading of the operations stream (its operation count and its
   * configuration) may be before a write asks the server again.
   */
  jetstreamStreamReadingAgeMsMax: 1_000,
  /**
   * JetStream store, an operations stream with a message cap (max_msgs under discard-new): the
   * share of the cap (1 / this) kept for the appends of operations already open, never given to
   * new ones (jetstream-stream-limits.ts `messageReserve`).
   */
  jetstreamMessageReserveDivisor: 10,
  /** EventStoreDB store: events per readStream call when reading an operation's log. */
  eventStoreDbReadPageMax: 1024,
  /**
   * JetStream store: a read takes the first messages of a subject one STREAM.MSG.GET at a time (most logs are a few
   * transitions: no consumer to create), and the rest of a longer log in batches pulled from an
   * ephemeral consumer filtered on the subject: a few round trips for thousands of transitions.
   */
  jetstreamScanGetsMax: 8,
  /** JetStream store: messages per batch of the ephemeral consumer that reads a long log. */
  jetstreamScanBatchMax: 1024,
  /** Stamp feed: how many recent deliveries are kept for appends whose PubAck arrives after the delivery. */
  stampFeedKeptMax: 8192,
  /** NATS consumers: messages a consumer pulls ahead; small, because buffered messages age against ack_wait too. */
  natsPullBatchMessagesMax: 64,
  /** NATS consumers: the bounds of one pull's expiry (a pull lasts ack_wait within these, see nats-consumers.ts). */
  natsPullExpiresMsMin: 1_000,
  natsPullExpiresMsMax: 30_000,
  /** NATS consumers: stream sequences remembered per subscription, to name the subject of an exhausted message. */
  natsDeliveredSubjectsMax: 10_000,
  /** NATS consumers: exhausted sequences remembered per subscription: the server re-emits the advisory after a restart. */
  natsExhaustedReportedMax: 10_000,
  /** The chars of a namespace and of a peer id kept readable in a stream name; everything is also hashed. */
  streamNameNamespaceCharsMax: 20,
  streamNamePeerCharsMax: 16,
  /** (namespace, peer) pairs whose stream names a process keeps computed (nats-names.ts); more are hashed again. */
  streamNamesCachedMax: 4096,
} as const;

assert(limits.attemptsMax >= 1 && limits.attemptsMax <= 16, 'attemptsMax within the profile range 1..16');
assert(limits.memoryModeAttemptsMax >= 1 && limits.memoryModeAttemptsMax <= limits.attemptsMax, 'memory mode caps attempts within the profile range');
assert(limits.groupCommitBatchBytesMax * 2 <= limits.transitionBytesMax, 'a group-committed batch leaves half a transition for its events');
assert(limits.resultBatchMsMax < limits.admissionBudgetMs, 'a result batching window is short beside any deadline');
assert(limits.listenUntilWaitMsMax < limits.admissionBudgetMs, 'an event waits for until verdicts within the admission budget');
assert(
  limits.workflowSecretBytesMin >= 8 && limits.workflowSecretBytesMin < limits.workflowSecretBytesMax,
  'a secret is long enough to scrub and fits its bound',
);
assert(limits.inputBytesMax < limits.transitionBytesMax, 'an input must fit in its admission transition');
assert(limits.resultBytesMax < limits.transitionBytesMax, 'a result must fit in its transition');
assert(
  limits.expressionResultBytesMax + limits.transitionOverheadBytesMax <= limits.transitionBytesMax,
  "a jq result fits its transition beside the transition's overhead",
);
assert(
  Math.ceil(limits.httpContentBytesMax / 3) * 4 + limits.transitionOverheadBytesMax <= limits.transitionBytesMax,
  "an HTTP call's content, even as base64 (output: raw), fits its transition",
);
assert(limits.transitionBytesMax <= limits.recordBytesMax, 'a transition fits in a record');
assert(
  limits.httpWaitsMax >= limits.waitsPerPrincipalMax &&
    limits.httpEventStreamsMax >= limits.httpEventStreamsPerPrincipalMax &&
    limits.httpEventDeliveriesMax >= limits.httpEventDeliveriesPerPrincipalMax,
  'every per-principal HTTP bound a deployment may set fits the most it may set for all principals together',
);
assert(
  limits.workflowRunningPerPrincipalDefault >= 1 && limits.workflowRunningPerPrincipalDefault <= limits.workflowRunningPerPrincipalMax,
  "a principal's default bound of running workflow instances is within its most",
);
assert(
  limits.emittedStreamEventsPerPrincipalDefault >= 1 && limits.emittedStreamEventsPerPrincipalDefault <= limits.emittedStreamEventsPerPrincipalMax,
  "a principal's default share of the emit stream is within its most",
);
assert(
  limits.rejectionsRecordedMax + limits.protocolConflictsRecordedMax < limits.transitionsPerOperationMax / 2,
  'rejections and conflicts cannot exhaust a stream',
);
assert(limits.transitionsStoredMax >= limits.transitionsPerOperationMax, 'every store reads back at least the per-operation budget');
assert(
  limits.workflowTransitionsMax * 2 <= limits.transitionsStoredMax,
  "a workflow instance's running budget leaves half of what a store reads back for its closing",
);
assert(
  limits.workflowLogBytesMax >= 32 * limits.transitionBytesMax,
  "a workflow instance's running byte budget holds many transitions of the largest size: its start and closing are small beside it",
);
assert(limits.resultBytesMax + limits.transitionOverheadBytesMax <= limits.transitionBytesMax, 'a result and its transition overhead fit a transition');
assert(
  limits.transitionBytesMax + limits.closingBytesPerBranch * limits.branchesMax <= limits.recordBytesMax,
  'a closing transition and every branch closing fit a record',
);
assert(
  limits.renewalTransitionsPerOperationMax +
    limits.rejectionsRecordedMax +
    limits.protocolConflictsRecordedMax +
    limits.closingTransitionsPerBranch * limits.branchesMax +
    limits.closingTransitionsBase <=
    (limits.transitionsPerOperationMax * 3) / 4,
  'renewals, recorded rejections and the largest closing reserve stay well under the transition budget',
);
assert(Number.isSafeInteger(limits.timeoutMsMax + limits.settlementGraceMsMax + limits.cancelTimeoutMsMax), 'time sums are safe integers');

export type Limits = typeof limits;
assert(
  Math.max(limits.inputBytesMax, limits.resultBytesMax) + limits.wireEnvelopeBytesMax <= limits.durableMsgBytesDefault,
  'the largest request or result fits a durable stream by default',
);
