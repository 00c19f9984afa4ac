import { z } from "zod";
import { plannerFor } from "../planner/deps";
import { MAX_COMMAND_CHARS, runPlanCommand } from "../planner/plan-command";
import { PERSON_ONLY } from "./policy";
import { defineOperation } from "./operation";
import type { AnyOperation } from "./registry";

/** Seed 002's `/plan` commands: start deep planning of a task, ask its status, cancel it. */
export const planningCommand = defineOperation({
  name: "planning.command",
  callers: PERSON_ONLY,
  summary: "Run a /plan command: `/plan <task>` starts deep planning, `/plan status`, `/plan cancel`",
  input: z.object({
    command: z.string().max(MAX_COMMAND_CHARS).describe("`/plan <task>`, `/plan status` or `/plan cancel`"),
    sessionId: z.uuid().optional().describe("The planning session meant; the default workspace's open one if absent"),
  }),
  output: z.object({
    action: z.enum(["started", "status", "cancelled"]),
    sessionId: z.string().nullable(),
    status: z.string().nullable(),
    phase: z.string().nullable(),
    message: z.string(),
  }),
  run: ({ app, identity }, input) =>
    runPlanCommand(plannerFor(app), {
      command: input.command,
      ...(input.sessionId && { sessionId: input.sessionId }),
      actor: identity.name,
    }),
});

export const planningOperations: AnyOperation[] = [planningCommand] as AnyOperation[];
