// The watch loop's start (watch-script.ts) with the box's facts probed ahead (WATCH_FACTS, handed
// as $3 by a kept connection's warm session, keeper.ts): its hello says those facts and probes
// nothing; facts it does not recognise as WATCH_FACTS' line are ignored and probed as without
// them; posix mode stays posix. Run by a real `sh` with no commands on its stdin (it says hello
// and ends).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { WATCH_FACTS, WATCH_SCRIPT } from '../../src/remote/ssh/watch-script.js';

/** the hello's fields before the clock: G B UID CPUS GPU */
function hello(mode: string, facts?: string): string {
  const args = ['-c', WATCH_SCRIPT, 'nsa-top-watch', mode, 'f00d', ...(facts === undefined ? [] : [facts])];
  const r = spawnSync('sh', args, { input: '', encoding: 'utf8', timeout: 20_000 });
  const line = r.stdout.split('\n').find((l) => l.startsWith('H '));
  assert.ok(line, `a hello: ${r.stdout}`);
  return line.split(' ').slice(1, 6).join(' ');
}

test('facts probed ahead are the hello; anything else is probed afresh; posix stays posix', () => {
  const probed = hello('auto');
  const facts = spawnSync('sh', ['-c', WATCH_FACTS], { encoding: 'utf8' }).stdout.trim();
  assert.match(facts, /^pre [01] [01] [01] (\d+|-) (\d+|-) [g-]$/);
  assert.equal(hello('auto', facts), probed, 'the same facts, not probed again');
  // facts this box does not have (no GNU find, uid 4242, 7 CPUs, a GPU): said as given
  assert.equal(hello('auto', 'pre 0 0 0 4242 7 g'), '0 0 4242 7 g');
  for (const odd of ['pre 1 1 1 4242 7 x', 'pre 2 1 1 0 2 -', 'pre 1 1 1 0; 2 -', 'pre 1 1', 'x 1 1 1 0 2 -', ''])
    assert.equal(hello('auto', odd), probed, `ignored: ${JSON.stringify(odd)}`);
  assert.equal(hello('posix', facts).split(' ')[0], '0', 'posix mode: no GNU find, whatever the facts');
});
