// The trainer configs' YAML without the yaml library: nested block mappings (two-space style),
// flow mappings of scalars (`model: {dim: 768, d_k: 64}`), plain and simply quoted scalars and
// comments — what the real configs (configs/*.yaml) and a run dir's config.yaml hold. The library's
// first parse in a process runs its parser cold (~11 ms of a ~250 ms `status`). The answer is the
// library's own `parseDocument(text).toJS()` (YAML 1.2 core schema) or undefined: anything outside
// this subset, or any doubt (a scalar the core schema could read as something else, a duplicate
// key, a tab), goes to the library, which also words the errors. yaml-simple-oracle.test.ts holds
// it to the library on generated documents.

/** a mapping key: a plain name (never one the core schema reads as null, a bool or a number) */
const KEY = /^[A-Za-z_][A-Za-z0-9_-]*$/;
const REFUSED_KEYS = new Set(['null', 'Null', 'NULL', 'true', 'True', 'TRUE', 'false', 'False', 'FALSE', '__proto__']);
/** decimal numbers as the core schema reads them and Number() gives the same value for */
const NUMBER = /^-?(?:0|[1-9][0-9]{0,14})(?:\.[0-9]+)?(?:[eE][-+]?[0-9]{1,3})?$/;
/** a plain scalar that is a string whatever the schema: starts with a letter or _ or /, no indicator inside */
const PLAIN_STRING = /^[A-Za-z_/][A-Za-z0-9_./-]*(?: [A-Za-z0-9_./-]+)*$/;
/** quoted without escapes, quotes or anything a flow context would split on */
const QUOTED = /^"([A-Za-z0-9_./ -]*)"$|^'([A-Za-z0-9_./ -]*)'$/;

const NO = Symbol('not in the subset');

function scalar(raw: string): unknown {
  const q = QUOTED.exec(raw);
  if (q) return q[1] ?? q[2];
  if (raw === '~' || raw === 'null' || raw === 'Null' || raw === 'NULL') return null;
  if (raw === 'true' || raw === 'True' || raw === 'TRUE') return true;
  if (raw === 'false' || raw === 'False' || raw === 'FALSE') return false;
  if (NUMBER.test(raw)) {
    const v = Number(raw);
    // -0 and the like: the library's own rules, not ours
    return Object.is(v, -0) ? NO : v;
  }
  return PLAIN_STRING.test(raw) ? raw : NO;
}

function flowMap(raw: string): unknown {
  const inner = raw.slice(1, -1).trim();
  const out: Record<string, unknown> = {};
  if (inner === '') return out;
  for (const item of inner.split(',')) {
    const m = /^([^:]*): (.*)$/.exec(item.trim());
    if (!m) return NO;
    const k = m[1]!;
    const v = scalar(m[2]!.trim());
    if (!KEY.test(k) || REFUSED_KEYS.has(k) || Object.hasOwn(out, k) || v === NO) return NO;
    out[k] = v;
  }
  return out;
}

/** the value of `key: raw` on one line (raw not empty) */
function value(raw: string): unknown {
  // a flow mapping of scalars: no nested collection; a comma inside a quoted scalar fails QUOTED
  if (raw.startsWith('{')) return raw.endsWith('}') && !/[[\]{}]/.test(raw.slice(1, -1)) ? flowMap(raw) : NO;
  return scalar(raw);
}

interface Line {
  indent: number;
  key: string;
  raw: string;
}

/** the document's mapping, or undefined when it is not in the subset (then ask the yaml library) */
export function parseSimpleYaml(text: string): Record<string, unknown> | undefined {
  if (/[\t\r\\]/.test(text)) return undefined;
  const lines: Line[] = [];
  for (const full of text.split('\n')) {
    // a comment: from a # at the start or after a blank (quoted scalars hold no #: QUOTED)
    const hash = full.startsWith('#') ? 0 : full.indexOf(' #');
    const line = (hash === -1 ? full : full.slice(0, hash)).trimEnd();
    if (line.trim() === '') continue;
    const indent = line.length - line.trimStart().length;
    const m = /^([^:]*):(?: (.*))?$/.exec(line.slice(indent));
    if (!m || line.includes('#')) return undefined;
    const key = m[1]!;
    if (!KEY.test(key) || REFUSED_KEYS.has(key)) return undefined;
    lines.push({ indent, key, raw: (m[2] ?? '').trim() });
  }
  if (lines.length === 0 || lines[0]!.indent !== 0) return undefined;
  let at = 0;
  /** the block mapping whose keys sit at `indent`, from lines[at] on */
  const block = (indent: number): Record<string, unknown> | typeof NO => {
    const out: Record<string, unknown> = {};
    while (at < lines.length && lines[at]!.indent >= indent) {
      const l = lines[at++]!;
      if (l.indent !== indent || Object.hasOwn(out, l.key)) return NO;
      let v: unknown;
      if (l.raw !== '') v = value(l.raw);
      else if (at < lines.length && lines[at]!.indent > indent) v = block(lines[at]!.indent);
      else v = null; // `key:` and nothing under it
      if (v === NO) return NO;
      out[l.key] = v;
    }
    return out;
  };
  const doc = block(0);
  return doc === NO || at !== lines.length ? undefined : doc;
}
