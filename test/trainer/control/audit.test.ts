// The one audited path (src/trainer/control/audit.ts), enforced two ways:
//  - by the source: nothing in src/ outside audit.ts builds an action record or writes the action
//    log (a TypeScript walk over every file, so a hand-built record cannot slip in unnoticed);
//  - by behaviour: audited() refuses read-only before the effect, records a throwing effect as
//    failed, refuses when the log is a link — but takes a fail-open (safety) action and says
//    NOT logged; and read-only is refused, and explained, in the same
//    words by the cockpit, `nsa-top halt`, `watchdog --halt`, `stop` and `relaunch`.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import {
  appendFileSync,
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  symlinkSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, relative } from 'node:path';
import { after, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import { LocalHost } from '../../../src/remote/local/host.js';
import { currentActor, readActions } from '../../../src/trainer/control/actions.js';
import { actionsInFlight, audited, READ_ONLY_REFUSAL, settleActions } from '../../../src/trainer/control/audit.js';
import { createActions } from '../../../src/cockpit/actions.js';
import { relaunch, stopRun } from '../../../src/trainer/launch/launch.js';
import { tempDir } from './helpers.js';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..', '..');
const SRC = join(ROOT, 'src');
const BIN = join(ROOT, 'bin', 'nsa-top.js');
const AUDIT = join('trainer', 'control', 'audit.ts');
const host = new LocalHost();
const tmp = mkdtempSync(join(tmpdir(), 'nsa-audit-'));
after(() => rmSync(tmp, { recursive: true, force: true }));

// ------------------------------------------------------------------------------ the source rule

const RECORD_KEYS = ['who', 'action', 'result'];
const WRITERS = /append|write|create/i;

/** Where `text` builds an action record by hand or writes the action log: "line: what". */
function handBuilt(file: string, text: string): string[] {
  const sf = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true, ts.ScriptKind.TSX);
  const out: string[] = [];
  const at = (n: ts.Node) => sf.getLineAndCharacterOfPosition(n.getStart(sf)).line + 1;
  const visit = (n: ts.Node): void => {
    if (ts.isObjectLiteralExpression(n)) {
      const keys = new Set(n.properties.map((p) => (p.name && ts.isIdentifier(p.name) ? p.name.text : '')));
      if (RECORD_KEYS.every((k) => keys.has(k))) out.push(`${at(n)}: an action record literal`);
    }
    if (ts.isIdentifier(n) && n.text === 'recordAction') out.push(`${at(n)}: recordAction`);
    if (ts.isCallExpression(n) && WRITERS.test(n.expression.getText(sf))) {
      const args = n.arguments.map((a) => a.getText(sf)).join(',');
      if (/ACTIONS_FILE|actions\.jsonl/.test(args)) out.push(`${at(n)}: writes the action log`);
    }
    ts.forEachChild(n, visit);
  };
  visit(sf);
  return out;
}

function sources(dir: string, out: string[] = []): string[] {
  for (const name of readdirSync(dir)) {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) sources(p, out);
    else if (/\.tsx?$/.test(name)) out.push(p);
  }
  return out;
}

test('the rule sees what it forbids (a hand-built record, a write to the log), and sees audit.ts build its own', () => {
  const bad = [
    'await appendOwn(host, outDir, `${NSA_DIR}/${ACTIONS_FILE}`, JSON.stringify(rec));',
    "const rec = { ts: Date.now(), who: actor, action: 'halt', target: {}, result: 'ok', detail: '' };",
    "appendFileSync(join(outDir, '.nsa-top', 'actions.jsonl'), line);",
    'await recordAction(host, runDir, rec);',
  ];
  for (const line of bad) assert.equal(handBuilt('x.ts', line).length, 1, line);
  // a stop request or a control request names who, but is no action record
  assert.deepEqual(handBuilt('x.ts', "const j = { ts: 1, who: actor, reason: 'stop' };"), []);
  assert.ok(
    handBuilt(AUDIT, readFileSync(join(SRC, AUDIT), 'utf8')).some((w) => /action record literal/.test(w)),
    'the walk finds the one place records are built',
  );
});

