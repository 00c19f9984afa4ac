import { z } from "zod";
import { AppError } from "../errors";
import type { PrismaClient } from "../generated/prisma/client";
import { exportPlanJson } from "../plans/export";
import type { PlanDraft } from "../plan-schema";
import { createPlan, getPlan } from "../plans/service";
import type { Plan } from "../plan-schema";
import type { ToolRegistry } from "../tools/registry";
import { fillPlaceholders, findPlaceholders, TEMPLATE_LIMITS } from "./placeholders";

/**
 * Plan templates: a plan version's content kept with `{{name}}` placeholders, started later as a
 * new plan (source `template`) by giving each parameter a value. The new plan passes the same
 * validation as any other; gates a person waived in the original come back (gates only go up).
 */

export const templateParameterSchema = z.object({
  name: z.string().regex(/^[A-Za-z_][A-Za-z0-9_]{0,63}$/),
  label: z.string().trim().min(1).max(TEMPLATE_LIMITS.labelChars),
  /** Used when no value is given; without one the parameter is required. */
  default: z.string().max(TEMPLATE_LIMITS.valueChars).optional(),
});
export type TemplateParameter = z.infer<typeof templateParameterSchema> & { required: boolean };

export const templateViewSchema = z.object({
  id: z.string(),
  name: z.string(),
  description: z.string(),
  goal: z.string(),
  parameters: z.array(
    z.object({ name: z.string(), label: z.string(), default: z.string().optional(), required: z.boolean() }),
  ),
  steps: z.array(z.object({ id: z.string(), title: z.string().optional(), description: z.string(), tool: z.string() })),
  sourcePlanId: z.string().nullable(),
  sourceVersion: z.number().nullable(),
  /** The owner: who saved it (name and kind). Only they or an admin may delete or change it. */
  createdBy: z.string(),
  createdByKind: z.enum(["person", "agent"]),
  createdAt: z.string(),
});
export type TemplateView = z.output<typeof templateViewSchema>;

export interface SaveTemplateInput {
  planId: string;
  version?: number;
  name: string;
  description?: string;
  /** Labels and defaults for detected placeholders; the rest get their name as label, no default. */
  parameters?: { name: string; label?: string; default?: string }[];
  actor: string;
  /** The saver's kind: with the name, the template's owner (an agent may not take a person's). */
  actorKind: "person" | "agent";
}

/** The draft a template keeps: the exported plan without its identity and provenance. */
function draftOf(plan: Plan): PlanDraft {
  const {
    id: _id,
    version: _version,
    source: _source,
    exportedFrom: _from,
    ...draft
  } = JSON.parse(exportPlanJson(plan).content) as PlanDraft & {
    id: string;
    version: number;
    source: string;
    exportedFrom: string;
  };
  return draft;
}

/** The placeholders of a plan version: what saving it as a template would ask about. */
export async function detectTemplateParameters(
  prisma: PrismaClient,
  input: { planId: string; version?: number },
): Promise<string[]> {
  return findPlaceholders(draftOf(await getPlan(prisma, input.planId, input.version)));
}

export async function saveTemplate(prisma: PrismaClient, input: SaveTemplateInput): Promise<TemplateView> {
  const plan = await getPlan(prisma, input.planId, input.version);
  const draft = draftOf(plan);
  const detected = findPlaceholders(draft);
  if (detected.length > TEMPLATE_LIMITS.parameters) {
    throw new AppError("invalid_input", `A template may have at most ${TEMPLATE_LIMITS.parameters} parameters`);
  }
  const given = new Map((input.parameters ?? []).map((parameter) => [parameter.name, parameter]));
  for (const name of given.keys()) {
    if (!detected.includes(name)) {
      throw new AppError(
        "invalid_input",
        `Parameter "${name}" does not appear in the plan as {{${name}}}. Found: ${detected.join(", ") || "none"}`,
      );
    }
  }
  const parameters = detected.map((name) => {
    const declared = given.get(name);
    return templateParameterSchema.parse({
      name,
      label: declared?.label?.trim() || name,
      ...(declared?.default !== undefined && declared.default !== "" && { default: declared.default }),
    });
  });
  const row = await prisma.planTemplate.create({
    data: {
      name: input.name,
      description: input.description ?? "",
      goal: draft.goal,
      content: draft as object,
      parameters,
      sourcePlanId: plan.id,
      sourceVersion: plan.version,
      createdBy: input.actor,
      createdByKind: input.actorKind,
    },
  });
  return toView(row);
}

