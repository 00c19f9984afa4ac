import { z } from "zod";

/**
 * What a step in awaiting_approval, awaiting_input or awaiting_agent waits for — or, for an agent
 * task in progress, which agent holds it. Shown to people and checked by timers.
 */
export const stepWaitingSchema = z.discriminatedUnion("kind", [
  z.object({ kind: z.literal("approval"), expiresAt: z.string() }),
  z.object({ kind: z.literal("input"), question: z.string(), choices: z.array(z.string()).optional() }),
  z.object({
    kind: z.literal("agent"),
    agent: z.string().optional(),
    since: z.string().optional(),
    /** Reported DONE, and being committed, checked and merged (as `run.get` and `task.reported` tell). */
    merging: z.boolean().optional(),
  }),
  /** A `run_plan` step waits for its child run (its id once started): server/engine/child-runs.ts. */
  z.object({ kind: z.literal("child_run"), runId: z.string().optional() }),
]);
export type StepWaiting = z.output<typeof stepWaitingSchema>;
