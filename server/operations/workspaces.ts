import { z } from "zod";
import {
  describePlanWorkspace,
  listWorkspaces,
  registerWorkspace,
  removeWorkspace,
  renameWorkspace,
} from "../plans/workspaces";
import { PERSON_ONLY, PERSON_OR_AGENT } from "./policy";
import { defineOperation } from "./operation";
import type { AnyOperation } from "./operation";

/**
 * Workspaces as operations: the directories tasks, planning sessions and runs act in. Registering
 * checks the directory (absolute, real, not a system directory, writable); renaming changes only
 * the name people see; removing takes it off the list but keeps history.
 */
const workspaceId = z.uuid();
const name = z.string().trim().min(1, "Give the workspace a name").max(100);
const workspaceSchema = z.object({
  id: z.string(),
  name: z.string(),
  path: z.string(),
  isDefault: z.boolean(),
  createdAt: z.string(),
  openRuns: z.number().describe("Unfinished runs acting in it"),
  openSessions: z.number().describe("Open planning sessions acting in it"),
});
const done = z.object({ ok: z.literal(true) });

export const workspaceList = defineOperation({
  name: "workspace.list",
  callers: PERSON_OR_AGENT,
  role: "viewer",
  summary: "Registered workspaces, the default first, with what still acts in each",
  input: z.object({}),
  output: z.object({ workspaces: z.array(workspaceSchema) }),
  annotations: { readOnly: true },
  async run({ app }) {
    return { workspaces: await listWorkspaces(app.db.pool, app.workspaceRoot) };
  },
});

export const workspaceForPlan = defineOperation({
  name: "workspace.for_plan",
  summary: "The workspace a plan acts in (its task's, or the default)",
  callers: PERSON_OR_AGENT,
  role: "viewer",
  input: z.object({ planId: z.string().min(1).max(100) }),
  output: z.object({
    id: z.string(),
    name: z.string(),
    path: z.string(),
    removed: z.boolean(),
    isDefault: z.boolean(),
  }),
  annotations: { readOnly: true },
  run: ({ app }, input) => describePlanWorkspace(app.db.pool, input.planId, app.workspaceRoot),
});

export const workspaceRegister = defineOperation({
  name: "workspace.register",
  callers: PERSON_ONLY,
  role: "admin",
  summary: "Register a directory (an absolute path) as a workspace; a registered one is returned as it is",
  input: z.object({ path: z.string().trim().min(1).max(4_096), name: name.optional() }),
  output: z.object({ id: z.string(), path: z.string() }),
  annotations: { idempotent: true },
  run: ({ app }, input) => registerWorkspace(app.db.pool, input.path, input.name),
});

export const workspaceRename = defineOperation({
  name: "workspace.rename",
  callers: PERSON_ONLY,
  role: "admin",
  summary: "Change the name a workspace is shown by (its path stays)",
  input: z.object({ workspaceId, name }),
  output: done,
  annotations: { idempotent: true },
  async run({ app }, input) {
    await renameWorkspace(app.db.pool, input.workspaceId, input.name);
    return { ok: true as const };
  },
});

export const workspaceRemove = defineOperation({
  name: "workspace.remove",
  callers: PERSON_ONLY,
  role: "admin",
  summary: "Take a workspace off the list (refused for the default and while a run or planning session uses it)",
  input: z.object({ workspaceId }),
  output: done,
  annotations: { destructive: true },
  async run({ app }, input) {
    await removeWorkspace(app.db.pool, input.workspaceId, app.workspaceRoot);
    return { ok: true as const };
  },
});

export const workspaceOperations: AnyOperation[] = [
  workspaceList,
  workspaceForPlan,
  workspaceRegister,
  workspaceRename,
  workspaceRemove,
];