export async function listTemplates(prisma: PrismaClient): Promise<TemplateView[]> {
  const rows = await prisma.planTemplate.findMany({ orderBy: { createdAt: "desc" }, take: 200 });
  return rows.map(toView);
}

export async function getTemplate(prisma: PrismaClient, templateId: string): Promise<TemplateView> {
  return toView(await findTemplate(prisma, templateId));
}

export async function deleteTemplate(prisma: PrismaClient, templateId: string): Promise<{ deleted: true }> {
  const deleted = await prisma.planTemplate.deleteMany({ where: { id: templateId } });
  if (deleted.count === 0) throw new AppError("not_found", `No template ${templateId}`);
  return { deleted: true };
}

/**
 * Starts a plan from a template: every required parameter needs a value (a missing one is named),
 * unknown names are refused, values are inserted as plain text, and the result is validated and
 * stored as version 1 of a new plan with source `template`.
 */
export async function instantiateTemplate(
  prisma: PrismaClient,
  tools: ToolRegistry,
  input: {
    templateId: string;
    values: Record<string, string>;
    actor: string;
    workspaceId?: string;
    /** The default workspace, where file names are checked without `workspaceId`. */
    workspaceRoot?: string;
  },
): Promise<Plan> {
  const row = await findTemplate(prisma, input.templateId);
  const parameters = parametersOf(row.parameters);
  const known = new Set(parameters.map((parameter) => parameter.name));
  const unknown = Object.keys(input.values).filter((name) => !known.has(name));
  if (unknown.length) {
    throw new AppError("invalid_input", `The template has no parameter ${unknown.map((n) => `"${n}"`).join(", ")}`, {
      unknown,
    });
  }
  const values: Record<string, string> = {};
  const missing: TemplateParameter[] = [];
  for (const parameter of parameters) {
    const given = Object.hasOwn(input.values, parameter.name) ? input.values[parameter.name] : undefined;
    const value = given !== undefined && given !== "" ? given : parameter.default;
    if (value === undefined) missing.push(parameter);
    else if (value.length > TEMPLATE_LIMITS.valueChars) {
      throw new AppError(
        "invalid_input",
        `The value of "${parameter.label}" is longer than ${TEMPLATE_LIMITS.valueChars} characters`,
        { parameter: parameter.name },
      );
    } else values[parameter.name] = value;
  }
  if (missing.length) {
    throw new AppError(
      "invalid_input",
      `Missing required parameter${missing.length === 1 ? "" : "s"}: ${missing.map((p) => `${p.label} (${p.name})`).join(", ")}`,
      { missing: missing.map((parameter) => parameter.name) },
    );
  }
  const draft = fillPlaceholders(row.content as unknown as PlanDraft, values);
  return createPlan(prisma, tools, {
    draft,
    source: "template",
    author: input.actor,
    ...(input.workspaceId && { workspaceId: input.workspaceId }),
    ...(input.workspaceRoot && { workspaceRoot: input.workspaceRoot }),
  });
}

async function findTemplate(prisma: PrismaClient, templateId: string) {
  const row = z.uuid().safeParse(templateId).success
    ? await prisma.planTemplate.findUnique({ where: { id: templateId } })
    : null;
  if (!row) throw new AppError("not_found", `No template ${templateId}`);
  return row;
}

function parametersOf(raw: unknown): TemplateParameter[] {
  return z
    .array(templateParameterSchema)
    .parse(raw)
    .map((parameter) => ({ ...parameter, required: parameter.default === undefined }));
}

function toView(row: Awaited<ReturnType<typeof findTemplate>>): TemplateView {
  const content = row.content as unknown as PlanDraft;
  return {
    id: row.id,
    name: row.name,
    description: row.description,
    goal: row.goal,
    parameters: parametersOf(row.parameters),
    steps: content.steps.map((step) => ({
      id: step.id,
      ...(step.title !== undefined && { title: step.title }),
      description: step.description ?? "",
      tool: step.tool,
    })),
    sourcePlanId: row.sourcePlanId,
    sourceVersion: row.sourceVersion,
    createdBy: row.createdBy,
    createdByKind: row.createdByKind === "agent" ? "agent" : "person",
    createdAt: row.createdAt.toISOString(),
  };
}
