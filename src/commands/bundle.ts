// `nsa-top bundle [RUN_DIR] [-o FILE] [--max-mb N] [--host H]`: one tar.gz an operator attaches to an
// incident — report and status, every stack dump by rank, the tails of the logs, nsa-top's own
// records, run.info/config, env.json and everything else redacted of secrets, versions, nvidia-smi
// and the host at the moment of bundling, checkpoints listed (never copied), and a README.md that
// tells the story in order. Reads through the Host (a run over --host is read there, the tar is
// written here), never follows a link, never writes into the run, never goes over its cap.
import { closeSync, constants, fchmodSync, openSync, readFileSync, writeSync } from 'node:fs';
import { isAbsolute, join, relative, resolve } from 'node:path';
import { Checker, thresholdsFromEnv } from '../checks/index.js';
import { claimedRank, dumpClaims, dumpTimeMs } from '../checks/dumplabels.js';
import { defineCommand, parseCommand } from './args.js';
import { HOST_OPTIONS, hostSpecOf, RUN_DIR_ARG } from './options.js';
import { CliError, orCliError } from './errors.js';
import { formatText, gatherReport, reportJson } from './report.js';
import { gatherStatus, resumeCheckpointOf, statusJsonText } from './status.js';
import type { Host } from '../remote/host.js';
import { openHost } from '../remote/index.js';
import { readActions } from '../trainer/control/audit.js';
import type { ActionRecord } from '../trainer/control/types.js';
import { resolveRunDir, resolveRunDirsAt } from '../trainer/run/rundir.js';
import { redactFile } from '../bundle/redact.js';
import { storyReadme, type StoryEvent } from '../bundle/story.js';
import { safeName, tarGz, tarSize, type TarEntry } from '../bundle/tar.js';
import { PACKAGE_ROOT } from '../self.js';
import { sanitize } from '../sanitize.js';
import { decodeRecord, encodeRecord, peekRecord, plainState, type JournalRecord } from '../journal/codec.js';
import { journalSource, type JournalSource } from '../journal/index.js';
import { currentActor } from '../trainer/control/actions.js';
import { audited } from '../trainer/control/audit.js';
import { readOnlyMode } from '../trainer/control/ownfiles.js';

export const command = defineCommand({
  name: 'bundle',
  positional: RUN_DIR_ARG,
  options: {
    output: {
      type: 'string',
      short: 'o',
      value: 'FILE',
      help: 'the tar.gz to create (default: ./<run>-bundle-<time>.tar.gz); never overwritten, never inside the run',
    },
    'max-mb': {
      type: 'number',
      min: 0.05,
      value: 'N',
      help: 'the most the bundle may weigh, in MiB (default 64): logs are tailed, the largest items cut first',
    },
    ...HOST_OPTIONS,
  },
  about: `Writes one tar.gz to attach to an incident: README.md (the story in order: what happened, when,
which rank, what was done, the verdict), report.txt/report.json, status.json, every stack dump by
rank (dumps/rank0/…, dumps/unclaimed/… when nothing names the rank), the tails of the logs and of
every other file of the run dir (run.info, config, env.json, metrics, heartbeats, training.csv),
nsa-top's own records (nsa-top/actions.jsonl, watchdog.jsonl, supervisor.json and its log),
versions.json, nvidia-smi.txt (when there is one), host.txt, and checkpoints.txt (names, sizes and
times: never the checkpoints). Every text is redacted of secrets, by name (*TOKEN*, *KEY*, *SECRET*,
*PASSWORD*, AUTH*, webhooks) and by shape (ghp_…, sk-…, hf_…, xox…-, AKIA…, JWTs, Slack and
Discord webhooks, URLs with a password or a token parameter). The file is created with mode 0600,
never over an existing file and never inside the run; a link in the run dir is never followed (the
README names it). With --host the run is read on that machine and the bundle written here.`,
  epilog: 'Exit: 0 written; 2 bad input (no run, the output exists or lies inside the run, a bad option).',
});

