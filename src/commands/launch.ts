// `nsa-top launch --profile NAME [--profiles FILE] [--steps N] [--attach] [-- EXTRA TRAINER ARGS]`: a
// run from a profile, under a detached supervisor.
import { LocalHost } from '../remote/local/host.js';
import { launchRun } from '../trainer/launch/launch.js';
import { relaunchRequestFate } from '../checks/carry.js';
import { sanitize } from '../sanitize.js';
import { defineCommand, parseCommand } from './args.js';
import { HOST_OPTIONS, NODE_OPTIONS, PROFILES_OPTION } from './options.js';
import { launchOnNodes } from './launch-nodes.js';

export const command = defineCommand({
  name: 'launch',
  options: {
    profile: {
      type: 'string',
      required: true,
      value: 'NAME',
      help: 'a profile from `nsa-top profiles` (built-ins: demo, cpu-smoke, m7c-...)',
    },
    ...PROFILES_OPTION,
    steps: { type: 'number', integer: true, min: 1, value: 'N', help: "override the profile's step count" },
    attach: { type: 'boolean', help: 'open the cockpit on the run once it is up' },
    ...NODE_OPTIONS,
    identity: HOST_OPTIONS.identity,
    'accept-new-host-key': HOST_OPTIONS['accept-new-host-key'],
  },
  passThrough: { name: 'TRAINER_ARGS', help: 'passed to the trainer as they are (e.g. -- --inject crash@step=40)' },
  about: `Starts a run from a launch profile under a detached supervisor (its own session: quitting nsa-top or
losing SSH does not stop training). The run gets artifacts/train_runs/<profile>_<YYYYmmdd-HHMMSS>/
with run.info (profile, command, env, config, GPUs, git commit, out_dir) and train.log.
With --node (a profile with nnodes, rdzv_endpoint or master_addr/master_port): one supervisor per
node, each running that node's torchrun (--nnodes, --node_rank in --node order unless node_ranks
says) in nodes/<node_rank>/ of the run dir on that node, started over the node's SSH connection by
the nsa-top installed at the same path there. Every node is reached and checked first: one that
cannot be reached or cannot run its part fails the launch before anything starts anywhere.`,
});

export async function run(argv: string[]): Promise<number> {
  const a = parseCommand(command, argv);
  if (!a) return 0;
  const { profile, profiles: profilesFile, steps, attach } = a.values;
  if (a.values.node?.length || a.values.nodes) return launchOnNodes(a.values, a.rest);
  const host = new LocalHost();
  const r = await launchRun(host, {
    profile,
    profilesFile,
    cwd: process.cwd(),
    steps,
    extraArgs: a.rest,
    judgeRequest: relaunchRequestFate,
  });
  process.stdout.write(
    `launched profile ${profile}\n  run dir     ${r.runDir}\n  out dir     ${r.outDir}\n  supervisor  pid ${r.supervisorPid} (detached)\n` +
      `  watch       nsa-top attach ${r.runDir}\n  log         ${r.runDir}/train.log\n` +
      r.requests.map((l) => `  ${sanitize(l)}\n`).join(''),
  );
  if (attach) {
    const cockpit = await import('./cockpit.js');
    return cockpit.runCockpit({
      runDir: r.runDir,
      acceptNewHostKey: false,
      readOnly: a.values['read-only'],
      intervalS: 1,
    });
  }
  return 0;
}
