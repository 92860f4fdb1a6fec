// Which new stack dump file is which rank's, for the dump action (signalForDumps in actions.ts).
// The real trainer names a SIGUSR1 dump `stackdump_<int(time.time())>.txt` — no rank, no pid — and
// opens it with "w": two ranks answering in one second share one name and the second write replaces
// the first (contract §1.12). So a file is claimed by content as well as by name: its first line
// ("Signal 10 at <iso, µs>Z") and its main thread's ident tell one write from another, and
//   - a name is never held by two ranks: a file that changes under a claim (another write in the same
//     second) takes the claim away — that rank's stack is lost, and it is named so;
//   - a write that could be more than one pending rank's is claimed by none (never guessed twice);
//   - `notBefore()` is when the next rank may be signalled: past the second of every claimed name.
// The reference trainer's `stackdump_<epoch>_rank<R>_<pid>.txt` is matched by the pid in its name.
import { join } from 'node:path';
import type { Host } from '../../remote/host.js';
import { readActions } from './audit.js';
import type { ActionRecord } from './types.js';
import type { RunRef } from '../run/rundirs.js';

export const DUMP_RE = /^(watchdog_)?stackdump_(fsdp_)?(\d+)(?:_rank(\d+)_(\d+))?(?:[_.-][^/]*)?\.txt$/;

export interface DumpSlot {
  rank: number;
  pid: number;
  /** its node (a multi-node run): pids are per node, so a pid names a process only with its node */
  host?: string;
  /** host time the signal was sent; undefined until then (or when it could not be sent) */
  sentAt?: number;
  /** full path of the file claimed for this rank */
  file?: string;
  /** the claimed write's first line: a later write under the same name changes it */
  header?: string;
  /** the claimed write's main-thread ident (the real trainer's dumps carry no pid) */
  ident?: string | null;
  /** set when a claimed file was overwritten: why this rank's stack is gone */
  lost?: string;
}

interface Head {
  header: string;
  /** when the dump says it was written (ms), else the file's mtime */
  at: number;
  ident: string | null;
}

/** a process as the dump records name it: its pid, on its node when there are several */
export function procKey(x: { pid: number; host?: string | null }): string {
  return x.host != null ? `${x.host} ${x.pid}` : String(x.pid);
}

const RE_SIGNAL_AT = /^Signal \d+ at (\d{4}-\d\d-\d\dT[\d:.]+)Z?/;
const RE_MAIN = /^--- Thread: MainThread \(([^()]*)\) ---/m;

export class DumpWatch {
  /** name → the version already accounted for */
  private seen = new Map<string, { mtimeMs: number; size: number }>();
  private owner = new Map<string, DumpSlot>();
  /** new writes no rank could be proven to own (a lost rank's late answer, someone else's signal) */
  unclaimed: string[] = [];
  /** the trainer names its dumps with rank and pid (the reference trainer): no collisions */
  named = false;

  constructor(
    private host: Host,
    private outDir: string,
    /** allowance for a remote host's corrected clock */
    private skewMs: number,
    private say: (msg: string) => void,
    /** main-thread ident → process (procKey), learnt from this run's earlier dump records (same pid +
     *  start time); not from this action's own claims: two processes may share an ident (no ASLR),
     *  and only the records of several dumps can show that */
    private idents: Map<string, string> = new Map(),
  ) {}

  private async list(): Promise<Map<string, { mtimeMs: number; size: number }>> {
    const m = new Map<string, { mtimeMs: number; size: number }>();
    try {
      for (const e of await this.host.list(this.outDir)) {
        const r = DUMP_RE.exec(e.name);
        if (r && !r[1] && e.isFile) m.set(e.name, { mtimeMs: e.mtimeMs, size: e.size }); // signal dumps only
      }
    } catch {
      /* dir vanished: nothing new */
    }
    return m;
  }

