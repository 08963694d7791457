/**
 * The DSL errors a contract call raises when its operation did not succeed: convoke's executor
 * raises them (exec/calls.ts), and the contract function's declaration for other engines raises
 * the same (dsl/contract-function.ts), so a document means one thing wherever it runs.
 */
export const contractDecisionErrorType = 'https://convoke.dev/errors/workflow/decision';
export const contractSettlementErrorType = 'https://convoke.dev/errors/workflow/settlement';
export const contractOutputErrorType = 'https://convoke.dev/errors/workflow/output';
