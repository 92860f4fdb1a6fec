// `preflight --node`'s rendezvous check, judged: the profile's rendezvous port (rdzv_endpoint's, or
// master_port) must be free on the node that hosts it (node_rank 0: torchrun's c10d store, or the
// static MASTER_ADDR, binds it there), and every other node must reach HOST:PORT — tried against a
// short-lived listener the preflight opens on the host node, so a firewall that drops or rejects the
// port is found before a launch waits in a rendezvous that never completes. Pure: the facts come from
// src/commands/preflight-nodes.ts.
import type { PreflightLine } from './preflight.js';

export interface RendezvousFacts {
  /** HOST:PORT as the profile names it (the address every node dials) */
  addr: string;
  port: number;
  /** the node that hosts it (node_rank 0), as named with --node */
  hostNode: string;
  /** the ports listening on the host node (/proc/net/tcp{,6}); null: could not be read (why) */
  listening: Set<number> | null;
  listeningError: string | null;
  /** the test listener on the host node: null when it was not opened (the port is taken), else
   *  its failure ('bind: …') or null error */
  listener: { error: string | null } | null;
  /** each other node's attempt to reach addr:port while the listener was up: 'ok', or why not */
  dials: { node: string; result: string }[];
}

/** The rendezvous lines of each node, by node label. */
export function judgeRendezvous(f: RendezvousFacts): Map<string, PreflightLine[]> {
  const out = new Map<string, PreflightLine[]>();
  const add = (node: string, l: PreflightLine) => out.set(node, [...(out.get(node) ?? []), l]);
  const ep = `${f.addr}:${f.port}`;
  const taken = f.listening?.has(f.port) === true || /EADDRINUSE|in use/i.test(f.listener?.error ?? '');
  if (taken)
    add(f.hostNode, {
      check: 'rendezvous',
      status: 'FAIL',
      text: `port ${f.port} on node ${f.hostNode} (node_rank 0, the rendezvous ${ep}) is already in use: torchrun cannot host the rendezvous there (a previous torchrun still alive?)`,
      fix: `find it on node ${f.hostNode} with \`ss -ltnp 'sport = :${f.port}'\` and stop it, or give the profile another port`,
    });
  else if (f.listening === null && f.listener?.error)
    add(f.hostNode, {
      check: 'rendezvous',
      status: 'WARN',
      text: `could not tell whether port ${f.port} on node ${f.hostNode} (node_rank 0) is free: ${f.listeningError ?? 'no /proc/net/tcp'}; ${f.listener.error}`,
      fix: `check with \`ss -ltnp 'sport = :${f.port}'\` on node ${f.hostNode}`,
    });
  else
    add(f.hostNode, {
      check: 'rendezvous',
      status: 'PASS',
      text: `port ${f.port} is free on node ${f.hostNode} (node_rank 0 hosts the rendezvous ${ep})`,
    });
  for (const d of f.dials) {
    if (taken || f.listener === null || f.listener.error)
      add(d.node, {
        check: 'rendezvous',
        status: 'WARN',
        text: `not tried: whether node ${d.node} reaches ${ep} (node ${f.hostNode}'s port ${f.port} could not be opened for the test)`,
      });
    else if (d.result === 'ok')
      add(d.node, {
        check: 'rendezvous',
        status: 'PASS',
        text: `node ${d.node} reaches ${ep} (a test listener on node ${f.hostNode} answered)`,
      });
    else
      add(d.node, {
        check: 'rendezvous',
        status: 'FAIL',
        text: `node ${d.node} cannot reach ${ep} (node ${f.hostNode}'s rendezvous port ${f.port}): ${d.result}`,
        fix: `open TCP port ${f.port} on node ${f.hostNode} to node ${d.node} (firewall, security group), or name an address of node ${f.hostNode} that node ${d.node} can route to`,
      });
  }
  return out;
}

/** The rendezvous HOST:PORT of a multi-node profile (rdzv_endpoint, else master_addr + master_port). */
export function rendezvousOf(p: {
  rdzv_endpoint?: string | undefined;
  master_addr?: string | undefined;
  master_port?: number | undefined;
}): { addr: string; port: number } | null {
  if (p.rdzv_endpoint !== undefined) {
    const i = p.rdzv_endpoint.lastIndexOf(':');
    const port = Number(p.rdzv_endpoint.slice(i + 1));
    if (i <= 0 || !Number.isInteger(port) || port < 1 || port > 65535) return null;
    return { addr: p.rdzv_endpoint.slice(0, i).replace(/^\[(.*)\]$/, '$1'), port };
  }
  if (p.master_addr !== undefined && p.master_port !== undefined) return { addr: p.master_addr, port: p.master_port };
  return null;
}
