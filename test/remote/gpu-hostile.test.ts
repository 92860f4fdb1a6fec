// nvidia-smi as hostile input: impossible values, garbage, a stream without newlines, and one that
// ignores SIGTERM. Real child processes (fake nvidia-smi scripts first on PATH), no mocks.
import assert from 'node:assert/strict';
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { GpuMonitor } from '../../src/remote/gpu.js';
import { LocalHost } from '../../src/remote/local/host.js';
import { procsUnder } from '../helpers/procs.js';

/** a fake nvidia-smi whose --query-gpu stream runs `body`; -L and the apps query print nothing */
function fakeSmi(body: string): { dir: string; env: Record<string, string>; done(): void } {
  const dir = mkdtempSync(join(tmpdir(), 'nsa-hostile-smi-'));
  const p = join(dir, 'nvidia-smi');
  writeFileSync(p, `#!/bin/sh\ncase "$*" in *--query-gpu*) ;; *) exit 0;; esac\n${body}\n`);
  chmodSync(p, 0o755);
  return {
    dir,
    env: { PATH: `${dir}:${process.env.PATH}` },
    done: () => rmSync(dir, { recursive: true, force: true }),
  };
}

async function until<T>(f: () => T | null | undefined | false, what: string, ms = 20_000): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = f();
    if (v) return v;
    if (Date.now() > end) throw new Error(`gave up waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

test(
  'values out of any range are shown as invalid, not as is; a fake ignoring SIGTERM is killed and reaped on stop',
  { timeout: 60_000 },
  async () => {
    const f = fakeSmi(
      `trap '' TERM\nwhile :; do echo '0, NVIDIA H100, GPU-x, 1000, 81559, 250, 1e+308, 700, 99999, 1980, 2619'; sleep 0.2; done`,
    );
    const m = new GpuMonitor(new LocalHost(), { intervalMs: 500, env: f.env });
    try {
      await m.start();
      const g = await until(() => {
        const c = m.current();
        return c.status === 'ok' && c;
      }, 'a sample');
      const d = g.devices[0]!;
      assert.equal(d.utilPct, null);
      assert.equal(d.powerW, null);
      assert.equal(d.tempC, null);
      assert.equal(d.memUsedMiB, 1000, 'values in range stay');
      assert.equal(d.powerLimitW, 700);
      assert.deepEqual(d.invalid, ['util 250%', 'power 1e+308 W', 'temp 99999 °C']);
      assert.ok(procsUnder(f.dir).length > 0, 'the fake runs');
    } finally {
      m.stop();
    }
    // it ignores SIGTERM: only the SIGKILL that follows ends it, and nothing of it is left
    await until(() => procsUnder(f.dir).length === 0, 'no fake nvidia-smi left after stop()');
    f.done();
  },
);

test('garbage from nvidia-smi is "unparseable output", not "not answering"', { timeout: 60_000 }, async () => {
  const f = fakeSmi(`while :; do echo 'hello, this is not a sample'; sleep 0.2; done`);
  const m = new GpuMonitor(new LocalHost(), { intervalMs: 500, timeoutMs: 1500, env: f.env });
  try {
    void m.start();
    const g = await until(() => {
      const c = m.current();
      return c.status === 'error' && c;
    }, 'an error status');
    assert.match(g.message, /unparseable output from nvidia-smi: "hello, this is not a sample"/);
  } finally {
    m.stop();
  }
  await until(() => procsUnder(f.dir).length === 0, 'no fake left');
  f.done();
});

test(
  'an nvidia-smi that never prints a newline costs at most the line cap, and says so',
  { timeout: 60_000 },
  async () => {
    const f = fakeSmi(`trap '' TERM\nyes 0123456789 | tr -d '\\n'`);
    const m = new GpuMonitor(new LocalHost(), { intervalMs: 500, timeoutMs: 1500, env: f.env });
    try {
      void m.start();
      const g = await until(() => {
        const c = m.current();
        return c.status === 'error' && c;
      }, 'an error status');
      assert.match(g.message, /unparseable output from nvidia-smi: "a line longer than 65536 bytes"/);
    } finally {
      m.stop();
    }
    await until(() => procsUnder(f.dir).length === 0, 'no fake left');
    f.done();
  },
);
