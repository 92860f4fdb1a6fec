// A multi-node launch (issue 22): `nsa-top launch --profile P --node N1 --node N2 …` starts one
// detached supervisor per node, each running that node's torchrun (its node_rank, the one
// rendezvous: multinode.ts), each over the node's own Host. Laid out as
//
//   <base>/<profile>_<stamp>/                  the launch: run.info (out_dir, the nodes), .nsa-top/nodes.json
//   <base>/<profile>_<stamp>/nodes/<R>/        node_rank R's launcher dir, on that node: its plan
//                                              (.nsa-top/launch.json), its supervisor's state, log, train.log
//
// so each supervisor is the one-machine supervisor over its own launcher dir: no two nodes ever
// write one file. The remote node's supervisor is started by the same nsa-top install on that node
// (`nsa-top supervise --start`, the plan on stdin): nsa-top must be installed at the same path there
// (a shared file system, or the same install on every node). Every node is reached and checked before
// anything is created or started anywhere; each start is audited in the run's action log with its node.
import { mkdirSync } from 'node:fs';
import { basename, dirname, isAbsolute, join, resolve } from 'node:path';
import type { Host } from '../../remote/host.js';
import { LocalHost } from '../../remote/local/host.js';
import { InputError } from '../../errors.js';
import { selfCommand } from '../../self.js';
import type { ActionRecord, SupervisorState } from '../control/types.js';
import { currentActor, readOnlyMode } from '../control/actions.js';
import { audited, READ_ONLY_REFUSAL } from '../control/audit.js';
import { createOwn, removeOwn, writeOwnAtomic } from '../control/ownfiles.js';
import { NSA_DIR, resolveRunDirs, type RunDirs } from '../run/rundirs.js';
import { readLaunchPlan, readSupervisorState, STOP_FILE, SUPERVISOR_LOG } from '../run/launchstate.js';
import { pickResumeCheckpoint } from '../run/checkpoints.js';
import { supervisorInCharge } from '../control/types.js';
import { removeStaleHalt } from '../control/actions.js';
import { verifyProcess } from '../../remote/procs.js';
import { describePick } from './launch.js';
import { describeWillRun, planPhases } from './willrun.js';
import { RESUME_FROM_ENV } from './state.js';
import { dirIdSync } from '../run/pointers.js';
import { awaitSupervisor, haltText, missingProgram, runInfoText, spawnSupervisor, stamp } from './launch.js';
import { nodeSlots, type NodeSlot } from './multinode.js';
import { abortNodeSupervisor } from './nodeabort.js';
import {
  gitCommitOf,
  loadProfiles,
  queryGpus,
  readConfigOutDir,
  resolveLaunchPlan,
  runDirBase,
  trainerCwd,
  trainerRepo,
  chooseConfig,
  type LaunchPlan,
} from './profiles.js';
import { writePlanLocal } from './state.js';
import { NODES_FILE, nodeDirOf, readNodeSupervisors, readNodesRecord, type NodesRecord } from '../run/nodesrecord.js';

/** a node as the launch takes it: its Host, or why it cannot be reached */
export interface LaunchNode {
  label: string;
  host: Host | null;
  error: string;
}

export interface NodeStart {
  label: string;
  nodeRank: number;
  dir: string;
  record: ActionRecord;
  supervisorPid: number | null;
  /** the start failed on another node: this node's supervisor was stopped (nodeabort.ts) */
  stopped?: ActionRecord;
}

export interface NodesLaunch {
  runDir: string;
  outDir: string;
  nodes: NodeStart[];
}

/** What the node's nsa-top answers after starting its supervisor (one JSON line). */
interface StartAnswer {
  pid: number;
  startTime: string | null;
  state: string | null;
  note: string | null;
  error?: string;
}

