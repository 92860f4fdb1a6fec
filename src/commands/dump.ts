// `nsa-top dump RUN [--json] [--host …]` — a stack dump of every rank (SIGUSR1, one rank at a time,
// verified pid + start time, proven a rank of the run by its records, only once its handler is
// installed, never the launcher), like the cockpit's d; logged in actions.jsonl.
import type { Host } from '../remote/host.js';
import type { RunDirs } from '../trainer/run/rundirs.js';
import type { NodeProcesses } from '../trainer/run/nodes.js';
import { lookAheadOf } from '../trainer/run/lookahead.js';
import { resolve } from 'node:path';
import { LocalHost } from '../remote/local/host.js';
import {
  currentActor,
  dumpAll,
  dumpRun,
  rankTarget,
  readOnlyMode,
  type DumpOutcome,
} from '../trainer/control/actions.js';
import type { UnprovenProc } from '../remote/types.js';
import { READ_ONLY_REFUSAL } from '../trainer/control/audit.js';
import { LOST } from '../trainer/control/dumpwatch.js';
import { outOfReachText } from '../trainer/control/nodes.js';
import { headlessVerdicts, refusedByState } from './fit.js';
import { nodeHosts, NODE_OPTIONS, nodeListOf, openNodes } from './nodes.js';
import { resolveRunDir, resolveRunDirsAt } from '../trainer/run/rundir.js';
import { defineCommand, parseCommand } from './args.js';
import { HOST_OPTIONS, hostSpecOf, RUN_DIR_ARG } from './options.js';
import { JSON_OPTION } from './control-cli.js';
import { CliError } from './errors.js';

export const command = defineCommand({
  name: 'dump',
  positional: RUN_DIR_ARG,
  options: { ...JSON_OPTION, ...HOST_OPTIONS, ...NODE_OPTIONS },
  about: `Sends SIGUSR1 to each rank of the run, one at a time (the real trainer names its dump
stackdump_<epoch>.txt, by the second only: the next rank waits until the previous one's file is there
and its second has passed), and names each rank's file, or says its stack was lost, and why. A rank
still starting (no SIGUSR1 handler yet: the signal would kill it) is not signalled and is named as
not ready.
A multi-node run (--node for each node, or --nodes H1,H2; the first reads the run dir): every rank on
every node, each checked and signalled on the node its pid lives on (one SSH connection per node),
one at a time as above; a node that cannot be reached, or that does not share the run dir, is named
for each of its ranks and not signalled.`,
  epilog: 'Exit codes: 0 every rank dumped, 1 some or none answered, 2 bad input, 3 refused (read-only, no ranks).',
});

async function openHostFor(spec: ReturnType<typeof hostSpecOf>): Promise<Host> {
  if (!spec.host || spec.host === 'local') return new LocalHost();
  try {
    // loaded only for --host: the SSH stack costs what a local dump does not need
    return await (await import('../remote/index.js')).openHost(spec);
  } catch (e) {
    throw new CliError(`--host ${spec.host}: ${(e as Error).message}`, 2);
  }
}