test('no code in src/ outside trainer/control/audit.ts builds an action record or appends to actions.jsonl', () => {
  const found: string[] = [];
  const files = sources(SRC);
  assert.ok(files.length > 50, `walked src/ (${files.length} files)`);
  for (const f of files) {
    const rel = relative(SRC, f);
    if (rel === AUDIT) continue;
    for (const w of handBuilt(rel, readFileSync(f, 'utf8'))) found.push(`src/${rel}:${w}`);
  }
  assert.deepEqual(found, [], 'every effect goes through audited() (src/trainer/control/audit.ts)');
});

// ------------------------------------------------------------------------------ audited()

test('audited: stamps who and when, records the outcome; a throwing effect is recorded as failed, never lost', async () => {
  const dir = tempDir('audit');
  const actor = await currentActor(host);
  const before = Date.now();
  const ok = await audited(host, dir, { actor, action: 'dump', target: { rank: 0 } }, async (ctx) => {
    await ctx.progress('started', 'under way');
    return { result: 'ok', detail: 'done', target: { file: 'f' } };
  });
  assert.deepEqual([ok.result, ok.detail, ok.who, ok.target.rank, ok.target.file], ['ok', 'done', actor, 0, 'f']);
  assert.ok(ok.ts >= before && ok.ts <= Date.now());
  const failed = await audited(host, dir, { actor, action: 'halt', target: {} }, async () => {
    throw new Error('disk on fire');
  });
  assert.deepEqual([failed.result, failed.detail], ['failed', 'disk on fire']);
  const quiet = await audited(host, dir, { actor, action: 'cancel-request', target: {} }, async () => ({
    result: 'refused',
    detail: 'nothing to cancel',
    unrecorded: 'nothing was asked',
  }));
  assert.equal(quiet.result, 'refused');
  const recs = await readActions(host, dir);
  assert.deepEqual(
    recs.map((r) => `${r.action} ${r.result} ${r.detail} ${r.who.pid}`),
    [`dump started under way ${process.pid}`, `dump ok done ${process.pid}`, `halt failed disk on fire ${process.pid}`],
  );
});

test('an action under way when its process ends: it finishes and is told, or it is recorded abandoned (then its late outcome too)', async () => {
  const dir = tempDir('audit-settle');
  const actor = await currentActor(host);
  const slow = (ms: number, detail: string) =>
    audited(host, dir, { actor, action: 'dump', target: {} }, async () => {
      await new Promise((r) => setTimeout(r, ms));
      return { result: 'ok', detail };
    });
  assert.deepEqual(actionsInFlight(), []);
  // live, the cockpit's q between rank 0's SIGUSR1 and rank 1's left one stack file and no record
  const first = slow(300, '2/2 ranks dumped');
  assert.deepEqual(
    actionsInFlight().map((a) => a.action),
    ['dump'],
  );
  const waited = await settleActions(10_000, 'quit');
  assert.deepEqual(waited.abandoned, []);
  assert.deepEqual(
    waited.kept.map((r) => r.detail),
    ['2/2 ranks dumped'],
  );
  assert.equal((await first).detail, '2/2 ranks dumped');
  // cut short (the time ran out, or a second Ctrl-C): a record says so at once
  let stop!: () => void;
  const second = slow(1500, 'finished late');
  const cut = settleActions(10_000, 'nsa-top quit while it was under way', new Promise<void>((r) => (stop = r)));
  setTimeout(() => stop(), 100);
  assert.deepEqual((await cut).abandoned, ['dump']);
  assert.deepEqual(actionsInFlight(), []);
  let recs = await readActions(host, dir);
  assert.match(recs.at(-1)!.detail, /^abandoned before its outcome was known: nsa-top quit while it was under way$/);
  assert.equal(recs.at(-1)!.result, 'failed');
  // the process lived on: what really happened is kept as well
  await second;
  recs = await readActions(host, dir);
  assert.deepEqual(
    recs.map((r) => `${r.result} ${r.detail}`),
    [
      'ok 2/2 ranks dumped',
      'failed abandoned before its outcome was known: nsa-top quit while it was under way',
      'ok after it was recorded abandoned: finished late',
    ],
  );
  // asked for just before the quit, its effect not begun: it is not taken, and the log says so
  let ran = false;
  const early = audited(host, dir, { actor, action: 'dump', target: {} }, async () => {
    ran = true;
    return { result: 'ok', detail: 'signalled' };
  });
  assert.deepEqual((await settleActions(10_000, 'quit first', Promise.resolve())).abandoned, ['dump']);
  assert.deepEqual([(await early).result, (await early).detail, ran], ['refused', 'not taken: quit first', false]);
  assert.equal((await readActions(host, dir)).at(-1)!.detail, 'not taken: quit first');
});

