// A machine's listening TCP ports, from /proc/net/tcp{,6} text: a fact about the host, read by
// the preflight (is torchrun's rendezvous port free?) and by an adopted run's relaunch.

/** The TCP ports in LISTEN state in /proc/net/tcp{,6} text. */
export function listeningPorts(procNetTcp: string): Set<number> {
  const ports = new Set<number>();
  for (const line of procNetTcp.split('\n')) {
    const f = line.trim().split(/\s+/);
    if (f.length < 4 || f[3] !== '0A') continue;
    const local = f[1]!;
    const port = parseInt(local.slice(local.lastIndexOf(':') + 1), 16);
    if (Number.isFinite(port)) ports.add(port);
  }
  return ports;
}
