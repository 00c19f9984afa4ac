import { z } from "zod";
import { approverPolicySchema, setWorkspacePolicy, workspacePolicy } from "../people/approver-policy";
import { addCredential, addPrincipal, listPrincipals, revokeCredential, setRole } from "../people/principals";
import { roleSchema } from "../vocabulary";
import { roleOf } from "../identity";
import { defineOperation } from "./operation";
import { PERSON_ONLY, PERSON_OR_AGENT } from "./policy";
import type { AnyOperation } from "./operation";

/**
 * People, agents and their credentials, and each workspace's approver policy: an admin's
 * (a person's, with the admin role). A credential's token is answered once, when it is made; the
 * server keeps only its hash.
 */
const principalId = z.uuid();
const credentialId = z.uuid();
const principalSchema = z.object({
  id: z.string(),
  kind: z.enum(["person", "agent"]),
  name: z.string(),
  role: roleSchema.nullable(),
  createdAt: z.string(),
  createdBy: z.string().nullable(),
  owner: z.boolean().describe("The access token's holder, the bootstrap admin"),
  credentials: z.array(
    z.object({
      id: z.string(),
      createdAt: z.string(),
      lastUsedAt: z.string().nullable(),
      revokedAt: z.string().nullable(),
    }),
  ),
});
const madeCredential = z.object({
  principalId: z.string(),
  credentialId: z.string(),
  token: z.string().describe("Shown once: the server keeps only its hash"),
});

export const peopleMe = defineOperation({
  name: "people.me",
  callers: PERSON_OR_AGENT,
  role: "viewer",
  summary: "Who the caller is: name, kind and (for a person) role",
  input: z.object({}),
  output: z.object({ name: z.string(), kind: z.enum(["person", "agent"]), role: roleSchema.nullable() }),
  annotations: { readOnly: true },
  run: async ({ identity }) => ({
    name: identity.name,
    kind: identity.kind === "agent" ? ("agent" as const) : ("person" as const),
    role: identity.kind === "person" ? roleOf(identity) : null,
  }),
});

export const peopleList = defineOperation({
  name: "people.list",
  callers: PERSON_ONLY,
  role: "admin",
  summary: "People and agents with their roles and credentials (never the tokens)",
  input: z.object({}),
  output: z.object({ principals: z.array(principalSchema) }),
  annotations: { readOnly: true },
  run: async ({ app }) => ({ principals: await listPrincipals(app.db.pool) }),
});

export const peopleAdd = defineOperation({
  name: "people.add",
  callers: PERSON_ONLY,
  role: "admin",
  summary: "Add a person with a role, or a named agent, with a credential whose token is shown once",
  input: z.discriminatedUnion("kind", [
    z.object({
      kind: z.literal("person"),
      name: z
        .string()
        .trim()
        .regex(/^[\w.@ -]{1,40}$/, "1–40 letters, digits, spaces, . @ - or _"),
      role: roleSchema,
    }),
    z.object({
      kind: z.literal("agent"),
      name: z
        .string()
        .trim()
        .regex(/^[\w.@-]{1,40}$/, "1–40 letters, digits, . @ - or _"),
    }),
  ]),
  output: madeCredential,
  run: ({ app, identity }, input) => addPrincipal(app.db.pool, { ...input, createdBy: identity.name }),
});

export const peopleAddCredential = defineOperation({
  name: "people.add_credential",
  callers: PERSON_ONLY,
  role: "admin",
  summary: "Another credential for a person or agent (its token shown once)",
  input: z.object({ principalId }),
  output: madeCredential,
  run: async ({ app, identity }, input) => {
    const made = await addCredential(app.db.pool, input.principalId, identity.name);
    return { principalId: input.principalId, credentialId: made.credentialId, token: made.token };
  },
});

export const peopleRevokeCredential = defineOperation({
  name: "people.revoke_credential",
  callers: PERSON_ONLY,
  role: "admin",
  summary: "Revoke a credential: the next request presenting it is refused",
  input: z.object({ credentialId }),
  output: z.object({ ok: z.literal(true) }),
  annotations: { destructive: true, idempotent: true },
  run: async ({ app, identity }, input) => {
    await revokeCredential(app.db.pool, input.credentialId, identity.name);
    return { ok: true as const };
  },
});

export const peopleSetRole = defineOperation({
  name: "people.set_role",
  callers: PERSON_ONLY,
  role: "admin",
  summary: "Change a person's role (the access token's holder stays an admin)",
  input: z.object({ principalId, role: roleSchema }),
  output: z.object({ ok: z.literal(true) }),
  annotations: { idempotent: true },
  run: async ({ app, identity }, input) => {
    await setRole(app.db.pool, input.principalId, input.role, identity.name);
    return { ok: true as const };
  },
});

export const workspacePolicyGet = defineOperation({
  name: "workspace.approver_policy",
  callers: PERSON_OR_AGENT,
  role: "viewer",
  summary:
    "A workspace's approver policy: distinct approvals a gated step needs by its risk, and whether its author may approve",
  input: z.object({ workspaceId: z.uuid() }),
  output: approverPolicySchema,
  annotations: { readOnly: true },
  run: ({ app }, input) => workspacePolicy(app.db.pool, input.workspaceId),
});

export const workspaceSetPolicy = defineOperation({
  name: "workspace.set_approver_policy",
  callers: PERSON_ONLY,
  role: "admin",
  summary: "Set a workspace's approver policy; the engine applies it to every decision from now on",
  input: z.object({ workspaceId: z.uuid(), policy: approverPolicySchema }),
  output: z.object({ ok: z.literal(true) }),
  annotations: { idempotent: true },
  run: async ({ app, identity }, input) => {
    await setWorkspacePolicy(app.db.pool, input.workspaceId, input.policy, identity.name);
    return { ok: true as const };
  },
});

export const peopleOperations: AnyOperation[] = [
  peopleMe,
  peopleList,
  peopleAdd,
  peopleAddCredential,
  peopleRevokeCredential,
  peopleSetRole,
  workspacePolicyGet,
  workspaceSetPolicy,
];
