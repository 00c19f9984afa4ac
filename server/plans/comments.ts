import { z } from "zod";
import type { PrismaClient } from "../generated/prisma/client";
import { AppError } from "../errors";
import type { Step } from "../plan-schema";

/**
 * Review as a conversation: comments on a step (or on one of its arguments, or on the whole plan),
 * each with what the reviewer wants done — comment, change, delete, insert a step before or after.
 * A comment is made on one version and stays with the plan; whether a later version answered it
 * is derived from the versions themselves (the step changed, was removed, or gained a neighbour),
 * so nothing is stored twice and a revision from any source — the planner, an agent, a person's
 * edit — answers comments alike. Resolving is a reviewer's act; an answered comment stays open
 * until someone resolves it, an unanswered one simply stays open.
 */
export const COMMENT_INTENTS = ["comment", "change", "delete", "insert_before", "insert_after"] as const;
export type CommentIntent = (typeof COMMENT_INTENTS)[number];

const INTENT_WORDS: Record<CommentIntent, string> = {
  comment: "comment",
  change: "change this",
  delete: "delete this step",
  insert_before: "insert a step before this one",
  insert_after: "insert a step after this one",
};

export const addCommentInputSchema = z
  .object({
    planId: z.string().min(1).max(100),
    /** The version the reviewer is looking at; it must be the current one. */
    version: z.number().int().positive(),
    /** Omitted for a comment on the whole plan. */
    stepId: z.string().min(1).max(100).optional(),
    /** A dotted path inside the step, e.g. `args.command`. */
    field: z
      .string()
      .regex(/^[A-Za-z_][\w]*(\.[\w-]+)*$/, "A field is a dotted path such as args.command")
      .max(200)
      .optional(),
    intent: z.enum(COMMENT_INTENTS).default("comment"),
    body: z.string().trim().min(1, "Say something in the comment").max(4_000),
    /** A reply joins its parent's thread (and takes its step). */
    parentId: z.uuid().optional(),
  })
  .refine((input) => !(input.field && !input.stepId), { message: "A field belongs to a step: name the step too" });
export type AddCommentInput = z.output<typeof addCommentInputSchema>;

export interface CommentAuthor {
  name: string;
  kind: "person" | "agent" | "system";
}

export interface CommentView {
  id: string;
  planVersion: number;
  stepId: string | null;
  field: string | null;
  intent: CommentIntent;
  body: string;
  author: string;
  authorKind: string;
  createdAt: string;
  resolved: { by: string; at: string } | null;
  /** The first later version in which the step this comment is about changed; null while none did. */
  answeredInVersion: number | null;
  replies: Omit<CommentView, "replies" | "answeredInVersion">[];
}

type Row = Awaited<ReturnType<PrismaClient["planComment"]["findMany"]>>[number];

export async function addComment(
  prisma: PrismaClient,
  author: CommentAuthor,
  input: AddCommentInput,
): Promise<{ id: string }> {
  const plan = await prisma.plan.findUnique({ where: { id: input.planId }, select: { currentVersion: true } });
  if (!plan) throw new AppError("not_found", `No plan ${input.planId}`);
  if (input.version !== plan.currentVersion) {
    throw new AppError(
      "version_conflict",
      `You are commenting on version ${input.version}; the plan is at version ${plan.currentVersion}. Reload and comment on what is current.`,
      { currentVersion: plan.currentVersion },
    );
  }
  let stepId = input.stepId ?? null;
  if (input.parentId) {
    const parent = await prisma.planComment.findUnique({ where: { id: input.parentId } });
    if (!parent || parent.planId !== input.planId) throw new AppError("not_found", `No comment ${input.parentId}`);
    if (parent.parentId) throw new AppError("invalid_input", "Reply to the thread's first comment");
    stepId = parent.stepId;
  }
  if (stepId) {
    const version = await prisma.planVersion.findUniqueOrThrow({
      where: { planId_version: { planId: input.planId, version: input.version } },
      select: { steps: true },
    });
    if (!(version.steps as unknown as Step[]).some((step) => step.id === stepId)) {
      throw new AppError("invalid_input", `Version ${input.version} has no step ${stepId}`);
    }
  }
  const row = await prisma.planComment.create({
    data: {
      planId: input.planId,
      planVersion: input.version,
      stepId,
      field: input.parentId ? null : (input.field ?? null),
      intent: input.parentId ? "comment" : input.intent,
      body: input.body,
      parentId: input.parentId ?? null,
      author: author.name,
      authorKind: author.kind,
    },
    select: { id: true },
  });
  return row;
}

export async function setCommentResolved(
  prisma: PrismaClient,
  actor: string,
  input: { planId: string; commentId: string; resolved: boolean },
): Promise<{ ok: true }> {
  const comment = await prisma.planComment.findUnique({ where: { id: input.commentId } });
  if (!comment || comment.planId !== input.planId) throw new AppError("not_found", `No comment ${input.commentId}`);
  if (comment.parentId) throw new AppError("invalid_input", "Resolve the thread, not a reply");
  await prisma.planComment.update({
    where: { id: input.commentId },
    data: input.resolved ? { resolvedAt: new Date(), resolvedBy: actor } : { resolvedAt: null, resolvedBy: null },
  });
  return { ok: true };
}

