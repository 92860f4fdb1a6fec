// The bundle's pure parts: secrets out by name and by shape (and not the words that only look like
// one), the ustar writer read back by the system's own gunzip, the README's story in time order.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { gunzipSync } from 'node:zlib';
import { isSecretName, REDACTED, redactFile, redactText } from '../../src/bundle/redact.js';
import { safeName, tarGz, tarSize } from '../../src/bundle/tar.js';
import { storyEvents, storyReadme, type StoryInput } from '../../src/bundle/story.js';

/** secrets of every shape the bundle promises to remove (built at run time: no real-looking literal in the repo) */
const PLANTED = {
  ghp: 'ghp_' + 'A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8',
  sk: 'sk-' + 'proj-Zq8Xw7Vu6Ts5Rq4Po3Nm2Lk1Jh0Gf',
  hf: 'hf_' + 'QwErTyUiOpAsDfGhJkLzXcVbNm123456',
  slackTok: 'xoxb-' + '123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx',
  aws: 'AKIA' + 'IOSFODNN7EXAMPLQ',
  jwt: 'eyJhbGciOiJIUzI1NiJ9' + '.eyJzdWIiOiJvcGVyYXRvciJ9.' + 'c2lnbmF0dXJlLW9mLXRoZS1qd3Q',
  hook: 'https://hooks.slack.com/services/' + 'T000/B000/XXXXSECRETXXXX',
  userinfo: 'postgres-pass-' + 'Hunter2Hunter2',
  query: 'qtok-' + 'abcdef0123456789',
  byName: 'plain-looking-value-' + '0451',
};

test('secret-looking names are secrets; tokenizer, tokens_per_s and monkey are not', () => {
  for (const n of [
    'HF_TOKEN',
    'hfToken',
    'WANDB_API_KEY',
    'AWS_SECRET_ACCESS_KEY',
    'DB_PASSWORD',
    'AUTH_HEADER',
    'Authorization',
    'SLACK_WEBHOOK_URL',
    'key',
    'GITHUB_PAT',
  ])
    assert.ok(isSecretName(n), n);
  for (const n of ['tokenizer', 'tokens_per_s', 'monkey', 'CONFIG', 'NSA_VIBE_SRC', 'dataset', 'keyboard'])
    assert.ok(!isSecretName(n), n);
});

test('every planted shape and name is redacted from JSON, JSON lines, broken JSON and plain text; the rest is kept', () => {
  const p = PLANTED;
  const env = JSON.stringify({
    torch: '2.4.0',
    tokenizer: 'byte',
    env: { CONFIG: 'configs/m.yaml', MY_SERVICE_TOKEN: p.byName, NOTE: `see ${p.ghp}` },
    argv: [
      '--resume',
      'x.pt',
      `--hub=https://u:${p.userinfo}@db.example/x`,
      `https://api.example/v1?token=${p.query}&q=1`,
    ],
    hooks: [p.hook, p.sk, p.hf, p.slackTok, p.aws, p.jwt],
  });
  const text = [
    env,
    env.slice(0, -30), // a tail that is not JSON any more
    `export HF_TOKEN=${p.byName}`,
    `WANDB_API_KEY: '${p.byName}'`,
    `Authorization: Bearer ${p.jwt}`,
    `[train] dataset=synthetic tokenizer=byte ${p.ghp}`,
  ].join('\n');
  const hits = { n: 0 };
  for (const out of [redactFile(env, hits), redactFile(text, hits), redactText(text)]) {
    for (const [k, v] of Object.entries(p)) assert.ok(!out.includes(v), `${k} survived: ${out}`);
    assert.ok(out.includes(REDACTED));
    assert.match(out, /tokenizer/);
    assert.match(out, /configs\/m\.yaml/);
  }
  assert.ok(hits.n >= 10, String(hits.n));
  // nothing secret: the file comes back byte for byte (JSON lines are not re-serialised)
  const clean = '{"a": 1,  "tokenizer": "byte"}\n[train] step 5 loss=3.2\n';
  assert.equal(redactFile(clean), clean);
});

