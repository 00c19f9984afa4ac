import { z } from "zod";
import {
  addComment,
  addCommentInputSchema,
  COMMENT_INTENTS,
  commentsAsInstructions,
  listComments,
  setCommentResolved,
} from "../plans/comments";
import { plannerFor } from "../planner/deps";
import { startRegeneration } from "../planner/sessions";
import { AppError } from "../errors";
import { defineOperation } from "./operation";
import { PERSON_ONLY, PERSON_OR_AGENT } from "./policy";
import { planReview } from "./plans";
import type { AnyOperation } from "./operation";

/**
 * Review as a conversation (server/plans/comments.ts): people and agents comment on steps, a
 * person asks for a revision from the open comments. Revising is a person's call — it spends the
 * planner's budget or sends an agent's plan back — so an agent's comments wait for one.
 */
const planId = z.string().min(1).max(100);

const replySchema = z.object({
  id: z.string(),
  planVersion: z.number(),
  stepId: z.string().nullable(),
  field: z.string().nullable(),
  intent: z.enum(COMMENT_INTENTS),
  body: z.string(),
  author: z.string(),
  authorKind: z.string(),
  createdAt: z.string(),
  resolved: z.object({ by: z.string(), at: z.string() }).nullable(),
});
const commentSchema = replySchema.extend({
  answeredInVersion: z.number().nullable().describe("The first later version whose change answered it"),
  replies: z.array(replySchema),
});

export const planComments = defineOperation({
  name: "plan.comments",
  callers: PERSON_OR_AGENT,
  role: "viewer",
  summary: "The review comments of a plan, as threads, each with whether a later version answered it",
  input: z.object({ planId }),
  output: z.object({ comments: z.array(commentSchema) }),
  annotations: { readOnly: true },
  run: async ({ app }, input) => ({ comments: await listComments(app.db.prisma, input.planId) }),
});

export const planComment = defineOperation({
  name: "plan.comment",
  callers: PERSON_OR_AGENT,
  role: "reviewer",
  summary:
    "Comment on a step, one of its arguments, or the whole plan, with an intent (comment, change, delete, insert_before, insert_after); or reply to a thread",
  input: addCommentInputSchema,
  output: z.object({ id: z.string() }),
  run: ({ app, identity }, input) => addComment(app.db.prisma, { name: identity.name, kind: identity.kind }, input),
});

export const planCommentResolve = defineOperation({
  name: "plan.comment_resolve",
  // Whether a comment is settled is the reviewer's call; an agent answers by revising or replying.
  callers: PERSON_ONLY,
  role: "reviewer",
  summary: "Resolve a comment thread (or reopen it with resolved: false)",
  input: z.object({ planId, commentId: z.uuid(), resolved: z.boolean().default(true) }),
  output: z.object({ ok: z.literal(true) }),
  annotations: { idempotent: true },
  run: ({ app, identity }, input) => setCommentResolved(app.db.prisma, identity.name, input),
});

export const planReviseFromComments = defineOperation({
  name: "plan.revise_from_comments",
  callers: PERSON_ONLY,
  role: "reviewer",
  summary:
    "Send the open, unanswered comments back for a revision: to the planner for its plans, to the authoring agent for an agent's plan (a person only)",
  input: z.object({ planId, version: z.number().int().positive() }),
  output: z.object({
    sentTo: z.enum(["planner", "agent"]),
    sessionId: z.string().nullable(),
    comments: z.number(),
  }),
  async run(context, input) {
    const { app, identity } = context;
    const plan = await app.db.prisma.planVersion.findUnique({
      where: { planId_version: { planId: input.planId, version: input.version } },
      select: { source: true },
    });
    if (!plan) throw new AppError("not_found", `No plan ${input.planId} version ${input.version}`);
    const comments = await listComments(app.db.prisma, input.planId);
    const instructions = commentsAsInstructions(comments, input.version);
    if (!instructions) {
      throw new AppError("invalid_state", "No open comment waits for an answer: comment on a step first");
    }
    const open = comments.filter((comment) => !comment.resolved && comment.answeredInVersion === null).length;
    if (plan.source === "agent") {
      await planReview.run(context, {
        planId: input.planId,
        version: input.version,
        decision: "request_changes",
        comment: instructions,
      });
      return { sentTo: "agent" as const, sessionId: null, comments: open };
    }
    const { sessionId } = await startRegeneration(plannerFor(app), {
      planId: input.planId,
      baseVersion: input.version,
      feedback: instructions,
      actor: identity.name,
    });
    return { sentTo: "planner" as const, sessionId, comments: open };
  },
});

export const planCommentOperations = [
  planComments,
  planComment,
  planCommentResolve,
  planReviseFromComments,
] as AnyOperation[];
