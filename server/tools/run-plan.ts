import { z } from "zod";
import { RUN_PLAN_TOOL } from "../vocabulary";
import { defineTool } from "./types";

export { RUN_PLAN_TOOL };

/** How deep runs may nest (a plan whose step runs a plan whose step runs a plan …). */
export const MAX_PLAN_NESTING = 5;

const parameterValue = z.union([z.string().max(10_000), z.number(), z.boolean()]);

/**
 * Which plan the child run runs: a saved plan's exact version, or a template filled with
 * parameters (values may be `$step_N.field` references, resolved when the step starts).
 */
export const runPlanInputSchema = z.union(
  [
    z.strictObject({
      plan_id: z.string().trim().min(1, "Which plan: plan_id is needed"),
      /** The exact version: the approval of this step binds to it, so "the latest" is not offered. */
      version: z.number().int().positive(),
    }),
    z.strictObject({
      template_id: z.string().trim().min(1, "Which template: template_id is needed"),
      params: z.record(z.string(), parameterValue).default({}),
    }),
  ],
  {
    error: () =>
      "Name a saved plan with its exact version ({ plan_id, version }: the approval binds to that version) or a template ({ template_id, params })",
  },
);
export type RunPlanArgs = z.infer<typeof runPlanInputSchema>;

export const runPlanOutputSchema = z.object({
  /** The child run. */
  run_id: z.string(),
  plan_id: z.string(),
  version: z.number(),
  status: z.enum(["completed"]),
  /** Each completed child step's output, by step id. */
  outputs: z.record(z.string(), z.unknown()),
});

/**
 * Runs another saved plan (or a template) as a child run. The engine never executes it in a
 * worker: when the step starts, the child run is created and the step stays `running` until the
 * child finishes (server/engine/child-runs.ts). Starting it is a person's decision — the gate
 * binds to the plan version or template named here — and the child's own gated steps wait for
 * their own decisions in the child run.
 */
export const runPlanTool = defineTool({
  name: RUN_PLAN_TOOL,
  description:
    "Run another saved plan (plan_id + version) or a template (template_id + params) as a child run; " +
    "completes with the child's step outputs when the child run completes, fails when it fails. " +
    "The child's gated steps need their own approval.",
  inputSchema: runPlanInputSchema,
  outputSchema: runPlanOutputSchema,
  capability: "plan.run",
  capabilityLabel: "Run a sub-plan",
  readOnly: false,
  destructive: false,
  idempotent: true,
  requiresApproval: true,
  // No worker runs the step, so no timer ends it: its child run ends it. The value is the most a
  // step may declare, so a plan holding one passes every check of a step's fields.
  defaultTimeoutSeconds: 86_400,
  async execute() {
    throw new Error("run_plan starts a child run through the engine, it is not executed by a worker");
  },
});
