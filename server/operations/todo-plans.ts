import { z } from "zod";
import { AppError } from "../errors";
import {
  addStepInput,
  addSteps,
  hasTitleOrStatus,
  readPlan,
  setupPlan,
  setupPlanInput,
  todoKeyFor,
  todoOwnerPrefix,
  todoPlanSchema,
  updateStep,
  updateStepFields,
} from "../agents/todo-plans";
import { resumeTodoPlan } from "../agents/todo-durability";
import { defineOperation, type OperationContext } from "./operation";
import { PERSON_OR_AGENT } from "./policy";
import type { AnyOperation } from "./operation";

/**
 * Seed 000's four planning tools as operations: one todo plan per caller and connection (an MCP
 * session), or per `session_id` the caller names (server/agents/todo-plans.ts). Fields are the
 * seed's own (snake_case). Writing a todo plan proposes work (a reviewer's); reading it a viewer's.
 */
const sessionField = {
  session_id: z.string().min(1).max(200).optional().describe("Key the plan by this id instead of the MCP session"),
};

/**
 * The todo plan's key: the caller's and the id it names, else its connection's. A connection new
 * to this process first takes over the caller's todo plan of a connection that is gone (a restart).
 */
async function todoKeyOf(
  { app, identity, connection }: OperationContext,
  explicit: string | undefined,
): Promise<{ key: string; connection?: string }> {
  const id = connection?.id;
  if (explicit) return { key: todoKeyFor(identity, explicit), ...(explicit === id && { connection: id }) };
  if (!id) throw new AppError("invalid_input", "This connection has no MCP session; pass session_id");
  const key = todoKeyFor(identity, id);
  if (connection?.isLive) {
    await resumeTodoPlan(app, {
      key,
      ownerPrefix: todoOwnerPrefix(identity),
      mcpSessionId: id,
      actor: identity.name,
      isLive: connection.isLive,
    });
  }
  return { key, connection: id };
}

export const todoSetupPlan = defineOperation({
  name: "planning.setup_plan",
  callers: PERSON_OR_AGENT,
  role: "reviewer",
  summary:
    "Create or replace this session's todo plan: an objective and optional initial steps (ids start at 1). Use a plan for multi-step work; skip it for trivial tasks. Order: planning_setup_plan → planning_add_step → planning_update_step → planning_read_plan",
  input: setupPlanInput.extend(sessionField),
  output: todoPlanSchema,
  annotations: { readOnly: false, idempotent: false, destructive: true },
  async run(context, { session_id, ...input }) {
    const { key, connection } = await todoKeyOf(context, session_id);
    // A plan keyed by the connection, not by the caller's own id, can be resumed after a restart.
    return setupPlan(context.app, {
      ...input,
      key,
      actor: context.identity.name,
      ...(connection && { mcpSession: connection }),
    });
  },
});

export const todoAddStep = defineOperation({
  name: "planning.add_step",
  callers: PERSON_OR_AGENT,
  role: "reviewer",
  summary:
    "Append steps to the active todo plan, after planning_setup_plan (fails without a plan, or when it is completed)",
  input: addStepInput.extend(sessionField),
  output: todoPlanSchema,
  annotations: { readOnly: false, idempotent: false, destructive: false },
  async run(context, { session_id, ...input }) {
    const { key } = await todoKeyOf(context, session_id);
    return addSteps(context.app, { ...input, key, actor: context.identity.name });
  },
});

export const todoUpdateStep = defineOperation({
  name: "planning.update_step",
  callers: PERSON_OR_AGENT,
  role: "reviewer",
  summary:
    "Report progress on a todo step: its title or status (pending, in_progress, done; a done step can be reopened); the plan completes when every step is done",
  input: z.object({ ...updateStepFields, ...sessionField }).refine(...hasTitleOrStatus),
  output: todoPlanSchema,
  annotations: { readOnly: false, idempotent: true, destructive: false },
  async run(context, { session_id, ...input }) {
    const { key } = await todoKeyOf(context, session_id);
    return updateStep(context.app, { ...input, key, actor: context.identity.name });
  },
});

export const todoReadPlan = defineOperation({
  name: "planning.read_plan",
  callers: PERSON_OR_AGENT,
  role: "viewer",
  summary: "Read this session's todo plan to check where you are (fails when there is none)",
  input: z.object(sessionField),
  output: todoPlanSchema,
  annotations: { readOnly: true, idempotent: true, destructive: false },
  async run(context, { session_id }) {
    return readPlan(context.app, (await todoKeyOf(context, session_id)).key);
  },
});

export const todoPlanOperations = [todoSetupPlan, todoAddStep, todoUpdateStep, todoReadPlan] as AnyOperation[];