export async function run(argv: string[]): Promise<number> {
  const p = parseCommand(command, argv);
  if (!p) return 0;
  const a = p.values;
  const readOnly = a['read-only'] || readOnlyMode();
  const out = (o: Record<string, unknown>, line: string, code: number) => {
    if (a.json) process.stdout.write(`${JSON.stringify({ command: 'dump', exitCode: code, ...o }, null, 2)}\n`);
    else (code === 0 ? process.stdout : process.stderr).write(line);
    return code;
  };
  if (readOnly) return out({ result: 'refused', detail: READ_ONLY_REFUSAL }, `dump refused: ${READ_ONLY_REFUSAL}\n`, 3);
  const spec = hostSpecOf(a);
  const nodeList = await nodeListOf(a);
  if (nodeList.length > 0 && spec.host)
    throw new CliError("dump: --host and --node: name the run dir's machine as the first --node", 2);
  const nodes = nodeList.length > 0 ? await openNodes(nodeList, spec) : null;
  const host = nodes ? nodes.primary.host! : await openHostFor(spec);
  const onProgress = a.json ? undefined : (m: string) => process.stderr.write(`  ${m}\n`);
  // finding the run and judging its state is one look (Host.look): over SSH its records are asked
  // together, each once. The proof, the signals and the wait for the dumps are the host's own:
  // never answered from a look
  const guess = p.positional ? resolve(process.cwd(), p.positional) : null;
  const look = host.look?.(guess ? lookAheadOf({ runDir: guess, outDir: guess }, 'first') : undefined) ?? null;
  const seen = look ?? host;
  try {
    const runDir = await resolveRunDir(seen, p.positional, process.cwd());
    // the run resolved once here at the edge: the state's refusal, the proof and the dumps read it
    const dirs = await resolveRunDirsAt(seen, runDir);
    const r = nodes
      ? await dumpNodes(host, dirs, nodes, readOnly, onProgress)
      : await dumpRun(
          host,
          dirs,
          () => currentActor(host),
          { readOnly, onProgress },
          // what the cockpit refuses (nothing to dump once the run has ended), in its words
          async () => (await refusedByState(seen, dirs, 'dump'))?.why ?? null,
        );
    // named as a trainer of the run without proof: never signalled, and said why
    const refused = r.unproven.map((u) => ({ rank: u.rank, pid: u.pid, status: 'refused', why: u.why }));
    const refusedLines = refused.map((u) => `pid ${u.pid}: not signalled (${u.why})\n`).join('');
    if (r.refused)
      return out(
        { result: 'refused', detail: r.refused, ...(refused.length ? { refused } : {}) },
        `dump refused: ${r.refused}\n${refusedLines}`,
        3,
      );
    if (!r.outcome) {
      const detail = `no rank process of this run is running${r.error ? ` (${r.error})` : ''}`;
      return out({ result: 'refused', detail, refused }, `dump refused: ${detail}\n${refusedLines}`, 3);
    }
    const perRank = r.outcome.perRank;
    const dumped = perRank.filter((x) => x.status === 'dumped').length;
    // a node that could not be reached, its ranks unknown: not every rank was dumped
    const outOfReach = r.outcome.outOfReach ?? [];
    const code = dumped === perRank.length && outOfReach.length === 0 ? 0 : 1;
    // by rank: its own file, or why it has none ("no stack written (lost) — …", "refused — …")
    const lines = perRank
      .map(
        (x) =>
          `rank ${x.rank}${x.host !== undefined ? ` on ${x.host}` : ''} (pid ${x.pid}): ${x.status === 'dumped' && x.file ? x.file : x.why?.startsWith(LOST) ? x.why : `${x.status} — ${x.why ?? ''}`}\n`,
      )
      .join('');
    const nodeLines = outOfReach.map((n) => `${outOfReachText(n)}\n`).join('');
    return out(
      {
        result: code === 0 ? 'ok' : dumped > 0 ? 'partial' : 'failed',
        perRank,
        pySpy: r.outcome.pySpy,
        ...(refused.length ? { refused } : {}),
        ...(outOfReach.length ? { outOfReach } : {}),
      },
      `dump: ${dumped}/${perRank.length} ranks dumped\n${lines}${nodeLines}${refusedLines}`,
      code,
    );
  } finally {
    look?.end();
    if (nodes) await nodes.set.close();
    else await host.close().catch(() => {});
  }
}

/**
 * A multi-node run: its ranks on every node from the one observation (the cockpit's, merged over
 * the nodes), the state's refusal in the cockpit's words, then dumpAll with each rank's node.
 */
async function dumpNodes(
  host: Host,
  dirs: RunDirs,
  nodes: NodeProcesses,
  readOnly: boolean,
  onProgress: ((m: string) => void) | undefined,
): Promise<{ outcome: DumpOutcome | null; unproven: UnprovenProc[]; error: string | null; refused?: string }> {
  const v = await headlessVerdicts(host, dirs, { nodes });
  const procs = v?.procs ?? null;
  const unproven = procs?.unproven ?? [];
  const targets = (procs?.ranks ?? []).filter((r) => r.proc.state !== 'Z').map(rankTarget);
  const refused = v && !v.verdicts.dump.ok ? v.verdicts.dump.why : null;
  if (targets.length === 0)
    return { outcome: null, unproven, error: procs?.error ?? null, ...(refused ? { refused } : {}) };
  if (refused) return { outcome: null, unproven, error: null, refused };
  const actor = await currentActor(host);
  const outcome = await dumpAll(host, dirs, targets, actor, {
    readOnly,
    ...(onProgress ? { onProgress } : {}),
    nodes: nodeHosts(nodes),
  });
  return { outcome, unproven, error: null };
}
