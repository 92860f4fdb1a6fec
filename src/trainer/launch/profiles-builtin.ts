// Built-in launch profiles: the runbooks' cases (contract §3) and the reference trainer's demo and
// smoke runs. Kept as YAML text so they go through exactly the parser and checks a user's file does.
// A user's profile file (nsa-top launch --profiles FILE) adds presets/profiles and may override these
// by name.

export const BUILTIN_SOURCE = '<built-in profiles>';

export const BUILTIN_PROFILES_YAML = `# nsa-top built-in launch profiles
presets:
  # scripts/train_m7c_prime.sh defaults (contract §3.1)
  nccl-prime:
    NCCL_P2P_DISABLE: "1"
    NCCL_IB_DISABLE: "1"
    TORCH_NCCL_BLOCKING_WAIT: "1"
    NCCL_DEBUG: WARN
    TOKENIZERS_PARALLELISM: "false"
  # 2xA100 PCIe production set (contract §3.3 run_m7c_2xa100_production.sh and §3.6)
  a100-pcie-production:
    NSA_PREFILL_BATCHED: "1"
    NSA_DISABLE_AUX_STATS: "1"
    NSA_DDP_STATIC_GRAPH: "1"
    NSA_DDP_FIND_UNUSED: "0"
    NSA_DDP_BUCKET_MB: "25"
    NSA_DDP_COMPRESS: bf16
    NSA_DDP_DISABLE_GC: "1"
    NSA_SEL_RANGES_V2: "1"
    NSA_USE_FA2: "1"
    NSA_MEM_DUMP_EVERY: "100"
    NSA_LOG_GRAD_NORM: "1"
    NCCL_ALGO: Ring
    NCCL_PROTO: Simple
    NCCL_P2P_DISABLE: "0"
    NCCL_IB_DISABLE: "1"
    NCCL_ASYNC_ERROR_HANDLING: "1"
    TORCH_NCCL_BLOCKING_WAIT: "1"
    TORCH_BACKEND: nccl
    PYTORCH_CUDA_ALLOC_CONF: "max_split_size_mb:256,expandable_segments:True"
  # 1xA100 production (contract §3.4), with the batched prefill the validated 9.2k tok/s run used
  # (the script itself left NSA_PREFILL_BATCHED unset: the sequential "step-5 hang" path)
  a100-single-production:
    NSA_PREFILL_BATCHED: "1"
    NSA_SDPA_NO_FLASH: "1"
    NSA_USE_FA2: "0"
    NSA_FA2_MIN_LEN_WIN: "-1"
    NSA_FA2_MIN_LEN_CMP: "-1"
    NSA_USE_SEL_VARLEN: "0"
    NSA_USE_TRITON_SEL: "0"
    NSA_USE_SEL_PACK: "0"
    NSA_USE_SEL_MASK: "1"
    NSA_FORCE_PARITY: "0"
    NSA_FORCE_SEL_MASK: "1"
    NSA_STRICT_ASSERTS: "0"
    PYTORCH_CUDA_ALLOC_CONF: "expandable_segments:True"
    TORCH_CUDNN_ALLOW_TF32: "1"
    TORCH_ALLOW_TF32_CUBLAS_OVERRIDE: "1"

profiles:
  demo:
    description: reference trainer, 2 ranks, 3000 steps (a few minutes on a laptop), a checkpoint every 25, the newest 5 kept
    trainer: reference
    procs: 2
    steps: 3000
    save_every: 25
    log_every: 5
    # the trainer's own retention (nsa-top never deletes a training artifact): 5 × ~1.6 MiB on disk,
    # not 120 of them
    args: [--keep-checkpoints, "5"]
    env:
      NSA_HEARTBEAT_EVERY: 1
    restart:
      max_restarts: 3
      backoff_s: 2
    # the reference trainer stops within a step of .HALT: a hung demo (--inject hang) must not
    # outlive its quit by the production default of 5 minutes
    stop:
      halt_grace_s: 10
      sigint_grace_s: 5

  cpu-smoke:
    description: reference trainer, one rank, 60 steps; checks the machine, the supervisor and the cockpit
    trainer: reference
    procs: 1
    steps: 60
    save_every: 20
    log_every: 5
    env:
      NSA_HEARTBEAT_EVERY: 1
    restart:
      max_restarts: 1
      backoff_s: 1

  m7c-prime:
    description: scripts/train_m7c_prime.sh — config by GPU memory, torchrun over every GPU, smoke first
    trainer: nsa-vibe
    config:
      by_gpu_memory:
        80g: configs/m7c_125m_80g.yaml
        40g: configs/m7c_125m_40g.yaml
        24g: configs/m7c_125m_24g.yaml
    procs: gpus
    args: [--dataset, fineweb_edu]
    env_presets: [nccl-prime]
    env:
      PYTHONPATH: .
      NSA_HEARTBEAT_EVERY: 1
    # the runbooks' smoke before a production run (the same for every m7c profile)
    smoke: &showcase-smoke
      config: configs/train_showcase.yaml
      steps: 50
    restart:
      max_restarts: 3
      backoff_s: 30

  m7c-2xa100-production:
    description: run_m7c_2xa100_production.sh phase 2 — 2xA100 PCIe DDP on FineWeb-Edu (no rm -rf, no timeout)
    trainer: nsa-vibe
    config: configs/m7c_125m_2xa100_production.yaml
    procs: 2
    args: [--dataset, fineweb_edu, --fwe-report-docs, "1000", --loader-timeout, "120", --synthetic-on-fail]
    env_presets: [a100-pcie-production]
    env:
      PYTHONPATH: .
      # a beat per step on every rank: slow DDP steps x log_every would otherwise look like stalls (§2.8e)
      NSA_HEARTBEAT_EVERY: 1
    smoke: *showcase-smoke
    restart:
      max_restarts: 3
      backoff_s: 60

  m7c-1xa100-production:
    description: run_m7c_1xa100_production.sh — one A100, masked selection, batched prefill
    trainer: nsa-vibe
    config: configs/m7c_125m_1xa100_prod_v1.yaml
    procs: 1
    args: [--dataset, fineweb_edu, --ddp, "0", --fwe-report-docs, "1000", --loader-timeout, "120", --synthetic-on-fail]
    env_presets: [a100-single-production]
    env:
      PYTHONPATH: .
      NSA_HEARTBEAT_EVERY: 1
    restart:
      max_restarts: 3
      backoff_s: 60
`;
