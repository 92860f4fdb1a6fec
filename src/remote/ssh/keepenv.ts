// NSA_TOP_SSH_KEEP read alone, without the kept connection's code (keep.ts): every --host command's
// early connect (early.ts) asks it as the process starts.
export const KEEP_ENV = 'NSA_TOP_SSH_KEEP';
export const KEEP_DEFAULT_S = 60;

/** NSA_TOP_SSH_KEEP as seconds (0: off); bad input throws (exit 2). */
export function keepSeconds(env: NodeJS.ProcessEnv = process.env): number {
  const v = env[KEEP_ENV];
  if (v === undefined || v === '') return KEEP_DEFAULT_S;
  if (!/^\d+(\.\d+)?$/.test(v) || !(Number(v) <= 86400))
    throw Object.assign(new Error(`${KEEP_ENV}=${v}: expected 0 (off) or a number of seconds up to 86400`), {
      exitCode: 2,
    });
  return Number(v);
}
