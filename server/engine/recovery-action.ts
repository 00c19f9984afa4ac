import { z } from "zod";
import { stepInputSchema } from "../plan-schema";

/**
 * What can be done about a failed step (seed 004 "Error Recovery"). The planner proposes one of
 * these with its reasoning; a person accepts it (or the run's policy does) and the engine applies it
 * through `applyRecoveryAction`.
 */
export const recoveryActionSchema = z.discriminatedUnion("kind", [
  /** Run the failed step again, optionally with new arguments. */
  z.object({ kind: z.literal("retry"), args: z.record(z.string(), z.unknown()).optional() }),
  /** Give up on the step; dependents that use its output are skipped, the others run. */
  z.object({ kind: z.literal("skip") }),
  /**
   * Run new steps first, then the failed step again: the new steps get fresh ids, may depend on
   * finished steps of the run, and the failed step comes to depend on all of them.
   */
  z.object({ kind: z.literal("insert_steps"), steps: z.array(stepInputSchema).min(1).max(50) }),
  /** Cancel the run. */
  z.object({ kind: z.literal("abort") }),
]);
export type RecoveryAction = z.infer<typeof recoveryActionSchema>;
