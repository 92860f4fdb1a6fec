// The watchdog rules, one file per concern. Each is a pure function of the evaluation context (and,
// for the few that need more than one snapshot, the Checker's bounded history). Each alert says
// what, since when and why.
export { LN3, a, ago, type Draft } from './common.js';
export {
  overdueAfterS,
  pauseAt,
  stallInfo,
  oddRankFromGpus,
  oddRankFromDumps,
  ruleStall,
  hangVerdicts,
  type StallInfo,
  type PauseInfo,
} from './stall.js';
export {
  STATE_TXT,
  refutedByTable,
  ruleProcesses,
  ruleHalt,
  ruleUnreadable,
  ruleAnomalyFile,
  ruleExited,
  ruleExitHang,
  exitHang,
} from './processes.js';
export { ruleThroughput } from './throughput.js';
export { ruleIdentity } from './identity.js';
export { ruleLoss, ruleGradNorm } from './loss.js';
export { gateRecords, gateViolations, ruleGates, type GateRecord } from './gates.js';
export { ruleData } from './data.js';
export { leakOf, ruleMemory, type MemSample } from './memory.js';
