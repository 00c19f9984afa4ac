import { z } from "zod";
import { auditListInputSchema, listAuditEntries } from "../audit/audit-log";
import { identityKindSchema } from "../vocabulary";
import { PERSON_OR_AGENT } from "./policy";
import { defineOperation } from "./operation";
import type { AnyOperation } from "./registry";

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

export const auditOperations: AnyOperation[] = [auditList];
