// `nsa-top preflight --node local --node user@B[:port] …`: the preflight on every node of a
// multi-node run, each over its own Host (one connection per node, src/remote/nodes.ts), printed per
// node. A node that cannot be reached is a FAIL of that node (the launch would fail there), never
// left out; the exit is 1 when any node has a FAIL.
import { preflightExit, type PreflightLine } from '../checks/preflight.js';
import { judgeRendezvous, rendezvousOf } from '../checks/preflight-rdzv.js';
import type { Host } from '../remote/host.js';
import { NodeSet } from '../remote/nodes.js';
import { listeningPorts } from '../remote/ports.js';
import { nodeSlots } from '../trainer/launch/multinode.js';
import { loadProfiles } from '../trainer/launch/profiles.js';
import { sanitize } from '../sanitize.js';
import { CliError } from './errors.js';
import { nodeListOf } from './nodes.js';
import { hostSpecOf } from './options.js';
import { formatLines, preflight, type Args } from './preflight.js';

export interface NodePreflight {
  host: string;
  reachable: boolean;
  error: string | null;
  lines: PreflightLine[];
  exitCode: number;
}

/** The line a node out of reach gets in place of its checks. */
export function unreachableLine(label: string, why: string): PreflightLine {
  return {
    check: 'node',
    status: 'FAIL',
    text: `node ${label} unreachable: ${why}`,
    fix: 'check the address, that its sshd runs, and the key (-i); nothing can be launched there',
  };
}

export async function preflightNodes(a: Args): Promise<number> {
  if (a.host) throw new CliError('preflight: --host and --node: name each machine with --node (local is this one)', 2);
  const names = await nodeListOf(a);
  let set: NodeSet;
  try {
    const { host: _h, ...spec } = hostSpecOf(a);
    set = await NodeSet.open(names, { spec });
  } catch (e) {
    throw new CliError(`preflight: ${(e as Error).message.split('\n')[0]}`, 2);
  }
  try {
    const results = await Promise.all(
      set.nodes.map(async (n): Promise<NodePreflight> => {
        if (!n.host) {
          const lines = [unreachableLine(n.label, n.error || 'not connected')];
          return { host: n.label, reachable: false, error: n.error, lines, exitCode: 1 };
        }
        try {
          const lines = await preflight(n.host, a);
          return { host: n.label, reachable: true, error: null, lines, exitCode: preflightExit(lines) };
        } catch (e) {
          if (e instanceof CliError) throw e; // bad input (unknown profile): the same on every node
          const why = (e as Error).message.split('\n')[0]!;
          return { host: n.label, reachable: false, error: why, lines: [unreachableLine(n.label, why)], exitCode: 1 };
        }
      }),
    );
    for (const [label, lines] of await rendezvousLines(a, set))
      for (const r of results.filter((x) => x.host === label)) {
        r.lines.push(...lines);
        r.exitCode = Math.max(r.exitCode, preflightExit(r.lines));
      }
    const exitCode = results.some((r) => r.exitCode !== 0) ? 1 : 0;
    if (a.json) process.stdout.write(JSON.stringify({ nodes: results, exitCode }, null, 2) + '\n');
    else {
      const parts = results.map((r) => formatLines(`node ${sanitize(r.host)}`, a.profile ?? null, r.lines));
      const bad = results.filter((r) => r.exitCode !== 0).map((r) => sanitize(r.host));
      parts.push(
        bad.length
          ? `${bad.length} of ${results.length} nodes not ready: ${bad.join(', ')}\n`
          : `all ${results.length} nodes ready\n`,
      );
      process.stdout.write(parts.join('\n'));
    }
    return exitCode;
  } finally {
    await set.close();
  }
}

