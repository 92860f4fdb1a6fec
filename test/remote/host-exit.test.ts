// Bad --host input is bad input (issue 24 item 10): an unresolvable host, a bad port, a port that is
// not a number, or a missing -i key file exit 2 with one line in every command that takes --host —
// never 1, which `report` means as NO-GO. The built binary, as a user runs it; HOME is a temp dir.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { cpSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { fileURLToPath } from 'node:url';

const bin = fileURLToPath(new URL('../../bin/nsa-top.js', import.meta.url));
const FIXTURE = fileURLToPath(new URL('../fixtures/nsa-vibe/single/', import.meta.url));
const tmp = mkdtempSync(join(tmpdir(), 'nsa-host-exit-'));
after(() => rmSync(tmp, { recursive: true, force: true }));
const runDir = join(tmp, 'run');
cpSync(FIXTURE, runDir, { recursive: true });
const key = join(tmp, 'id_ed25519');
const kg = spawnSync('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-f', key], { encoding: 'utf8' });

function nsaTop(args: string[]) {
  return spawnSync(process.execPath, [bin, ...args], {
    encoding: 'utf8',
    timeout: 60_000,
    env: { ...process.env, HOME: tmp, SSH_AUTH_SOCK: '' },
  });
}

const BAD: [string, string[], RegExp][] = [
  ['a port out of range', ['--host', 'me@box:99999', '-i', key], /invalid port 99999/],
  ['a port that is not a number', ['--host', 'me@box:ssh', '-i', key], /port must be a number/],
  ['a missing -i key file', ['--host', 'me@127.0.0.1', '-i', join(tmp, 'no-such-key')], /identity file not found/],
  [
    'an unresolvable host',
    ['--host', 'me@nsa-top-no-such-host.invalid', '-i', key],
    /cannot reach|ENOTFOUND|EAI_AGAIN/,
  ],
];

// every command that takes --host (preflight takes no run dir)
const COMMANDS: [string, string[]][] = [
  ['report', ['report', runDir]],
  ['status', ['status', runDir]],
  ['watchdog', ['watchdog', runDir, '--once']],
  ['preflight', ['preflight']],
  ['the cockpit', [runDir]],
];

test('bad --host or a missing -i key: exit 2 and one line, in report, status, watchdog, preflight and the cockpit', (t) => {
  if (kg.status !== 0) {
    t.skip(`ssh-keygen could not make a key: ${kg.stderr}`);
    return;
  }
  const report = nsaTop(['report', runDir]);
  assert.ok(
    report.status === 0 || report.status === 1,
    `the fixture grades locally (exit ${report.status}): ${report.stderr}`,
  );
  for (const [cmd, base] of COMMANDS) {
    // the cockpit and report get every case; the others the two that used to exit 1
    const cases =
      cmd === 'report' || cmd === 'the cockpit' ? BAD : BAD.filter(([, , why]) => !/cannot reach/.test(why.source));
    for (const [what, extra, why] of cases) {
      const r = nsaTop([...base, ...extra]);
      assert.equal(r.status, 2, `${cmd} with ${what}: exit ${r.status}: ${r.stderr}`);
      assert.equal(r.stdout, '', `${cmd} with ${what}: nothing on stdout`);
      const lines = r.stderr.split('\n').filter(Boolean);
      assert.equal(lines.length, 1, `${cmd} with ${what}: one line: ${r.stderr}`);
      assert.match(lines[0]!, /^nsa-top: /);
      assert.match(lines[0]!, why, `${cmd} with ${what}`);
    }
  }
});
