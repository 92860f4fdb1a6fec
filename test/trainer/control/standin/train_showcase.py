# A stand-in for the real nsa-vibe trainer's SIGUSR1 stack dumps (scripts/train_showcase.py
# TS:208-226, contract §1.12): a custom handler on SIGUSR1 and SIGTERM writes
# stackdump_<int(time.time())>.txt into train.out_dir (no rank, no pid in the name, opened "w": two
# ranks answering in one second share one file and the second write replaces the first), a first
# line "Signal <n> at <utc iso>Z", then "--- Thread: <name> (<ident>) ---" and the stack of every
# thread, like the real one; env.json and a boot heartbeat as at its start. An in-process watchdog thread sleeps, as the real one does.
# Test knobs (not the real trainer's): STANDIN_JITTER_MS="lo-hi" delays each handler by a random
# time in that range before it takes the second (a busy rank answers late); every write is also
# appended to standin_writes_rank<R>.log ("<name>\t<first line>") so a test can tell whose a file is.
import datetime, json, os, random, re, signal, sys, threading, time, traceback

cfg = open(os.environ.get("CONFIG", "configs/train_showcase.yaml")).read()
out_dir = re.search(r"out_dir:\s*\"?([^\"\s}]+)", cfg).group(1)
rank = int(os.environ.get("RANK", "0"))
lo, _, hi = os.environ.get("STANDIN_JITTER_MS", "0-0").partition("-")
lo, hi = int(lo), int(hi or lo)
side = os.path.join(os.environ.get("STANDIN_SIDE_DIR", out_dir), f"standin_writes_rank{rank}.log")


def dump_stack(signum, frame):
    time.sleep(random.uniform(lo, hi) / 1000.0)
    ts = int(time.time())
    path = os.path.join(out_dir, f"stackdump_{ts}.txt")
    names = {t.ident: t.name for t in threading.enumerate()}
    head = f"Signal {signum} at {datetime.datetime.utcnow().isoformat()}Z"
    with open(path, "w") as f:
        f.write(head + "\n")
        for tid, stack in sys._current_frames().items():
            f.write(f"\n--- Thread: {names.get(tid, '?')} ({tid}) ---\n")
            f.write("".join(traceback.format_stack(stack)))
    with open(side, "a") as s:
        s.write(f"stackdump_{ts}.txt\t{head}\n")


def _watchdog():
    while True:
        time.sleep(30.0)


os.makedirs(out_dir, exist_ok=True)
env = {k: v for k, v in os.environ.items() if k.startswith("NSA_") or k in ("WORLD_SIZE", "RANK", "LOCAL_RANK", "CONFIG")}
with open(os.path.join(out_dir, "env.json"), "w") as f:
    f.write(json.dumps({"time": datetime.datetime.utcnow().isoformat() + "Z", "env": env}))
with open(os.path.join(out_dir, f"heartbeat_rank{rank}.jsonl"), "a") as f:
    now = time.time()
    f.write(json.dumps({"ts": now, "pid": os.getpid(), "rank": rank, "step": 0, "msg": "boot", "phase": "start"}) + "\n")
signal.signal(signal.SIGUSR1, dump_stack)
signal.signal(signal.SIGTERM, dump_stack)
threading.Thread(target=_watchdog, daemon=True).start()
print("ready", flush=True)
while True:
    time.sleep(0.05)
