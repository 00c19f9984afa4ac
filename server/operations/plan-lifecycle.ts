import { z } from "zod";
import { archivePlan, restorePlan } from "../plans/lifecycle";
import { PERSON_ONLY } from "./policy";
import { defineOperation } from "./operation";
import type { AnyOperation } from "./operation";

/**
 * Discarding and restoring plans: a person's decisions, audited (`plan.archived`, `plan.restored`).
 * Rejecting a submitted plan is `plan.review` with decision `reject` (server/operations/plans.ts),
 * the same for the built-in planner's plans and an agent's.
 */
const planId = z.string().min(1).max(100);

export const planArchive = defineOperation({
  name: "plan.archive",
  callers: PERSON_ONLY,
  role: "approver",
  summary: "Archive (discard) a plan: hidden from the plans list, never runs; refused while a run of it is active",
  input: z.object({ planId }),
  output: z.object({ planId: z.string(), state: z.enum(["archived", "rejected"]) }),
  annotations: { destructive: false, idempotent: false },
  async run({ app, identity }, input) {
    const result = await archivePlan(app.db.pool, { planId: input.planId, actor: identity.name });
    return {
      planId: result.planId,
      state: result.state === "rejected" ? ("rejected" as const) : ("archived" as const),
    };
  },
});

export const planRestore = defineOperation({
  name: "plan.restore",
  callers: PERSON_ONLY,
  role: "approver",
  summary: "Restore an archived or rejected plan to the plans list; it may be approved again",
  input: z.object({ planId }),
  output: z.object({ planId: z.string(), state: z.literal("active") }),
  run({ app, identity }, input) {
    return restorePlan(app.db.pool, { planId: input.planId, actor: identity.name });
  },
});

export const planLifecycleOperations = [planArchive, planRestore] as AnyOperation[];