const DEFAULT_MAX_MB = 64;
/** the most of one log or file a bundle carries before the cap's cuts (its end) */
const FILE_TAIL = 8 * 2 ** 20;
const CHECKPOINT = /\.(pt|pth|ckpt|safetensors|bin|npz|pkl)$/i;
const DUMP = /^(stackdump|stack_dump|stacks?)[_-].*\.txt$|dump.*\.txt$/i;

export async function run(argv: string[]): Promise<number> {
  const p = parseCommand(command, argv);
  if (!p) return 0;
  const v = p.values;
  const t = orCliError('bundle', () => thresholdsFromEnv(process.env));
  const maxBytes = Math.floor((v['max-mb'] ?? DEFAULT_MAX_MB) * 2 ** 20);
  const host = await openHost(hostSpecOf(v));
  try {
    return await bundleOn(host, p.positional, v.output, maxBytes, t);
  } finally {
    await host.close().catch(() => {});
  }
}

interface Found {
  /** relative to its root */
  rel: string;
  type: string;
  nlink: number;
  ino: number;
  size: number;
  mtimeMs: number;
}

/** The files of a dir and its direct subdirs, as they are (find -P: a link is a link, not its target). */
async function listTree(host: Host, dir: string): Promise<Found[] | string> {
  const r = await host
    .exec(['find', '-P', dir, '-mindepth', '1', '-maxdepth', '2', '-printf', '%y\\t%n\\t%i\\t%s\\t%T@\\t%P\\n'], {
      timeoutMs: 30_000,
    })
    .catch((e: Error) => ({ code: 1, stdout: '', stderr: e.message, timedOut: false }));
  if (r.code !== 0 && !r.stdout)
    return `find ${dir}: ${r.timedOut ? 'timed out' : r.stderr.trim() || `exit ${r.code}`}`;
  const out: Found[] = [];
  for (const line of r.stdout.split('\n')) {
    const f = line.split('\t');
    if (f.length < 6) continue;
    out.push({
      type: f[0]!,
      nlink: Number(f[1]),
      ino: Number(f[2]),
      size: Number(f[3]),
      mtimeMs: Math.round(Number(f[4]) * 1000),
      rel: f.slice(5).join('\t'),
    });
  }
  return out;
}

interface Item {
  name: string;
  data: Buffer;
  mtimeMs: number;
  /** may be tailed to fit the cap (the report, status and README may not) */
  cuttable: boolean;
  note?: string;
}

async function execText(host: Host, argv: string[]): Promise<string | null> {
  try {
    const r = await host.exec(argv, { timeoutMs: 15_000 });
    if (r.code !== 0 || r.timedOut) return null;
    return r.stdout;
  } catch {
    return null;
  }
}

const stamp = (ms: number) =>
  new Date(ms)
    .toISOString()
    .replace(/[-:]/g, '')
    .replace(/\.\d{3}Z$/, 'Z');

