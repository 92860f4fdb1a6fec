// The quick looks every command asks of a box as it starts: who we are there (the owner checks of
// pointer files, src/trainer/run/pointers.ts) and its CPU count and GPU tools (the observation's
// host facts, src/cockpit/observe.ts). Over SSH they are asked once per connection, right behind the
// first look-ahead and without waiting for each (SshHost), and the first exec of the same argv is
// answered from that: no round trip of its own on the way to the first frame.

/** `id -u`: the uid nsa-top runs as on the box */
export const UID_ARGV: readonly string[] = ['id', '-u'];

/** the CPU count (getconf, else nproc), then `gpu-tools` when nvidia-smi is on the PATH */
export const HOST_FACTS_ARGV: readonly string[] = [
  'sh',
  '-c',
  '(getconf _NPROCESSORS_ONLN 2>/dev/null || nproc); command -v nvidia-smi >/dev/null && echo gpu-tools',
];

/** what SshHost asks at connect */
export const FIRST_ASKS: readonly (readonly string[])[] = [UID_ARGV, HOST_FACTS_ARGV];
