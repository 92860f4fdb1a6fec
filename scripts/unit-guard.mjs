// Preloaded (`--import`) into every test file's process by `run-tests.mjs --unit`: the unit tier
// promises tests that start no processes (no sshd, no tmux, no pty, no CLI), so any attempt to start
// one throws here, naming the file that should not be in the tier. Only the test files' own processes
// are guarded (node's runner sets NODE_TEST_CONTEXT there), not the runner that spawns them.
import { syncBuiltinESMExports, createRequire } from 'node:module';

if (process.env.NODE_TEST_CONTEXT) {
  const require = createRequire(import.meta.url);
  const cp = require('node:child_process');
  const refuse = (what) =>
    function unitGuard(...args) {
      const cmd = typeof args[0] === 'string' ? args[0] : '';
      // tsx compiles TypeScript with esbuild, which runs its own service binary: not the test's process
      if (/[/\\]esbuild(\.exe)?$/.test(cmd) || /[/\\]@esbuild[/\\]/.test(cmd)) return real[what](...args);
      const err = new Error(
        `unit tier: ${what}(${JSON.stringify(cmd)}) — this test file starts a process and must not be in ` +
          `UNIT_TESTS (scripts/run-tests.mjs); run it in the full suite instead`,
      );
      process.exitCode = 1;
      process.stderr.write(`${err.message}\n`);
      throw err;
    };
  const names = ['spawn', 'spawnSync', 'exec', 'execSync', 'execFile', 'execFileSync', 'fork'];
  const real = Object.fromEntries(names.map((n) => [n, cp[n]]));
  for (const n of names) cp[n] = refuse(n);
  syncBuiltinESMExports();
  // node-pty forks in native code, past child_process: replace its entry point before anyone imports it
  let pty = null;
  try {
    pty = require('node-pty');
  } catch {
    // not installed: nothing to guard
  }
  if (pty) pty.spawn = refuse('node-pty.spawn');
}
