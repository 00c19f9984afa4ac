import { z } from "zod";
import { readEvents } from "../events/store";
import { describePlannerConfig } from "../planner/config";
import { plannerFor } from "../planner/deps";
import { listRecoveryProposals } from "../planner/recovery-proposals";
import { getPlanningSession, listPlanningSessions } from "../planner/sessions";
import { getUsage } from "../planner/usage";
import { listWorkspaces } from "../plans/workspaces";
import { describeSandbox } from "../tools/sandbox";
import { defineOperation } from "./operation";
import { PERSON_ONLY } from "./policy";
import type { AnyOperation } from "./operation";

/**
 * The planning page's reads — what is configured, a session with its progress, the model calls'
 * usage, recovery proposals — as operations, so the tRPC door is an adapter. They are a person's
 * pages, like the planner's operations themselves (server/operations/planner.ts): the planner
 * spends a person's model budget and its sessions are a person's, so an agent does not read them
 * (and MCP does not offer them). Outputs are the planner's own shapes, passed through.
 */
const passThrough = <T>() => z.custom<T>(() => true);
const sessionId = z.uuid();

export const plannerOptions = defineOperation({
  name: "planner.options",
  summary: "What the planner has configured (never the keys), the sandbox's state, and the workspaces to plan in",
  callers: PERSON_ONLY,
  role: "viewer",
  // The browser asks without input.
  input: z.object({}).optional(),
  output: z.object({
    config: passThrough<ReturnType<typeof describePlannerConfig>>(),
    defaultWorkspace: z.string(),
    sandbox: passThrough<ReturnType<typeof describeSandbox>>(),
    workspaces: z.array(z.object({ id: z.string(), name: z.string(), path: z.string(), isDefault: z.boolean() })),
  }),
  annotations: { readOnly: true },
  async run({ app }) {
    const planner = plannerFor(app);
    const workspaces = await listWorkspaces(app.db.pool, app.workspaceRoot);
    return {
      config: describePlannerConfig(planner.config),
      defaultWorkspace: app.workspaceRoot,
      // Whether this process confines unapproved commands, and what its self-test proved.
      sandbox: describeSandbox(),
      workspaces: workspaces.map((workspace) => ({
        id: workspace.id,
        name: workspace.name,
        path: workspace.path,
        isDefault: workspace.isDefault,
      })),
    };
  },
});

export const plannerSession = defineOperation({
  name: "planner.session",
  summary: "One planning session: its state, questions, progress and plan",
  callers: PERSON_ONLY,
  role: "viewer",
  input: z.object({ sessionId }),
  output: passThrough<Awaited<ReturnType<typeof getPlanningSession>>>(),
  annotations: { readOnly: true },
  run: ({ app }, input) => getPlanningSession(plannerFor(app), input.sessionId),
});

export const plannerSessions = defineOperation({
  name: "planner.sessions",
  summary: "Planning sessions, newest first, of one plan when given",
  callers: PERSON_ONLY,
  role: "viewer",
  input: z.object({ planId: z.string().optional() }).optional(),
  output: passThrough<Awaited<ReturnType<typeof listPlanningSessions>>>(),
  annotations: { readOnly: true },
  run: ({ app }, input) => listPlanningSessions(plannerFor(app), input ?? {}),
});

/**
 * A planning session's stored progress events after `lastEventId`. The tRPC subscription of the
 * same name replays these and then follows live; it is authorised by this operation.
 */
export const plannerEvents = defineOperation({
  name: "planner.events",
  summary: "A planning session's stored progress events after a sequence number, oldest first",
  callers: PERSON_ONLY,
  role: "viewer",
  input: z.object({ sessionId, lastEventId: z.string().nullish() }),
  output: z.object({ events: passThrough<Awaited<ReturnType<typeof readEvents>>>() }),
  annotations: { readOnly: true },
  async run({ app }, input) {
    const after = input.lastEventId ? Number(input.lastEventId) : 0;
    return { events: await readEvents(app.db.pool, input.sessionId, Number.isFinite(after) ? after : 0) };
  },
});

export const plannerUsage = defineOperation({
  name: "planner.usage",
  summary: "Model calls and their tokens and cost, of a step, a run, a planning session or a plan",
  callers: PERSON_ONLY,
  role: "viewer",
  // The step scope first: an object schema drops keys it does not know, so `{runId}` would
  // swallow `{runId, stepId}`.
  input: z.union([
    z.object({ runId: z.uuid(), stepId: z.string().max(100) }),
    z.object({ sessionId: z.uuid() }),
    z.object({ planId: z.string() }),
    z.object({ runId: z.uuid() }),
  ]),
  output: passThrough<Awaited<ReturnType<typeof getUsage>>>(),
  annotations: { readOnly: true },
  run: ({ app }, input) => getUsage(app.db.prisma, input),
});

export const recoveryProposals = defineOperation({
  name: "recovery.proposals",
  summary: "The planner's recovery proposals for a run's failed steps (or one step), newest first",
  callers: PERSON_ONLY,
  role: "viewer",
  input: z.object({ runId: z.uuid(), stepId: z.string().optional() }),
  output: passThrough<Awaited<ReturnType<typeof listRecoveryProposals>>>(),
  annotations: { readOnly: true },
  run: ({ app }, input) => listRecoveryProposals(plannerFor(app), input),
});

export const plannerReadOperations = [
  plannerOptions,
  plannerSession,
  plannerSessions,
  plannerEvents,
  plannerUsage,
  recoveryProposals,
] as AnyOperation[];