async function nodeProblems(n: LaunchNode & { host: Host }, plan: LaunchPlan, profileName: string): Promise<string[]> {
  const h = n.host;
  const out: string[] = [];
  const [node, bin] = selfCommand();
  for (const p of [node!, bin!])
    if (!(await h.stat(p).catch(() => null))?.isFile)
      out.push(`nsa-top is not installed at ${p} there (the launch runs the same nsa-top on every node)`);
  if (plan.trainer === 'nsa-vibe') {
    const script = plan.command.find((w) => /\.py$/.test(w));
    if (script) {
      const path = isAbsolute(script) ? script : join(plan.cwd, script);
      if (!(await h.stat(path).catch(() => null))?.isFile)
        out.push(`${path} not found (profile ${profileName}: repo/script)`);
    }
  }
  const missing = await missingProgram(h, plan.command[0]!, plan.cwd);
  if (missing) out.push(missing);
  const halt = await haltText(h, plan.outDir);
  if (halt !== null) out.push(`stale .HALT in ${plan.outDir} ("${halt.trim()}"): the trainer would stop at step 1`);
  return out;
}

/**
 * Launches the profile on every node. Throws InputError (nothing created, nothing started
 * anywhere) when a node cannot be reached (exit 1) or cannot run its part (exit 2).
 */
