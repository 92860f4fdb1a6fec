// NSA_TOP_SSH_TRACE=1: one stderr line per phase of the SSH host — TCP connect, key exchange,
// authentication, the watch loop's channel and hello, and every request the loop answers (what,
// how long) — each stamped with ms since the process started, so a slow `--host` look says where
// its time went. Off (and free) otherwise.
const on = Boolean(process.env.NSA_TOP_SSH_TRACE);
// the process's end too: what it still waited for after the host closed shows as the gap to it
if (on) process.once('exit', (code) => sshTrace(`process exit ${code}`));

export function sshTrace(what: string): void {
  if (on) process.stderr.write(`ssh-trace ${performance.now().toFixed(0).padStart(6)} ms  ${what}\n`);
}

/** `sshTrace` for a request: call the result when it is answered (logs the round trip) */
export function sshTraceSpan(what: string): () => void {
  if (!on) return () => {};
  const t0 = performance.now();
  return () => sshTrace(`${what} (${(performance.now() - t0).toFixed(0)} ms)`);
}

export const sshTracing = on;