test('audited: read-only refuses before the effect and writes nothing; a linked log refuses before the effect', async () => {
  const actor = await currentActor(host);
  const dir = tempDir('audit-ro');
  let ran = 0;
  const effect = async () => (ran++, { result: 'ok' as const, detail: 'did it' });
  const ro = await audited(host, dir, { actor, action: 'halt', target: {} }, effect, { readOnly: true });
  assert.deepEqual([ro.result, ro.detail, ran], ['refused', READ_ONLY_REFUSAL, 0]);
  process.env.NSA_TOP_READ_ONLY = '1';
  try {
    const env = await audited(host, dir, { actor, action: 'halt', target: {} }, effect);
    assert.deepEqual([env.result, env.detail, ran], ['refused', READ_ONLY_REFUSAL, 0]);
  } finally {
    delete process.env.NSA_TOP_READ_ONLY;
  }
  assert.deepEqual(readdirSync(dir), ['train.log'], 'nothing written, the action log included');
  const linked = tempDir('audit-link');
  mkdirSync(join(linked, '.nsa-top'));
  symlinkSync(join(tmp, 'elsewhere.jsonl'), join(linked, '.nsa-top', 'actions.jsonl'));
  const r = await audited(host, linked, { actor, action: 'halt', target: {}, requireLog: true }, effect);
  assert.equal(r.result, 'refused');
  assert.match(r.detail, /could not be recorded, so it was not taken/);
  assert.equal(ran, 0);
  assert.equal(existsSync(join(tmp, 'elsewhere.jsonl')), false);
});

test('audited: a fail-open (safety) action is taken with a linked log and says NOT logged on every line; read-only still refuses it; an unwritable log reads the same', async () => {
  const actor = await currentActor(host);
  const linked = tempDir('audit-open');
  mkdirSync(join(linked, '.nsa-top'));
  symlinkSync(join(tmp, 'elsewhere-open.jsonl'), join(linked, '.nsa-top', 'actions.jsonl'));
  let ran = 0;
  const spec = { actor, action: 'halt' as const, target: {}, requireLog: true, failOpen: true };
  const r = await audited(host, linked, spec, async (ctx) => {
    ran++;
    const p = await ctx.progress('started', 'on its way');
    assert.match(p.detail, /^on its way; NOT logged: .*actions\.jsonl: is a symbolic link: refused/);
    return { result: 'ok', detail: 'halted' };
  });
  assert.equal(ran, 1, 'the effect is taken');
  assert.equal(r.result, 'ok');
  assert.match(r.detail, /^halted; NOT logged: .*actions\.jsonl: is a symbolic link: refused/);
  assert.match(r.notLogged ?? '', /is a symbolic link/);
  assert.equal(existsSync(join(tmp, 'elsewhere-open.jsonl')), false, 'nothing written through the link');
  // the same action without failOpen is refused before the effect (a dump, a signal)
  const closed = await audited(
    host,
    linked,
    { ...spec, failOpen: false },
    async () => (ran++, { result: 'ok', detail: 'x' }),
  );
  assert.deepEqual([closed.result, ran], ['refused', 1]);
  // read-only holds for a safety action too
  const ro = await audited(host, linked, spec, async () => (ran++, { result: 'ok', detail: 'x' }), { readOnly: true });
  assert.deepEqual([ro.result, ro.detail, ran], ['refused', READ_ONLY_REFUSAL, 1]);
  // a log that cannot be written for an ordinary reason (here the run dir vanishes under the effect;
  // a full disk is ownfiles.test.ts's tmpfs): the same words, the effect's outcome kept
  const gone = tempDir('audit-gone');
  const g = await audited(host, gone, { actor, action: 'halt', target: {} }, async () => {
    rmSync(gone, { recursive: true, force: true });
    return { result: 'ok', detail: 'halted' };
  });
  assert.equal(g.result, 'ok');
  assert.match(g.detail, /^halted; NOT logged: /, 'the disk-full / unwritable path says it in the same words');
  assert.ok(g.notLogged);
});

