# A multi-node job for nsa-top's tests (test/multinode/): one rank of a real torch.distributed job,
# started by `torchrun --nnodes 2 --rdzv-backend c10d`, doing one gloo all-reduce per step and writing
# the nsa-vibe trainer's files (docs/contract.md) into NSA_TOP_RUN_DIR, which every node shares:
# env.json and training.csv (rank 0), heartbeat_rank{N}.jsonl (every rank: boot, a `beat` per step as
# with NSA_HEARTBEAT_EVERY=1, and rank 0's progress/step_end on log steps), stackdump_<sec>.txt on
# SIGUSR1/SIGTERM (the trainer's own handler, §1.12), and a stop at the step that finds .HALT.
# Named train_showcase.py because that is how nsa-top tells a rank of an nsa-vibe run by its command.
# Arguments: --steps N (default 100000) --step-s S (seconds per step, default 0.2) --log-every K;
# --ignore-halt: never stop at .HALT (a trainer that does not answer it: only a signal ends it).
import datetime
import json
import os
import signal
import sys
import threading
import time
import traceback

import torch
import torch.distributed as dist


def arg(name, default):
    if name in sys.argv:
        return type(default)(sys.argv[sys.argv.index(name) + 1])
    return default


STEPS = arg("--steps", 100000)
STEP_S = arg("--step-s", 0.2)
LOG_EVERY = arg("--log-every", 5)
IGNORE_HALT = "--ignore-halt" in sys.argv
OUT = os.environ["NSA_TOP_RUN_DIR"]
RANK = int(os.environ["RANK"])
WORLD = int(os.environ["WORLD_SIZE"])


def iso():
    return datetime.datetime.utcnow().isoformat() + "Z"


def heartbeat(step, msg, **extra):
    rec = {"ts": time.time(), "iso": iso(), "pid": os.getpid(), "rank": RANK, "step": step, "msg": msg}
    rec.update(extra)
    with open(os.path.join(OUT, "heartbeat_rank%d.jsonl" % RANK), "a") as f:
        f.write(json.dumps(rec) + "\n")


def dump(signum, frame):
    lines = ["Signal %d at %s" % (signum, iso())]
    names = {t.ident: t.name for t in threading.enumerate()}
    for ident, fr in sys._current_frames().items():
        lines.append("--- Thread: %s (%d) ---" % (names.get(ident, "?"), ident))
        lines.extend(l.rstrip("\n") for l in traceback.format_stack(fr))
    with open(os.path.join(OUT, "stackdump_%d.txt" % int(time.time())), "a") as f:
        f.write("\n".join(lines) + "\n")


def main():
    if RANK == 0:
        with open(os.path.join(OUT, "env.json"), "w") as f:
            json.dump({"torch": torch.__version__, "env": {"WORLD_SIZE": str(WORLD), "NSA_TOP_RUN_DIR": OUT}}, f)
    signal.signal(signal.SIGUSR1, dump)
    signal.signal(signal.SIGTERM, dump)
    dist.init_process_group("gloo")
    heartbeat(0, "boot", phase="start", host=os.uname().nodename, group_rank=os.environ.get("GROUP_RANK"))
    t_last = time.time()
    for step in range(1, STEPS + 1):
        heartbeat(step, "beat", phase="step_start")
        # every rank looks for .HALT, and they agree through the same all-reduce that paces the job
        halt = torch.tensor([1.0 if os.path.exists(os.path.join(OUT, ".HALT")) and not IGNORE_HALT else 0.0])
        loss = torch.tensor([5.0 / (1 + step * 0.01) + 0.01 * RANK])
        both = torch.cat([loss, halt])
        dist.all_reduce(both)
        if both[1].item() > 0:
            print("[train] .HALT found at step %d: stopping" % step, flush=True)
            break
        time.sleep(STEP_S)
        if RANK == 0 and (step == 1 or step % LOG_EVERY == 0):
            now = time.time()
            l = both[0].item() / WORLD
            tps = (LOG_EVERY * 128 * WORLD) / max(1e-6, now - t_last)
            t_last = now
            print("step %d | loss %.4f | toks/s %.0f" % (step, l, tps), flush=True)
            heartbeat(step, "progress", loss=l, toks_per_s=tps)
            heartbeat(step, "step_end", phase="end")
            with open(os.path.join(OUT, "training.csv"), "a") as f:
                f.write("%d,%.6f,%.6e,%.0f\n" % (step, l, 3e-4, tps))
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
