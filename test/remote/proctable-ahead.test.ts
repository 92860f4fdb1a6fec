// The process table a look asks ahead (LookAhead.procs → SshHost.lookAhead → LookMemo.procTable):
// the 'run' table read before the run's heartbeats name pids serves the look's first read of the
// table only when it is the table that read would get (src/remote/procs.ts tableCovers) — else that
// read goes to the box as before. Pure: tables are PROC_SCRIPT's output as text.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parseProcScriptOutput, tableCovers } from '../../src/remote/procs.js';
import { LookMemo } from '../../src/remote/ssh/look.js';
import type { ProcTableRequest } from '../../src/remote/host.js';

const stat = (pid: number, comm: string) =>
  `${pid} (${comm}) S 1 ${pid} ${pid} 0 -1 4194560 100 0 0 0 5 2 0 0 20 0 1 0 12345 1000000 200 18446744073709551615`;
/** PROC_SCRIPT's answer: a trainer (python, pid 40) read closely, its launcher (bash, pid 39) not */
const TEXT = [
  'R /runs/a',
  'U 1000.5',
  'T 100 4096',
  `S ${stat(40, 'python3')}`,
  'W 0',
  `S ${stat(39, 'bash')}`,
  'W do_wait',
  'D 40 /runs/a',
  '@@NSA-TOP-HEAD@@',
  '==> 39/cmdline <==',
  'bash\0run.sh\0',
  '==> 40/cmdline <==',
  'python3\0train.py\0',
  '==> 40/environ <==',
  'RANK=0\0',
].join('\n');
const table = parseProcScriptOutput(TEXT);
const ahead: ProcTableRequest = { runDir: '/runs/a', sysconf: true, mode: 'run', known: [], pids: [] };
const req = (o: Partial<ProcTableRequest>): ProcTableRequest => ({ ...ahead, pids: [40], ...o });

test('the table asked ahead answers a first read naming a trainer it read closely, and nothing else', () => {
  assert.equal(tableCovers(ahead, table, req({})), true, 'a heartbeat pid the table read closely');
  assert.equal(tableCovers(ahead, table, req({ pids: [] })), true, 'no pid named');
  assert.equal(tableCovers(ahead, table, req({ pids: [39] })), false, 'not trainer-looking: read only when named');
  assert.equal(tableCovers(ahead, table, req({ pids: [41] })), false, 'not in the table (gone, or new since)');
  assert.equal(tableCovers(ahead, table, req({ runDir: '/runs/b' })), false, 'another run dir');
  assert.equal(tableCovers(ahead, table, req({ sysconf: false })), false, 'not first contact');
  assert.equal(tableCovers(ahead, table, req({ mode: 'all' })), false, 'another mode');
  assert.equal(tableCovers(ahead, table, req({ known: [40], pids: [] })), false, 'other pids known');
  assert.equal(tableCovers({ ...ahead, pids: [40] }, table, req({})), false, 'the ahead read named pids');
  const failed = parseProcScriptOutput('X no /proc on this host\n');
  assert.equal(tableCovers(ahead, failed, req({ pids: [] })), false, 'a table that could not be read');
  // the reader killed on its way (the session of a dropped link): the stat lines it did not reach are
  // not processes that are gone — the answer is an error, and the node's last table stands
  const cut = parseProcScriptOutput(TEXT.slice(0, TEXT.indexOf('D 40')));
  assert.match(cut.error ?? '', /cut short/);
  assert.equal(tableCovers(ahead, cut, req({ pids: [] })), false, 'a table cut short');
  assert.equal(table.error, undefined, 'a whole answer is no error');
});

test("the look's memo gives the table once, to a read it covers, and not after a write", async () => {
  let gen = 1;
  const memo = new LookMemo(() => gen);
  assert.equal(await memo.procTable(req({})), null, 'nothing asked ahead');
  memo.seedProcs(ahead, Promise.resolve(table));
  assert.equal(await memo.procTable(req({ pids: [39] })), null, 'not covered: read on its own');
  assert.equal(await memo.procTable(req({})), null, 'asked once: a second read goes to the box');
  memo.seedProcs(ahead, Promise.resolve(table));
  assert.equal(await memo.procTable(req({})), table);
  memo.seedProcs(ahead, Promise.resolve(table));
  gen++; // a write, signal or non-quick exec since it was asked
  assert.equal(await memo.procTable(req({})), null);
  memo.seedProcs(ahead, Promise.reject(new Error('the loop went away')));
  assert.equal(await memo.procTable(req({})), null, 'a failed ahead read is no answer');
  assert.deepEqual(memo.unasked({ procs: { runDir: '/runs/a' } }).procs, { runDir: '/runs/a' });
  memo.seedProcs(ahead, Promise.resolve(table));
  assert.equal(memo.unasked({ procs: { runDir: '/runs/a' } }).procs, undefined, 'one table ahead per look');
  assert.deepEqual(
    memo.unasked({ procs: { runDir: '/runs/a/out' } }).procs,
    { runDir: '/runs/a/out' },
    "the run found elsewhere (a launcher dir's out_dir): that one's table",
  );
});