// ------------------------------------------------------------------------------ read-only, everywhere

function cli(args: string[], env: Record<string, string> = {}) {
  return spawnSync(process.execPath, [BIN, ...args], {
    encoding: 'utf8',
    timeout: 60_000,
    env: { ...process.env, ...env },
  });
}

/** a finished single-rank run whose loss went NaN: `watchdog --halt` would act on it */
function nanRun(): string {
  const d = mkdtempSync(join(tmp, 'run-'));
  cpSync(join(ROOT, 'test', 'fixtures', 'nsa-vibe', 'single'), d, { recursive: true });
  rmSync(join(d, 'metrics.json'));
  appendFileSync(join(d, 'training.csv'), '41,nan,0.0,500\n');
  return d;
}

test('read-only: the cockpit, halt, stop, watchdog --halt and relaunch refuse in the same words and write nothing', async () => {
  const d = nanRun();
  const listing = readdirSync(d).sort();
  const actor = await currentActor(host);
  const said: Record<string, string> = {};
  // the cockpit
  const cockpit = createActions({ host, runDir: d, readOnly: true, state: () => null });
  for (const [k, r] of [
    ['cockpit halt', await cockpit.halt('now')],
    ['cockpit halt after checkpoint', await cockpit.halt('after-checkpoint')],
    ['cockpit escalate', await cockpit.escalate('SIGINT')],
    ['cockpit relaunch', await cockpit.relaunch({ removeStaleHalt: false })],
  ] as const) {
    assert.equal(r.result, 'refused', k);
    said[k] = r.detail;
  }
  said['relaunch()'] = (await relaunch(host, d, actor, { removeStaleHalt: true, readOnly: true })).detail;
  said['stopRun()'] = (await stopRun(host, d, actor, { readOnly: true })).detail;
  // the CLI, by the environment and by the flag
  for (const [args, env] of [
    [['halt', d, '--json'], { NSA_TOP_READ_ONLY: '1' }],
    [['halt', d, '--json', '--read-only'], {}],
    [['stop', d, '--json'], { NSA_TOP_READ_ONLY: '1' }],
    [['dump', d, '--json'], { NSA_TOP_READ_ONLY: '1' }],
  ] as [string[], Record<string, string>][]) {
    const r = cli(args, env);
    assert.equal(r.status, 3, `${args.join(' ')}: ${r.stderr}`);
    said[args.join(' ')] = String(JSON.parse(r.stdout).detail);
  }
  const wd = cli(['watchdog', d, '--halt', '--no-gpu'], { NSA_TOP_READ_ONLY: '1' });
  const halt = wd.stdout
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as Record<string, unknown>)
    .find((e) => e.event === 'halt');
  assert.equal(halt?.result, 'refused', wd.stdout + wd.stderr);
  said['watchdog --halt'] = String(halt?.detail);
  const rl = cli(['relaunch', d, '--yes', '--read-only']);
  assert.equal(rl.status, 3, rl.stderr);
  said['relaunch --read-only'] = /^relaunch refused: (.*)$/m.exec(rl.stderr)?.[1] ?? rl.stderr;
  for (const [k, v] of Object.entries(said)) assert.equal(v, READ_ONLY_REFUSAL, k);
  assert.deepEqual(readdirSync(d).sort(), listing, 'no .HALT, .anomaly_type, .nsa-top or dump written');
});
