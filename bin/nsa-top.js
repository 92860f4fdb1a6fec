#!/usr/bin/env node
// Thin entry: the CLI lives in dist/cli.js, bundled from src/cli.ts by `npm run build` (run by npm ci).
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const cli = join(dirname(fileURLToPath(import.meta.url)), '..', 'dist', 'cli.js');
if (!existsSync(cli)) {
  process.stderr.write('nsa-top: dist/cli.js is missing; run `npm run build` (npm ci runs it for you)\n');
  process.exit(2);
}
const { main } = await import(pathToFileURL(cli).href);
process.exitCode = await main(process.argv.slice(2));
