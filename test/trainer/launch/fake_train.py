# A stand-in for the real nsa-vibe trainer (scripts/train_showcase.py) for adopt/relaunch tests,
# following its on-disk rules (contract §1): config only from the YAML named by CONFIG (relative
# to the cwd), artifacts to its train.out_dir; env.json with CONFIG and NSA_* at boot; a `boot`
# heartbeat, then rank-0 `progress` records; checkpoint_step{N}.pt every train.save_every steps
# (a zip ending in its end-of-central-directory record, like torch.save); --resume loads weights
# only ("[train] resumed from X") and the step count restarts at 1; .HALT stops at the next step
# with exit 0 and NO checkpoint. Step time: FAKE_STEP_MS (50). No torch: starts in milliseconds.
# FAKE_CRASH_RESUMED_AT=N: a resumed run exits 3 at step N (a crash for the supervisor to restart).
import json, os, re, sys, time

args = sys.argv[1:]
resume = None
for i, a in enumerate(args):
    if a == "--resume" and i + 1 < len(args):
        resume = args[i + 1]
    elif a.startswith("--resume="):
        resume = a.split("=", 1)[1]
cfg_path = os.environ.get("CONFIG", "configs/train_showcase.yaml")
print(f"[boot] loading config {cfg_path}", flush=True)
text = open(cfg_path).read()
out = re.search(r"out_dir:\s*\"?([^\"\s}]+)", text).group(1)
save_every = int(re.search(r"save_every:\s*(\d+)", text).group(1))
steps = int(re.search(r"steps:\s*(\d+)", text).group(1))
os.makedirs(out, exist_ok=True)
env = {k: v for k, v in os.environ.items() if k == "CONFIG" or k.startswith("NSA_")}
json.dump({"env": env, "argv": sys.argv}, open(os.path.join(out, "env.json"), "w"))
hb = open(os.path.join(out, "heartbeat_rank0.jsonl"), "a")


def beat(step, msg, **kw):
    hb.write(json.dumps({"ts": time.time(), "pid": os.getpid(), "rank": 0, "step": step, "msg": msg, **kw}) + "\n")
    hb.flush()


beat(0, "boot", phase="start")
if resume:
    try:
        open(resume, "rb").read()
        print(f"[train] resumed from {resume}", flush=True)
    except Exception as e:
        print(f"[train] resume failed: {e}", flush=True)
step_s = float(os.environ.get("FAKE_STEP_MS", "50")) / 1000
for step in range(1, steps + 1):
    if os.path.exists(os.path.join(out, ".HALT")):
        print("[train] HALT file detected \u2014 stopping gracefully.", flush=True)
        json.dump({"steps": step - 1}, open(os.path.join(out, "metrics.json"), "w"))
        sys.exit(0)
    time.sleep(step_s)
    if resume and step == int(os.environ.get("FAKE_CRASH_RESUMED_AT", "0")):
        print(f"[inject] crash at step {step} of a resumed run", flush=True)
        sys.exit(3)
    print(f"step {step:04d} | loss 5.0000 | lr 3.00e-04 | toks/s 1000", flush=True)
    beat(step, "progress", loss=5.0, toks_per_s=1000.0)
    if save_every and step % save_every == 0:
        p = os.path.join(out, f"checkpoint_step{step}.pt")
        with open(p + ".part", "wb") as f:
            f.write(b"PK\x03\x04" + b"\x07" * 4096 + b"PK\x05\x06" + b"\x00" * 18)
        os.replace(p + ".part", p)
json.dump({"steps": steps}, open(os.path.join(out, "metrics.json"), "w"))
