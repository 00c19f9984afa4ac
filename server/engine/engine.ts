/**
 * The engine's public API. The engine itself lives in one file per concern (see
 * docs/architecture.md, "Where each engine rule lives"); this facade keeps imports elsewhere stable.
 */
export { createEngineDeps, type EngineDeps } from "./deps";
export type { StepWaiting } from "./run-transaction";
export { startRun, DEFAULT_APPROVAL_TIMEOUT_MS, DEFAULT_APPROVAL_WARNING_MS, type StartRunInput } from "./start-run";
export { ABORT_SETTLE_MS, executeStepJob, WorkerShutdownError, abortAllLocally, abortRunLocally } from "./step-runner";
export {
  decideApproval,
  answerQuestion,
  cancelRun,
  pauseRun,
  resumeRun,
  retryStep,
  skipStep,
  pauseRunForSignal,
  resumeRunAfterSignal,
} from "./commands";
export { warnApprovalExpiring, expireApproval } from "./approval-timers";
export { decideFanOutGroup, fanOutGroupView, groupViewSchema, type GroupView } from "./fan-out-decisions";
export { renewLeases, LeaseLostError, recoverInterruptedSteps, interruptedReason } from "./leases";
export { MISSED_BEATS } from "./queue-locks";
export { adoptPlanVersion, adoptPlanVersionIntoRun } from "./plan-versions";
export { checkAgentTaskUpdate, updateAgentTasks, type AgentTaskStatus, type AgentTaskUpdate } from "./agent-tasks";
