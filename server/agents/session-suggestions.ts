import type { AppContext } from "../services";
import { findSession } from "./sessions";
import { loadSession } from "./session-state";
import { workspaceTodoMarkers } from "./workspace-work";

type App = Pick<AppContext, "db" | "engine" | "tools" | "workspaceRoot">;

export interface TaskSuggestion {
  title: string;
  type: string;
  context_hints: string[];
  relevant_file_paths: string[];
  reason: string;
}

/**
 * Seed 003's `suggest` (P-3): new tasks for the session from the workspace — the TODO/FIXME
 * markers in its files (read where the workspace is), and, with an LLM provider configured, the planner's suggestions. Nothing
 * is added; the agent adds the ones worth doing with `add_tasks`. Titles already in the plan are
 * left out.
 */
export async function suggestForSession(
  app: App,
  input: { sessionId?: string; caller?: string; suggestWithModel?: (planId: string) => Promise<TaskSuggestion[]> },
): Promise<{ status: "success"; suggestions: TaskSuggestion[] }> {
  const session = await findSession(app, input.sessionId, input.caller);
  const loaded = await loadSession(app, session);
  const markers = await workspaceTodoMarkers(app, session);
  const fromMarkers: TaskSuggestion[] = markers.map((marker) => ({
    title: `Resolve the ${marker.kind} in ${marker.path}:${marker.line}: ${marker.text}`.slice(0, 200),
    type: marker.kind === "FIXME" || marker.kind === "BUG" ? "bugfix" : "chore",
    context_hints: [`Read \`${marker.path}\` around line ${marker.line}, where the ${marker.kind} marker is.`],
    relevant_file_paths: [marker.path],
    reason: `${marker.kind} marker in ${marker.path}:${marker.line}`,
  }));
  const fromModel = input.suggestWithModel ? await input.suggestWithModel(session.plan_id) : [];
  const known = new Set(loaded.steps.map((step) => normaliseTitle(step.title ?? step.description)));
  const suggestions: TaskSuggestion[] = [];
  for (const suggestion of [...fromModel, ...fromMarkers]) {
    const key = normaliseTitle(suggestion.title);
    if (known.has(key)) continue;
    known.add(key);
    suggestions.push(suggestion);
  }
  return { status: "success", suggestions };
}

function normaliseTitle(title: string): string {
  return title
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, " ")
    .trim();
}
