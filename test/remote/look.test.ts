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
  const r = spawnSync('sh', ['-c', LOOK_SCRIPT, 'sh', ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
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
  // five files of 250 KiB: four fit in the 1 MiB total, the fifth is asked on its own
  const files = [1, 2, 3, 4, 5].map((i) => join(d, `f${i}`));
  files.forEach((p, i) => writeFileSync(p, Buffer.alloc(250 * 1024, 97 + i)));
  const statsOnly = runLook({ files });
  assert.equal(statsOnly.out.length < 2000, true, `stats only: ${statsOnly.out.length} bytes`);
  assert.equal([...statsOnly.ans.whole.values()].length, 0);
  assert.equal(fields(statsOnly.ans, files[4]!)![2], String(250 * 1024));
  const withBytes = runLook({ files, contents: true });
  assert.ok(4 * 250 * 1024 <= LOOK_TOTAL_MAX && 5 * 250 * 1024 > LOOK_TOTAL_MAX);
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

  // b's stat moved between its stat and the check after the bytes: b and what follows it are not taken
  const text = out.toString('latin1');
  const vAt = text.indexOf(`@@${NONCE} V 0@@\n`);
  const bLine = text
    .slice(vAt)
    .split('\n')
    .find((l) => l.endsWith(` ${b}`))!;
  const moved = text.slice(0, vAt) + text.slice(vAt).replace(bLine, bLine.replace(/^(\d+) (\d+)/, '$1 99'));
  assert.deepEqual(whole(parseLookAnswer(Buffer.from(moved, 'latin1'), NONCE, files, dirs)), [a]);

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
  // nonce, per-file cap, total cap, dir count, the dirs, `/` (find's proof it ran), the files
  assert.deepEqual(args, [NONCE, String(LOOK_FILE_MAX), String(LOOK_TOTAL_MAX), '1', '/d', '/', '/a']);
  assert.equal(lookArgs({ files: ['/a'] }, NONCE).args[2], '0', 'stats only: no bytes');
});
