// The one place the runtime reaches the model (src/trainer/reference/model/**, owned by the model
// engineer): createModel, the optimizer and the schedule.
export { createModel, defaultModelConfig, AdamW, lrAt, clipGradNorm } from './stub-model.js';
export type { Model, ModelConfig, StepStats } from './stub-model.js';