  /** What is there before any signal is someone else's. */
  async start(): Promise<void> {
    this.seen = await this.list();
    const now = this.host.now() / 1000;
    for (const name of this.seen.keys()) {
      const r = DUMP_RE.exec(name);
      if (r?.[5] !== undefined) this.named = true;
      // a dump named for this very second (the last one of a dump just before this one, or the
      // trainer's own): the first signal waits past it, or its file would be written over
      const sec = Number(r?.[3]);
      if (Number.isFinite(sec) && sec >= now - 5 && sec <= now + 5) this.floorS = Math.max(this.floorS, sec);
    }
  }

  /** the newest second a dump already there was named for (recent ones only: a far-future name is ignored) */
  private floorS = -Infinity;

  private async head(name: string, mtimeMs: number): Promise<Head | null> {
    let text: string;
    try {
      text = (await this.host.readRange(join(this.outDir, name), 0, 600)).toString('utf8');
    } catch {
      return null; // vanished or unreadable: looked at again next time
    }
    const nl = text.indexOf('\n');
    if (nl < 0) return null; // still being written
    const header = text.slice(0, nl).trim();
    const m = RE_SIGNAL_AT.exec(header);
    const t = m ? Date.parse(`${m[1]}Z`) : NaN;
    return { header, at: Number.isFinite(t) ? t : mtimeMs, ident: RE_MAIN.exec(text)?.[1] ?? null };
  }

  /**
   * The earliest host time at which the next rank may be signalled: with names that carry only the
   * second, not before every second a claimed dump was named for has passed.
   */
  notBefore(): number {
    if (this.named) return -Infinity;
    let s = this.floorS;
    for (const name of this.owner.keys()) s = Math.max(s, Number(DUMP_RE.exec(name)?.[3] ?? -Infinity));
    return (s + 1) * 1000 + this.skewMs;
  }

  private claim(slot: DumpSlot, name: string, head: Head | null): void {
    slot.file = join(this.outDir, name);
    slot.header = head?.header;
    slot.ident = head?.ident ?? null;
    this.owner.set(name, slot);
    this.say(`rank ${slot.rank}: ${name}`);
  }

  /** New dump writes since the last look, each given to the one rank it can belong to. */
  async collect(slots: DumpSlot[]): Promise<void> {
    for (const [name, v] of await this.list()) {
      const prev = this.seen.get(name);
      if (prev && prev.mtimeMs === v.mtimeMs && prev.size === v.size) continue;
      const m = DUMP_RE.exec(name);
      const pidInName = m?.[5];
      if (pidInName !== undefined) {
        this.named = true;
        this.seen.set(name, v);
        // rank and pid: two nodes may hand out the same pid
        const slot = slots.find(
          (x) => x.pid === Number(pidInName) && x.rank === Number(m![4]) && x.sentAt !== undefined,
        );
        if (slot && !slot.file) {
          slot.lost = undefined; // the pid in its name proves whose it is, however late
          this.claim(slot, name, await this.head(name, v.mtimeMs));
        }
        continue;
      }
      const head = await this.head(name, v.mtimeMs);
      if (!head) continue; // half written: next look
      this.seen.set(name, v);
      const owner = this.owner.get(name);
      if (owner) {
        if (owner.header === head.header) {
          owner.ident ??= head.ident; // the same write, read whole this time
          continue;
        }
        if (head.ident && this.idents.get(head.ident) === procKey(owner)) {
          owner.header = head.header; // its own process wrote again (proven by history): still its stack
          continue;
        }
        // another write in the same second replaced this rank's stack
        this.owner.delete(name);
        owner.file = undefined;
        owner.lost = `its ${name} was overwritten by another dump written in the same second`;
        this.say(`rank ${owner.rank}: ${name} overwritten by another dump in the same second — its stack is lost`);
      }
      // content: a main thread seen before in this run's dumps names its process exactly
      const known = head.ident ? this.idents.get(head.ident) : undefined;
      const pidsKnown = new Set(this.idents.values());
      // every signalled rank without a file may have written it — one given up on as well (a late
      // answer): a write two ranks may own is claimed for neither. A rank whose file was overwritten
      // has written; the write that replaced it is someone else's
      let cands = slots.filter(
        (x) => x.sentAt !== undefined && !x.file && !x.lost && x.sentAt - this.skewMs <= head.at && x !== owner,
      );
      if (known !== undefined) cands = cands.filter((x) => procKey(x) === known);
      else if (head.ident) cands = cands.filter((x) => !pidsKnown.has(procKey(x)));
      if (cands.length !== 1) {
        this.unclaimed.push(name);
        this.say(
          cands.length > 1
            ? `${name}: could be rank ${cands.map((c) => c.rank).join(' or ')}'s — claimed for none`
            : `${name}: no signalled rank can be proven to have written it — claimed for none`,
        );
        continue;
      }
      this.claim(cands[0]!, name, head);
    }
  }
}

