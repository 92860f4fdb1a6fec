// A scrape of the watchdog's /metrics that comes about when its next round is due is answered with
// that round, run at once: the process wakes once for both (bench/watchdog-metrics.bench.ts), and
// the scraper gets the newest judgement, not one up to an interval old. Against the built binary
// on a live 2-rank reference run, scraped by this test every 2.8 s while the watchdog looks every 3 s:
// once the rounds follow the scrapes, every scrape is answered by a round run for it (its
// observation is fresh, and one round was added per scrape: the timer, a little past the interval,
// never fired in between), and a second scrape right after it brings no round.
// Needs `npm run build` first (the binary is what runs).
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { metricsListen, start, tmp, waitFor } from '../checks/live-helpers.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** one sample's value off an exposition (the first series of the family) */
function sample(text: string, name: string): number {
  const m = new RegExp(`^${name}(?:\\{[^}]*\\})? (\\S+)$`, 'm').exec(text);
  assert.ok(m, `${name} in the exposition`);
  return Number(m[1]);
}

test(
  'scrapes about once an interval: each is answered by a round run for it, and a scrape right after brings none',
  { timeout: 90_000 },
  async () => {
    const dir = tmp();
    const run = join(dir, 'run');
    const trainer = start(['train', '--out', run, '--steps', '5000', '--ranks', '2', '--log-every', '5']);
    await waitFor('the run dir', () => existsSync(join(run, 'heartbeat_rank1.jsonl')), 30_000);
    const wd = start([
      'watchdog',
      run,
      '--interval',
      '3',
      '--no-gpu',
      '--no-record',
      '--metrics-listen',
      '127.0.0.1:0',
    ]);
    const listen = await metricsListen(wd);
    const scrape = async () => {
      const text = await fetch(`http://${listen}/metrics`).then((r) => r.text());
      const at = Date.now() / 1000;
      return {
        rounds: sample(text, 'nsatop_watchdog_observations_total'),
        age: at - sample(text, 'nsatop_watchdog_last_observation_timestamp_seconds'),
      };
    };
    // two scrapes to fall in step (the first has no cadence to go by; the second moves the round
    // onto the third), then four that must each be answered by their own round
    const seen: { rounds: number; age: number }[] = [];
    let last = 0;
    for (let i = 0; i < 6; i++) {
      if (i > 0) await sleep(2800 - (Date.now() - last));
      last = Date.now();
      seen.push(await scrape());
    }
    const inStep = seen.slice(2);
    for (const [i, s] of inStep.entries()) {
      assert.ok(s.age < 0.75, `scrape ${i + 3} answered by a round run for it: ${JSON.stringify(seen)}`);
      if (i > 0) assert.equal(s.rounds - inStep[i - 1]!.rounds, 1, `one round per scrape: ${JSON.stringify(seen)}`);
    }
    // a scrape right after one: the round is not due, nothing is looked at again
    const again = await scrape();
    assert.equal(again.rounds, seen.at(-1)!.rounds, 'no round for a scrape right after one');

    wd.child.kill('SIGINT');
    assert.equal(await wd.done, 0);
    trainer.child.kill('SIGINT');
    await waitFor(
      'the trainer to stop',
      () => trainer.child.exitCode !== null || trainer.child.signalCode !== null,
      30_000,
    );
  },
);
