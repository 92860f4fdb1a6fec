// The look-ahead of an SSH look (src/remote/ssh/look.ts): its script run by a real `sh` (as the
// watch loop runs it) on a tree of every kind of name, and its answer read back. What it says of each
// file is what the plain file scripts would (stat fields, missing, not a regular file), what it
// brings whole is the file's bytes, and whatever it cannot vouch for — too large, past the total
// cap, changed while read, an answer cut short, find not running — it leaves out, to be asked on
// its own.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import {
  mkdirSync,
  mkdtempSync,
  readFileSync,
  readdirSync,
  rmSync,
  statSync,
  symlinkSync,
  utimesSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  LOOK_FILE_MAX,
  LOOK_SCRIPT,
  LOOK_TOTAL_MAX,
  lookArgs,
  parseLookAnswer,
  type LookAnswer,
} from '../../src/remote/ssh/look.js';
import { parseFindEntry } from '../../src/remote/ssh/listing.js';
import type { LookAhead } from '../../src/remote/host.js';

const tmp = mkdtempSync(join(tmpdir(), 'nsa-look-'));
after(() => rmSync(tmp, { recursive: true, force: true }));

const NONCE = 'f00dfeed0123456789abcdef';
const gnu =
  spawnSync('sh', ['-c', "find / -maxdepth 0 -printf '' && printf 'x\\n' | xargs -d '\\n' true"]).status === 0;

function runLook(ahead: LookAhead): { out: Buffer; ans: LookAnswer } {
  const { args, files, dirs } = lookArgs(ahead, NONCE);
  const r = spawnSync('sh', ['-c', LOOK_SCRIPT, 'sh', ...args], {
    stdio: ['ignore', 'pipe', 'pipe'],
    maxBuffer: 1 << 26,
  });
  assert.equal(r.status, 0, r.stderr.toString());
  return { out: r.stdout, ans: parseLookAnswer(r.stdout, NONCE, files, dirs) };
}

/** the stat answer's fields, as SshFiles.stat reads them */
function fields(ans: LookAnswer, p: string): string[] | null {
  const r = ans.stats.get(p);
  assert.ok(r, `a stat answer for ${p}`);
  if (r.code === 3) return null;
  assert.equal(r.code, 0);
  return r.stdout.toString().trim().split(' ');
}

test('every kind of name: stats as the file scripts give them, small files whole, the rest left to be asked', (t) => {
  if (!gnu) return t.skip('no GNU find/xargs here: the look-ahead is not used on such a box');
  const d = join(tmp, 'tree');
  mkdirSync(join(d, 'sub'), { recursive: true });
  writeFileSync(join(d, 'small.json'), '{"a": 1}\n');
  writeFileSync(join(d, 'empty'), '');
  writeFileSync(join(d, 'name with  spaces '), 'spaced\n');
  writeFileSync(join(d, 'bytes.bin'), Buffer.from([0, 10, 13, 255, 64, 64, 10]));
  writeFileSync(join(d, 'big.log'), Buffer.alloc(LOOK_FILE_MAX + 1, 120));
  symlinkSync('small.json', join(d, 'link'));
  symlinkSync('nowhere', join(d, 'dangling'));
  spawnSync('mkfifo', [join(d, 'fifo')]);
  const names = [
    'small.json',
    'empty',
    'name with  spaces ',
    'bytes.bin',
    'big.log',
    'link',
    'dangling',
    'fifo',
    'sub',
  ];
  const files = [...names.map((n) => join(d, n)), join(d, 'missing'), join(d, 'sub', 'missing', 'deeper')];
  const { ans } = runLook({ files, dirs: [d, join(d, 'nodir')], contents: true });

  for (const n of ['small.json', 'empty', 'name with  spaces ', 'bytes.bin', 'big.log', 'link', 'sub']) {
    const p = join(d, n);
    const st = statSync(p);
    const f = fields(ans, p)!;
    // INO TYPE SIZE MTIME MODE UID NLINK DEV (a link is followed)
    assert.equal(Number(f[0]), st.ino, n);
    assert.equal(f[1], st.isDirectory() ? 'd' : 'f', n);
    if (!st.isDirectory()) assert.equal(Number(f[2]), st.size, n);
    assert.equal(Math.round(Number(f[3]) * 1000), Math.round(st.mtimeMs), n);
    assert.equal(parseInt(f[4]!, 8), st.mode & 0o7777, n);
    assert.equal(Number(f[5]), st.uid, n);
    assert.equal(Number(f[6]), st.nlink, n);
  }
  // a dangling link is not there for `[ -e ]`; nor is a name that does not exist
  for (const n of ['dangling', 'missing']) {
    assert.equal(fields(ans, join(d, n)), null, n);
    assert.deepEqual(ans.whole.get(join(d, n)), { kind: 'missing' }, n);
  }
  assert.equal(fields(ans, join(d, 'sub', 'missing', 'deeper')), null);
  // a FIFO and a dir are there but never read
  assert.equal(fields(ans, join(d, 'fifo'))![1], 'p');
  assert.deepEqual(ans.whole.get(join(d, 'fifo')), { kind: 'not-regular' });
  assert.deepEqual(ans.whole.get(join(d, 'sub')), { kind: 'not-regular' });
  // small files whole, byte for byte (NUL, CR, newlines kept); the large one is left to its reader
  for (const n of ['small.json', 'empty', 'name with  spaces ', 'bytes.bin', 'link']) {
    const w = ans.whole.get(join(d, n));
    assert.equal(w?.kind, 'data', n);
    assert.deepEqual(w.kind === 'data' && w.data, readFileSync(join(d, n)), n);
  }
  assert.equal(ans.whole.get(join(d, 'big.log')), undefined);
  // the listing is find's, as SshFiles.list reads it; a dir that is not there is left to list()
  const listed = ans.lists
    .get(d)!
    .stdout.toString()
    .split('\n')
    .map(parseFindEntry)
    .filter((e) => e !== null)
    .map((e) => e.name)
    .sort();
  assert.deepEqual(listed, readdirSync(d).sort());
  assert.equal(ans.lists.has(join(d, 'nodir')), false);
});

