import { z } from "zod";
import { decideFanOutGroup, fanOutGroupView, groupViewSchema } from "../engine/engine";
import { defineOperation } from "./operation";
import { PERSON_ONLY, PERSON_OR_AGENT } from "./policy";
import { approverNote } from "./plans";
import type { AnyOperation } from "./operation";

const runId = z.uuid();
const templateId = z.string().min(1).max(64);

export const runGroup = defineOperation({
  name: "run.group",
  callers: PERSON_OR_AGENT,
  role: "viewer",
  summary:
    "A fan-out step's group: its instances in list order, each with its element, status and what approving it lets run",
  input: z.object({ runId, stepId: templateId }),
  output: groupViewSchema,
  annotations: { readOnly: true },
  run: async ({ app }, input) => fanOutGroupView(app.db.pool, app.tools, input.runId, input.stepId),
});

export const runDecideGroup = defineOperation({
  name: "run.decide_group",
  callers: PERSON_ONLY,
  role: "approver",
  summary:
    "Approve or deny every waiting instance of a fan-out step at once, as shown (a person only); refused when the list changed",
  input: z.object({
    runId,
    stepId: templateId,
    approve: z.boolean(),
    listHash: z
      .string()
      .regex(/^[0-9a-f]{64}$/)
      .describe("The group's listHash as shown by run.group; refused if the list is not the one shown"),
    note: approverNote.describe("The decider's note: stored with each instance's decision and audited"),
  }),
  output: z.object({ decided: z.array(z.string()) }),
  async run({ app, identity }, input) {
    return decideFanOutGroup(app.engine, {
      runId: input.runId,
      templateId: input.stepId,
      approve: input.approve,
      actor: identity.name,
      listHash: input.listHash,
      ...(input.note && { comment: input.note }),
    });
  },
});

export const fanOutOperations: AnyOperation[] = [runGroup, runDecideGroup];
