import { z } from "zod";
import {
  deleteTemplate,
  detectTemplateParameters,
  getTemplate,
  instantiateTemplate,
  listTemplates,
  saveTemplate,
  templateViewSchema,
} from "../templates/service";
import { TEMPLATE_LIMITS } from "../templates/placeholders";
import { requireWorkspace } from "../plans/workspaces";
import { AppError } from "../errors";
import { roleOf, type Identity } from "../identity";
import { PERSON_OR_AGENT } from "./policy";
import { defineOperation } from "./operation";
import { planSchema } from "../plan-schema";
import type { AnyOperation } from "./operation";

/** Plan templates as operations: save a plan version as one, list, read, start a plan from one, delete. */
const templateId = z.string().min(1).max(100);
const value = z.string().max(TEMPLATE_LIMITS.valueChars);

export const templateDetect = defineOperation({
  name: "template.detect_parameters",
  callers: PERSON_OR_AGENT,
  role: "reviewer",
  summary: "The {{name}} placeholders a plan version holds: the parameters saving it as a template would declare",
  input: z.object({ planId: z.string().min(1).max(100), version: z.number().int().positive().optional() }),
  output: z.object({ parameters: z.array(z.string()) }),
  annotations: { readOnly: true },
  async run({ app }, input) {
    return { parameters: await detectTemplateParameters(app.db.prisma, input) };
  },
});

export const templateSave = defineOperation({
  name: "template.save",
  callers: PERSON_OR_AGENT,
  role: "reviewer",
  summary: "Save a plan version as a template; {{name}} placeholders become parameters (label and default optional)",
  input: z.object({
    planId: z.string().min(1).max(100),
    version: z.number().int().positive().optional(),
    name: z.string().trim().min(1, "A template needs a name").max(200),
    description: z.string().max(2_000).optional(),
    parameters: z
      .array(
        z.object({
          name: z.string().min(1).max(64),
          label: z.string().max(TEMPLATE_LIMITS.labelChars).optional(),
          default: value.optional(),
        }),
      )
      .max(TEMPLATE_LIMITS.parameters)
      .optional(),
  }),
  output: templateViewSchema,
  async run({ app, identity }, input) {
    if (identity.kind === "system") throw new AppError("forbidden", "Templates are saved by a person or an agent");
    return saveTemplate(app.db.prisma, { ...input, actor: identity.name, actorKind: identity.kind });
  },
});

export const templateList = defineOperation({
  name: "template.list",
  callers: PERSON_OR_AGENT,
  role: "viewer",
  summary: "Plan templates, newest first",
  input: z.object({}),
  output: z.object({ templates: z.array(templateViewSchema) }),
  annotations: { readOnly: true },
  async run({ app }) {
    return { templates: await listTemplates(app.db.prisma) };
  },
});

export const templateGet = defineOperation({
  name: "template.get",
  callers: PERSON_OR_AGENT,
  role: "viewer",
  summary: "One plan template with its parameters",
  input: z.object({ templateId }),
  output: templateViewSchema,
  annotations: { readOnly: true },
  async run({ app }, input) {
    return getTemplate(app.db.prisma, input.templateId);
  },
});

export const templateInstantiate = defineOperation({
  name: "template.instantiate",
  callers: PERSON_OR_AGENT,
  role: "reviewer",
  summary: "Start a new plan (source template) from a template, filling its parameters; a missing one is named",
  input: z.object({
    templateId,
    values: z.record(z.string().max(64), value).default({}),
    workspaceId: z.uuid().optional().describe("A registered workspace (workspace.list); the default one otherwise"),
  }),
  output: planSchema,
  async run({ app, identity }, input) {
    if (input.workspaceId) await requireWorkspace(app.db.pool, input.workspaceId);
    const plan = await instantiateTemplate(app.db.prisma, app.tools, {
      templateId: input.templateId,
      values: input.values,
      actor: identity.name,
      ...(input.workspaceId && { workspaceId: input.workspaceId }),
      workspaceRoot: app.workspaceRoot,
    });
    return plan;
  },
});

export const templateDelete = defineOperation({
  name: "template.delete",
  callers: PERSON_OR_AGENT,
  role: "approver",
  summary: "Delete a plan template (plans started from it stay)",
  input: z.object({ templateId }),
  output: z.object({ deleted: z.literal(true) }),
  annotations: { destructive: true, idempotent: false },
  async run({ app, identity }, input) {
    requireTemplateOwner(await getTemplate(app.db.prisma, input.templateId), identity, "delete");
    return deleteTemplate(app.db.prisma, input.templateId);
  },
});

/**
 * A template is its owner's — the name and kind that saved it — and an admin's: anyone else,
 * an agent above all, may use it but not delete or change it.
 */
function requireTemplateOwner(
  template: { name: string; createdBy: string; createdByKind: string },
  identity: Identity,
  action: string,
): void {
  const owner = identity.name === template.createdBy && identity.kind === template.createdByKind;
  const admin = identity.kind === "person" && roleOf(identity) === "admin";
  if (owner || admin) return;
  throw new AppError(
    "forbidden",
    `Only ${template.createdBy} (a ${template.createdByKind}), who saved the template "${template.name}", or an admin may ${action} it; ${identity.name} is a ${identity.kind === "person" ? roleOf(identity) : identity.kind}.`,
    { owner: template.createdBy, ownerKind: template.createdByKind },
  );
}

export const templateOperations: AnyOperation[] = [
  templateDetect,
  templateSave,
  templateList,
  templateGet,
  templateInstantiate,
  templateDelete,
] as AnyOperation[];
