// `nsa-top dump RUN [--json]` — a stack dump of every rank (SIGUSR1, one rank at a time, verified pid + start
// time, never the launcher), like the cockpit's d; logged in actions.jsonl.
import { currentActor, dumpAll, readOnlyMode } from '../trainer/control/actions.js';
import { READ_ONLY_REFUSAL } from '../trainer/control/audit.js';
import { LOST } from '../trainer/control/dumpwatch.js';
import { findRunProcesses } from '../trainer/run/processes.js';
import { resolveRunDirs } from '../trainer/launch/rundirs.js';
import { heartbeatPidsOf } from '../trainer/control/requests.js';
import { defineCommand, parseCommand } from './args.js';
import { RUN_DIR_ARG } from './options.js';
import { JSON_OPTION, localRun } from './control-cli.js';
import { refusedByState } from './fit.js';

export const command = defineCommand({
  name: 'dump',
  positional: RUN_DIR_ARG,
  options: JSON_OPTION,
  about: `Sends SIGUSR1 to each rank of the run, one at a time (the real trainer names its dump
stackdump_<epoch>.txt, by the second only: the next rank waits until the previous one's file is there
and its second has passed), and names each rank's file, or says its stack was lost, and why.`,
  epilog: 'Exit codes: 0 every rank dumped, 1 some or none answered, 2 bad input, 3 refused (read-only, no ranks).',
});

export async function run(argv: string[]): Promise<number> {
  const p = parseCommand(command, argv);
  if (!p) return 0;
  const a = p.values;
  const { host, runDir } = await localRun(p.positional);
  const readOnly = a['read-only'] || readOnlyMode();
  const out = (o: Record<string, unknown>, line: string, code: number) => {
    if (a.json) process.stdout.write(`${JSON.stringify({ command: 'dump', exitCode: code, ...o }, null, 2)}\n`);
    else (code === 0 ? process.stdout : process.stderr).write(line);
    return code;
  };
  if (readOnly) return out({ result: 'refused', detail: READ_ONLY_REFUSAL }, `dump refused: ${READ_ONLY_REFUSAL}\n`, 3);
  const no = await refusedByState(host, runDir, 'dump');
  if (no) return out({ result: 'refused', detail: no.why }, `dump refused: ${no.why}\n`, 3);
  const { outDir } = await resolveRunDirs(host, runDir);
  const procs = await findRunProcesses(host, outDir, { heartbeatPids: await heartbeatPidsOf(host, outDir) });
  const targets = procs.ranks
    .filter((r) => r.proc.state !== 'Z')
    .map((r) => ({ rank: r.rank, pid: r.proc.pid, startTime: r.proc.startTime, state: r.proc.state }));
  if (targets.length === 0)
    return out(
      { result: 'refused', detail: `no rank process of this run is running${procs.error ? ` (${procs.error})` : ''}` },
      `dump refused: no rank process of this run is running${procs.error ? ` (${procs.error})` : ''}\n`,
      3,
    );
  const actor = await currentActor(host);
  const r = await dumpAll(host, runDir, targets, actor, {
    readOnly,
    onProgress: a.json ? undefined : (m) => process.stderr.write(`  ${m}\n`),
  });
  const dumped = r.perRank.filter((p) => p.status === 'dumped').length;
  const code = dumped === r.perRank.length ? 0 : 1;
  // by rank: its own file, or why it has none ("no stack written (lost) — …", "refused — …")
  const lines = r.perRank
    .map(
      (p) =>
        `rank ${p.rank} (pid ${p.pid}): ${p.status === 'dumped' && p.file ? p.file : p.why?.startsWith(LOST) ? p.why : `${p.status} — ${p.why ?? ''}`}\n`,
    )
    .join('');
  return out(
    { result: code === 0 ? 'ok' : dumped > 0 ? 'partial' : 'failed', perRank: r.perRank, pySpy: r.pySpy },
    `dump: ${dumped}/${r.perRank.length} ranks dumped\n${lines}`,
    code,
  );
}
