// The readers' hand-written shape checks (readers/shape.ts) give zod's answers: the same value, the
// same refusals, in the same words, on generated env.json / metrics.json / gate-collapse files and
// trainer configs. And jsonTooDeep's bracket count (a fast path) never changes its verdict.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { parseDocument, stringify } from 'yaml';
import { z } from 'zod';
import {
  jsonTooDeep,
  MAX_JSON_DEPTH,
  parseEnvJson,
  parseGateCollapse,
  parseMetricsJson,
  parsePyJson,
} from '../../../src/trainer/run/readers/jsonfiles.js';
import { parseTrainerConfig } from '../../../src/trainer/run/readers/config.js';
import type { ParseResult } from '../../../src/trainer/run/readers/heartbeat.js';
import { EnvJsonSchema, MetricsJsonSchema, TrainerConfigSchema } from './zod-schemas.js';

/** zod's answer on a file's text, as the readers word it (parseObjectFile before shape.ts) */
function viaZod(text: string, schema: z.ZodType): ParseResult<unknown> {
  const j = parsePyJson(text);
  if (!j.ok) return j;
  const r = schema.safeParse(j.value);
  if (!r.success) return { ok: false, error: `unexpected shape: ${r.error.issues[0]?.message ?? 'schema'}` };
  return { ok: true, value: r.data };
}

/** the same answer: both refuse in the same words, or both give the same JSON (keys in the same order) */
function same(mine: ParseResult<unknown>, zod: ParseResult<unknown>, text: string): void {
  assert.equal(mine.ok, zod.ok, text);
  if (mine.ok && zod.ok) {
    assert.equal(JSON.stringify(mine.value), JSON.stringify(zod.value), text);
    // a key the check sets to undefined is still there (zod's .catch(undefined) keeps it)
    assert.deepEqual(Object.keys(mine.value as object), Object.keys(zod.value as object), text);
  } else if (!mine.ok && !zod.ok) assert.equal(mine.error, zod.error, text);
}

// values of every JSON type, non-finite numbers included (written as 1e999 / bare NaN, as Python does)
const INF = 'INF_MARK';
const leaf = fc.oneof(
  fc.integer({ min: -5, max: 5 }),
  fc.double({ noNaN: true, noDefaultInfinity: true }),
  fc.string({ maxLength: 4 }),
  fc.boolean(),
  fc.constant(null),
  fc.constantFrom(INF, `-${INF}`, 'NaN!'),
);
const key = fc.constantFrom('a', 'x', 'CONFIG', '__proto__', 'toString', 'constructor');
const value = fc.letrec((tie) => ({
  v: fc.oneof({ depthSize: 'small' }, leaf, fc.array(tie('v'), { maxLength: 3 }), fc.dictionary(key, tie('v'))),
})).v;
const toText = (o: unknown) =>
  JSON.stringify(o).replaceAll(`"-${INF}"`, '-1e999').replaceAll(`"${INF}"`, '1e999').replaceAll('"NaN!"', 'NaN');

/** an object with the schema's keys (each of any type, or absent) and some others */
function objectOf(keys: string[], good: fc.Arbitrary<unknown>) {
  const field = fc.oneof({ weight: 3, arbitrary: good }, { weight: 2, arbitrary: value });
  return fc.oneof(
    {
      weight: 8,
      arbitrary: fc
        .tuple(
          fc.record(Object.fromEntries(keys.map((k) => [k, field])), { requiredKeys: [] }),
          fc.dictionary(key, value, { maxKeys: 2 }),
        )
        .map(([a, b]) => ({ ...b, ...a })),
    },
    { weight: 1, arbitrary: value },
  );
}

const ENV_KEYS = Object.keys(EnvJsonSchema.shape);
const METRICS_KEYS = Object.keys(MetricsJsonSchema.shape);

test('env.json: the hand-written check gives zod’s answer (each field tolerant on its own)', () => {
  const good = fc.oneof(
    fc.string({ maxLength: 3 }),
    fc.integer(),
    fc.boolean(),
    fc.array(fc.integer(), { maxLength: 3 }),
    fc.dictionary(key, value, { maxKeys: 2 }),
  );
  fc.assert(
    fc.property(objectOf(ENV_KEYS, good), (o) => {
      const text = toText(o);
      same(parseEnvJson(text), viaZod(text, EnvJsonSchema), text);
    }),
    { numRuns: 400 },
  );
});

