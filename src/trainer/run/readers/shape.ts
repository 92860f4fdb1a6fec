// Shape checks for the small JSON/YAML files a run's first look reads (env.json, metrics.json,
// gate_collapse_details.json, the trainer's config): what zod's `looseObject` did for them, by hand.
// zod is ~750 KB of bundled JS whose load alone cost `nsa-top status` more than half a bare node
// start, for four flat objects; these few lines keep it off every reader's import graph. The zod
// schemas they replace are kept as the reference in test/trainer/run/zod-schemas.ts, and
// test/trainer/run/validators.test.ts holds both to the same answers (values and messages).
import type { ParseResult } from './heartbeat.js';

/** one field's type: its name in messages, and the check */
export interface Leaf {
  expected: string;
  ok: (v: unknown) => boolean;
}

/** a loose object's fields: leaves, or nested loose objects (checked the same way) */
export type Shape = { readonly [k: string]: Leaf | { shape: Shape } };

export const str: Leaf = { expected: 'string', ok: (v) => typeof v === 'string' };
/** a finite number (zod 4's z.number() refuses NaN and ±Infinity) */
export const num: Leaf = { expected: 'number', ok: (v) => typeof v === 'number' && Number.isFinite(v) };
export const bool: Leaf = { expected: 'boolean', ok: (v) => typeof v === 'boolean' };
export const numArray: Leaf = { expected: 'array', ok: (v) => Array.isArray(v) && v.every(num.ok) };
/** an object with string keys (arrays and null are not) */
export const record: Leaf = { expected: 'record', ok: isObject };
export const anything: Leaf = { expected: 'unknown', ok: () => true };

export function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** the type of a value as zod's messages name it ("expected number, received string") */
export function receivedType(v: unknown): string {
  if (typeof v === 'number') return Number.isFinite(v) ? 'number' : String(v);
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'array';
  return typeof v;
}

export function invalidType(expected: string, v: unknown): string {
  return `Invalid input: expected ${expected}, received ${receivedType(v)}`;
}

/** the own keys of `o` but `__proto__` (a JSON key of that name is dropped, never made a prototype) */
function copyKeys(o: Record<string, unknown>, out: Record<string, unknown>, skip?: Shape): void {
  for (const k of Object.keys(o)) if (k !== '__proto__' && !(skip && Object.hasOwn(skip, k))) out[k] = o[k];
}

/** a copy of an object (a record of unknown values) */
export function copyRecord(o: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  copyKeys(o, out);
  return out;
}

function leafValue(l: Leaf, v: unknown): unknown {
  if (l === record) return copyRecord(v as Record<string, unknown>);
  if (l === numArray) return (v as number[]).slice();
  return v;
}

/**
 * A loose object whose every field is optional and tolerant on its own (zod's
 * `.optional().catch(undefined)`): a field of the wrong type becomes undefined, the rest stays;
 * unknown keys are kept. null when `v` is not an object.
 */
export function tolerantObject(v: unknown, shape: Shape): Record<string, unknown> | null {
  if (!isObject(v)) return null;
  const out: Record<string, unknown> = {};
  for (const k of Object.keys(shape)) {
    if (!Object.hasOwn(v, k)) continue;
    const f = shape[k]!;
    const x = v[k];
    if ('shape' in f) out[k] = tolerantObject(x, f.shape) ?? undefined;
    else out[k] = x !== undefined && f.ok(x) ? leafValue(f, x) : undefined;
  }
  copyKeys(v, out, shape);
  return out;
}

/**
 * A loose object whose fields are optional but must have their type when present (zod's
 * `.optional()`): the first field that does not (in the shape's order) fails it, with zod's words.
 */
export function strictObject(v: unknown, shape: { readonly [k: string]: Leaf }): ParseResult<Record<string, unknown>> {
  if (!isObject(v)) return { ok: false, error: invalidType('object', v) };
  const out: Record<string, unknown> = {};
  for (const k of Object.keys(shape)) {
    if (!Object.hasOwn(v, k)) continue;
    const f = shape[k]!;
    const x = v[k];
    if (x !== undefined && !f.ok(x)) return { ok: false, error: invalidType(f.expected, x) };
    out[k] = x === undefined ? x : leafValue(f, x);
  }
  copyKeys(v, out, shape);
  return { ok: true, value: out };
}
