import { z } from "zod";
import { findSession } from "../agents/sessions";
import { clearSignal } from "../agents/session-signals";
import { applyRecoveryAction, rerunFrom } from "../engine/recovery";
import { recoveryActionSchema } from "../engine/recovery-action";
import { removeWorktreesOfRunIn } from "../agents/workspace-work";
import { defineOperation } from "./operation";
import { PERSON_ONLY } from "./policy";
import type { AnyOperation } from "./operation";

/**
 * Steering a run past what stopped it — re-running from a step, applying a recovery to a failed
 * step, clearing an agent's blocker — is a person's decision: each may make something run that
 * nobody approved in this form, so an agent never does it.
 */
const runId = z.uuid();
const stepId = z.string().min(1).max(64);

export const runRerunFrom = defineOperation({
  name: "run.rerun_from",
  summary:
    "A new run from a step on, reusing the other steps' recorded results; optional new arguments (a person only)",
  callers: PERSON_ONLY,
  role: "approver",
  input: z.object({ runId, stepId, args: z.record(z.string(), z.unknown()).optional() }),
  output: z.object({ runId: z.string(), planVersion: z.number() }),
  run: ({ app, identity }, input) => rerunFrom(app.engine, app.db.prisma, { ...input, actor: identity.name }),
});

export const runApplyRecovery = defineOperation({
  name: "run.apply_recovery",
  summary: "Retry a failed step with new arguments, skip it, insert steps before it, or abort the run (a person only)",
  callers: PERSON_ONLY,
  role: "approver",
  input: z.object({ runId, stepId, action: recoveryActionSchema }),
  output: z.object({ planVersion: z.number().optional() }),
  async run({ app, identity }, input) {
    const result = await applyRecoveryAction(app.engine, app.db.prisma, { ...input, actor: identity.name });
    // Worktrees (issue "Parallel agent work"): a recovery that aborts the run removes its worktrees.
    if (input.action.kind === "abort") await removeWorktreesOfRunIn(app.engine, input.runId);
    return result;
  },
});

export const signalClear = defineOperation({
  name: "signal.clear",
  summary: "Clear a signal an agent session raised; a cleared blocker lets its run go on (a person only)",
  callers: PERSON_ONLY,
  role: "approver",
  input: z.object({ sessionId: z.string().min(1).max(200), signalId: z.string().min(1).max(100) }),
  output: z.object({ status: z.literal("success"), message: z.string() }),
  async run({ app, identity }, input) {
    return clearSignal(app, await findSession(app, input.sessionId), input.signalId, identity.name);
  },
});

export const steeringOperations = [runRerunFrom, runApplyRecovery, signalClear] as AnyOperation[];
