// Shared helpers for the reader tests: temp run dirs (under os.tmpdir(), removed by the caller).
import { cpSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { DirPoll, ReadRequest } from '../../../src/remote/host.js';
import { LocalHost } from '../../../src/remote/local/host.js';

export const FIXTURES = fileURLToPath(new URL('../../fixtures/nsa-vibe/', import.meta.url));

export function tempDir(prefix = 'nsa-top-readers-'): { dir: string; done(): void } {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  return { dir, done: () => rmSync(dir, { recursive: true, force: true }) };
}

/** a writable copy of one fixture run */
export function copyFixture(name: string): { dir: string; done(): void } {
  const t = tempDir();
  const dir = join(t.dir, name);
  cpSync(join(FIXTURES, name), dir, { recursive: true });
  return { dir, done: t.done };
}

export function hbLine(o: Record<string, unknown>): string {
  return JSON.stringify({ iso: 'x', rank: 0, pid: 100, step: 0, ...o }) + '\n';
}

export function progressLine(step: number, ts: number, extra: Record<string, unknown> = {}, pid = 100): string {
  return (
    hbLine({ ts, step, pid, msg: 'progress', loss: 5 - step / 1000, toks_per_s: 1000 + step, ...extra }) +
    hbLine({ ts: ts + 0.0001, step, pid, msg: 'step_end', phase: 'end' })
  );
}

/**
 * A LocalHost whose reads of the paths `refuse` picks answer EACCES: root ignores file modes here,
 * so a permission error on one file is made by the host.
 */
export class RefusingHost extends LocalHost {
  constructor(private readonly refuse: (path: string) => boolean) {
    super();
  }

  override async pollDir(dir: string, reads: ReadRequest[], subdirs?: string[]): Promise<DirPoll> {
    const p = await super.pollDir(dir, reads, subdirs);
    p.reads = p.reads.map((r) =>
      this.refuse(r.path) ? { ...r, stat: null, data: Buffer.alloc(0), error: 'EACCES: permission denied' } : r,
    );
    return p;
  }
}
