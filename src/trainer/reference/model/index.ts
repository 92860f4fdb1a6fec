// Public surface of the reference NSA model (the runtime in ../ codes against exactly this).
export type { ModelConfig, GateStatsOut, SelStatsOut, StepStats, GateOverride, Model, LayoutEntry } from './model.js';
export { createModel, defaultModelConfig, validateConfig, buildLayout, numCmp } from './model.js';
export { AdamW, lrAt, clipGradNorm } from './optim.js';
