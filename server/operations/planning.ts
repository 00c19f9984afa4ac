import { z } from "zod";
import { plannerFor } from "../planner/deps";
import { MAX_COMMAND_CHARS, runPlanCommand } from "../planner/plan-command";
import { addPlanningMessage } from "../planner/messages";
import { MAX_FEEDBACK_CHARS } from "../planner/session-rules";
import { PERSON_ONLY } from "./policy";
import { defineOperation } from "./operation";
import type { AnyOperation } from "./operation";

/** Seed 002's `/plan` commands: start deep planning of a task, ask its status, cancel it. */
export const planningCommand = defineOperation({
  name: "planning.command",
  callers: PERSON_ONLY,
  role: "reviewer",
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

/**
 * Seed 002: a person's message while the planner gathers joins the planning context — the built-in
 * planner's next model call, or the answer to an agent's next call in plan mode.
 */
export const planningMessage = defineOperation({
  name: "planning.message",
  callers: PERSON_ONLY,
  role: "reviewer",
  summary: "Add a message to an open planning session; the planner (or the planning agent) sees it next",
  input: z.object({
    sessionId: z.uuid().describe("The planning session"),
    message: z.string().max(MAX_FEEDBACK_CHARS).describe("What the planner should also take into account"),
  }),
  output: z.object({ messageId: z.string() }),
  run({ app, identity }, input) {
    return addPlanningMessage(app.db.pool, { ...input, actor: identity.name });
  },
});

export const planningOperations: AnyOperation[] = [planningCommand, planningMessage] as AnyOperation[];