// the test listener on the rendezvous host and each other node's dial, in the profile's python (a
// node that runs torchrun has it): stdlib only, one line of answer each
const LISTEN_PY = `import socket, sys, time
p, n, end = int(sys.argv[1]), int(sys.argv[2]), time.time() + float(sys.argv[3])
try:
    if socket.has_dualstack_ipv6():
        s = socket.create_server(("", p), family=socket.AF_INET6, dualstack_ipv6=True, backlog=16)
    else:
        s = socket.create_server(("", p), backlog=16)
except OSError as e:
    print("bind: " + str(e)); sys.exit(0)
k = 0
while k < n and time.time() < end:
    s.settimeout(max(0.05, end - time.time()))
    try:
        c, _ = s.accept(); c.close(); k += 1
    except OSError:
        break
print("accepted %d" % k)`;
const DIAL_PY = `import socket, sys, time
h, p, end = sys.argv[1], int(sys.argv[2]), time.time() + float(sys.argv[3])
last = "no answer"
while time.time() < end:
    try:
        socket.create_connection((h, p), timeout=max(0.5, end - time.time())).close(); print("ok"); sys.exit(0)
    except socket.timeout:
        last = "no answer within the wait (a firewall that drops it?)"; break
    except OSError as e:
        last = type(e).__name__ + ": " + str(e); time.sleep(0.2)
print(last)`;
/** s the listener stays up; each dial retries a refused connection (the listener not up yet) this long */
const LISTEN_S = 10;
const DIAL_S = 8;

/**
 * A multi-node profile's rendezvous, checked across the nodes (src/checks/preflight-rdzv.ts): its
 * port free on the node_rank 0 node (/proc/net/tcp there, src/remote/ports.ts) and reached from
 * every other node. Nothing without --profile, for a one-node profile, or when the host node is out
 * of reach (its own FAIL says so).
 */
async function rendezvousLines(a: Args, set: NodeSet): Promise<Map<string, PreflightLine[]>> {
  if (!a.profile) return new Map();
  const first = set.nodes.find((n) => n.host);
  if (!first) return new Map();
  const profile = (await loadProfiles(first.host!, a.profiles ?? undefined).catch(() => null))?.profiles[a.profile];
  const ep = profile && (profile.nnodes ?? 1) > 1 ? rendezvousOf(profile) : null;
  if (!profile || !ep) return new Map();
  const labels = set.nodes.map((n) => n.label);
  let hostLabel: string;
  try {
    hostLabel = nodeSlots(a.profile, profile, labels, 'preflight').find((s) => s.nodeRank === 0)!.label;
  } catch (e) {
    const text = (e as Error).message.replace(/ Nothing was started\.$/, '');
    return new Map([[labels[0]!, [{ check: 'rendezvous', status: 'FAIL', text }]]]);
  }
  const hostNode = set.nodes.find((n) => n.label === hostLabel)!;
  if (!hostNode.host) return new Map();
  const python = profile.python ?? 'python3';
  const py = async (h: Host, code: string, args: string[], s: number) => {
    const r = await h
      .exec([python, '-c', code, ...args], { timeoutMs: (s + 10) * 1000 })
      .catch((e: Error) => ({ code: -1, stdout: '', stderr: e.message, timedOut: false }));
    return (
      r.stdout.trim().split('\n').pop() || `${python}: ${(r.stderr.trim().split('\n').pop() ?? '') || `exit ${r.code}`}`
    );
  };
  const texts = await Promise.all(
    ['/proc/net/tcp', '/proc/net/tcp6'].map((p) =>
      hostNode
        .host!.readFile(p)
        .then((b) => b.toString('utf8'))
        .catch(() => null),
    ),
  );
  const known = texts.filter((t): t is string => t !== null);
  const listening = known.length ? listeningPorts(known.join('\n')) : null;
  const others = set.nodes.filter((n) => n.host && n.label !== hostLabel);
  let listener: { error: string | null } | null = null;
  let dials: { node: string; result: string }[] = others.map((n) => ({ node: n.label, result: 'not tried' }));
  if (!listening?.has(ep.port)) {
    const listen = py(hostNode.host, LISTEN_PY, [String(ep.port), String(others.length), String(LISTEN_S)], LISTEN_S);
    dials = await Promise.all(
      others.map(async (n) => ({
        node: n.label,
        result: await py(n.host!, DIAL_PY, [ep.addr, String(ep.port), String(DIAL_S)], DIAL_S),
      })),
    );
    const said = await listen;
    listener = { error: /^accepted \d+$/.test(said) ? null : said };
  }
  return judgeRendezvous({
    addr: ep.addr,
    port: ep.port,
    hostNode: hostLabel,
    listening,
    listeningError: known.length ? null : `no /proc/net/tcp on node ${hostLabel}`,
    listener,
    dials,
  });
}
