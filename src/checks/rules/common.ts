// Shared by every rule: the draft alert shape and its constructor.
// Each rule is a pure function of the evaluation context (src/checks/context.ts).
import type { Alert, Severity } from '../types.js';
import type { Ctx } from '../context.js';
import { dur } from '../../format.js';

export type Draft = Omit<Alert, 'since'> & { since?: number };

export const LN3 = Math.log(3);

export function a(
  id: string,
  rule: string,
  severity: Severity,
  title: string,
  detail: string,
  extra: Partial<Draft> = {},
): Draft {
  return { id, rule, severity, title, detail, ...extra };
}

export const ago = (ctx: Ctx, ts: number) => dur(Math.max(0, (ctx.now - ts) / 1000), 'precise');