export async function launchNodes(
  local: Host,
  nodes: readonly LaunchNode[],
  opts: { profile: string; profilesFile?: string; cwd: string; steps?: number; extraArgs?: string[] },
): Promise<NodesLaunch> {
  if (readOnlyMode()) throw new InputError(`launch refused: ${READ_ONLY_REFUSAL} (NSA_TOP_READ_ONLY=1)`);
  const actor = await currentActor(local);
  const cwd = resolve(opts.cwd);
  const file = await loadProfiles(local, opts.profilesFile);
  const profile = file.profiles[opts.profile];
  if (!profile)
    throw new InputError(
      `unknown profile '${opts.profile}' (known: ${Object.keys(file.profiles).join(', ')}; nsa-top profiles lists them)`,
    );
  const down = nodes.filter((n) => !n.host);
  if (down.length)
    throw new InputError(
      `${down.map((n) => `node ${n.label} unreachable: ${n.error || 'not connected'}`).join('; ')}. Nothing was started on any node.`,
      1,
    );
  const started = new Date();
  const base = runDirBase(profile, cwd);
  const name = `${opts.profile}_${stamp(started)}`;
  const slots = nodeSlots(
    opts.profile,
    profile,
    nodes.map((n) => n.label),
    name,
  );
  const tcwd = trainerCwd(profile, cwd);
  // every node's plan, made with its own GPUs and config, and checked there, before anything exists
  const planFor = async (n: LaunchNode & { host: Host }, slot: NodeSlot, runDir: string): Promise<LaunchPlan> => {
    const gpus = await queryGpus(n.host);
    let configOutDir: string | null = null;
    if (!profile.out_dir) {
      const { config } = chooseConfig(profile, gpus);
      if (config) {
        const r = await readConfigOutDir(n.host, tcwd, config);
        if (r.error) throw new InputError(`node ${n.label}: config ${r.error}. Nothing was started on any node.`);
        configOutDir = r.outDir;
      }
    }
    const plan = resolveLaunchPlan({
      profileName: opts.profile,
      profile,
      presets: file.presets,
      gpus,
      runDir: nodeDirOf(runDir, slot.nodeRank),
      cwd,
      configOutDir,
      steps: opts.steps,
      extraArgs: opts.extraArgs,
      node: slot,
    });
    plan.gitCommit = await gitCommitOf(n.host, trainerRepo(plan));
    return plan;
  };
  const up = nodes as (LaunchNode & { host: Host })[];
  const probe = await Promise.all(up.map((n, i) => planFor(n, slots[i]!, join(base, name))));
  const outDirs = [...new Set(probe.map((p) => p.outDir))];
  if (outDirs.length > 1)
    throw new InputError(
      `the nodes' configs name different out_dirs (${outDirs.join(', ')}): one run writes one out_dir. Nothing was started on any node.`,
    );
  const problems = (await Promise.all(up.map((n, i) => nodeProblems(n, probe[i]!, opts.profile)))).flatMap((ps, i) =>
    ps.map((p) => `node ${up[i]!.label}: ${p}`),
  );
  if (problems.length) throw new InputError(`${problems.join('; ')}. Nothing was started on any node.`);
  const writer = await liveWriterOf(
    local,
    probe[0]!.outDir,
    (label) => up.find((n) => n.label === label)?.host ?? label,
  );
  if (writer)
    throw new InputError(
      `${probe[0]!.outDir} is being written by ${writer}: stop it first. Nothing was started on any node.`,
    );
  // the launch's own dir, here (exclusive: two launches in one second get distinct dirs)
  await local.mkdirp(base);
  let runDir = join(base, name);
  for (let i = 2; ; i++) {
    try {
      mkdirSync(runDir);
      break;
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'EEXIST' || i > 50) throw e;
      runDir = join(base, `${name}-${i}`);
    }
  }
  const plans = probe.map((p) => ({ ...p, runDir: nodeDirOf(runDir, p.node!.nodeRank) }));
  const outDir = plans[0]!.outDir;
  const record: NodesRecord = {
    version: 1,
    runDir,
    profile: opts.profile,
    outDir,
    rdzvId: name,
    started: started.toISOString(),
    nodes: plans.map((p, i) => ({ label: up[i]!.label, nodeRank: p.node!.nodeRank, dir: p.runDir })),
  };
  const info =
    runInfoText({ ...plans[0]!, runDir }, started) +
    record.nodes.map((n) => `node: ${n.label} node_rank=${n.nodeRank} dir=${n.dir}`).join('\n') +
    '\n';
  await createOwn(local, runDir, 'run.info', info, { fresh: true, launcher: true });
  await writeOwnAtomic(
    local,
    runDir,
    `${NSA_DIR}/${NODES_FILE}`,
    `${JSON.stringify({ ...record, dirId: dirIdSync(runDir) }, null, 2)}\n`,
    {
      fresh: true,
    },
  );
  await local.mkdirp(outDir);
  if (outDir !== runDir)
    await writeOwnAtomic(
      local,
      outDir,
      `${NSA_DIR}/run.json`,
      `${JSON.stringify({ runDir, outDir, outDirId: dirIdSync(outDir), profile: opts.profile, started: started.toISOString() }, null, 2)}\n`,
      { fresh: true },
    );
  const dirs: RunDirs = { runDir, outDir, supervised: true };
  // every node at once: torchrun's rendezvous waits for all of them
  const starts = await Promise.all(
    plans.map(async (plan, i): Promise<NodeStart> => {
      const n = up[i]!;
      const slot = plan.node!;
      let pid: number | null = null;
      const rec = await audited(
        local,
        dirs,
        { actor, action: 'launch', target: { runDir, node: n.label, nodeRank: slot.nodeRank, dir: plan.runDir } },
        async () => {
          const a = await startOnNode(n.host, plan);
          const target = {
            node: n.label,
            nodeRank: slot.nodeRank,
            supervisorPid: a.pid || null,
            command: plan.command,
          };
          if (a.error || !a.pid)
            return { result: 'failed', detail: `node ${n.label}: ${a.error ?? 'no supervisor pid'}`, target };
          pid = a.pid;
          if (a.state === null || a.state === 'failed')
            return {
              result: 'failed',
              detail: `node ${n.label}: the supervisor (pid ${a.pid}) did not come up${a.note ? `: ${a.note}` : ''}; see ${join(plan.runDir, NSA_DIR, 'supervisor.log')} there`,
              target,
            };
          return {
            result: 'ok',
            detail: `node ${n.label} (node_rank ${slot.nodeRank}): supervisor pid ${a.pid} (as that node sees it): ${plan.command.join(' ')}`,
            target,
          };
        },
      );
      return { label: n.label, nodeRank: slot.nodeRank, dir: plan.runDir, record: rec, supervisorPid: pid };
    }),
  );
  // a node whose supervisor did not start: the others' would wait for a rendezvous that never completes
  const failed = starts.filter((s) => s.record.result !== 'ok').map((s) => s.label);
  if (failed.length)
    await Promise.all(
      starts
        .filter((s) => s.record.result === 'ok')
        .map(async (s) => {
          const why = `the launch failed on node ${failed.join(', node ')}`;
          s.stopped = await abortNodeSupervisor(up.find((n) => n.label === s.label)!.host, s, actor, why);
        }),
    );
  return { runDir, outDir, nodes: starts };
}

