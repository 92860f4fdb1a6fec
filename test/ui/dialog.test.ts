import { test } from 'node:test';
import assert from 'node:assert/strict';
import { dialogView, relaunchDialog } from '../../src/ui/dialogs/index.js';
import { plain } from '../../src/ui/text.js';
import { baseState } from './helpers.js';

const text = (lines: Parameters<typeof plain>[0][]) => lines.map((l) => plain(l)).join('\n');

test('halt dialog: the steps at risk are told per trainer — the reference trainer saves on HALT, nsa-vibe does not', () => {
  const s = baseState();
  s.run.step = 202;
  s.stepsAtRisk = { steps: 27, lastCheckpointStep: 175, savesOnHalt: false };
  const real = text(dialogView({ kind: 'halt-choose', startedAt: Date.now() }, s, Date.now(), 100).lines);
  assert.match(real, /newest complete checkpoint: step 175/);
  assert.match(real, /halting now loses 27 steps \(the nsa-vibe trainer writes no checkpoint on HALT\)/);
  s.stepsAtRisk = { steps: 0, lastCheckpointStep: 175, savesOnHalt: true };
  const ref = text(dialogView({ kind: 'halt-choose', startedAt: Date.now() }, s, Date.now(), 100).lines);
  assert.match(ref, /loses nothing: this trainer saves a checkpoint when it sees \.HALT/);
  assert.doesNotMatch(ref, /writes no checkpoint/);
});

