// An unreadable tb/ (mode 000) is named, not skipped in silence (issue 24 item 10): `status` warns
// on stderr and in its alerts, `report` carries the warning. Run without the file-permission
// capabilities (root ignores mode 000); skipped, saying why, where that cannot be done.
import assert from 'node:assert/strict';
import { chmodSync, cpSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { spawnWithoutDac, withoutDacSkip } from '../../helpers/unprivileged.js';

const bin = fileURLToPath(new URL('../../../bin/nsa-top.js', import.meta.url));
const FIXTURE = fileURLToPath(new URL('../../fixtures/nsa-vibe/single/', import.meta.url));
const tmp = mkdtempSync(join(tmpdir(), 'nsa-tb-unreadable-'));
after(() => rmSync(tmp, { recursive: true, force: true }));

test(
  'a tb/ nsa-top cannot list is named by status (stderr, alerts, parse) and by report',
  { skip: withoutDacSkip },
  () => {
    const d = join(tmp, 'run');
    cpSync(FIXTURE, d, { recursive: true });
    mkdirSync(join(d, 'tb'));
    writeFileSync(join(d, 'tb', 'events.out.tfevents.1.host.1.0'), '');
    const as = (args: string[]) =>
      spawnWithoutDac([process.execPath, bin, ...args], { encoding: 'utf8', timeout: 60_000 });
    // control: readable, nothing said
    const ok = as(['status', d]);
    assert.doesNotMatch(ok.stdout + ok.stderr, /tb\/.*permission denied/, ok.stdout + ok.stderr);
    chmodSync(join(d, 'tb'), 0o000);
    try {
      const s = as(['status', d]);
      assert.match(s.stderr, /warning: cannot read tb\/ in .* \(permission denied\)/, s.stderr);
      assert.match(s.stdout, /cannot read 1 artifact: tb\/ \(permission denied\)/);
      assert.match(
        s.stdout,
        /tb\/: 1 bad of 1 — last: EACCES: permission denied.* its TensorBoard events are not read/,
      );
      const r = as(['report', d]);
      assert.match(r.stdout, /WARNING +cannot read 1 artifact: tb\/ \(permission denied\)/, r.stdout + r.stderr);
    } finally {
      chmodSync(join(d, 'tb'), 0o755);
    }
  },
);