async function bundleOn(
  host: Host,
  dir: string | undefined,
  output: string | undefined,
  maxBytes: number,
  t: ReturnType<typeof thresholdsFromEnv>,
): Promise<number> {
  const runDir = await resolveRunDir(host, dir, process.cwd());
  const dirs = await resolveRunDirsAt(host, runDir);
  const name = dirs.outDir.split('/').filter(Boolean).pop() ?? 'run';
  const now = Date.now();
  const out = resolve(output ?? `${safeName(name).replace(/\//g, '_')}-bundle-${stamp(now)}.tar.gz`);
  // nsa-top never writes into the trainer's files: the bundle goes outside the run
  if (host.kind === 'local')
    for (const d of new Set([dirs.runDir, dirs.outDir])) {
      const rel = relative(resolve(d), out);
      if (!rel.startsWith('..') && !isAbsolute(rel))
        throw new CliError(`bundle: ${out} lies inside the run dir ${d}: write it elsewhere (-o)`, 2);
    }
  // refuse at once, before the minutes of reading (the O_EXCL open below is what guarantees it)
  try {
    closeSync(openSync(out, constants.O_RDONLY | constants.O_NOFOLLOW));
    throw new CliError(`bundle: ${out} exists: a bundle is never written over a file`, 2);
  } catch (e) {
    if (e instanceof CliError) throw e;
    if ((e as NodeJS.ErrnoException).code !== 'ENOENT')
      throw new CliError(`bundle: ${out} exists: a bundle is never written over a file`, 2);
  }

  const items: Item[] = [];
  const refused: string[] = [];
  const notes: string[] = [];
  const add = (it: Item) => items.push({ ...it, name: safeName(it.name) });

  // the report and status: the same readings as `nsa-top report` and `nsa-top status --json`
  let rep: Awaited<ReturnType<typeof gatherReport>> = null;
  try {
    rep = await gatherReport(host, { dir: runDir, phase: undefined, minTps: undefined }, t);
  } catch (e) {
    notes.push(`no report: ${sanitize((e as Error).message)}`);
  }
  if (rep) {
    add({ name: 'report.txt', data: Buffer.from(formatText(rep.rep, rep.charts)), mtimeMs: now, cuttable: false });
    add({ name: 'report.json', data: Buffer.from(reportJson(rep.rep, rep.charts)), mtimeMs: now, cuttable: false });
  }
  // status --json from the report's own observation (one reading of the run, not two: over SSH
  // each costs seconds); a run with nothing to judge gets status's own reading
  const st = rep
    ? {
        snap: rep.snap,
        ev: rep.ev,
        obs: rep.obs,
        actions: await readActions(host, rep.obs.dirs, 200).catch(() => [] as ActionRecord[]),
        resumeCheckpoint: await resumeCheckpointOf(host, rep.obs.dirs, false),
      }
    : await gatherStatus(host, runDir, false, new Checker(t));
  add({ name: 'status.json', data: Buffer.from(statusJsonText(st)), mtimeMs: now, cuttable: false });
  const actions = await readActions(host, st.obs.dirs).catch(() => [] as ActionRecord[]);
  const claims = dumpClaims(actions);

  // the files of the run: listed as they are, links refused
  const roots: { dir: string; prefix: string }[] = [{ dir: dirs.outDir, prefix: 'run' }];
  if (dirs.runDir !== dirs.outDir) roots.push({ dir: dirs.runDir, prefix: 'launcher' });
  const checkpoints: string[] = [];
  const extra: StoryEvent[] = [];
  const dumps: { name: string; ts: number; rank: number | null; kind: string; file: string }[] = [];
  for (const root of roots) {
    const tree = await listTree(host, root.dir);
    if (typeof tree === 'string') {
      notes.push(sanitize(tree));
      continue;
    }
    const wanted: Found[] = [];
    for (const f of tree) {
      const shown = `${root.dir}/${f.rel}`;
      if (f.type === 'l') {
        refused.push(`\`${sanitize(shown)}\`: a symbolic link — not followed`);
        continue;
      }
      if (f.type === 'd') continue;
      if (f.type !== 'f') {
        refused.push(`\`${sanitize(shown)}\`: not a regular file (${f.type})`);
        continue;
      }
      const parts = f.rel.split('/');
      const base = parts[parts.length - 1]!;
      if (root.dir === dirs.outDir && (f.rel === '.HALT' || f.rel === '.anomaly_type'))
        extra.push({
          ts: f.mtimeMs,
          text: `${f.rel} written in the run dir (${f.rel === '.HALT' ? 'the ranks stop at their next step' : 'the watchdog named an anomaly'})`,
        });
      if (CHECKPOINT.test(base)) {
        checkpoints.push(`${f.rel}\t${f.size}\t${new Date(f.mtimeMs).toISOString()}`);
        continue;
      }
      if (parts.length > 1 && parts[0] !== '.nsa-top') continue; // other subdirs (tb events): not carried
      // the journal is carried as its windows around the critical alerts (below), not whole
      if (root.dir === dirs.outDir && JOURNAL_NAME.test(f.rel)) continue;
      if (f.nlink > 1) {
        refused.push(
          `\`${sanitize(shown)}\`: a hard link (${f.nlink} names) — may be a file outside the run, not read`,
        );
        continue;
      }
      wanted.push(f);
    }
    // one round trip for every file of this root (over SSH: one poll, not two per file)
    const got = await readTails(host, root.dir, wanted, FILE_TAIL);
    for (const f of wanted) {
      const shown = `${root.dir}/${f.rel}`;
      const parts = f.rel.split('/');
      const base = parts[parts.length - 1]!;
      const data = got.get(f.rel) ?? 'not read';
      if (typeof data === 'string') {
        refused.push(`\`${sanitize(shown)}\`: ${sanitize(data)}`);
        continue;
      }
      if (data.subarray(0, 8192).includes(0)) {
        notes.push(`${sanitize(shown)}: binary, not carried (${f.size} bytes)`);
        continue;
      }
      const tailed = data.length < f.size ? `its last ${data.length} of ${f.size} bytes` : undefined;
      if (parts.length === 1 && DUMP.test(base)) {
        const parsed = st.snap.dumps.find((d) => d.name === base);
        const rank = parsed ? claimedRank(parsed, claims) : (/rank[_-]?(\d+)/i.exec(base)?.[1] ?? null);
        const r = rank === null ? null : Number(rank);
        const file = `dumps/${r === null ? 'unclaimed' : `rank${r}`}/${base}`;
        add({ name: file, data, mtimeMs: f.mtimeMs, cuttable: true, note: tailed });
        dumps.push({
          name: base,
          ts: parsed ? dumpTimeMs(parsed) : f.mtimeMs,
          rank: r,
          kind: parsed?.kind ?? (/watchdog/i.test(data.toString('utf8', 0, 200)) ? 'watchdog' : 'signal'),
          file,
        });
        continue;
      }
      const inBundle =
        parts[0] === '.nsa-top' ? `${root.prefix}/nsa-top/${parts.slice(1).join('/')}` : `${root.prefix}/${f.rel}`;
      add({ name: inBundle, data, mtimeMs: f.mtimeMs, cuttable: true, note: tailed });
    }
  }
  // a hand-launched run's stdout, recorded at adoption (it may lie outside the run dir)
  const adopted = st.obs.stop?.adoptedLog ?? null;
  if (adopted) {
    const tree = await host
      .exec(['find', '-P', adopted, '-maxdepth', '0', '-printf', '%y\\t%n\\t%i\\t%s\\t%T@\\n'], { timeoutMs: 15_000 })
      .catch(() => null);
    const f = tree?.stdout.trim().split('\t') ?? [];
    if (f[0] === 'f' && Number(f[1]) === 1) {
      const found = {
        rel: adopted,
        type: 'f',
        nlink: 1,
        ino: Number(f[2]),
        size: Number(f[3]),
        mtimeMs: Number(f[4]) * 1000,
      };
      const data = await readTail(host, adopted, found, FILE_TAIL);
      if (typeof data !== 'string')
        add({
          name: 'logs/adopted-stdout.log',
          data,
          mtimeMs: found.mtimeMs,
          cuttable: true,
          note: `the tail of ${adopted}`,
        });
    } else if (f.length)
      refused.push(`\`${sanitize(adopted)}\` (the adoption's stdout): not a regular file with one name — not read`);
  }
  // the journal around each critical alert: what nsa-top saw from 2 minutes before to 1 minute after
  const journal: JournalRecord[] = [];
  const jsrc = await journalSource(host, st.obs.dirs).catch((e: Error) => {
    notes.push(`the journal could not be read: ${sanitize(e.message)}`);
    return null;
  });
  if (!jsrc) notes.push('no journal: nothing recorded this run (a cockpit or watchdog on its host records one)');
  else {
    // its state changes and critical alerts are told in the story, in order
    for (const text of jsrc.linesBetween(-Infinity, Infinity)) {
      const k = peekRecord(text)?.k;
      if (k !== 'state' && k !== 'alert' && k !== 'clear') continue;
      const r = decodeRecord(text);
      if (r) journal.push(r);
    }
    const ws = await journalWindows(jsrc);
    for (const w of ws) add({ name: w.name, data: w.data, mtimeMs: w.to, cuttable: true, note: w.note });
    if (ws.length === 0)
      notes.push(`no critical alert in the journal (${sanitize(jsrc.origin)}): no journal window carried`);
  }
  add({
    name: 'checkpoints.txt',
    data: Buffer.from(['# name\tbytes\tmtime (listed, never copied)', ...checkpoints].join('\n') + '\n'),
    mtimeMs: now,
    cuttable: false,
  });

  // versions, nvidia-smi and the host, now
  const versions: Record<string, unknown> = { nsaTop: nsaTopVersion(), node: process.version };
  const envItem = items.find((i) => i.name === 'run/env.json');
  if (envItem) {
    try {
      const env = JSON.parse(envItem.data.toString('utf8')) as Record<string, unknown>;
      for (const k of [
        'python',
        'torch',
        'cuda',
        'cuda_version',
        'cudnn',
        'nccl',
        'nccl_version',
        'driver',
        'driver_version',
        'gpu_name',
      ])
        if (env[k] !== undefined) versions[k] = env[k];
    } catch {
      /* not JSON: carried as it is */
    }
  }
  const smi = await execText(host, ['nvidia-smi', '-q']);
  if (smi !== null) {
    add({ name: 'nvidia-smi.txt', data: Buffer.from(smi), mtimeMs: now, cuttable: true });
    const drv = /Driver Version\s*:\s*(\S+)/.exec(smi)?.[1];
    const cuda = /CUDA Version\s*:\s*(\S+)/.exec(smi)?.[1];
    if (drv) versions.driver ??= drv;
    if (cuda) versions.cudaDriverApi = cuda;
  } else notes.push(`nvidia-smi -q: not available on ${host.label} (no NVIDIA driver, or not on PATH): skipped`);
  add({
    name: 'versions.json',
    data: Buffer.from(JSON.stringify(versions, null, 2) + '\n'),
    mtimeMs: now,
    cuttable: false,
  });
  const hostLines = [`host ${host.label} (${host.kind})`, `host clock ${new Date(host.now()).toISOString()}`];
  for (const [label, argv] of [
    ['uname', ['uname', '-a']],
    ['uptime', ['uptime']],
    ['cpus', ['nproc']],
    ['memory', ['free', '-m']],
    ['disk', ['df', '-hP', dirs.outDir]],
  ] as const) {
    const r = await execText(host, [...argv]);
    hostLines.push(`--- ${label}`, r === null ? '(not available)' : r.trimEnd());
  }
  add({ name: 'host.txt', data: Buffer.from(hostLines.join('\n') + '\n'), mtimeMs: now, cuttable: false });

  // secrets out of every text
  const hits = { n: 0 };
  for (const it of items) it.data = Buffer.from(redactFile(it.data.toString('utf8'), hits));

  // the cap: the largest cuttable item is tailed (halved) first, until the tar fits with its README
  const cut: string[] = [];
  const cutFrom = new Map<string, number>();
  const README_ROOM = 256 * 1024;
  const size = () => tarSize([...items.map((i) => i.data.length), README_ROOM]);
  while (size() > maxBytes) {
    const big = items.filter((i) => i.cuttable && i.data.length > 0).sort((a, b) => b.data.length - a.data.length)[0];
    if (!big) break;
    if (!cutFrom.has(big.name)) cutFrom.set(big.name, big.data.length);
    const over = size() - maxBytes;
    const keep =
      big.data.length > 4096 ? Math.max(0, Math.min(Math.floor(big.data.length / 2), big.data.length - over)) : 0;
    const nl = keep > 0 ? big.data.indexOf(10, big.data.length - keep) : -1;
    big.data = keep > 0 && nl >= 0 ? big.data.subarray(nl + 1) : Buffer.alloc(0);
  }
  for (const [n, before] of cutFrom) {
    const it = items.find((i) => i.name === n)!;
    cut.push(
      it.data.length === 0
        ? `\`${n}\`: dropped (${before} bytes)`
        : `\`${n}\`: tailed to its last ${it.data.length} of ${before} bytes`,
    );
    it.note = it.data.length === 0 ? 'cut to nothing to fit the cap' : `tailed to fit the cap`;
  }
  const kept = items.filter((i) => i.data.length > 0 || !cutFrom.has(i.name));

  const readme = storyReadme({
    name,
    dir: dirs.outDir,
    host: host.label,
    bundledAt: now,
    nsaTopVersion: nsaTopVersion(),
    report: rep?.rep ?? null,
    state: { runState: st.ev.runState, why: st.ev.runStateWhy },
    lastAdvance: st.snap.stepAdvancedTs !== null ? { ts: st.snap.stepAdvancedTs, step: st.snap.step } : null,
    actions,
    dumps,
    stopEvents: st.obs.stop?.events ?? [],
    stalls: st.obs.stop?.stalls ?? [],
    journal,
    extra,
    contents: kept.map((i) => ({ name: i.name, bytes: i.data.length, ...(i.note ? { note: i.note } : {}) })),
    cut,
    refused,
    notes,
    redactions: hits.n,
  });
  const entries: TarEntry[] = [
    { name: 'README.md', data: Buffer.from(redactFile(readme)).subarray(0, README_ROOM), mtimeMs: now },
    ...kept.map((i) => ({ name: i.name, data: i.data, mtimeMs: i.mtimeMs })),
  ];
  const gz = tarGz(entries);
  const said = `${out} (${gz.length} bytes, ${entries.length} files${cut.length ? `, ${cut.length} cut to fit ${maxBytes} bytes` : ''}${refused.length ? `, ${refused.length} refused` : ''})`;
  // the bundle is recorded in the run's action log (audited); read-only writes the bundle, records nothing
  if (readOnlyMode()) {
    writeExclusive(out, gz);
    process.stdout.write(`bundle: ${said}; not recorded in the action log: read-only\n`);
    return 0;
  }
  const actor = await currentActor(host);
  const rec = await audited(
    host,
    st.obs.dirs,
    { actor, action: 'bundle', target: { path: out, bytes: gz.length, files: entries.length } },
    async () => {
      writeExclusive(out, gz);
      return { result: 'ok', detail: `bundle written: ${said}` };
    },
  );
  if (rec.result !== 'ok') throw new CliError(`bundle: ${rec.detail}`, 2);
  process.stdout.write(
    `bundle: ${said}${rec.notLogged !== undefined ? `; NOT logged: ${sanitize(rec.notLogged)}` : ''}\n`,
  );
  return 0;
}

