#!/bin/sh
':' /*-
# A launcher in sh, then node on this same file (JavaScript reads these lines as a string and a
# comment): the node flags depend on the command, which a `#!/usr/bin/env -S node …` line cannot do.
# The pid stays (exec), so does the command line node's process shows.
case "$1" in
  status)
    for a in "$@"; do case "$a" in --full | --full=* | --at | --at=*) exec node "$0" "$@" ;; esac; done
    exec node --no-opt "$0" "$@" ;;
  report | bundle) exec node "$0" "$@" ;;
esac
exec node --min-semi-space-size=4 --max-semi-space-size=4 --interrupt-budget=67584 --predictable "$0" "$@"
*/
// Thin entry: the CLI lives in dist/cli.js, bundled from src/cli.ts by `npm run build` (run by npm ci).
// status, report and bundle parse a run's files once and exit: node's own defaults (status: below). Above every
// other command's flags (the cockpit, the watchdog, the supervisor run for hours at 1 Hz):
// A fixed 4 MiB young generation (bench/cockpit.bench.ts): node's default lets it grow to 16 MiB,
// which put the cockpit at ~115 MB RSS; capped at 1 MiB it stayed ~90 MB but scavenged every
// second and a half, and those scavenges (with their helper threads) were ~0.1 % of a core. At
// 4 MiB the cockpit scavenges every ~6 s at the same RSS.
// --interrupt-budget: V8's default on Node 20 (67584), said for the start-up; every long-running
// command raises it to ~60x below once it runs.
// --predictable: V8 gives the young generation's spare half back to the kernel after every
// scavenge of a process that allocates under 1 MB/s (Heap::ShouldResizeNewSpace: "low allocation
// throughput"), so each page of it is faulted in again: a cockpit or watchdog at 1 Hz took ~7000
// minor faults a minute, ~8 % of its CPU under perf. Predictable mode (V8's flag, used by node's own
// snapshot builds) is the one switch that keeps it: ~500 faults a minute, and side by side on one
// live run the watchdog with metrics 0.54 → 0.46 % of a core, the cockpit 0.55 → 0.41 % (btop 0.51 %),
// for ~2-8 MB more RSS. It also runs V8's GC and optimising compiler on the main thread (no helper
// threads: nothing a long-running nsa-top does needs them; --single-threaded alone changed nothing
// measurable). Not for the one-shots: their optimising compiles on the main thread cost a status of
// a 50k-row run ~16 ms of wall (284 → 268 ms, interleaved medians of 21), and the 4 MiB young
// generation ~10 more (271 → 261 ms); V8 flips neither at run time (predictable crashed it).
// status without --full or --at: --no-opt (no TurboFan). A status reads a bounded tail (~1 MiB a
// file) and exits within ~0.3 s; the functions V8 optimises in that time are mostly done being hot
// when their optimised code arrives, and its compiles ran on a second thread that a loaded box
// (the trainer on every core) takes from the main one. On a live 2-rank reference run: 390 → 317
// ms of CPU, 335 → 312 ms of wall on an idle box; 415 → 327 ms of CPU with its heartbeat at 1 MiB
// (medians of 15, interleaved); the readers bench's 1k/100k/1 GB runs unchanged (2.69/2.69/2.75x a
// bare node). --full reads a whole history and --at a journal: those keep TurboFan.
// Processes nsa-top starts itself (trainer ranks, the supervisor) run `node bin/nsa-top.js` and keep
// node's defaults.
// CommonJS (bin/package.json): node runs it without its ES module loader, whose facade for an
// imported builtin reads every export (node:fs's ReadStream getter loads all of node:stream): ~6 ms
// of a `status --help`'s ~100 ms CPU (interleaved medians of 21). cli.js stays an ES module,
// imported below; status's own bundle is CommonJS anyway.
'use strict';
const { existsSync } = require('node:fs');
const { join } = require('node:path');

// --predictable also gives Math.random the same seed in every process (V8's string hashes are
// seeded at start-up too; nsa-top parses only its run's own files and, on a metrics port, headers
// node caps in number and size). nsa-top's draws (temporary file names) and its libraries' come
// from the OS's random bytes instead: 53 bits a draw, as V8 makes them.
let pool = null;
let drawn = 0;
Math.random = function random() {
  if (pool === null || drawn >= pool.length) {
    pool = require('node:crypto').randomFillSync(new Uint32Array(256));
    drawn = 0;
  }
  const hi = pool[drawn++] >>> 5;
  const lo = pool[drawn++] >>> 6;
  return (hi * 67108864 + lo) / 9007199254740992;
};

// Without a listener, Node answers SIGUSR1 by opening its inspector on port 9229. The cockpit tells
// operators to send SIGUSR1 to trainers; one aimed at a process still loading must never do that.
// The reference trainer replaces this listener with its stack-dump handler once it is up.
const command = process.argv[2];
process.on('SIGUSR1', () => {
  if (command === 'train') process.stderr.write(`[train] pid ${process.pid}: SIGUSR1 while starting: no dump yet\n`);
});

// The cockpit, the watchdog and every other command: ~60x V8's default interrupt budget, so code
// that runs once a second is left in V8's baseline tier instead of being optimised bit by bit for
// minutes; only what is really hot gets TurboFan. Measured side by side: 0.78 → 0.58 % of a core in
// the first minute, 0.52 → 0.42 % in steady state, 3-5 MB less RSS (and the same set at start-up
// in the shebang or here: 0.45 against 0.45 %). V8 reads the flag as each function's budget is set.
// Not for status, report and bundle: node:v8 loads node:stream (~10 ms), which a status no longer
// needs (it prints through fd 1: src/stdout.ts); the cockpit's budget would hold the status of a
// 1.5 MB training.csv in the baseline tier (~1.5x its CPU).
if (command !== 'status' && command !== 'report' && command !== 'bundle')
  require('node:v8').setFlagsFromString('--interrupt-budget=4194304');

const dist = join(__dirname, '..', 'dist');
// `status` runs from one CommonJS file (scripts/build.mjs says why: it loads cheaper than cli.js's
// ES module chunks); cli.js, built from the same sources, is its fallback
const statusCjs = command === 'status' ? join(dist, 'status.cjs') : null;
const cli = join(dist, 'cli.js');
if (!existsSync(cli)) {
  process.stderr.write('nsa-top: dist/cli.js is missing; run `npm run build` (npm ci runs it for you)\n');
  process.exit(2);
}
const loaded =
  statusCjs && existsSync(statusCjs)
    ? Promise.resolve(require(statusCjs))
    : import(require('node:url').pathToFileURL(cli).href);
loaded
  .then(({ main }) => main(process.argv.slice(2)))
  .then(
    (code) => {
      process.exitCode = code;
    },
    (e) => {
      // what an ES module's top-level await rejecting did: the error on stderr, exit 1
      process.exitCode = 1;
      console.error(e);
    },
  );
