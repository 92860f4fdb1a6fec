// Public surface of the reference NSA model (the runtime in ../ codes against exactly this).
//
// - createModel(cfg, { seed, kernels }) → Model. Same seed ⇒ same params ⇒ same losses.
//   kernels 'auto' (default) uses the WebAssembly SIMD kernels when kernels.wasm loads, else JS;
//   'wasm' throws with the reason when it cannot.
// - model.params / model.grads are ordinary Float32Arrays in `layout` order (weights stored
//   [in, out]); params are read at the start of every forward, so callers may update them in place
//   (optimizer, checkpoint restore). forwardBackward overwrites grads (mean loss over
//   batch×(seqLen−1) targets).
// - StepStats.gate / .sel are layer-0 statistics of that forward, computed as contract §6 says.
// - setGateOverride('collapse') pins every gate to one-hot on the sliding-window branch (like
//   NSA_FORCE_BRANCH=win); 'uniform' pins 1/3 each; null restores the learned gate. While pinned,
//   the gate MLP gets zero gradient.
// - lrAt counts optimizer steps from 1 (lrAt(1) = lr/warmupSteps).
export type { ModelConfig, GateStatsOut, SelStatsOut, StepStats, GateOverride, Model, LayoutEntry } from './model.js';
export { createModel, defaultModelConfig, validateConfig, buildLayout, numCmp } from './model.js';
export { AdamW, lrAt, clipGradNorm } from './optim.js';
