// A node:test reporter that writes one line per test file as the file's process ends:
// "<wall ms>\t<pass|fail>\t<file>", plus "start\t<file>" when a file begins, so that a run stopped by
// run-tests.mjs's time limit still says which file was running. run-tests.mjs reads the lines back
// after the run and prints the files sorted by wall time: the suite has a time budget (~20 min on
// 2 cores) and the slow files are where it goes.
// The runner reports each file as a top-level test named by its absolute path; its duration is the
// file's whole process (start-up, imports, every test and hook in it).
export default async function* fileTimes(source) {
  for await (const ev of source) {
    const d = ev.data;
    if (!d || d.nesting !== 0 || !d.file || d.name !== d.file) continue;
    if (ev.type === 'test:dequeue') yield `start\t${d.file}\n`;
    // a file's own test:pass/test:fail is not emitted (only its tests'); test:complete always is
    else if (ev.type === 'test:complete') {
      const ms = Math.round(d.details?.duration_ms ?? 0);
      yield `${ms}\t${d.details?.passed ? 'pass' : 'fail'}\t${d.file}\n`;
    }
  }
}
