// openHost: the one way commands get a Host. No --host → LocalHost; otherwise an SshHost
// resolved through ~/.ssh/config (aliases: HostName/User/Port/IdentityFile), -i, ssh-agent.
import type { Host } from './host.js';
import { LocalHost } from './local/host.js';
import { SshHost, type SshHostOptions } from './ssh/host.js';
import { resolveTarget } from './ssh/config.js';
import { claimEarly } from './early.js';
import { keepSeconds, keepSocketFor } from './ssh/keep.js';
import type { KeepOption } from './ssh/connection.js';

export type { Host } from './host.js';
export { LocalHost } from './local/host.js';
export { SshHost, HostKeyError, SshConnectError } from './ssh/host.js';
export { GpuMonitor, sampleGpus } from './gpu.js';
export { listProcesses, readProc, verifyProcess } from './procs.js';

export interface OpenHostSpec {
  /** `user@box[:port]` or a ~/.ssh/config alias; absent (or `local`) → this machine */
  host?: string;
  /** -i: private key file */
  identity?: string;
  /** --port (a port in --host wins) */
  port?: number;
  /** --accept-new-host-key: trust an unknown host key and record it in ~/.ssh/known_hosts */
  acceptNewHostKey?: boolean;
  /** overrides for tests and embedding (known_hosts paths, keepalive, …) */
  ssh?: Partial<Omit<SshHostOptions, 'target'>>;
  /** ssh config text instead of ~/.ssh/config; home instead of ~ */
  sshConfigText?: string;
  home?: string;
}

export async function openHost(spec: OpenHostSpec = {}, opts: { early?: boolean } = {}): Promise<Host> {
  if (!spec.host || spec.host === 'local') return new LocalHost();
  // the connection cli.ts started as the process started (early.ts), when it is for this spec
  const early = opts.early === false ? null : claimEarly(spec);
  if (early) return early;
  const target = resolveTarget(spec.host, {
    identity: spec.identity,
    port: spec.port,
    configText: spec.sshConfigText,
    home: spec.home,
  });
  // a kept connection (NSA_TOP_SSH_KEEP; src/remote/ssh/keep.ts) unless the caller said which
  const keep = spec.ssh && 'keep' in spec.ssh ? spec.ssh.keep : keepOptionFor(target, spec.ssh?.knownHostsFiles);
  return SshHost.connect({ target, acceptNewHostKey: spec.acceptNewHostKey, ...spec.ssh, keep });
}

/** Where `target`'s kept connection is looked for (undefined: NSA_TOP_SSH_KEEP=0; bad value throws). */
export function keepOptionFor(
  target: Parameters<typeof keepSocketFor>[0],
  knownHostsFiles?: string[],
): KeepOption | undefined {
  const idleS = keepSeconds();
  if (idleS === 0) return undefined;
  return { ...keepSocketFor(target, knownHostsFiles, true), idleS };
}