test("relaunch dialog: names the file the trainer layer chose and why — a later segment's lower step — and the hand-launched command", () => {
  const s = baseState();
  s.run.checkpoints = [
    {
      name: 'checkpoint_step60.pt',
      path: '/o/checkpoint_step60.pt',
      step: 60,
      size: 1,
      mtimeMs: 1000,
      fsdp: false,
      complete: true,
    },
    {
      name: 'checkpoint_step20.pt',
      path: '/o/checkpoint_step20.pt',
      step: 20,
      size: 1,
      mtimeMs: 2000,
      fsdp: false,
      complete: true,
    },
  ];
  const info = {
    refusal: null,
    resume: {
      name: 'checkpoint_step20.pt',
      path: '/o/checkpoint_step20.pt',
      step: 20,
      segment: 1,
      why: 'newest complete weights: written 05:25:00 by segment #1; checkpoint_step60.pt has a higher step but segment #0 wrote it earlier',
    },
    fresh: false,
    warnings: ['checkpoint names repeat across segments: checkpoint_step60.pt (segment #0) will be overwritten'],
    skipped: [],
    adopted: '(cd /repo && python -m torch.distributed.run --nproc_per_node=2 train.py) with CONFIG=c.yaml',
  };
  const v = text(dialogView(relaunchDialog('confirm', info), s, Date.now(), 200).lines);
  assert.match(v, /resumes from checkpoint_step20\.pt \(step 20\)/);
  assert.doesNotMatch(v, /resumes from checkpoint_step60/);
  assert.match(v, /segment #0 wrote it earlier/);
  assert.match(v, /will be overwritten/);
  assert.match(v, /started by hand; runs again under the supervisor: \(cd \/repo && python -m torch\.distributed\.run/);
  assert.match(v, /type the run name/);
  const checking = text(dialogView(relaunchDialog('checking', null), s, Date.now(), 200).lines);
  assert.match(checking, /checking what a relaunch would do/);
  assert.doesNotMatch(checking, /type the run name/);
});

test('relaunch dialog on a trainer whose supervisor died: it says the trainer is re-adopted, not a resume or a fresh start', () => {
  const s = baseState();
  const info = {
    refusal: null,
    resume: null,
    fresh: false,
    warnings: [],
    skipped: [],
    adopted: null,
    readopt:
      're-adopts the running trainer (pid 4242): a new supervisor watches it and restarts it if it dies; nothing is restarted now',
  };
  const v = text(dialogView(relaunchDialog('confirm', info), s, Date.now(), 200).lines);
  assert.match(v, /re-adopts the running trainer \(pid 4242\)/);
  assert.doesNotMatch(v, /no complete checkpoint|starts from step 0|first start/);
});

test('a refusal is wrapped to the dialog, not cut at its edge', () => {
  const why =
    'the run was not started by nsa-top and never seen running, so its launch command is unknown: start it with a profile — nsa-top launch --profile NAME -- --resume /very/long/path/checkpoint_step40.pt';
  const v = dialogView({ kind: 'refused', what: 'relaunch', why }, baseState(), Date.now(), 60);
  assert.ok(v.lines.length > 3);
  assert.match(text(v.lines).replace(/\n/g, ' '), /checkpoint_step40\.pt/);
});

import { escalationGate } from '../../src/ui/dialogs/index.js';
import { haltDisabled, relaunchDisabled } from '../../src/ui/keymap.js';
import { footerLine } from '../../src/ui/panels/footer.js';
import { proc, procs } from '../checks/helpers.js';
import type { ControlRequest } from '../../src/trainer/control/types.js';
import { supervisorState } from '../helpers/supervisor.js';

const track = {
  kind: 'halt-track' as const,
  mode: 'after-checkpoint' as const,
  startStep: 10,
  result: null,
  escalation: null,
  killArmed: false,
};
const who = { user: 'alice', tty: null, tmux: null, host: 'box', pid: 1 };

test('escalation (SIGINT/SIGKILL) is not offered before .HALT exists, nor before the grace has passed; then it is', () => {
  const now = Date.now();
  const s = baseState();
  s.procs = procs([proc(0, 'R'), proc(1, 'R')]);
  s.haltGraceS = 300;
  const req: ControlRequest = {
    id: 'r1',
    kind: 'halt-after-checkpoint',
    ts: now - 60_000,
    who,
    state: 'pending',
    owner: { kind: 'agent', pid: 42, startTime: '1' },
    graceS: 300,
    note: 'waiting for a complete checkpoint written after 10:00:00',
    updatedAt: now,
  };
  s.requests = [req];
  // an hour after the request, still no .HALT: nothing has been asked of the trainer
  let v = text(dialogView({ ...track, startedAt: now - 3_600_000 }, s, now, 120).lines);
  assert.doesNotMatch(v, /i SIGINT/);
  assert.match(v, /not offered: no \.HALT yet/);
  assert.match(v, /pending: waiting for a complete checkpoint/);
  assert.match(v, /x cancel the request/);
  assert.match(v, /carried by agent pid 42 \(outlives this cockpit\)/);
  // .HALT written 20 s ago: the ranks still have their grace
  s.requests = [{ ...req, state: 'halt-written', haltAt: now - 20_000, note: '.HALT written' }];
  s.run.control.halt = { present: true, content: 'halt: manual_stop alice', mtimeMs: now - 20_000 };
  v = text(dialogView({ ...track, startedAt: now - 60_000 }, s, now, 120).lines);
  assert.doesNotMatch(v, /i SIGINT/);
  assert.match(v, /4m40s of their 5m00s grace left/);
  assert.ok(escalationGate(s, now) !== null);
  // past the grace: offered
  assert.equal(escalationGate(s, now + 281_000), null);
  v = text(dialogView({ ...track, startedAt: now - 60_000 }, s, now + 281_000, 120).lines);
  assert.match(v, /i SIGINT {2}K SIGKILL/);
});

test('keys that cannot work say why, in the footer and in ? (from the run state): no halt on a finished run, no relaunch while running', () => {
  const s = baseState();
  s.runState = 'FINISHED';
  s.runStateWhy = 'metrics.json written at step 400';
  s.procs = procs([]);
  assert.match(haltDisabled(s)?.why ?? '', /FINISHED \(metrics\.json written at step 400\): nothing to halt/);
  // a FINISHED run is not relaunched without more steps: r stays on and its dialog asks for them
  // (relaunch-steps.test.tsx); a count not past the steps is refused in the words `nsa-top relaunch` uses
  assert.equal(relaunchDisabled(s), null);
  s.run = { ...s.run, step: 400, totalSteps: 400 };
  assert.match(relaunchDisabled(s, 400)?.why ?? '', /FINISHED .*: --steps 400 is not past the 400 steps it trained/);
  assert.match(plain(footerLine(s, 200, null)), /h halt:off\(FINISHED\)/);
  assert.match(text(dialogView({ kind: 'help' }, s, Date.now(), 120).lines), /disabled now: the run is FINISHED/);
  s.runState = 'RUNNING';
  s.runStateWhy = 'step advanced 2s ago';
  s.procs = procs([proc(0, 'R')]);
  assert.equal(haltDisabled(s), null);
  assert.match(relaunchDisabled(s)?.why ?? '', /RUNNING .*halt it first/);
  assert.match(plain(footerLine(s, 200, null)), /r relaunch:off\(RUNNING\)/);
  // a pending request keeps h open on an ended run: it shows the request and can cancel it
  s.runState = 'EXITED';
  s.requests = [
    {
      id: 'r',
      kind: 'halt-after-checkpoint',
      ts: 1,
      who,
      state: 'pending',
      owner: null,
      graceS: 300,
      note: 'waiting',
      updatedAt: 1,
    },
  ];
  assert.equal(haltDisabled(s), null);
});

test('a zombie rank has exited: the halt window counts it stopped, as the escalation gate does (never both)', () => {
  const now = Date.now();
  const s = baseState();
  s.procs = procs([proc(0, 'Z', { pid: 42 })]);
  s.run.control.halt = { present: true, content: 'halt: manual_stop alice', mtimeMs: now - 20_000 };
  const v = text(dialogView({ ...track, startedAt: now - 60_000 }, s, now, 120).lines);
  assert.doesNotMatch(v, /still running/);
  assert.match(v, /rank 0 stopped.*\(zombie pid 42\)/);
});

test("the halt window of a pending request in a hung run says the judge's word: it cannot fire", () => {
  const now = Date.now();
  const s = baseState();
  s.runState = 'STALLED';
  s.runStateWhy = 'rank 1 (pid 1001) is stopped (T)';
  s.procs = procs([proc(0, 'S'), proc(1, 'T')]);
  const req: ControlRequest = {
    id: 'r9',
    kind: 'halt-after-checkpoint',
    ts: now - 60_000,
    who,
    state: 'pending',
    owner: { kind: 'supervisor', pid: 42, startTime: '1' },
    graceS: 300,
    note: 'waiting for a complete checkpoint written after 10:00:00',
    updatedAt: now,
  };
  s.requests = [req];
  const title =
    'the halt after the next checkpoint requested by alice at 10:00:00 cannot fire: the run is stalled and writes no checkpoint';
  s.alerts = [{ id: 'request:r9', rule: 'request', severity: 'warning', title, detail: '', since: now }];
  const v = text(dialogView({ ...track, startedAt: now - 60_000 }, s, now, 200).lines);
  assert.match(v, /pending: waiting for a complete checkpoint/);
  assert.match(v, /cannot fire: the run is stalled and writes no checkpoint/);
  // the judge's info line (a run that advances) is not repeated there
  s.alerts = [{ id: 'request:r9', rule: 'request', severity: 'info', title: 'halt after …', detail: '', since: now }];
  assert.doesNotMatch(text(dialogView({ ...track, startedAt: now - 60_000 }, s, now, 200).lines), /cannot fire/);
});

test("the halt window says what the stop did, not what a dead supervisor's file still says", () => {
  const now = Date.now();
  const s = baseState();
  s.procs = procs([proc(0, 'S'), proc(1, 'S')]);
  // supervisor.json still says running (SIGKILLed a second ago, not reaped yet when the file was judged)
  s.supervisor = supervisorState('/r', { pid: 77, startTime: '1' }, { updatedAt: now });
  const win = { ...track, mode: 'now' as const, startedAt: now };
  assert.match(text(dialogView(win, s, now, 200).lines), /asking the supervisor to stop/);
  const died = {
    ok: true,
    result: 'ok' as const,
    detail:
      'the supervisor (pid 77) is not alive (pid + start time checked): nsa-top wrote .HALT itself (.HALT written (halt: manual_stop)); nothing escalates it',
  };
  const v = text(dialogView({ ...win, result: died }, s, now, 200).lines);
  assert.doesNotMatch(v, /the supervisor writes \.HALT/);
  assert.match(v, /\.HALT written: ranks stop before their next micro-step/);
  assert.match(v, /nsa-top wrote \.HALT itself/);
  const took = { ok: true, result: 'started' as const, detail: 'stop requested: the supervisor (pid 77) took it' };
  assert.match(
    text(dialogView({ ...win, result: took }, s, now, 200).lines),
    /stop requested: the supervisor writes \.HALT, then escalates/,
  );
});
