import { z } from "zod";
import { auditListInputSchema, listAuditEntries } from "../audit/audit-log";
import { verifyAuditLog } from "../audit/verify";
import { identityKindSchema, roleSchema } from "../vocabulary";
import { PERSON_ONLY, PERSON_OR_AGENT } from "./policy";
import { defineOperation } from "./operation";
import type { AnyOperation } from "./operation";

const entrySchema = z.object({
  id: z.string(),
  actor: z.string(),
  actorKind: identityKindSchema.nullable().describe("person, agent or system; null for entries from before kinds"),
  action: z.string(),
  planId: z.string(),
  planningSessionId: z.string().nullable(),
  planVersion: z.number().nullable(),
  planGoal: z.string().nullable(),
  runId: z.string().nullable(),
  stepId: z.string().nullable(),
  detail: z.record(z.string(), z.unknown()),
  createdAt: z.string(),
});

export const auditList = defineOperation({
  name: "audit.list",
  callers: PERSON_OR_AGENT,
  role: "viewer",
  summary: "The audit log newest first (who decided what, when), filtered by plan, run and actor, paged by cursor",
  input: auditListInputSchema,
  output: z.object({ entries: z.array(entrySchema), nextCursor: z.string().nullable() }),
  annotations: { readOnly: true },
  run: ({ app }, input) => listAuditEntries(app.db.pool, input),
});

const decisionSchema = z.object({
  kind: z.enum(["step_approval", "plan_approval", "gate_waiver", "admin_change"]),
  seq: z.string().nullable().describe("the audit entry that records the decision"),
  actor: z.string(),
  actorKind: z.string().nullable(),
  role: roleSchema
    .nullable()
    .describe("the actor's role when deciding; null: no recorded role (the access token's holder)"),
  policy: z.string().nullable().describe("the approver policy applied"),
  definitionHash: z.string().nullable(),
  planVersion: z.number().nullable(),
});

const effectSchema = z.object({
  kind: z.enum(["step", "merge", "people", "credential", "webhook", "approver_policy", "mcp_server"]),
  subject: z.string(),
  runId: z.string().nullable(),
  stepId: z.string().nullable(),
  seq: z.string().nullable(),
  decisions: z.array(decisionSchema),
  problem: z.string().optional().describe("why no decision authorises it"),
});

export const auditVerify = defineOperation({
  name: "audit.verify",
  // A person's check of the record; an agent whose actions the record holds does not audit it.
  callers: PERSON_ONLY,
  role: "viewer",
  summary:
    "Replays the audit hash chain (every broken link by seq, expected and found hash) and checks every side effect against the decisions that authorised it",
  input: z.object({}).strict(),
  output: z.object({
    ok: z.boolean(),
    entries: z.number(),
    head: z.object({ seq: z.string(), rowHash: z.string().nullable() }),
    breaks: z.array(
      z.object({
        seq: z.string(),
        kind: z.enum(["entry_changed", "link_broken", "missing", "unsealed", "head_mismatch"]),
        expected: z.string().nullable(),
        found: z.string().nullable(),
      }),
    ),
    authorised: z.array(effectSchema),
    systemDecided: z.record(z.string(), z.number()),
    unauthorised: z.array(effectSchema),
  }),
  annotations: { readOnly: true, idempotent: true },
  run: ({ app }) => verifyAuditLog(app.db.pool, app.tools),
});

export const auditOperations: AnyOperation[] = [auditList, auditVerify];