const JOURNAL_NAME = /^\.nsa-top\/journal(\.\d+)?\.(jsonl|lock)$/;
/** the journal window around a critical alert: from this long before it to this long after */
const WINDOW_BEFORE_MS = 120_000;
const WINDOW_AFTER_MS = 60_000;

/** Each critical alert's window of the journal (overlapping windows merged), each file readable
 *  from its start: the state at its start as a keyframe, then the journal's lines after it. */
async function journalWindows(src: JournalSource): Promise<{ name: string; data: Buffer; to: number; note: string }[]> {
  const spans: { from: number; to: number; alerts: string[] }[] = [];
  for (const m of src.markers) {
    if (m.kind !== 'alert' || !m.label.startsWith('critical ')) continue;
    const from = Math.max(src.span.start, m.at - WINDOW_BEFORE_MS);
    const to = Math.min(src.span.end, m.at + WINDOW_AFTER_MS);
    const last = spans.at(-1);
    if (last && from <= last.to) {
      last.to = Math.max(last.to, to);
      last.alerts.push(m.label);
    } else spans.push({ from, to, alerts: [m.label] });
  }
  const out = [];
  for (const w of spans) {
    const s0 = await src.stateAt(w.from);
    const body = plainState(s0);
    delete body.at;
    const lines = [encodeRecord(s0.at, 'key', { s: body }), ...src.linesBetween(s0.at + 1, w.to)];
    const iso = new Date(w.from).toISOString().replace(/[:.]/g, '-');
    out.push({
      name: `journal/window-${iso}.jsonl`,
      data: Buffer.from(lines.join('\n') + '\n'),
      to: w.to,
      note: `the journal ${new Date(w.from).toISOString()} – ${new Date(w.to).toISOString()} around ${w.alerts.slice(0, 3).join('; ')}`,
    });
  }
  return out;
}

