/**
 * A document drawn as a Mermaid flowchart: the graph is built by `buildGraph` of
 * @serverlessworkflow/sdk, pinned exactly to 1.0.1 (engines: node >= 20), and written out here.
 * That release validates only `dsl: '1.0.0'`, but its `buildGraph` does not validate: it walks the
 * task list, which DSL 1.0.3 left as 1.0.0 had it, and draws every official 1.0.3 example.
 * Validation is dsl-schema.ts's. Loaded on first use (the SDK compiles its own schemas at load).
 *
 * The SDK's own `convertToMermaidCode` (1.0.1, and 1.0.3-alpha1 alike) writes each label and id
 * as it is, between double quotes: a `switch` case or a `then` condition holding a `"` (any jq
 * string literal) or a task name holding a space gives text Mermaid refuses to parse, and a task
 * nested in a `try` or a `switch` is declared twice. This writer keeps its layout (one subgraph
 * per composite task, hidden entry and exit nodes, `---` into a subgraph's hidden nodes) and
 * writes every id as `n<k>` (its own, in the order the graph names them) and every label with the
 * characters Mermaid reads inside a quoted label (`"`, `#`, `<`, `>`, `&`, a backtick) as entity
 * codes, each node once.
 *
 * Documents are handed over as plain objects: the SDK's `Classes.Workflow.deserialize` rewrites
 * `listen.to.any: []` into `[[]]`, so convoke parses the text itself (text.ts).
 */
import type { JsonObject } from '../../contract/json.js';

type Sdk = typeof import('@serverlessworkflow/sdk');
type Graph = ReturnType<Sdk['buildGraph']>;
type GraphNode = Graph['nodes'][number];

let loaded: Promise<Sdk> | undefined;
// The package is CommonJS (a UMD bundle whose exports Node cannot list), so its API is `default`.
const sdk = (): Promise<Sdk> => (loaded ??= import('@serverlessworkflow/sdk').then((m) => m.default));

/** The document as a Mermaid flowchart. */
export async function mermaidOf(document: JsonObject): Promise<string> {
  const { buildGraph } = await sdk();
  const graph = buildGraph(structuredClone(document) as Parameters<Sdk['buildGraph']>[0]);
  return `${new Writer().graph(graph, 0).join('\n')}\n\nclassDef hidden display: none;`;
}

/** A label inside Mermaid's double quotes: what Mermaid would read as syntax, markup or an entity, as entity codes; one line. */
export function mermaidLabel(text: string): string {
  return text.replace(/[\r\n\t]+/g, ' ').replace(/["#<>&`]/g, (c) => `#${c.charCodeAt(0)};`);
}

const isGraph = (node: GraphNode): node is Graph => Array.isArray((node as Partial<Graph>).nodes) && (node as Graph).nodes.length > 0;

class Writer {
  private readonly ids = new Map<string, string>();
  private readonly declared = new Set<string>();

  /** The chart's own id for a graph id: `n` and the order it was first named in. */
  private id(graphId: string): string {
    let id = this.ids.get(graphId);
    if (id === undefined) {
      id = `n${this.ids.size}`;
      this.ids.set(graphId, id);
    }
    return id;
  }

  graph(graph: Graph, depth: number): string[] {
    const pad = '    '.repeat(depth);
    const lines = [depth === 0 ? 'flowchart TD' : `${pad}subgraph ${this.id(graph.id)} ["${mermaidLabel(graph.label || graph.id)}"]`];
    for (const node of graph.nodes) lines.push(...this.node(node, depth + 1));
    for (const edge of graph.edges) {
      // Into a subgraph's hidden entry or exit node, a line without an arrow head (as the SDK draws it).
      const headless = !edge.destinationId.startsWith('root') && (edge.destinationId.endsWith('-entry-node') || edge.destinationId.endsWith('-exit-node'));
      const label = edge.label ? ` -- "${mermaidLabel(edge.label)}"` : '';
      lines.push(`${pad}    ${this.id(edge.sourceId)}${label} ${headless ? '---' : '-->'} ${this.id(edge.destinationId)}`);
    }
    if (depth > 0) lines.push(`${pad}end`);
    return lines;
  }

  private node(node: GraphNode, depth: number): string[] {
    if (isGraph(node)) return this.graph(node, depth);
    if (this.declared.has(node.id)) return [];
    this.declared.add(node.id);
    const pad = '    '.repeat(depth);
    const id = this.id(node.id);
    switch (node.type) {
      case 'entry':
      case 'exit':
        return [`${pad}${id}:::hidden`];
      case 'start':
        return [`${pad}${id}(( ))`];
      case 'end':
        return [`${pad}${id}((( )))`];
      default:
        return [`${pad}${id}["${mermaidLabel(node.label || node.id)}"]`];
    }
  }
}
