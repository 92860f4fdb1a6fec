// The one place the runtime reaches the model (src/trainer/reference/model/**, owned by the model
// engineer): createModel, the optimizer and the schedule.
export {
  createModel,
  defaultModelConfig,
  validateConfig as validateModelConfig,
  AdamW,
  lrAt,
  clipGradNorm,
} from './model/index.js';
export type { Model, ModelConfig, StepStats } from './model/index.js';