test('stats only (a look again): no bytes; the total cap keeps a look-ahead small', (t) => {
  if (!gnu) return t.skip('no GNU find/xargs here');
  const d = join(tmp, 'cap');
  mkdirSync(d, { recursive: true });
  // five files of a bit under a quarter of the total each: four fit, the fifth is asked on its own
  const size = Math.floor(LOOK_TOTAL_MAX / 4.1);
  assert.ok(size <= LOOK_FILE_MAX);
  const files = [1, 2, 3, 4, 5].map((i) => join(d, `f${i}`));
  files.forEach((p, i) => writeFileSync(p, Buffer.alloc(size, 97 + i)));
  const statsOnly = runLook({ files });
  assert.equal(statsOnly.out.length < 2000, true, `stats only: ${statsOnly.out.length} bytes`);
  assert.equal([...statsOnly.ans.whole.values()].length, 0);
  assert.equal(fields(statsOnly.ans, files[4]!)![2], String(size));
  const withBytes = runLook({ files, contents: true });
  assert.ok(4 * size <= LOOK_TOTAL_MAX && 5 * size > LOOK_TOTAL_MAX);
  for (const p of files.slice(0, 4))
    assert.deepEqual((withBytes.ans.whole.get(p) as { data: Buffer }).data, readFileSync(p));
  assert.equal(withBytes.ans.whole.get(files[4]!), undefined);
});

test('an answer it cannot vouch for answers nothing: a stat moved while read, a file cat could not read, cut short, find failed, another nonce', (t) => {
  if (!gnu) return t.skip('no GNU find/xargs here');
  const d = join(tmp, 'vouch');
  mkdirSync(d, { recursive: true });
  const [a, b, c] = ['a', 'b', 'c'].map((n) => join(d, n)) as [string, string, string];
  writeFileSync(a, 'aaa\n');
  writeFileSync(b, 'bbbb\n');
  writeFileSync(c, 'cc\n');
  const ahead = { files: [a, b, c], dirs: [d], contents: true };
  const { out } = runLook(ahead);
  const { files, dirs } = lookArgs(ahead, NONCE);
  const whole = (x: LookAnswer) => [...x.whole.entries()].filter(([, w]) => w.kind === 'data').map(([p]) => p);
  assert.deepEqual(whole(parseLookAnswer(out, NONCE, files, dirs)), [a, b, c]);

  // b (being written: read to its stat'ed size) moved between its stat and the check after the
  // bytes: replaced or shrunk, b is not taken, and costs no other file; grown, its first bytes are
  // the ones stat'ed, and it is taken
  const text = out.toString('latin1');
  const vAt = text.indexOf(`@@${NONCE} V 0@@\n`);
  const bLine = text
    .slice(vAt)
    .split('\n')
    .find((l) => l.endsWith(` ${b}`))!;
  const after = (re: string) =>
    parseLookAnswer(
      Buffer.from(text.slice(0, vAt) + text.slice(vAt).replace(bLine, bLine.replace(/^(\d+) (\d+)/, re)), 'latin1'),
      NONCE,
      files,
      dirs,
    );
  assert.deepEqual(whole(after('7$1 $2')), [a, c], 'replaced');
  assert.deepEqual(whole(after('$1 1')), [a, c], 'shrunk');
  const grown = after('$1 99');
  assert.deepEqual(whole(grown), [a, b, c], 'grown');
  const gb = grown.whole.get(b);
  assert.ok(gb?.kind === 'data');
  assert.equal(gb.data.toString(), 'bbbb\n');
  assert.equal(gb.stat.size, 5, 'the stat the bytes go with');

  // a file cat could not read (it came short: the files after it shifted): nothing from the block
  const catFailed = text.replace(`@@${NONCE} V 0@@`, `@@${NONCE} V 123@@`);
  assert.notEqual(catFailed, text);
  assert.deepEqual(whole(parseLookAnswer(Buffer.from(catFailed, 'latin1'), NONCE, files, dirs)), []);

  // cut short anywhere: never an answer that was not all there (stats only up to where they are whole)
  for (let cut = 0; cut < out.length; cut += 7) {
    const part = parseLookAnswer(out.subarray(0, cut), NONCE, files, dirs);
    for (const [p, w] of part.whole) if (w.kind === 'data') assert.deepEqual(w.data, readFileSync(p), `cut ${cut}`);
    if (cut < text.indexOf(`@@${NONCE} C `)) assert.equal(part.stats.size, 0, `cut ${cut}: no stat from a part`);
  }

  // find failed (no `/` stat'ed): nothing is missing on its word
  const noRoot = text.replace(/^r \d+ d .* \/\n/m, '');
  assert.notEqual(noRoot, text);
  const broken = parseLookAnswer(Buffer.from(noRoot, 'latin1'), NONCE, files, dirs);
  assert.equal(broken.stats.size, 0);
  assert.equal(broken.whole.size, 0);

  // markers of another nonce are not this answer's
  assert.equal(parseLookAnswer(out, 'another', files, dirs).stats.size, 0);
});

