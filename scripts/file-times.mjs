// A node:test reporter that writes one line per test file as the file's process ends:
// "<wall ms>\t<cpu ms>\t<pass|fail>\t<file>", plus "start\t<file>" when a file begins, so that a run
// stopped by run-tests.mjs's time limit still says which file was running. run-tests.mjs reads the
// lines back after the run and prints the files sorted by wall time: the suite has a time budget
// (~20 min on 2 cores) and the slow files are where it goes.
// The runner reports each file as a top-level test named by its absolute path; its duration is the
// file's whole process (start-up, imports, every test and hook in it). The CPU figure is the growth
// of this runner's reaped-children CPU time (/proc/self/stat cutime + cstime) since the previous
// file ended: files run one at a time, so it is that file's process and the processes it waited
// for (CLIs, trainers), a measure a loaded machine barely changes, unlike the wall time. -1 where
// /proc is not there.
import { readFileSync } from 'node:fs';

const TICK_MS = 10; // Linux USER_HZ = 100

function childrenCpuMs() {
  try {
    const s = readFileSync('/proc/self/stat', 'utf8');
    const f = s.slice(s.lastIndexOf(')') + 2).split(' ');
    return (Number(f[13]) + Number(f[14])) * TICK_MS;
  } catch {
    return -1;
  }
}

export default async function* fileTimes(source) {
  let cpu0 = childrenCpuMs();
  for await (const ev of source) {
    const d = ev.data;
    if (!d || d.nesting !== 0 || !d.file || d.name !== d.file) continue;
    if (ev.type === 'test:dequeue') yield `start\t${d.file}\n`;
    // a file's own test:pass/test:fail is not emitted (only its tests'); test:complete always is
    else if (ev.type === 'test:complete') {
      const ms = Math.round(d.details?.duration_ms ?? 0);
      const cpu1 = childrenCpuMs();
      const cpu = cpu0 < 0 || cpu1 < 0 ? -1 : cpu1 - cpu0;
      cpu0 = cpu1;
      yield `${ms}\t${cpu}\t${d.details?.passed ? 'pass' : 'fail'}\t${d.file}\n`;
    }
  }
}
