// `npm run bench`: runs every bench/*.bench.ts in its own process, one after another (the machine
// is small and shared; benchmarks compare ratios measured within one run, never absolute times
// across runs). Each bench prints its own table; NSA_BENCH_FILTER=substr picks some.
import { spawnSync } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const filter = process.env.NSA_BENCH_FILTER;
const files = readdirSync(here)
  .filter((f) => f.endsWith('.bench.ts') && (!filter || f.includes(filter)))
  .sort();
if (files.length === 0) {
  console.error('bench: no bench/*.bench.ts files matched');
  process.exit(1);
}
let failed = 0;
for (const f of files) {
  console.log(`\n=== ${f}`);
  const r = spawnSync(process.execPath, ['--expose-gc', '--import', 'tsx', join(here, f)], { stdio: 'inherit' });
  if (r.status !== 0) {
    failed++;
    console.error(`bench: ${f} exited ${r.status}`);
  }
}
process.exit(failed ? 1 : 0);
