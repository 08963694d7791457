/** The Serverless Workflow DSL release convoke reads and writes (DESIGN: 1.0.4 is unpublished). */
export const workflowDslVersion = '1.0.3';