/** The ends of a root's files in one poll, each kept only if it is still the file listed (same inode, one name). */
async function readTails(host: Host, dir: string, files: Found[], max: number): Promise<Map<string, Buffer | string>> {
  const out = new Map<string, Buffer | string>();
  if (!files.length) return out;
  let poll;
  try {
    poll = await host.pollDir(
      dir,
      files.map((f) => ({ path: join(dir, f.rel), offset: Math.max(0, f.size - max), maxBytes: max })),
    );
  } catch (e) {
    for (const f of files) out.set(f.rel, `unreadable: ${(e as Error).message}`);
    return out;
  }
  for (const f of files) {
    const r = poll.reads.find((x) => x.path === join(dir, f.rel));
    if (!r || r.error || !r.stat) {
      out.set(f.rel, `unreadable: ${r?.error ?? 'gone'}`);
      continue;
    }
    if (r.stat.ino !== f.ino || (r.stat.nlink !== undefined && r.stat.nlink > 1)) {
      out.set(f.rel, 'changed into a link or another file while read — not carried');
      continue;
    }
    let data = r.data.subarray(0, Math.max(0, f.size - r.offset));
    if (r.offset > 0) {
      const nl = data.indexOf(10);
      if (nl >= 0) data = data.subarray(nl + 1);
    }
    out.set(f.rel, data);
  }
  return out;
}

