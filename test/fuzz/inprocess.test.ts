// The fuzz suite, in-process tier: the readers, RunModel, the Checker, report grading and the
// cockpit's composer on generated hostile input (≥ 100k inputs in all), seeded and reproducible
// (FUZZ_SEED=<seed> replays a run; the seed and the counts are printed). Properties:
// - nothing throws, nothing grows without bound, every parse error is a named one-liner;
// - no text that reaches a terminal (status, report, a cockpit frame) holds ESC or a C0/C1 control
//   other than the cockpit's own SGR styling;
// - JSON output keeps the exact values (escapes are data there, not lost).
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { Checker } from '../../src/checks/index.js';
import { gradeRun } from '../../src/checks/report.js';
import { Collector } from '../../src/cockpit/collector.js';
import { chart, formatMd, formatText } from '../../src/commands/report.js';
import { formatStatus } from '../../src/commands/status.js';
import { parseGpuLine, GPU_RANGES } from '../../src/remote/gpu.js';
import { LocalHost } from '../../src/remote/local/host.js';
import { jsonSafe, jsonSafeBytes, sanitize, sanitizeText } from '../../src/sanitize.js';
import { parseCsvLine, TrainingCsv } from '../../src/trainer/run/readers/csv.js';
import { HeartbeatState, parseHeartbeatLine } from '../../src/trainer/run/readers/heartbeat.js';
import { parseEnvJson, parsePyJson } from '../../src/trainer/run/readers/jsonfiles.js';
import { LineSplitter } from '../../src/lines.js';
import { RunModel } from '../../src/trainer/run/model.js';
import { lineToAnsi } from '../../src/ui/ansi.js';
import { compose } from '../../src/ui/compose.js';
import { initialView } from '../../src/ui/view.js';
import { csvLine, envJson, ESCAPES, escapeText, heartbeatLine, Rng, seedFromEnv, writeRunDir } from './gen.js';

const SEED = seedFromEnv();
const LINES = Number(process.env.FUZZ_LINES || 100_000);
const DIRS = Number(process.env.FUZZ_DIRS_INPROC || 150);

