/** `convoke bundle check FILE`: validate a contract bundle and print its digest, subjects and interactions. */
import { readBundleFile } from '../../deployment/files.js';
import { describeCompletion } from '../../contract/completion.js';
import type { CliIo } from '../io.js';
import { fitText, labelled, renderTable, widthOf } from '../table.js';

export async function bundleCheckCommand(file: string, options: { json: boolean }, io: CliIo): Promise<number> {
  const compiled = await readBundleFile(file);
  // Its workflows as the executor would run them (loaded only for a bundle that has any).
  if (compiled.bundle.pipelines !== undefined || compiled.bundle.workflows !== undefined)
    await (await import('../runnable.js')).checkedRunnableWorkflows(compiled);
  if (options.json) {
    io.stdout.write(
      JSON.stringify({ contract: compiled.ref, interactions: Object.fromEntries([...compiled.interactions].map(([id, i]) => [id, i.spec])) }, null, 2) + '\n',
    );
    return 0;
  }
  // Each wrapped under its value's column (labelled), as workflow validate prints a bundle's: wrapped
  // as prose, the digest and subjects went on at the margin, under the labels.
  const subjects = `${compiled.bundle.subjectNamespace}.<interaction>.<operation>.{request,result,claim,cancel,cancel-result}.<peer>`;
  const head: [string, string][] = [
    ['contract ', `${compiled.ref.id}@${compiled.ref.version}`],
    ['digest   ', compiled.digest],
    ['subjects ', subjects],
  ];
  io.stdout.write(`${head.map(([label, text]) => labelled(label, text, widthOf(io))).join('\n')}\n\n`);
  const rows = [...compiled.interactions.values()].map((i) => {
    const s = i.spec;
    const audience = 'group' in s.audience ? `group ${s.audience.group}` : `peers ${s.audience.peers.join(',')}`;
    return [i.id, s.delivery, audience, describeCompletion(s.completion), s.votes, `${s.timeoutMs} ms`, s.onTimeout, s.attempts, s.siblings, s.waitFor];
  });
  io.stdout.write(
    renderTable(['interaction', 'delivery', 'audience', 'completion', 'votes', 'timeout', 'on timeout', 'attempts', 'siblings', 'waitFor'], rows, widthOf(io)),
  );
  const pipelines = Object.keys(compiled.bundle.pipelines ?? {});
  const workflows = Object.keys(compiled.bundle.workflows ?? {});
  if (pipelines.length > 0) io.stdout.write(`\n${fitText(`pipelines ${pipelines.join(', ')}`, widthOf(io))}`);
  if (workflows.length > 0) io.stdout.write(`${pipelines.length > 0 ? '' : '\n'}${fitText(`workflows ${workflows.join(', ')}`, widthOf(io))}`);
  return 0;
}
