#!/usr/bin/env -S node --max-semi-space-size=1
// Thin entry: the CLI lives in dist/cli.js, bundled from src/cli.ts by `npm run build` (run by npm ci).
// --max-semi-space-size=1: a 1 MiB young generation keeps the cockpit under 100 MB RSS (measured in
// bench/cockpit.bench.ts: ~115 MB → ~93 MB at the same CPU). Processes nsa-top starts itself
// (trainer ranks, the supervisor) run `node bin/nsa-top.js` and keep node's defaults.
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

// Without a listener, Node answers SIGUSR1 by opening its inspector on port 9229. The cockpit tells
// operators to send SIGUSR1 to trainers; one aimed at a process still loading must never do that.
// The reference trainer replaces this listener with its stack-dump handler once it is up.
const command = process.argv[2];
process.on('SIGUSR1', () => {
  if (command === 'train') process.stderr.write(`[train] pid ${process.pid}: SIGUSR1 while starting: no dump yet\n`);
});

const cli = join(dirname(fileURLToPath(import.meta.url)), '..', 'dist', 'cli.js');
if (!existsSync(cli)) {
  process.stderr.write('nsa-top: dist/cli.js is missing; run `npm run build` (npm ci runs it for you)\n');
  process.exit(2);
}
const { main } = await import(pathToFileURL(cli).href);
process.exitCode = await main(process.argv.slice(2));
