// Small whole-file artifacts: env.json, metrics.json, gate_collapse_details.json, opt_state_mb.txt,
// .HALT, .anomaly_type. Read whole (capped), re-read when size/mtime/inode change.
import { sanitize } from '../../../sanitize.js';
import { parseNumCell } from './num.js';
import type { ParseResult } from './heartbeat.js';
import {
  anything,
  bool,
  copyRecord,
  invalidType,
  isObject,
  num,
  numArray,
  record,
  str,
  strictObject,
  tolerantObject,
} from './shape.js';

// Each field is optional and tolerant on its own: one odd value — e.g. `"torch": null` from a
// trainer without torch — must not discard CONFIG and the NSA_* flags (shape.ts: tolerantObject).
const ENV_JSON = {
  time: str,
  python: str,
  torch: str,
  cuda_available: bool,
  cuda_device_count: num,
  gpu_name: str,
  cuda_capability: numArray,
  distributed_backend: str,
  implementation: str,
  /** nsa-top's reference trainer marks its runs with "nsa-top-reference" */
  trainer: str,
  env: record,
};
export interface EnvJson {
  time?: string | undefined;
  python?: string | undefined;
  torch?: string | undefined;
  cuda_available?: boolean | undefined;
  cuda_device_count?: number | undefined;
  gpu_name?: string | undefined;
  cuda_capability?: number[] | undefined;
  distributed_backend?: string | undefined;
  implementation?: string | undefined;
  trainer?: string | undefined;
  env?: Record<string, unknown> | undefined;
  [k: string]: unknown;
}

// each field optional, but of its type when present (shape.ts: strictObject)
const METRICS_JSON = {
  device: str,
  dtype: str,
  steps: num,
  seq_len: num,
  batch_global: num,
  lr: num,
  loss_first: anything,
  loss_last: anything,
  backend: str,
};
export interface MetricsJson {
  device?: string | undefined;
  dtype?: string | undefined;
  steps?: number | undefined;
  seq_len?: number | undefined;
  batch_global?: number | undefined;
  lr?: number | undefined;
  loss_first?: unknown;
  loss_last?: unknown;
  backend?: string | undefined;
  [k: string]: unknown;
}

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
  // nesting deeper than max needs more than max opening brackets: short lines cannot, and neither
  // can a line with few of them (counted by indexOf, not char by char: a heartbeat file is
  // millions of lines with one or two brackets each, and this runs before every JSON.parse)
  if (text.length <= max || !moreThan(text, max)) return false;
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

/** more than `max` of `[` and `{` together in `text` (strings included) */
function moreThan(text: string, max: number): boolean {
  let n = 0;
  for (let i = text.indexOf('{'); i >= 0; i = text.indexOf('{', i + 1)) if (++n > max) return true;
  for (let i = text.indexOf('['); i >= 0; i = text.indexOf('[', i + 1)) if (++n > max) return true;
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

/** the file as JSON, and its shape checked (`check` says what is wrong, in zod's words) */
function parseObjectFile<T>(text: string, check: (v: unknown) => ParseResult<T>): ParseResult<T> {
  const j = parsePyJson(text);
  if (!j.ok) return j;
  const r = check(j.value);
  return r.ok ? r : { ok: false, error: `unexpected shape: ${r.error}` };
}

export function parseEnvJson(text: string): ParseResult<EnvJson> {
  return parseObjectFile(text, (v) => {
    const o = tolerantObject(v, ENV_JSON);
    return o ? { ok: true, value: o as EnvJson } : strictObject(v, {});
  });
}

export function parseMetricsJson(text: string): ParseResult<MetricsJson> {
  return parseObjectFile(text, (v) => strictObject(v, METRICS_JSON) as ParseResult<MetricsJson>);
}

export function parseGateCollapse(text: string): ParseResult<Record<string, unknown>> {
  return parseObjectFile(text, (v) =>
    isObject(v) ? { ok: true, value: copyRecord(v) } : { ok: false, error: invalidType(record.expected, v) },
  );
}

/** opt_state_mb.txt: one float */
export function parseOptState(text: string): ParseResult<number> {
  const n = parseNumCell(text.trim().split(/\s+/)[0] ?? '');
  return n === null || !Number.isFinite(n) ? { ok: false, error: 'not a number' } : { ok: true, value: n };
}