/**
 * The live run that writes `outDir` (its launch dir and who runs it), or null: a one-machine
 * supervised run, or a multi-node one whose supervisor on any node named here is in charge (each
 * read on its own node). Never two runs into one out_dir.
 */
async function liveWriterOf(
  local: Host,
  outDir: string,
  hostOf: (label: string) => Host | string,
): Promise<string | null> {
  const other = await resolveRunDirs(local, outDir).catch(() => null);
  if (!other?.supervised || other.runDir === outDir) return null;
  const sups = await readNodeSupervisors(local, other.runDir, hostOf);
  const live = sups
    ? sups
        .filter((x) => x.state && supervisorInCharge(x.state.state))
        .map((x) => `node ${x.label} (supervisor pid ${x.state!.supervisor?.pid}, ${x.state!.state})`)
    : [];
  if (!sups) {
    const st = await readSupervisorState(local, other.runDir);
    if (st && supervisorInCharge(st.state)) live.push(`supervisor pid ${st.supervisor?.pid}, ${st.state}`);
  }
  return live.length ? `the run ${other.runDir} (${live.join('; ')})` : null;
}

/** Starts node `host`'s supervisor through that node's nsa-top (`supervise --start`, the plan on stdin). */
async function startOnNode(host: Host, payload: LaunchPlan | NodeRelaunch): Promise<StartAnswer> {
  const r = await host
    .exec([...selfCommand(), 'supervise', '--start'], { input: JSON.stringify(payload), timeoutMs: 40_000 })
    .catch((e: Error) => ({ code: -1, stdout: '', stderr: e.message, timedOut: false }));
  const last = r.stdout.trim().split('\n').pop() ?? '';
  try {
    const a = JSON.parse(last) as StartAnswer;
    if (typeof a.pid === 'number' || a.error) return a;
  } catch {
    /* below */
  }
  const why = r.timedOut ? 'no answer in 40 s' : (r.stderr || r.stdout).trim().split('\n').pop() || `exit ${r.code}`;
  return { pid: 0, startTime: null, state: null, note: null, error: `nsa-top supervise --start: ${why}` };
}

/**
 * `nsa-top supervise --start` on a node: the node's launcher dir made (fresh), its plan and
 * run.info written, its supervisor started detached here; the answer is one JSON line.
 */
export async function startHere(planText: string): Promise<StartAnswer> {
  let plan: LaunchPlan;
  try {
    plan = JSON.parse(planText) as LaunchPlan;
  } catch (e) {
    throw new InputError(`supervise --start: the plan on stdin is not JSON: ${(e as Error).message}`);
  }
  if ((plan as unknown as NodeRelaunch)?.relaunch === 1) return restartHere(plan as unknown as NodeRelaunch);
  if (
    plan?.version !== 1 ||
    typeof plan.runDir !== 'string' ||
    !isAbsolute(plan.runDir) ||
    basename(dirname(plan.runDir)) !== 'nodes' ||
    !plan.node ||
    !Array.isArray(plan.command) ||
    !plan.command.every((w) => typeof w === 'string')
  )
    throw new InputError('supervise --start: the plan on stdin is not a node launch plan (nsa-top launch --node)');
  const host = new LocalHost();
  mkdirSync(dirname(plan.runDir), { recursive: true });
  try {
    mkdirSync(plan.runDir); // exclusive: never a second supervisor into one node dir
  } catch (e) {
    throw new InputError(`supervise --start: ${plan.runDir}: ${(e as NodeJS.ErrnoException).code ?? e}`);
  }
  await host.mkdirp(plan.outDir);
  writePlanLocal(plan.runDir, plan);
  await createOwn(host, plan.runDir, 'run.info', runInfoText(plan, new Date()), { fresh: true, launcher: true });
  const pid = spawnSupervisor(plan.runDir, false, null);
  const st: SupervisorState | null = await awaitSupervisor(host, plan.runDir, pid);
  return {
    pid,
    startTime: st?.supervisor?.pid === pid ? String(st.supervisor.startTime) : null,
    state: st?.supervisor?.pid === pid ? st.state : null,
    note: st?.note ?? null,
  };
}

