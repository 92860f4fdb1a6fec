#!/bin/bash
# Records real nvidia-smi outputs as fixtures for the GPU reader (src/remote/gpu.ts): the exact
# queries nsa-top runs, idle and under a torch load, plus -L and -q. Run on a machine with a GPU:
#   OUT=/tmp/rec bash scripts/record-nvidia-smi.sh   → $OUT/<state>/{gpu.csv,apps.csv,L.txt,q.txt,...}
set -u
OUT=${OUT:?OUT not set}
GPU_Q='--query-gpu=index,name,uuid,memory.used,memory.total,utilization.gpu,power.draw,power.limit,temperature.gpu,clocks.sm,clocks.mem'
APP_Q='--query-compute-apps=pid,gpu_uuid,used_memory'
F='--format=csv,noheader,nounits'
rec() { # state
  local d="$OUT/$1"; mkdir -p "$d"
  nvidia-smi "$GPU_Q" "$F" > "$d/gpu.csv" 2> "$d/gpu.err"; echo $? > "$d/gpu.rc"
  nvidia-smi "$APP_Q" "$F" > "$d/apps.csv" 2> "$d/apps.err"; echo $? > "$d/apps.rc"
  nvidia-smi -L > "$d/L.txt" 2>&1
  nvidia-smi -q > "$d/q.txt" 2>&1
  nvidia-smi > "$d/smi.txt" 2>&1
  # the stream the reader keeps open: a burst of lines per -lms interval
  timeout 3 nvidia-smi "$GPU_Q" "$F" -lms 500 > "$d/gpu-stream.csv" 2>&1
  ps -eo pid,lstart,args > "$d/ps.txt"
}
{ nvidia-smi --version; uname -a; python3 -c 'import torch; print("torch", torch.__version__, torch.cuda.is_available())'; } > "$OUT/versions.txt" 2>&1
rec idle
cat > /tmp/load.py <<'PY'
import os, sys, time, torch
a = torch.randn(8192, 8192, device='cuda', dtype=torch.bfloat16)
b = torch.randn(8192, 8192, device='cuda', dtype=torch.bfloat16)
hold = torch.empty(int(float(sys.argv[1]) * 2**30), dtype=torch.uint8, device='cuda')  # a training run's footprint
open(sys.argv[2], 'w').write(str(os.getpid()))
end = time.time() + float(sys.argv[3])
while time.time() < end:
    for _ in range(50): c = a @ b
    torch.cuda.synchronize()
PY
if python3 -c 'import torch; assert torch.cuda.is_available()' 2>/dev/null; then
  python3 /tmp/load.py 20 /tmp/load1.pid 40 > "$OUT/load1.log" 2>&1 &
  python3 /tmp/load.py 7 /tmp/load2.pid 40 > "$OUT/load2.log" 2>&1 &
  sleep 20
  rec load
  echo "$(cat /tmp/load1.pid 2>/dev/null) $(cat /tmp/load2.pid 2>/dev/null)" > "$OUT/load/pids.txt"
  wait
  sleep 3
  rec after
else
  echo "no torch with CUDA" > "$OUT/no-torch.txt"
fi
ls -la "$OUT"/*