test('only absolute one-line paths travel: the others are asked on their own', () => {
  const { args, files, dirs } = lookArgs(
    { files: ['/a', 'rel', '/b\nc', '/a', '-rf'], dirs: ['/d', 'x/y', '/e\r'], contents: true },
    NONCE,
  );
  assert.deepEqual(files, ['/a']);
  assert.deepEqual(dirs, ['/d']);
  // nonce, per-file cap, total cap, dir count, read dir count, the dirs, `/` (find's proof it ran), the files
  assert.deepEqual(args, [NONCE, String(LOOK_FILE_MAX), String(LOOK_TOTAL_MAX), '1', '0', '/d', '/', '/a']);
  // read dirs go first (the script reads the first ones), and only with contents
  const rd = lookArgs({ files: ['/a'], dirs: ['/d', '/r'], readDirs: ['/r', 'rel'], contents: true }, NONCE);
  assert.deepEqual(rd.args.slice(3), ['2', '1', '/r', '/d', '/', '/a']);
  assert.deepEqual(rd.readDirs, ['/r']);
  assert.deepEqual(lookArgs({ dirs: ['/d'], readDirs: ['/r'] }, NONCE).args.slice(3, 5), ['1', '0']);
  assert.equal(lookArgs({ files: ['/a'] }, NONCE).args[2], '0', 'stats only: no bytes');
});

test('read dirs: every small regular file of the dir whole and its listing, a path named too once, a name with a line break left out', (t) => {
  if (!gnu) return t.skip('no GNU find/xargs here');
  const d = join(tmp, 'readdir');
  mkdirSync(join(d, 'tb'), { recursive: true });
  writeFileSync(join(d, 'config.yaml'), 'a: 1\n');
  writeFileSync(join(d, 'training.csv'), 'step,loss\n1,2.5\n');
  writeFileSync(join(d, 'tb', 'events.out'), Buffer.from([0, 1, 2, 10, 255]));
  writeFileSync(join(d, 'big.log'), Buffer.alloc(LOOK_FILE_MAX + 1, 120));
  writeFileSync(join(d, 'line\nbreak'), 'x\n');
  const named = join(d, 'config.yaml');
  const ahead = { files: [named], dirs: [d], readDirs: [d, join(d, 'tb'), join(d, 'nodir')], contents: true };
  const { ans, out } = runLook(ahead);
  for (const p of [named, join(d, 'training.csv'), join(d, 'tb', 'events.out')]) {
    const w = ans.whole.get(p);
    assert.equal(w?.kind, 'data', p);
    assert.deepEqual(w.kind === 'data' && w.data, readFileSync(p), p);
    // with the stat its bytes go with
    const st = statSync(p);
    assert.equal(w.kind === 'data' && w.stat.size, st.size, p);
    assert.equal(w.kind === 'data' && w.stat.ino, st.ino, p);
  }
  // a path named and in a read dir is read once: the block is the sum of the distinct files
  const tot = Number(/@@f00dfeed0123456789abcdef C (\d+)@@/.exec(out.toString('latin1'))![1]);
  assert.equal(tot, 5 + 16 + 5);
  assert.equal(ans.whole.get(join(d, 'big.log')), undefined, 'over the per-file cap: asked on its own');
  assert.equal(ans.whole.get(join(d, 'line\nbreak')), undefined, 'a name with a line break is not read');
  // both read dirs listed (the listing as SshFiles.list reads it); a missing one said so
  const names = (p: string) =>
    ans.lists
      .get(p)!
      .stdout.toString()
      .split('\n')
      .map(parseFindEntry)
      .filter((e) => e !== null)
      .map((e) => e.name)
      .sort();
  assert.deepEqual(names(join(d, 'tb')), ['events.out']);
  assert.ok(names(d).includes('training.csv'));
  assert.ok(ans.unlisted.has(join(d, 'nodir')));
  assert.ok(!ans.unlisted.has(d));
  // stats only (a look again): the dirs are listed but nothing of them is read
  const again = runLook({ ...ahead, contents: false });
  assert.equal(again.ans.whole.size, 0);
  assert.equal(again.ans.stats.has(join(d, 'training.csv')), false);
});

