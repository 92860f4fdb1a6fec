// Alerts that need a file the trainer has not written yet wait for it. The trainer writes env.json
// a moment after it boots; until then its identity is unknown, not "the toy default": a rule that
// reads a missing CONFIG as the toy default would cry wolf at every launch. Pure.
import type { Ctx } from './context.js';

/** env.json was read and parsed: only then does a missing CONFIG mean the toy default. */
export function envJsonRead(ctx: Ctx): boolean {
  const f = ctx.run.files['env.json'];
  return !!f && f.records > 0 && f.parseErrors === 0;
}

/** Which file each alert (by id) judges, and when it is still missing for that alert's verdict. */
const NEEDS: { match: (id: string) => boolean; file: string; missing: (ctx: Ctx) => boolean }[] = [
  // "launched with config X but the run used the toy default": only env.json says which CONFIG the
  // trainer saw; before it is written, no CONFIG is known, which is not the same as none
  {
    match: (id) => id === 'identity:config',
    file: 'env.json',
    missing: (ctx) => ctx.run.identity.config === null && !envJsonRead(ctx),
  },
];

/** The file alert `id` waits for (it is not raised until the trainer writes it), or null. */
export function waitsForFile(ctx: Ctx, id: string): string | null {
  for (const n of NEEDS) if (n.match(id) && n.missing(ctx)) return n.file;
  return null;
}
