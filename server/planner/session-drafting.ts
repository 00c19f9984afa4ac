import { isAppError } from "../errors";
import { getPlan } from "../plans/service";
import { redactSecrets } from "../redact";
import type { PlannerDeps } from "./deps";
import { planDeep } from "./deep-mode";
import { planWithRefinement, type PlanningContext, type PlanningOutcome } from "./planning";
import { deepTaskPrompt, quickPlanPrompt, regeneratePrompt } from "./prompts";
import type { SessionFailure } from "./sessions";
import { snapshotWorkspace } from "./snapshot";

/**
 * What a planning session's loop (session-jobs.ts) drafts with: the session row it runs from, the
 * prompt its kind and mode call for over a snapshot of the workspace, and the failure an error
 * ends it with.
 */

export interface SessionRow {
  id: string;
  kind: string;
  mode: string;
  status: string;
  phase: string;
  goal: string;
  model: string;
  workspaceId: string | null;
  workspaceRoot: string;
  useJudge: boolean;
  maxRefinements: number;
  planId: string | null;
  baseVersion: number | null;
  feedback: string | null;
  traceId: string;
  actor: string;
  loopState: unknown;
}

/** Drafts the session's plan: quick or deep, a new plan or a regeneration of the current one. */
export async function draftPlan(
  deps: PlannerDeps,
  session: SessionRow,
  context: PlanningContext,
): Promise<PlanningOutcome> {
  const tools = deps.tools.list();
  const snapshotText = async () => {
    const snapshot = await snapshotWorkspace(session.workspaceRoot);
    const keyFiles = snapshot.keyFiles.map((file) => file.path);
    await context.emit("planning.context", {
      message: `Workspace snapshot: ${snapshot.entries.length}${snapshot.truncated ? "+" : ""} entries, ${keyFiles.length} key file${keyFiles.length === 1 ? "" : "s"} (${keyFiles.join(", ") || "none"})`,
      entries: snapshot.entries.length,
      keyFiles,
    });
    return snapshot.text;
  };
  if (session.kind !== "regenerate") {
    if (session.mode === "deep") {
      return planDeep(context, async () =>
        deepTaskPrompt({ goal: session.goal, snapshot: await snapshotText(), tools }),
      );
    }
    return planWithRefinement(context, quickPlanPrompt({ goal: session.goal, snapshot: await snapshotText(), tools }));
  }
  const current = await getPlan(deps.prisma, session.planId!, session.baseVersion!);
  const feedback = session.feedback ?? "";
  if (session.mode === "deep") {
    return planDeep(
      context,
      async () =>
        deepTaskPrompt({ goal: session.goal, snapshot: await snapshotText(), tools, feedback }) +
        `\n\nThe current plan:\n${JSON.stringify({ summary: current.summary, steps: current.steps })}`,
    );
  }
  return planWithRefinement(
    context,
    regeneratePrompt({ goal: session.goal, snapshot: await snapshotText(), tools, currentPlan: current, feedback }),
  );
}

/** How an error ends a session: a provider's error as the provider said it, anything else as internal. */
export function failureOf(error: unknown): SessionFailure {
  return isAppError(error)
    ? {
        status: "error",
        error_type: "provider_error",
        message: redactSecrets(error.message),
        kind: ((error.details as { kind?: string } | undefined)?.kind ?? error.code) as string,
        retryable: (error.details as { retryable?: boolean } | undefined)?.retryable ?? true,
      }
    : {
        status: "error",
        error_type: "internal",
        message: redactSecrets(
          `Planning stopped on an internal error: ${error instanceof Error ? error.message : String(error)}`,
        ),
        retryable: true,
      };
}