test('metrics.json: the hand-written check gives zod’s answer and its words when it refuses', () => {
  const good = fc.oneof(fc.string({ maxLength: 3 }), fc.double({ noNaN: true, noDefaultInfinity: true }));
  fc.assert(
    fc.property(objectOf(METRICS_KEYS, good), (o) => {
      const text = toText(o);
      same(parseMetricsJson(text), viaZod(text, MetricsJsonSchema), text);
    }),
    { numRuns: 400 },
  );
  // the refusals, spelled out
  assert.deepEqual(parseMetricsJson('{"steps": "x"}'), {
    ok: false,
    error: 'unexpected shape: Invalid input: expected number, received string',
  });
  assert.deepEqual(parseMetricsJson('{"lr": 1e999}'), {
    ok: false,
    error: 'unexpected shape: Invalid input: expected number, received Infinity',
  });
  assert.deepEqual(parseMetricsJson('[1]'), {
    ok: false,
    error: 'unexpected shape: Invalid input: expected object, received array',
  });
});

test('gate_collapse_details.json: any object is kept, anything else refused as zod refused it', () => {
  const gate = z.record(z.string(), z.unknown());
  fc.assert(
    fc.property(value, (o) => {
      const text = toText(o);
      same(parseGateCollapse(text), viaZod(text, gate), text);
    }),
    { numRuns: 200 },
  );
});

test('trainer config: the hand-written check gives zod’s answer on any YAML mapping', () => {
  const num = fc.oneof(fc.integer({ min: 0, max: 4096 }), fc.double({ noNaN: true, noDefaultInfinity: true }));
  const section = (keys: string[]) => objectOf(keys, fc.oneof(num, fc.string({ maxLength: 3 })));
  const shape = TrainerConfigSchema.shape;
  const sections = Object.fromEntries(
    Object.keys(shape).map((k) => {
      const inner = (
        shape[k as keyof typeof shape] as unknown as { def: { innerType: { def: { innerType: z.ZodObject } } } }
      ).def.innerType.def.innerType;
      return [
        k,
        fc.oneof({ weight: 4, arbitrary: section(Object.keys(inner.shape)) }, { weight: 1, arbitrary: value }),
      ];
    }),
  );
  fc.assert(
    fc.property(fc.record(sections, { requiredKeys: [] }), fc.dictionary(key, value, { maxKeys: 2 }), (a, b) => {
      const text = stringify({ ...b, ...a });
      const mine = parseTrainerConfig(text);
      const doc = parseDocument(text, { prettyErrors: false }).toJS({ maxAliasCount: 100 }) as unknown;
      const r = TrainerConfigSchema.safeParse(doc);
      assert.equal(mine.ok, r.success, text);
      if (mine.ok && r.success) assert.equal(JSON.stringify(mine.value), JSON.stringify(r.data), text);
    }),
    { numRuns: 100 },
  );
});

/** jsonTooDeep as it was: every character walked */
function tooDeepByWalk(text: string, max: number): boolean {
  let depth = 0;
  let inStr = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inStr) {
      if (c === 92) i++;
      else if (c === 34) inStr = false;
    } else if (c === 34) inStr = true;
    else if (c === 91 || c === 123) {
      if (++depth > max) return true;
    } else if (c === 93 || c === 125) depth--;
  }
  return false;
}

test('jsonTooDeep: counting brackets first never changes the verdict', () => {
  const ch = fc.constantFrom('[', '{', ']', '}', '"', '\\', 'a', ',', ' ');
  fc.assert(
    fc.property(fc.array(ch, { maxLength: 60 }), fc.integer({ min: 0, max: 8 }), (cs, max) => {
      const text = cs.join('');
      assert.equal(jsonTooDeep(text, max), text.length > max && tooDeepByWalk(text, max), text);
    }),
    { numRuns: 2000 },
  );
  // at the real limit: brackets inside strings are counted, never nested
  const inString = `{"a": "${'['.repeat(MAX_JSON_DEPTH + 5)}"}`;
  assert.equal(jsonTooDeep(inString), false);
  assert.equal(jsonTooDeep('['.repeat(MAX_JSON_DEPTH + 1) + ']'.repeat(MAX_JSON_DEPTH + 1)), true);
  assert.equal(jsonTooDeep('['.repeat(MAX_JSON_DEPTH) + ']'.repeat(MAX_JSON_DEPTH)), false);
});
