// One trainer per run dir: <out>/.train.lock holds the pid of the `nsa-top train` process (the
// launcher, or the single process) that writes it. A second start into the same dir is refused while
// that pid is alive and still an `nsa-top train`; a lock left by a killed process is taken over.
import { closeSync, openSync, readFileSync, unlinkSync, writeSync } from 'node:fs';
import { join } from 'node:path';

export class LockError extends Error {}

function holderAlive(pid: number): boolean {
  if (!Number.isInteger(pid) || pid <= 0 || pid === process.pid) return false;
  try {
    process.kill(pid, 0);
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
  try {
    const cmd = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
    return cmd.some((a) => /nsa-top/.test(a)) && cmd.includes('train');
  } catch {
    return true; // no /proc: trust the live pid
  }
}

/** Takes the lock or throws LockError; returns a release function (also run at process exit). */
export function lockRunDir(dir: string): () => void {
  const path = join(dir, '.train.lock');
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      const fd = openSync(path, 'wx');
      writeSync(fd, `${process.pid}\n`);
      closeSync(fd);
      let released = false;
      const release = () => {
        if (released) return;
        released = true;
        try {
          if (readFileSync(path, 'utf8').trim() === String(process.pid)) unlinkSync(path);
        } catch {
          /* gone already */
        }
      };
      process.once('exit', release);
      return release;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      let pid = NaN;
      try {
        pid = Number(readFileSync(path, 'utf8').trim());
      } catch {
        /* vanished between open and read: retry */
      }
      if (holderAlive(pid))
        throw new LockError(
          `another nsa-top train (pid ${pid}) is writing ${dir}; stop it first or choose another --out`,
        );
      try {
        unlinkSync(path); // stale: its process is gone
      } catch {
        /* someone else took it over */
      }
    }
  }
  throw new LockError(`could not take ${path}`);
}
