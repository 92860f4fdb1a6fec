// The watch loop's start (watch-script.ts) with the box's facts probed ahead (WATCH_FACTS, handed
// as $3 by a kept connection's warm session, keeper.ts): its hello says those facts and probes
// nothing; facts it does not recognise as WATCH_FACTS' line are ignored and probed as without
// them; posix mode stays posix; its scratch files never outlive it. Run by a real `sh`.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
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
  assert.match(facts, /^pre [01] [01] [01] (\d+|-) (\d+|-) [g-] (\d+|-) (\d+|-)$/);
  assert.equal(hello('auto', facts), probed, 'the same facts, not probed again');
  // facts this box does not have (no GNU find, uid 4242, 7 CPUs, a GPU): said as given
  assert.equal(hello('auto', 'pre 0 0 0 4242 7 g'), '0 0 4242 7 g');
  for (const odd of ['pre 1 1 1 4242 7 x', 'pre 2 1 1 0 2 -', 'pre 1 1 1 0; 2 -', 'pre 1 1', 'x 1 1 1 0 2 -', ''])
    assert.equal(hello('auto', odd), probed, `ignored: ${JSON.stringify(odd)}`);
  assert.equal(hello('posix', facts).split(' ')[0], '0', 'posix mode: no GNU find, whatever the facts');
});

test("a first process table reports the clock ticks and page size the facts said, else getconf's", () => {
  /** the T line of a process table read first (TK 1) by the loop started with `facts` */
  const tline = (facts?: string) => {
    const args = ['-c', WATCH_SCRIPT, 'nsa-top-watch', 'auto', 'f00d', ...(facts === undefined ? [] : [facts])];
    const r = spawnSync('sh', args, { input: `P 1 1 list - ${process.pid} |\n`, encoding: 'utf8', timeout: 20_000 });
    return r.stdout.split('\n').find((l) => l.startsWith('T '));
  };
  const own = `T ${spawnSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).stdout.trim()} ${spawnSync('getconf', ['PAGESIZE'], { encoding: 'utf8' }).stdout.trim()}`;
  assert.equal(tline(), own);
  assert.equal(tline('pre 1 1 1 0 2 - 123 8192'), 'T 123 8192', 'as the facts said: no getconf');
  for (const odd of ['pre 1 1 1 0 2 -', 'pre 1 1 1 0 2 - x 8192', 'pre 1 1 1 0 2 - 100 -', 'pre 1 1 1 0 2 x 123 8192'])
    assert.equal(tline(odd), own, `getconf's: ${odd}`);
});

test("the loop's scratch files in the box's TMPDIR go with it however it ends: end of input, SIGHUP, SIGTERM, a closed stdout", async () => {
  const ends: Record<string, (p: ChildProcessWithoutNullStreams) => void> = {
    'end of input': (p) => p.stdin.end(),
    SIGHUP: (p) => p.kill('SIGHUP'),
    SIGTERM: (p) => p.kill('SIGTERM'),
    // a frame written to a pipe nobody reads any more (a kept connection's client gone): SIGPIPE
    'closed stdout': (p) => {
      p.stdout.destroy();
      p.stdin.write('t 1\n');
    },
  };
  for (const [how, end] of Object.entries(ends)) {
    const dir = mkdtempSync(join(tmpdir(), 'nsa-watch-tmp-'));
    try {
      const p = spawn('sh', ['-c', WATCH_SCRIPT, 'nsa-top-watch', 'auto', 'f00d'], {
        env: { ...process.env, TMPDIR: dir },
      });
      const exited = new Promise((r) => p.once('exit', r));
      // its hello: the scratch file is made and the loop waits for commands
      await new Promise<void>((r) => p.stdout.on('data', (b: Buffer) => b.toString().includes('H ') && r()));
      assert.equal(readdirSync(dir).length, 1, `${how}: the loop's scratch file`);
      end(p);
      await exited;
      assert.deepEqual(readdirSync(dir), [], `${how}: nothing left`);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }
});
