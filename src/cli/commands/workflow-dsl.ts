/**
 * `convoke workflow validate BUNDLE [NAME]`, `convoke workflow lower BUNDLE NAME [--json]` and
 * `convoke workflow graph BUNDLE NAME`: a bundle's pipelines and workflows checked, lowered to
 * standalone Serverless Workflow 1.0.3 documents (YAML, or RFC 8785 canonical JSON) and drawn as
 * Mermaid flowcharts of the Serverless Workflow SDK's graph. `validate` and `graph` also take a
 * standalone workflow document (with `--with` the documents its `run: workflow` tasks name), checked
 * as `workflow run` checks it. Nothing runs and nothing is contacted.
 */
import type { Command } from 'commander';
import type { CompiledBundle } from '../../contract/bundle.js';
import { invalidInput } from '../../contract/errors.js';
import type { JsonObject } from '../../contract/json.js';
import type { CliIo } from '../io.js';
// Loaded at start anyway: main.ts registers `workflow run` from it.
import { checkWorkflowFiles, headerOf } from './workflow-run.js';
import { repeatable, workflowCommand } from '../options.js';
import { labelled, widthOf } from '../table.js';
import { terminalText } from '../terminal-text.js';

// Loaded when a workflow command runs (main.ts registers these commands on every start).
const load = async () => {
  const [files, runnable, bundle, mermaid, canonical, yaml] = await Promise.all([
    import('../../deployment/files.js'),
    import('../runnable.js'),
    import('../../workflow/dsl/bundle.js'),
    import('../../workflow/dsl/mermaid.js'),
    import('../../contract/canonical.js'),
    import('yaml'),
  ]);
  // The bundle as the language checks it, and its workflows as the executor would run them, their jq compiled.
  const checkedBundle = async (compiled: CompiledBundle) => {
    await runnable.checkedRunnableWorkflows(compiled);
    return compiled;
  };
  return {
    readBundleFile: async (file: string) => checkedBundle(await files.readBundleFile(file)),
    /** A bundle, checked; or a standalone document with its --with documents, checked as `workflow run` checks them. */
    readBundleOrDocument: async (
      file: string,
      withFiles: readonly string[],
    ): Promise<{ kind: 'bundle'; compiled: CompiledBundle } | { kind: 'document'; document: JsonObject }> => {
      const read = await files.readBundleOrDocument(file);
      if (read.kind === 'bundle') {
        if (withFiles.length > 0)
          throw invalidInput(`--with pins documents beside a standalone workflow document; ${file} is a bundle, which pins its own under workflows:`);
        return { kind: 'bundle', compiled: await checkedBundle(read.compiled) };
      }
      return { kind: 'document', document: (await checkWorkflowFiles(file, withFiles)).document };
    },
    checkBundleWorkflows: bundle.checkBundleWorkflows,
    mermaidOf: mermaid.mermaidOf,
    canonicalJson: canonical.canonicalJson,
    yamlText: (document: unknown) => yamlText(yaml, document),
  };
};

/**
 * A document as YAML a terminal shows as it is, with the same value: every string holding a
 * character terminalText escapes (a task name or value from whoever wrote the bundle) is written
 * double-quoted, where terminalText's `\uXXXX` is YAML's own escape of that character.
 */
function yamlText(yaml: typeof import('yaml'), document: unknown): string {
  const tree = new yaml.Document(document);
  yaml.visit(tree, {
    Scalar(_key, node) {
      if (typeof node.value === 'string' && terminalText(node.value) !== node.value) node.type = 'QUOTE_DOUBLE';
    },
  });
  return terminalText(tree.toString({ lineWidth: 0 }));
}

/** A NAME given for a standalone document must be its own name. */
function checkDocumentName(file: string, document: JsonObject, name: string | undefined): void {
  const [, own] = headerOf(document);
  if (name !== undefined && name !== own) throw invalidInput(`${file} is the workflow document ${JSON.stringify(own)}, not ${JSON.stringify(name)}`);
}