/** what a multi-node relaunch sends each node's nsa-top (`supervise --start`, on stdin) */
export interface NodeRelaunch {
  relaunch: 1;
  /** the node's launcher dir (nodes/<R>/ of the launch) */
  dir: string;
  /** the one checkpoint for every node; null: none (from scratch) */
  resumeFrom: string | null;
  /** the programs the operator allowed by name (--allow-command): the supervisor checks the plan again */
  allow: string[];
}

/** A node's supervisor started again over its launcher dir, resuming from the checkpoint given. */
async function restartHere(r: NodeRelaunch): Promise<StartAnswer> {
  if (typeof r.dir !== 'string' || !isAbsolute(r.dir) || basename(dirname(r.dir)) !== 'nodes')
    throw new InputError('supervise --start: not a node launcher dir (nodes/<R>/ of a launch --node)');
  const host = new LocalHost();
  const plan = await readLaunchPlan(host, r.dir);
  if (!plan?.node) throw new InputError(`supervise --start: ${r.dir}: no node launch plan`);
  const st = await readSupervisorState(host, r.dir);
  if (st && supervisorInCharge(st.state))
    return {
      pid: 0,
      startTime: null,
      state: null,
      note: null,
      error: `its supervisor (pid ${st.supervisor?.pid}) is ${st.state}`,
    };
  try {
    await removeOwn(host, r.dir, `${NSA_DIR}/${STOP_FILE}`);
  } catch {
    /* none */
  }
  const pid = spawnSupervisor(r.dir, true, Array.isArray(r.allow) ? r.allow : [], [], {
    [RESUME_FROM_ENV]: typeof r.resumeFrom === 'string' ? r.resumeFrom : '',
  });
  const up = await awaitSupervisor(host, r.dir, pid);
  const why = up?.supervisor?.pid === pid ? null : await readSupervisorLogTail(r.dir);
  return {
    pid,
    startTime: up?.supervisor?.pid === pid ? String(up.supervisor.startTime) : null,
    state: up?.supervisor?.pid === pid ? up.state : null,
    note: up?.note ?? why,
  };
}

async function readSupervisorLogTail(dir: string): Promise<string | null> {
  try {
    const b = await new LocalHost().readFile(join(dir, NSA_DIR, SUPERVISOR_LOG), 64 * 1024);
    return b.toString('utf8').trim().split('\n').pop() ?? null;
  } catch {
    return null;
  }
}

/**
 * Relaunches a `launch --node` run on all its nodes from the ONE newest complete checkpoint of its
 * out_dir (picked once, on the first node, which reads the run dir): refused (InputError exit 3,
 * nothing started anywhere) while any node's supervisor is in charge or its trainer still runs, or
 * with a .HALT present unless removeStaleHalt; a node out of reach fails it before anything starts
 * (exit 1). Each node's start is audited with its node and the checkpoint.
 */