/** Every thread of a plan, oldest first, with whether a later version answered it. */
export async function listComments(prisma: PrismaClient, planId: string): Promise<CommentView[]> {
  const rows = await prisma.planComment.findMany({ where: { planId }, orderBy: { createdAt: "asc" } });
  if (rows.length === 0) {
    if (!(await prisma.plan.findUnique({ where: { id: planId }, select: { id: true } }))) {
      throw new AppError("not_found", `No plan ${planId}`);
    }
    return [];
  }
  const versions = await prisma.planVersion.findMany({
    where: { planId, version: { gte: Math.min(...rows.map((row) => row.planVersion)) } },
    orderBy: { version: "asc" },
    select: { version: true, steps: true },
  });
  const stepsByVersion = new Map(versions.map((v) => [v.version, v.steps as unknown as Step[]]));
  const threads = rows.filter((row) => !row.parentId);
  return threads.map((row) => ({
    ...baseView(row),
    answeredInVersion: answeredIn(row, stepsByVersion),
    replies: rows.filter((reply) => reply.parentId === row.id).map(baseView),
  }));
}

function baseView(row: Row): Omit<CommentView, "replies" | "answeredInVersion"> {
  return {
    id: row.id,
    planVersion: row.planVersion,
    stepId: row.stepId,
    field: row.field,
    intent: row.intent as CommentIntent,
    body: row.body,
    author: row.author,
    authorKind: row.authorKind,
    createdAt: row.createdAt.toISOString(),
    resolved: row.resolvedAt ? { by: row.resolvedBy ?? "", at: row.resolvedAt.toISOString() } : null,
  };
}

/**
 * The first version after the comment's in which its step was changed (or, for `field`, that
 * field), removed, or — for an insert — got a new neighbour on the asked side. A comment on the
 * whole plan is answered by any later version.
 */
function answeredIn(comment: Row, stepsByVersion: Map<number, Step[]>): number | null {
  const original = stepsByVersion.get(comment.planVersion);
  if (!original) return null;
  const before = comment.stepId ? original.find((step) => step.id === comment.stepId) : undefined;
  for (const [version, steps] of stepsByVersion) {
    if (version <= comment.planVersion) continue;
    if (!comment.stepId || !before) return version;
    const index = steps.findIndex((step) => step.id === comment.stepId);
    if (index < 0) return version;
    const after = steps[index]!;
    if (comment.intent === "insert_before" || comment.intent === "insert_after") {
      const neighbour = steps[comment.intent === "insert_before" ? index - 1 : index + 1];
      const known = new Set(original.map((step) => step.id));
      if (neighbour && !known.has(neighbour.id)) return version;
      continue;
    }
    if (comment.field ? changedAt(before, after, comment.field) : changedStep(before, after)) return version;
  }
  return null;
}

function changedStep(before: Step, after: Step): boolean {
  const { order: _a, ...left } = before;
  const { order: _b, ...right } = after;
  return JSON.stringify(left) !== JSON.stringify(right);
}

function changedAt(before: Step, after: Step, field: string): boolean {
  const read = (step: Step) =>
    field.split(".").reduce<unknown>((value, key) => (value as Record<string, unknown> | undefined)?.[key], step);
  return JSON.stringify(read(before)) !== JSON.stringify(read(after));
}

/**
 * The open, unanswered comments as instructions for a revision — to the planner as feedback, or
 * to the agent that wrote the plan as a request for changes. Each names its id so the revision
 * can be traced back to what asked for it.
 */
export function commentsAsInstructions(comments: CommentView[], currentVersion: number): string | null {
  const open = comments.filter((comment) => !comment.resolved && comment.answeredInVersion === null);
  if (open.length === 0) return null;
  const lines = open.map((comment) => {
    const where = comment.stepId ? `${comment.stepId}${comment.field ? ` (${comment.field})` : ""}` : "the whole plan";
    const replies = comment.replies.map((reply) => ` Reply from ${reply.author}: ${oneLine(reply.body)}`).join("");
    return `- [comment ${comment.id.slice(0, 8)}] On ${where} — ${INTENT_WORDS[comment.intent]}: ${oneLine(comment.body)}${replies}`;
  });
  return [
    `Revise version ${currentVersion} of the plan to answer each of these review comments. Keep every step that no comment is about as it is.`,
    ...lines,
  ].join("\n");
}

/** Open threads in a plan's Markdown export, under the step they are about. */
export function commentsMarkdown(comments: CommentView[], stepId: string | null): string[] {
  const threads = comments.filter((comment) => comment.stepId === stepId && !comment.resolved);
  if (threads.length === 0) return [];
  const lines = ["", "Review comments:", ""];
  for (const comment of threads) {
    const answered = comment.answeredInVersion ? ` (answered in v${comment.answeredInVersion})` : "";
    lines.push(
      `- **${comment.author}** — ${INTENT_WORDS[comment.intent]}${comment.field ? ` \`${comment.field}\`` : ""}: ${oneLine(comment.body)}${answered}`,
    );
    for (const reply of comment.replies) lines.push(`  - **${reply.author}**: ${oneLine(reply.body)}`);
  }
  return lines;
}

function oneLine(text: string): string {
  return text.replace(/\s+/g, " ").trim();
}
