// The SSH connection of a `--host` command, started as the process starts: its TCP connect, key
// exchange, login and the watch loop's session (a login shell on the box: its start-up files can
// take most of a second) run while this process loads the command's code (status, dump, the
// cockpit's Ink and React) instead of after it. openHost takes it when asked for the same target
// with the same options; a command that never asks (bad input, --help) abandons it, and the
// process exits as it would have (an abandoned connect is cut short, a finished one closed).
import { connect } from 'node:net';
import { parseArgs } from 'node:util';
import type { Host } from './host.js';
import type { OpenHostSpec } from './index.js';
import { sshTrace } from './ssh/trace.js';
import type { EarlySocket, KeepOption } from './ssh/connection.js';
import { keepSeconds } from './ssh/keepenv.js';

interface Early {
  key: string;
  abort: AbortController;
  host: Promise<Host>;
  claimed: boolean;
}

let early: Early | null = null;

/** the spec fields an early connection is made for; any other field set: no early connection */
function keyOf(spec: OpenHostSpec): string | null {
  const { host, identity, acceptNewHostKey, ...rest } = spec;
  if (!host || host === 'local' || Object.values(rest).some((v) => v !== undefined)) return null;
  return JSON.stringify([host, identity ?? null, acceptNewHostKey === true]);
}

/**
 * The --host, -i and --accept-new-host-key of a command line (the words before any `--`), as the
 * commands' own parser reads them; null where there is no --host, where it is given twice, or
 * with --help (the command will not connect).
 */
export function earlySpecOf(words: string[]): OpenHostSpec | null {
  let r;
  try {
    r = parseArgs({
      args: words,
      options: {
        host: { type: 'string', multiple: true },
        identity: { type: 'string', short: 'i', multiple: true },
        'accept-new-host-key': { type: 'boolean' },
        help: { type: 'boolean', short: 'h' },
      },
      strict: false,
      allowPositionals: true,
    });
  } catch {
    return null;
  }
  const one = (v: unknown) => (Array.isArray(v) && v.length === 1 && typeof v[0] === 'string' ? v[0] : undefined);
  const host = one(r.values.host);
  if (!host || host === 'local' || r.values.help) return null;
  if (r.values.identity !== undefined && one(r.values.identity) === undefined) return null;
  return { host, identity: one(r.values.identity), acceptNewHostKey: r.values['accept-new-host-key'] === true };
}

/**
 * The TCP connection alone, opened with node's own `net` before any SSH code loads: the server's
 * side of a new connection (sshd forks and re-executes itself for each one, then sends its banner)
 * runs while ssh2 and the host's code load. Null when the target cannot be resolved (openHost then
 * says why). An error before the handshake takes it is kept quiet: the handshake connects afresh.
 * Where a keeper of the target answers on its unix socket (src/remote/ssh/keep.ts), that socket
 * instead, and no TCP connection at all.
 */
async function preconnect(
  spec: OpenHostSpec,
  abort: AbortSignal,
): Promise<{ tcp: EarlySocket | null; keep?: KeepOption }> {
  const { resolveTarget } = await import('./ssh/config.js');
  let t;
  try {
    t = resolveTarget(spec.host!, { identity: spec.identity });
  } catch {
    return { tcp: null };
  }
  if (abort.aborted) return { tcp: null };
  // a keeper of this target (NSA_TOP_SSH_KEEP, src/remote/ssh/keep.ts): its socket instead of TCP
  let keep: KeepOption | undefined;
  const idleS = keepSeconds();
  if (idleS > 0) {
    const { keepSocketFor, openUnix } = await import('./ssh/keep.js');
    const k = keepSocketFor(t, undefined, true);
    const unix = k.problem ? null : await openUnix(k.path);
    keep = { ...k, idleS, pre: Promise.resolve(unix) };
    if (unix) {
      abort.addEventListener('abort', () => unix.destroy(), { once: true });
      return { tcp: null, keep };
    }
  }
  const sock = connect({ host: t.hostName, port: t.port });
  const pre: EarlySocket = { sock, error: null };
  // kept for the handshake to report (a refused connect), not thrown here with nobody listening
  sock.on('error', (e) => (pre.error ??= e));
  sock.once('connect', () => sshTrace(`tcp connected early to ${t.hostName}:${t.port}`));
  abort.addEventListener('abort', () => sock.destroy(), { once: true });
  return { tcp: pre, keep };
}

/** Starts connecting for `spec` now (once per process); openHost takes it (claimEarly). */
export function startEarly(spec: OpenHostSpec): void {
  const key = keyOf(spec);
  if ((early && !early.claimed) || key === null) return;
  // a bad NSA_TOP_SSH_KEEP: no early connection (openHost says so, exit 2)
  try {
    keepSeconds();
  } catch {
    return;
  }
  const abort = new AbortController();
  const pre = preconnect(spec, abort.signal).catch(() => ({ tcp: null, keep: undefined }));
  const host = import('./index.js').then(async (m) => {
    const { tcp, keep } = await pre;
    return m.openHost({ ...spec, ssh: { signal: abort.signal, sock: tcp ?? undefined, keep } }, { early: false });
  });
  host.catch(() => {}); // a failure is the claimer's to report; unclaimed, nobody's
  early = { key, abort, host, claimed: false };
}

/** The early connection for `spec`, once (its failure too: the same error the command would get). */
export function claimEarly(spec: OpenHostSpec): Promise<Host> | null {
  if (!early || early.claimed || keyOf(spec) !== early.key) return null;
  early.claimed = true;
  return early.host;
}

/** An early connection nobody claimed: cut short, or closed once up. */
export function abandonEarly(): void {
  const e = early;
  if (!e || e.claimed) return;
  e.claimed = true;
  e.abort.abort();
  void e.host.then((h) => h.close()).catch(() => {});
}