export async function relaunchNodes(
  primary: Host,
  nodes: readonly LaunchNode[],
  dirs: RunDirs,
  opts: { removeStaleHalt: boolean; allowCommand: string[] },
): Promise<NodesLaunch & { resumeFrom: string | null; pickWhy: string }> {
  if (readOnlyMode()) throw new InputError(`relaunch refused: ${READ_ONLY_REFUSAL} (NSA_TOP_READ_ONLY=1)`);
  const actor = await currentActor(primary);
  const rec = await readNodesRecord(primary, dirs.runDir);
  if (!rec)
    throw new InputError(
      `relaunch --node: ${dirs.runDir} was not started by nsa-top launch --node (no ${NSA_DIR}/${NODES_FILE})`,
    );
  const want = rec.nodes.map((n) => n.label);
  const given = nodes.map((n) => n.label);
  if (want.length !== given.length || want.some((l) => !given.includes(l)))
    throw new InputError(
      `relaunch --node: the run was launched on ${want.join(', ')}; name the same nodes (got ${given.join(', ')})`,
    );
  const down = nodes.filter((n) => !n.host);
  if (down.length)
    throw new InputError(
      `${down.map((n) => `node ${n.label} unreachable: ${n.error || 'not connected'}`).join('; ')}. Nothing was started on any node.`,
      1,
    );
  const hostOf = (label: string) => nodes.find((n) => n.label === label)!.host!;
  // nothing of the run may still run anywhere: never a second trainer into the one rendezvous
  const busy: string[] = [];
  for (const n of rec.nodes) {
    const h = hostOf(n.label);
    const st = await readSupervisorState(h, n.dir);
    if (st && supervisorInCharge(st.state))
      busy.push(`node ${n.label}: its supervisor (pid ${st.supervisor?.pid}) is ${st.state}`);
    else if (st?.child?.startTime && (await verifyProcess(h, st.child).catch(() => false)))
      busy.push(`node ${n.label}: its trainer (pid ${st.child.pid}) still runs`);
    const plan = await readLaunchPlan(h, n.dir);
    if (!plan?.node) busy.push(`node ${n.label}: no node launch plan in ${n.dir}`);
    else {
      const seen = describeWillRun(planPhases({ ...plan, smoke: null }), { allow: opts.allowCommand });
      if (seen.refusal) busy.push(`node ${n.label}: ${seen.refusal}`);
    }
  }
  if (busy.length) throw new InputError(`relaunch refused: ${busy.join('; ')}. Nothing was started on any node.`, 3);
  const halt = await haltText(primary, dirs.outDir);
  if (halt !== null) {
    if (!opts.removeStaleHalt)
      throw new InputError(
        `relaunch refused: .HALT present in ${dirs.outDir} ("${halt.trim()}"): every rank would stop at step 1. Confirm its removal: --remove-stale-halt. Nothing was started on any node.`,
        3,
      );
    const rm = await removeStaleHalt(primary, dirs, actor);
    if (rm.result !== 'ok') throw new InputError(`relaunch: could not remove .HALT: ${rm.detail}`, 1);
  }
  // the one checkpoint, for every node
  const pick = await pickResumeCheckpoint(primary, dirs.outDir);
  const resumeFrom = pick.found?.path ?? null;
  const pickWhy = describePick(pick);
  const starts = await Promise.all(
    rec.nodes.map(async (n): Promise<NodeStart> => {
      const h = hostOf(n.label);
      let pid: number | null = null;
      const record = await audited(
        primary,
        dirs,
        { actor, action: 'relaunch', target: { runDir: dirs.runDir, node: n.label, nodeRank: n.nodeRank, dir: n.dir } },
        async () => {
          const a = await startOnNode(h, { relaunch: 1, dir: n.dir, resumeFrom, allow: opts.allowCommand });
          const target = { node: n.label, nodeRank: n.nodeRank, supervisorPid: a.pid || null, resumeFrom };
          if (a.error || !a.pid || a.state === null || a.state === 'failed')
            return {
              result: 'failed',
              detail: `node ${n.label}: ${a.error ?? `the supervisor (pid ${a.pid}) did not come up${a.note ? `: ${a.note}` : ''}`}`,
              target,
            };
          pid = a.pid;
          return {
            result: 'ok',
            detail: `node ${n.label} (node_rank ${n.nodeRank}): supervisor pid ${a.pid}; ${pickWhy}`,
            target,
          };
        },
      );
      return { label: n.label, nodeRank: n.nodeRank, dir: n.dir, record, supervisorPid: pid };
    }),
  );
  return { runDir: dirs.runDir, outDir: dirs.outDir, nodes: starts, resumeFrom, pickWhy };
}