test('the files being written come first, each read to its size: one that grew while read is taken; a settled one that moved costs only the settled files after it', (t) => {
  if (!gnu) return t.skip('no GNU find/xargs here');
  const d = join(tmp, 'hot');
  mkdirSync(d, { recursive: true });
  const [hot, old, older] = [join(d, 'training.csv'), join(d, 'config.yaml'), join(d, 'env.json')];
  writeFileSync(hot, 'step\n1\n');
  writeFileSync(old, 'a: 1\n');
  writeFileSync(older, '{}\n');
  for (const p of [old, older]) utimesSync(p, new Date(Date.now() - 60_000), new Date(Date.now() - 60_000));
  const ahead = { files: [old, hot, older], contents: true };
  const { out } = runLook(ahead);
  const { files, dirs } = lookArgs(ahead, NONCE);
  const whole = (x: LookAnswer) =>
    [...x.whole.entries()]
      .filter(([, w]) => w.kind === 'data')
      .map(([p]) => p)
      .sort();
  assert.deepEqual(whole(parseLookAnswer(out, NONCE, files, dirs)), [hot, old, older].sort());
  const text = out.toString('latin1');
  // the file being written's bytes come first, though it was named second; then the settled ones
  const cEnd = text.indexOf('@@\n', text.indexOf(`@@${NONCE} C `)) + 3;
  assert.equal(text.slice(cEnd, cEnd + 12), 'step\n1\na: 1\n');
  const vAt = text.indexOf(`@@${NONCE} V 0@@\n`);
  const lineOf = (p: string) =>
    text
      .slice(vAt)
      .split('\n')
      .find((l) => l.endsWith(` ${p}`))!;
  const moved = (p: string, re: string) =>
    whole(
      parseLookAnswer(
        Buffer.from(
          text.slice(0, vAt) + text.slice(vAt).replace(lineOf(p), lineOf(p).replace(/^(\d+) (\d+)/, re)),
          'latin1',
        ),
        NONCE,
        files,
        dirs,
      ),
    );
  // the hot file grew while read (a step's lines appended): taken, its first bytes as stat'ed
  assert.deepEqual(moved(hot, '$1 99'), [hot, old, older].sort());
  // …replaced: not taken; the settled ones after it are
  assert.deepEqual(moved(hot, '7$1 $2'), [old, older].sort());
  // the first settled file moved (cat read on past its size): neither it nor the settled one after
  // it, but the file being written, read before them, is still taken
  assert.deepEqual(moved(old, '$1 99'), [hot]);
  // the last settled file moved: only it
  assert.deepEqual(moved(older, '$1 99'), [hot, old].sort());
});

test("a read dir's brought file answers the look's reads of it too (status's resume pick reads the heartbeat the poll has)", async () => {
  const { LookMemo } = await import('../../src/remote/ssh/look.js');
  let gen = 1;
  const memo = new LookMemo(() => gen);
  const hb = '/run/heartbeat_rank0.jsonl';
  const data = Buffer.from('{"step": 1}\n');
  const stat = { size: data.length, mtimeMs: 1, ino: 7 } as never;
  const ans: LookAnswer = {
    stats: new Map(),
    lists: new Map(),
    unlisted: new Set(),
    whole: new Map([[hb, { kind: 'data', data, stat }]]),
  };
  memo.seed({ files: [], dirs: [], readDirs: ['/run'] }, Promise.resolve(ans));
  assert.deepEqual(await memo.wholeFile(hb), { kind: 'data', data, stat });
  assert.equal(await memo.wholeFile('/run/big.csv'), null, 'not brought: asked on its own');
  gen = 2; // a write since: the look's copies are not answers any more
  assert.equal(await memo.wholeFile(hb), null);
});