/** The end of a file, read only if it is still the file that was listed (no link swapped in since). */
async function readTail(host: Host, path: string, f: Found, max: number): Promise<Buffer | string> {
  try {
    const start = Math.max(0, f.size - max);
    let data = await host.readRange(path, start, f.size);
    const after = await host.stat(path);
    if (!after || after.ino !== f.ino || (after.nlink !== undefined && after.nlink > 1))
      return 'changed into a link or another file while read — not carried';
    if (start > 0) {
      const nl = data.indexOf(10);
      if (nl >= 0) data = data.subarray(nl + 1);
    }
    return data;
  } catch (e) {
    return `unreadable: ${(e as Error).message}`;
  }
}

function nsaTopVersion(): string {
  try {
    return (JSON.parse(readFileSync(join(PACKAGE_ROOT, 'package.json'), 'utf8')) as { version: string }).version;
  } catch {
    return 'unknown';
  }
}

/** Created, never replaced (O_EXCL), never through a link (O_NOFOLLOW), mode 0600 whatever the umask. */
function writeExclusive(path: string, data: Buffer): void {
  let fd: number;
  try {
    fd = openSync(path, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, 0o600);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    throw new CliError(
      code === 'EEXIST'
        ? `bundle: ${path} exists: a bundle is never written over a file`
        : `bundle: cannot create ${path}: ${code}`,
      2,
    );
  }
  try {
    fchmodSync(fd, 0o600);
    for (let off = 0; off < data.length;) off += writeSync(fd, data, off);
  } finally {
    closeSync(fd);
  }
}