test('the ustar archive: names made safe, sizes padded, read back after gunzip', () => {
  assert.equal(safeName('../../etc/passwd'), 'etc/passwd');
  assert.equal(safeName('/abs/x y.txt'), 'abs/x_y.txt');
  assert.ok(safeName('a/'.repeat(80) + 'z').length <= 100);
  const gz = tarGz([
    { name: 'README.md', data: Buffer.from('hello\n'), mtimeMs: 1_700_000_000_000 },
    { name: 'dumps/rank1/s.txt', data: Buffer.alloc(700, 65), mtimeMs: 1_700_000_000_000 },
  ]);
  const tar = gunzipSync(gz);
  assert.equal(tar.length, tarSize([6, 700]));
  assert.equal(tar.subarray(0, 9).toString(), 'README.md');
  assert.equal(tar.subarray(257, 262).toString(), 'ustar');
  assert.equal(tar.subarray(100, 107).toString(), '0000600');
  // the checksum: the header's bytes with the checksum field as spaces
  const h = Buffer.from(tar.subarray(0, 512));
  const stored = parseInt(h.subarray(148, 155).toString(), 8);
  h.fill(32, 148, 156);
  assert.equal(
    stored,
    h.reduce((a, b) => a + b, 0),
  );
  assert.equal(tar.subarray(1024, 1041).toString(), 'dumps/rank1/s.txt');
});

test("the README's story is in time order: hang, dump, halt; the verdict and the cuts are said", () => {
  const t0 = Date.UTC(2026, 10, 26, 3, 0, 0);
  const s: StoryInput = {
    name: 'r',
    dir: '/runs/r',
    host: 'local',
    bundledAt: t0 + 60_000,
    nsaTopVersion: '0.1.0',
    report: null,
    state: { runState: 'STALLED', why: 'no step for 40 s' },
    lastAdvance: { ts: t0, step: 12 },
    actions: [
      {
        ts: t0 + 30_000,
        who: { user: 'op', tty: null, tmux: null, host: 'h', pid: 1 },
        action: 'halt',
        target: {},
        result: 'ok',
        detail: '.HALT written',
      },
      {
        ts: t0 + 20_000,
        who: { user: 'op', tty: null, tmux: null, host: 'h', pid: 1 },
        action: 'dump',
        target: { perRank: [{ rank: 1, pid: 9, status: 'dumped', file: '/runs/r/stackdump_1.txt' }] },
        result: 'ok',
        detail: '2 of 2 ranks dumped',
      },
    ] as StoryInput['actions'],
    dumps: [{ name: 'stackdump_1.txt', ts: t0 + 19_000, rank: 1, kind: 'signal', file: 'dumps/rank1/stackdump_1.txt' }],
    stopEvents: [],
    stalls: [],
    contents: [{ name: 'report.txt', bytes: 10 }],
    cut: ['`run/train.log`: tailed'],
    refused: ['`/runs/r/evil`: a symbolic link — not followed'],
    notes: [],
    redactions: 3,
  };
  const ev = storyEvents(s).map((e) => e.text.split(' ')[0]);
  assert.deepEqual(ev, ['HANG:', 'DUMP', 'ACTION', 'ACTION']);
  const md = storyReadme(s);
  const order = ['HANG', 'DUMP rank 1', 'ACTION dump', 'ACTION halt'].map((w) => md.indexOf(w));
  assert.deepEqual(
    [...order].sort((a, b) => a - b),
    order,
    md,
  );
  assert.ok(
    order.every((i) => i > 0),
    md,
  );
  assert.match(md, /State now: \*\*STALLED\*\*/);
  assert.match(md, /## Cut to stay under the size cap[\s\S]*run\/train\.log/);
  assert.match(md, /## Refused[\s\S]*symbolic link/);
});
