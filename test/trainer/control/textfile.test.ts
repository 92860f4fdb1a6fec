// The metrics textfile writer (writeTextfileAtomic in src/trainer/control/ownfiles.ts) on real files,
// both ways it writes: in place on a local file system (the watchdog's every round) and through the
// thread pool (anywhere else, and whenever the name is no longer the file this writer put there).
// Each round replaces the file whole (a new inode at the name, no temporary left); a file nsa-top
// did not write, a hard link, a link or a directory at the name is refused and left as it is; a
// textfile another nsa-top wrote is proven by its mark and replaced; read-only writes nothing.
import assert from 'node:assert/strict';
import {
  linkSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { onLocalFs } from '../../../src/remote/local/host.js';
import {
  OwnWriteError,
  ReadOnlyError,
  TEXTFILE_MARK,
  writeTextfileAtomic,
} from '../../../src/trainer/control/ownfiles.js';

const root = mkdtempSync(join(tmpdir(), 'nsa-textfile-'));
after(() => rmSync(root, { recursive: true, force: true }));
const body = (n: number) => `${TEXTFILE_MARK}\nnsatop_train_step{run="r"} ${n}\n`;

for (const io of ['sync', 'async'] as const) {
  test(`${io}: each round replaces the file whole; what nsa-top did not write is refused and left as it is`, async () => {
    const dir = join(root, io);
    mkdirSync(dir);
    const path = join(dir, 'nsatop.prom');
    let ours = await writeTextfileAtomic(path, body(1), { io, ours: null });
    assert.equal(readFileSync(path, 'utf8'), body(1));
    assert.equal(lstatSync(path).ino, ours, 'the inode it returns is the one at the name');
    const again = await writeTextfileAtomic(path, body(2), { io, ours });
    assert.equal(readFileSync(path, 'utf8'), body(2));
    assert.notEqual(again, ours, 'replaced by a rename, never rewritten in place (a reader never sees half)');
    ours = again;
    assert.deepEqual(readdirSync(dir), ['nsatop.prom'], 'no temporary file left');

    // another nsa-top's textfile (its mark, another inode): proven again, and replaced
    rmSync(path);
    writeFileSync(path, body(7));
    ours = await writeTextfileAtomic(path, body(3), { io, ours });
    assert.equal(readFileSync(path, 'utf8'), body(3));

    // what nsa-top did not write: refused, whatever `ours` says
    const refusals: [string, () => void, RegExp][] = [
      ['a foreign file', () => writeFileSync(path, 'node_other_metric 1\n'), /did not write it: refused/],
      [
        'a hard link',
        () => (writeFileSync(join(dir, 'other'), body(9)), linkSync(join(dir, 'other'), path)),
        /more than one link/,
      ],
      ['a symbolic link', () => symlinkSync(join(dir, 'elsewhere.prom'), path), /a link: refused/],
      ['a directory', () => mkdirSync(path), /not a regular file: refused/],
    ];
    for (const [what, plant, why] of refusals) {
      rmSync(path, { recursive: true, force: true });
      rmSync(join(dir, 'other'), { force: true });
      ours = await writeTextfileAtomic(path, body(4), { io, ours: null });
      // our file kept alive under another name: what is planted cannot get its inode
      linkSync(path, join(dir, 'kept'));
      rmSync(path);
      plant();
      const before = lstatSync(path);
      await assert.rejects(
        writeTextfileAtomic(path, body(5), { io, ours }),
        (e: Error) => e instanceof OwnWriteError && why.test(e.message),
        what,
      );
      assert.equal(lstatSync(path).ino, before.ino, `${what}: left as it was`);
      assert.ok(!readdirSync(dir).some((n) => n.endsWith('.tmp')), `${what}: no temporary file left`);
      rmSync(join(dir, 'kept'));
    }
    assert.ok(!readdirSync(dir).includes('elsewhere.prom'), 'nothing written through the link');

    rmSync(path, { recursive: true, force: true });
    await assert.rejects(writeTextfileAtomic(path, body(5), { io, readOnly: true }), ReadOnlyError);
    await assert.rejects(writeTextfileAtomic(path, 'no mark\n', { io }), /without the nsa-top mark/);
    assert.deepEqual(readdirSync(dir), [], 'read-only and a markless text: nothing written');
  });
}

test('the temp dir is on a local file system here, so the watchdog writes its textfile in place', async () => {
  // (the sync case above forces the way; this says which one a watchdog writing here takes)
  assert.equal(await onLocalFs(root), true, `${root}: not a file system onLocalFs knows`);
  assert.equal(await onLocalFs(join(root, 'missing')), null);
});
