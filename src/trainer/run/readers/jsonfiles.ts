// Small whole-file artifacts: env.json, metrics.json, gate_collapse_details.json, opt_state_mb.txt,
// .HALT, .anomaly_type. Read whole (capped), re-read when size/mtime/inode change.
import { z } from 'zod';
import { sanitize } from '../../../sanitize.js';
import { parseNumCell } from './num.js';
import type { ParseResult } from './heartbeat.js';

// Each field is optional and tolerant on its own (`.catch(undefined)`): one odd value — e.g.
// `"torch": null` from a trainer without torch — must not discard CONFIG and the NSA_* flags.
export const EnvJsonSchema = z.looseObject({
  time: z.string().optional().catch(undefined),
  python: z.string().optional().catch(undefined),
  torch: z.string().optional().catch(undefined),
  cuda_available: z.boolean().optional().catch(undefined),
  cuda_device_count: z.number().optional().catch(undefined),
  gpu_name: z.string().optional().catch(undefined),
  cuda_capability: z.array(z.number()).optional().catch(undefined),
  distributed_backend: z.string().optional().catch(undefined),
  implementation: z.string().optional().catch(undefined),
  /** nsa-top's reference trainer marks its runs with "nsa-top-reference" */
  trainer: z.string().optional().catch(undefined),
  env: z.record(z.string(), z.unknown()).optional().catch(undefined),
});
export type EnvJson = z.infer<typeof EnvJsonSchema>;

export const MetricsJsonSchema = z.looseObject({
  device: z.string().optional(),
  dtype: z.string().optional(),
  steps: z.number().optional(),
  seq_len: z.number().optional(),
  batch_global: z.number().optional(),
  lr: z.number().optional(),
  loss_first: z.unknown().optional(),
  loss_last: z.unknown().optional(),
  backend: z.string().optional(),
});
export type MetricsJson = z.infer<typeof MetricsJsonSchema>;

const BARE_NONFINITE = /([:,[]\s*)(-?Infinity|NaN)(?=\s*[,\]}])/g;

/**
 * How deep a JSON value in a run's files may nest. The trainer writes flat objects (one level of
 * arrays for gate shares); a deeper value is refused by name before it is parsed, because every
 * recursive consumer downstream (JSON.stringify of a snapshot, schema checks, the UI) would overflow
 * the stack on it (a 500,000-deep value once made `status --json` print nothing).
 */
export const MAX_JSON_DEPTH = 64;

/** true when `text` opens more than `max` nested arrays/objects (brackets inside strings excluded) */
export function jsonTooDeep(text: string, max = MAX_JSON_DEPTH): boolean {
  // nesting deeper than max needs more than max opening brackets: short lines cannot
  if (text.length <= max) return false;
  let depth = 0;
  let inStr = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inStr) {
      if (c === 92)
        i++; // backslash: skip the escaped char
      else if (c === 34) inStr = false;
    } else if (c === 34) inStr = true;
    else if (c === 91 || c === 123) {
      if (++depth > max) return true;
    } else if (c === 93 || c === 125) depth--;
  }
  return false;
}

/** The parse error of a value nested too deep (named, so status says what was refused). */
export const TOO_DEEP = `JSON nested deeper than ${MAX_JSON_DEPTH} levels: refused`;

/** JSON.parse that tolerates Python's bare NaN/Infinity (they become strings). */
export function parsePyJson(text: string): ParseResult<unknown> {
  if (jsonTooDeep(text)) return { ok: false, error: TOO_DEEP };
  try {
    return { ok: true, value: JSON.parse(text) };
  } catch {
    try {
      return { ok: true, value: JSON.parse(text.replace(BARE_NONFINITE, '$1"$2"')) };
    } catch (e) {
      return { ok: false, error: `not JSON: ${sanitize((e as Error).message).slice(0, 80)}` };
    }
  }
}

export function parseObjectFile<T>(text: string, schema: z.ZodType<T>): ParseResult<T> {
  const j = parsePyJson(text);
  if (!j.ok) return j;
  const r = schema.safeParse(j.value);
  if (!r.success) return { ok: false, error: `unexpected shape: ${r.error.issues[0]?.message ?? 'schema'}` };
  return { ok: true, value: r.data };
}

export function parseEnvJson(text: string): ParseResult<EnvJson> {
  return parseObjectFile(text, EnvJsonSchema);
}

export function parseMetricsJson(text: string): ParseResult<MetricsJson> {
  return parseObjectFile(text, MetricsJsonSchema);
}

export function parseGateCollapse(text: string): ParseResult<Record<string, unknown>> {
  return parseObjectFile(text, z.record(z.string(), z.unknown()));
}

/** opt_state_mb.txt: one float */
export function parseOptState(text: string): ParseResult<number> {
  const n = parseNumCell(text.trim().split(/\s+/)[0] ?? '');
  return n === null || !Number.isFinite(n) ? { ok: false, error: 'not a number' } : { ok: true, value: n };
}
