// The watchdog's CPU with metrics on (bench/watchdog-metrics.bench.ts) on a long run: the watchdogs
// start once the run has logged 2,500 records (every series window full, hundreds of checkpoints),
// ~7–8 minutes into a reference run, so what grows with a run's length is in the figures. Same rows,
// same target (< 0.5 % of a core with metrics and notify on at 1 Hz).
process.env.NSA_BENCH_LONG = '1';
await import('./watchdog-metrics.bench.js');
export {};
