// Compiles the reference trainer's AssemblyScript kernels to WebAssembly SIMD:
//   src/trainer/reference/kernels/assembly/kernels.ts -> src/trainer/reference/kernels/kernels.wasm
// The .wasm is committed (and shipped next to dist/cli.js by scripts/build.mjs), so users never need
// asc; run this after editing the kernels: `node scripts/build-wasm.mjs`.
import { spawnSync } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const kdir = join(root, 'src/trainer/reference/kernels');
const asc = join(root, 'node_modules/assemblyscript/bin/asc.js');
const args = [
  asc,
  join(kdir, 'assembly/kernels.ts'),
  '--outFile',
  join(kdir, 'kernels.wasm'),
  '--enable',
  'simd',
  '-O3',
  '--noAssert',
  '--converge',
  '--runtime',
  'stub',
  '--use',
  'abort=',
  '--initialMemory',
  '32',
];
const r = spawnSync(process.execPath, args, { cwd: root, stdio: 'inherit' });
if (r.status !== 0) {
  console.error(`build-wasm: asc exited ${r.status}`);
  process.exit(r.status ?? 1);
}
console.log('build-wasm: wrote src/trainer/reference/kernels/kernels.wasm');
