# A stand-in for torch 1.13's torchrun (its elastic agent) for the supervisor's first-gone test:
# starts 2 "ranks" (sleeping python processes with RANK in their environment; rank 0 with a child
# that ends after 2 s, RANK inherited), looks at them only
# every 1 s (torch 1.13's agent: every 5 s, so a killed rank stays a zombie until then), then ends
# the rest with SIGTERM and prints the agent's failure summary naming rank 0 with exitcode 1 — the
# wrong rank, as the real agent did after rank 1 was SIGKILLed — and exits 1. Extra flags ignored.
import datetime
import os
import signal
import subprocess
import sys
import time

ranks = []
for r in range(2):
    env = dict(os.environ, RANK=str(r), LOCAL_RANK=str(r), WORLD_SIZE="2")
    # rank 0 has a short-lived child of its own (a `git` or a compiler the real trainer runs): it
    # inherits RANK=0, and its end is not rank 0 going
    helper = 'sleep 2 & echo "[fake-torchrun] helper $! of rank 0"; ' if r == 0 else ""
    code = "import time\nwhile True: time.sleep(1)"
    ranks.append(subprocess.Popen(["sh", "-c", f'{helper}exec "$0" -c "$1"', sys.executable, code], env=env))
    print(f"[fake-torchrun] rank {r} pid {ranks[-1].pid}", flush=True)
while all(p.poll() is None for p in ranks):
    time.sleep(1)
for p in ranks:
    if p.poll() is None:
        p.send_signal(signal.SIGTERM)
for p in ranks:
    p.wait()
now = datetime.datetime.now().strftime("%Y-%m-%d_%H:%M:%S")
print(
    f"""torch.distributed.elastic.multiprocessing.errors.ChildFailedError:
============================================================
train.py FAILED
------------------------------------------------------------
Root Cause (first observed failure):
[0]:
  time      : {now}
  host      : localhost
  rank      : 0 (local_rank: 0)
  exitcode  : 1 (pid: {ranks[0].pid})
  error_file: <N/A>
============================================================""",
    flush=True,
)
sys.exit(1)