/** A rank's stack that was not written, or not kept: the words every surface uses. */
export const LOST = 'no stack written (lost)';

/**
 * The dump action's one-line result, by rank: "k/n ranks dumped" counts only ranks with a file of
 * their own; each is named with its file, each lost rank with why.
 */
export function dumpSummary(
  perRank: { rank: number; host?: string; status: string; file?: string; why?: string }[],
  unclaimed: string[],
  pySpy: boolean,
): string {
  const base = (f: string) => f.split('/').pop() ?? f;
  const dumped = perRank.filter((r) => r.status === 'dumped' && r.file);
  // a multi-node run names each rank's node: "rank 1 on B stackdump_….txt"
  const name = (r: { rank: number; host?: string }) => `rank ${r.rank}${r.host !== undefined ? ` on ${r.host}` : ''}`;
  return (
    `${dumped.length}/${perRank.length} ranks dumped` +
    (dumped.length ? `: ${dumped.map((r) => `${name(r)} ${base(r.file!)}`).join(', ')}` : '') +
    perRank
      .filter((r) => !(r.status === 'dumped' && r.file))
      .map((r) => (r.why?.startsWith(LOST) ? `; ${name(r)}: ${r.why}` : `; ${name(r)} ${r.status}: ${r.why}`))
      .join('') +
    (unclaimed.length
      ? `; ${unclaimed.map(base).join(', ')} written meanwhile, not proven any one rank's: claimed for none`
      : '') +
    (pySpy && dumped.length < perRank.length
      ? '; py-spy is installed (py-spy dump --pid PID shows native frames too)'
      : '')
  );
}

/**
 * Main-thread ident → pid from this run's earlier dump records, for the ranks about to be signalled
 * (same pid and start time). An ident two processes share proves nothing and is left out.
 */
export async function knownDumpIdents(
  host: Host,
  run: RunRef,
  targets: { pid: number; startTime: string; host?: string }[],
): Promise<Map<string, string>> {
  const out = new Map<string, string>();
  const shared = new Set<string>();
  const recs = await readActions(host, run, 200).catch(() => [] as ActionRecord[]);
  for (const r of recs) {
    if (r.action !== 'dump' || !Array.isArray(r.target.perRank)) continue;
    for (const e of r.target.perRank as { pid?: unknown; startTime?: unknown; ident?: unknown; host?: unknown }[]) {
      if (typeof e?.ident !== 'string' || !e.ident) continue;
      const t = targets.find(
        (x) => x.pid === e.pid && String(x.startTime) === String(e.startTime) && (x.host ?? null) === (e.host ?? null),
      );
      if (!t) continue;
      const had = out.get(e.ident);
      if (had !== undefined && had !== procKey(t)) shared.add(e.ident);
      out.set(e.ident, procKey(t));
    }
  }
  for (const i of shared) out.delete(i);
  return out;
}
