// The heartbeat's step time (src/trainer/run/readers/heartbeat.ts stepTimeS), read from the ring of
// step marks in place: on random progress and beat records — repeated steps, steps going back, equal
// and backward times, more marks than the ring holds (it wraps) — it equals the median the reader
// took when it built a mark object per mark (the reference below is that loop, kept verbatim).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { HeartbeatState } from '../../../src/trainer/run/readers/heartbeat.js';
import { median } from '../../../src/trainer/run/readers/num.js';

function rng(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s * 1664525 + 1013904223) >>> 0;
    return s / 2 ** 32;
  };
}

interface MarksLike {
  length: number;
  toArray(): { step: number; ts: number }[];
}

function reference(h: HeartbeatState): number | null {
  const inner = h as unknown as { beatMarks: MarksLike; progressMarks: MarksLike };
  const marks = (inner.beatMarks.length >= 3 ? inner.beatMarks : inner.progressMarks).toArray();
  const rates: number[] = [];
  for (let i = 1; i < marks.length; i++) {
    const a = marks[i - 1]!;
    const b = marks[i]!;
    if (b.step > a.step && b.ts >= a.ts) rates.push((b.ts - a.ts) / 1000 / (b.step - a.step));
  }
  return median(rates);
}

test('the step time read from the ring in place equals the one read from mark objects', () => {
  const r = rng(7);
  let compared = 0;
  for (let c = 0; c < 300; c++) {
    const h = new HeartbeatState(0, 'heartbeat_rank0.jsonl', { recentWindow: 100, historyBuckets: 16 });
    let step = 1;
    let ts = 1_795_000_000;
    const n = Math.floor(r() * 200);
    const beats = r() < 0.3;
    for (let i = 0; i < n; i++) {
      step += r() < 0.1 ? 0 : r() < 0.03 ? -3 : 1 + Math.floor(r() * 3);
      ts += r() < 0.05 ? -1 : r() * 4;
      h.record({
        ts,
        msg: beats && r() < 0.7 ? 'beat' : 'progress',
        step: Math.max(0, step),
        loss: 5,
        toks_per_s: 100,
      });
      if (r() < 0.2) {
        assert.equal(h.stepTimeS(), reference(h), `case ${c}, record ${i}`);
        compared++;
      }
    }
    assert.equal(h.stepTimeS(), reference(h), `case ${c}`);
  }
  assert.ok(compared > 1000);
});