export async function workflowValidateCommand(
  file: string,
  name: string | undefined,
  options: { json: boolean; with?: readonly string[] },
  io: CliIo,
): Promise<number> {
  const { readBundleOrDocument, checkBundleWorkflows } = await load();
  const read = await readBundleOrDocument(file, options.with ?? []);
  if (read.kind === 'document') {
    checkDocumentName(file, read.document, name);
    const [namespace, own, version] = headerOf(read.document);
    if (options.json) {
      io.stdout.write(JSON.stringify({ document: { namespace, name: own, version }, file, with: options.with ?? [], valid: true }, null, 2) + '\n');
      return 0;
    }
    const width = widthOf(io);
    io.stdout.write(`${labelled('document ', `${namespace}/${own}@${version}`, width)}\n`);
    io.stdout.write(`${labelled('valid    ', `workflow ${own} (${file}${(options.with ?? []).map((w) => `, with ${w}`).join('')})`, width)}\n`);
    return 0;
  }
  const compiled = read.compiled;
  const checked = await checkBundleWorkflows(compiled, name);
  if (options.json) {
    const workflows = [...checked.values()].map((w) => ({ name: w.name, kind: w.kind, pointer: w.pointer, valid: true }));
    io.stdout.write(JSON.stringify({ contract: compiled.ref, workflows }, null, 2) + '\n');
    return 0;
  }
  // The bundle's names, for a person: labelled shows them escaped (the bundle may be anyone's), each line wrapped under its label.
  const width = widthOf(io);
  io.stdout.write(`${labelled('contract ', `${compiled.ref.id}@${compiled.ref.version}`, width)}\n${labelled('digest   ', compiled.digest, width)}\n`);
  if (checked.size === 0) io.stdout.write('no pipelines or workflows\n');
  for (const w of checked.values()) io.stdout.write(`${labelled('valid    ', `${w.kind.padEnd(8)} ${w.name} (${w.pointer})`, width)}\n`);
  return 0;
}

export async function workflowLowerCommand(file: string, name: string, options: { json: boolean }, io: CliIo): Promise<number> {
  const { readBundleFile, checkBundleWorkflows, canonicalJson, yamlText } = await load();
  const compiled = await readBundleFile(file);
  const document = (await checkBundleWorkflows(compiled, name)).get(name)?.document;
  if (document === undefined) return 1;
  io.stdout.write(options.json ? canonicalJson(document) + '\n' : yamlText(document));
  return 0;
}

export async function workflowGraphCommand(file: string, name: string | undefined, options: { with?: readonly string[] }, io: CliIo): Promise<number> {
  const { readBundleOrDocument, checkBundleWorkflows, mermaidOf } = await load();
  const read = await readBundleOrDocument(file, options.with ?? []);
  let document: JsonObject | undefined;
  if (read.kind === 'document') {
    checkDocumentName(file, read.document, name);
    document = read.document;
  } else {
    if (name === undefined) throw invalidInput(`${file} is a bundle: name the pipeline or workflow to draw`);
    document = (await checkBundleWorkflows(read.compiled, name)).get(name)?.document;
  }
  if (document === undefined) return 1;
  // Task names are the bundle's: escaped, as every text the CLI shows a person (Mermaid draws the escape as written).
  io.stdout.write(terminalText((await mermaidOf(document)).trimEnd()) + '\n');
  return 0;
}

/** Registers validate, lower and graph under `convoke workflow`. */
export function addWorkflowDslCommands(program: Command, io: CliIo, setExit: (code: number) => void): void {
  const workflow = workflowCommand(program);
  const withOption = ['--with <file>', 'a standalone document: a workflow its run: workflow tasks name (repeatable)', repeatable, [] as string[]] as const;
  workflow
    .command('validate')
    .argument('<file>', 'bundle file, or a standalone workflow document (JSON or YAML)')
    .argument('[name]', 'one pipeline or workflow (all when absent)')
    .option(...withOption)
    .option('--json', 'machine-readable output', false)
    .description(
      "check the bundle's pipelines and workflows, or a workflow document (supported tasks, resolved calls, compatible stage schemas, deterministic expressions, jq that compiles), and validate each standalone document against the Serverless Workflow DSL 1.0.3 JSON Schema",
    )
    .action(async (file: string, name: string | undefined, o) => setExit(await workflowValidateCommand(file, name, { json: o.json, with: o.with }, io)));
  workflow
    .command('lower')
    .argument('<bundle>', 'bundle file (JSON or YAML)')
    .argument('<name>', 'pipeline or workflow name')
    .option('--json', 'print RFC 8785 canonical JSON instead of YAML', false)
    .description('print the standalone Serverless Workflow 1.0.3 document of a pipeline (lowered) or workflow (with the contract function declared)')
    .action(async (file: string, name: string, o) => setExit(await workflowLowerCommand(file, name, { json: o.json }, io)));
  workflow
    .command('graph')
    .argument('<file>', 'bundle file, or a standalone workflow document (JSON or YAML)')
    .argument('[name]', "pipeline or workflow name (a bundle's; a document's own name, if given)")
    .option(...withOption)
    .description("print a pipeline's or workflow's document as a Mermaid flowchart (of the Serverless Workflow SDK's graph)")
    .action(async (file: string, name: string | undefined, o) => setExit(await workflowGraphCommand(file, name, { with: o.with }, io)));
}
