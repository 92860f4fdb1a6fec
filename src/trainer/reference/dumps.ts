// SIGUSR1 → stack dump, installed as early as the process can: a SIGUSR1 arriving before a handler
// exists would kill the process (the signal's default action). Until the run dir is known the signal
// is only logged; after that, the dump shows whatever the ActivityStack says the loop is doing.
import { ActivityStack, writeStackDump } from './activity.js';

/**
 * Node flags that install a SIGUSR1 listener before anything else loads. Without a listener, Node
 * answers SIGUSR1 by starting its inspector (a debugger port on 9229), and a process still loading
 * the bundle has none yet. The launcher puts these after process.execPath when it spawns ranks;
 * anything that starts `nsa-top train` can do the same. The real handler replaces this one.
 */
export const EARLY_SIGUSR1_NODE_ARGS = [
  // one argument (--import=URL), so bin/nsa-top.js stays within the first three argv entries that
  // the process matcher (src/remote/procs.ts) looks at
  '--import=data:text/javascript,process.on("SIGUSR1",()=>process.stderr.write("[train] pid "+process.pid+": SIGUSR1 while starting: no dump yet\\n"));' +
    'if(process.env.NSA_TOP_EARLY_SIGUSR1_MARK)process.stderr.write("early SIGUSR1 listener installed\\n")',
];

export interface DumpHandler {
  act: ActivityStack;
  /** where dumps go (null: not known yet) */
  setTarget(dir: string, rank: number): void;
  uninstall(): void;
}

export function installDumpHandler(dir: string | null, rank: number): DumpHandler {
  const act = new ActivityStack();
  act.enter('startup');
  let target = dir;
  let r = rank;
  const onUsr1 = () => {
    if (!target) {
      process.stderr.write(
        `[train] pid ${process.pid}: SIGUSR1 during startup, before the run dir is known: no dump\n`,
      );
      return;
    }
    try {
      const p = writeStackDump(target, r, act);
      process.stderr.write(`[train] rank ${r}: SIGUSR1 → stack dump ${p}\n`);
    } catch (err) {
      process.stderr.write(`[train] rank ${r}: stack dump failed: ${(err as Error).message}\n`);
    }
  };
  // Take over from any early listener (EARLY_SIGUSR1_NODE_ARGS) without ever having none installed.
  const early = process.listeners('SIGUSR1');
  process.on('SIGUSR1', onUsr1);
  for (const l of early) process.off('SIGUSR1', l);
  return {
    act,
    setTarget(d, rk) {
      target = d;
      r = rk;
    },
    uninstall() {
      process.off('SIGUSR1', onUsr1);
    },
  };
}