const BAD_TEXT = /[\x00-\x08\x0b-\x1f\x7f-\x9f]/;
/** a terminal frame: nsa-top's own SGR codes and cursor moves allowed, nothing else */
const OWN_CODES = /\x1b\[[0-9;]*m/g;

function assertNoEscapes(text: string, what: string): void {
  const m = BAD_TEXT.exec(text);
  assert.ok(
    !m,
    `${what}: control 0x${m?.[0].charCodeAt(0).toString(16)} at ${m?.index} in ${JSON.stringify(text.slice(Math.max(0, (m?.index ?? 0) - 40), (m?.index ?? 0) + 40))} (FUZZ_SEED=${SEED})`,
  );
}

test(`readers: ${LINES} generated lines never throw; errors are named one-liners (seed ${SEED})`, () => {
  const r = new Rng(SEED);
  const opts = { recentWindow: 200, historyBuckets: 64 };
  const hb = new HeartbeatState(0, 'heartbeat_rank0.jsonl', opts);
  const csv = new TrainingCsv(opts);
  const counts = { lines: 0, hbOk: 0, hbErr: 0, csvOk: 0, csvErr: 0, json: 0, smi: 0, splitErr: 0 };
  const errors = new Set<string>();
  const splitter = new LineSplitter(4096);
  let step = 0;
  for (let i = 0; i < LINES; i++) {
    if (r.chance(0.8)) step++;
    const kind = i % 5;
    counts.lines++;
    if (kind === 0 || kind === 1) {
      const line = heartbeatLine(r, step, 1_790_000_000 + i, 0);
      const p = parseHeartbeatLine(line);
      if (p.ok) {
        hb.record(p.value);
        counts.hbOk++;
      } else {
        counts.hbErr++;
        errors.add(p.error);
      }
    } else if (kind === 2) {
      const line = csvLine(r, step);
      const e = csv.line(line, null);
      if (e) {
        counts.csvErr++;
        assert.ok(e.length < 200 && !e.includes('\n'), e);
      } else counts.csvOk++;
      parseCsvLine(line, 3);
    } else if (kind === 3) {
      const text = r.chance(0.5) ? envJson(r) : heartbeatLine(r, step, 1, 0);
      const p = parseEnvJson(text);
      if (!p.ok) errors.add(p.error.replace(/:.*/, ''));
      const j = parsePyJson(text);
      // whatever parses can be printed as JSON again (no stack overflow on a deep value)
      if (j.ok) JSON.stringify(j.value);
      counts.json++;
    } else {
      const f = () =>
        r.pick(['0', '1', '250', '-5', '99999', '1e+308', 'nan', '[N/A]', '[Not Supported]', escapeText(r), '']);
      const d = parseGpuLine(
        [r.pick(['0', '1', 'x', '99999', '-1']), escapeText(r), 'GPU-1', f(), f(), f(), f(), f(), f(), f(), f()].join(
          ', ',
        ),
      );
      if (d) {
        for (const k of Object.keys(GPU_RANGES) as (keyof typeof GPU_RANGES)[]) {
          const v = d[k];
          if (v !== null)
            assert.ok(v >= GPU_RANGES[k].lo && v <= GPU_RANGES[k].hi, `${k} ${v} shown although out of range`);
        }
      }
      counts.smi++;
    }
    // the splitter over random chunkings of random bytes, with a small cap
    if (i % 50 === 0) {
      const buf = Buffer.from(
        heartbeatLine(r, step, 1, 0) + (r.chance(0.5) ? '\n' : '') + 'x'.repeat(r.chance(0.1) ? 5000 : 10) + '\n',
      );
      let at = 0;
      while (at < buf.length) {
        const n = r.int(1, 700);
        splitter.push(buf.subarray(at, at + n), {
          line: (l) => assert.ok(Buffer.byteLength(l) <= 4096),
          error: () => counts.splitErr++,
        });
        at += n;
      }
    }
  }
  // bounded whatever came in
  assert.ok(hb.segments.length <= 1000);
  assert.ok(hb.series.loss.toJSON().recent.length <= 200);
  assert.ok(Object.keys(hb.events).length <= 65);
  for (const e of errors) assert.ok(e.length < 200 && !e.includes('\n'), e);
  assert.ok(counts.hbOk > 0 && counts.hbErr > 0 && counts.csvOk > 0 && counts.csvErr > 0, JSON.stringify(counts));
  console.log(`fuzz readers: seed ${SEED} ${JSON.stringify(counts)}`);
});

test('the sanitiser: no control survives, printable text is untouched, JSON stays exact', () => {
  const r = new Rng(SEED + 1);
  let n = 0;
  for (let i = 0; i < 20_000; i++) {
    let s = '';
    for (let k = r.int(0, 8); k > 0; k--) s += r.chance(0.5) ? r.pick(ESCAPES) : String.fromCharCode(r.int(0, 0x2fff));
    assertNoEscapes(sanitize(s), 'sanitize');
    const multi = sanitizeText(s);
    assertNoEscapes(multi.replace(/[\n\t]/g, ''), 'sanitizeText');
    assert.deepEqual(JSON.parse(jsonSafe(JSON.stringify({ s }))), { s }, 'jsonSafe keeps the value');
    assertNoEscapes(jsonSafe(JSON.stringify({ s })), 'jsonSafe');
    const js = JSON.stringify({ s }, null, 2);
    assert.deepEqual(jsonSafeBytes(js), Buffer.from(jsonSafe(js), 'utf8'), 'jsonSafeBytes is jsonSafe in UTF-8');
    n++;
  }
  assert.equal(sanitize('plain text · ü 日本'), 'plain text · ü 日本');
  // the byte search tells C1 (C2 80–9F) from the Latin-1 letters that share its lead byte
  for (const s of ['½ — ü', 'a\x85b', 'x\x7f', '¼\x9b31m', '\xa0\x9f'])
    assert.equal(jsonSafeBytes(JSON.stringify(s)).toString('utf8'), jsonSafe(JSON.stringify(s)), JSON.stringify(s));
  assert.equal(jsonSafeBytes(JSON.stringify('a\x9b31m')).toString('utf8'), '"a\\u009b31m"');
  assert.equal(sanitize('a\x1b]52;c;cHduZWQ=\x07b\x1b[2Jc\x9b31md'), 'abcd');
  console.log(`fuzz sanitiser: seed ${SEED} ${n} strings`);
});

test(
  `run dirs: ${DIRS} generated dirs through RunModel, Checker, report grading, status text and cockpit frames (seed ${SEED})`,
  { timeout: 600_000 },
  async () => {
    const r = new Rng(SEED + 2);
    const root = mkdtempSync(join(tmpdir(), 'nsa-fuzz-inproc-'));
    const host = new LocalHost();
    const counts = { dirs: 0, polls: 0, frames: 0, reports: 0, parseErrors: 0, specials: 0, withEscapes: 0 };
    try {
      for (let i = 0; i < DIRS; i++) {
        const dir = join(root, `r${i}`);
        const made = writeRunDir(r, dir, { maxLines: 40 });
        counts.specials += made.filter((m) => m.endsWith(')')).length;
        const what = `dir ${i} (${made.join(', ')}) FUZZ_SEED=${SEED}`;
        const m = new RunModel(host, dir);
        await m.poll();
        const snap = await m.poll();
        counts.polls += 2;
        for (const f of Object.values(snap.files)) {
          counts.parseErrors += f.parseErrors;
          if (f.lastError)
            assert.ok(f.lastError.length < 400 && !f.lastError.includes('\n'), `${what}: ${f.lastError}`);
        }
        assert.ok(
          snap.identity.worldSize === null || snap.identity.worldSize <= 65536,
          `${what}: world ${snap.identity.worldSize}`,
        );
        // JSON: parses back and keeps data exactly (never throws on depth)
        const json = jsonSafe(JSON.stringify(snap));
        assert.ok(JSON.parse(json));
        if (/\\u001b|\\u009b/.test(json)) counts.withEscapes++;
        const now = snap.hostNowMs;
        const ev = new Checker({ stallFloorS: 1 }).evaluate({ now, run: snap, procs: null, gpu: null });
        const rep = gradeRun({ run: snap, ev });
        assert.ok([0, 1, 2].includes(rep.exitCode));
        counts.reports++;
        const charts = { loss: chart(snap.series.loss), toksPerS: chart(snap.series.toksPerS) };
        assertNoEscapes(sanitizeText(formatStatus(snap)).replace(/[\n\t]/g, ''), `${what}: status`);
        assertNoEscapes(sanitizeText(formatText(rep, charts)).replace(/[\n\t]/g, ''), `${what}: report`);
        assertNoEscapes(sanitizeText(formatMd(rep, charts)).replace(/[\n\t]/g, ''), `${what}: report md`);
        counts.dirs++;
      }
      // the cockpit: the collector (action log included) and frames at a few sizes, on a sample
      for (let i = 0; i < Math.min(DIRS, 40); i++) {
        const dir = join(root, `r${i}`);
        const c = new Collector({ host, runDir: dir, gpu: null, procsIntervalMs: 3_600_000 });
        await c.tick();
        const s = await c.tick();
        for (const [cols, rows] of [
          [120, 40],
          [80, 24],
          [200, 60],
        ] as const) {
          for (const dialog of [null, { kind: 'help' as const }]) {
            const f = compose(s, initialView(), cols, rows, s.at, dialog as never);
            const ansi = f.lines.map((l) => lineToAnsi(l, false)).join('\n');
            assertNoEscapes(
              ansi.replace(OWN_CODES, '').replace(/\n/g, ''),
              `dir ${i} frame ${cols}x${rows} FUZZ_SEED=${SEED}`,
            );
            counts.frames++;
          }
        }
        c.stop();
      }
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
    assert.ok(counts.withEscapes > 0, 'the generated dirs carry escapes into the snapshot');
    console.log(`fuzz run dirs: seed ${SEED} ${JSON.stringify(counts)}`);
  },
);
