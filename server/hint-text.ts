/**
 * The text checks the quality gates share — the plan gates (server/plans/quality-gates.ts) and the
 * gates for tasks an agent adds (server/agents/task-gates.ts): whether a context hint is
 * actionable, which paths it names, and which of those it says are to be made. Pure functions
 * over strings, on the ground floor so that both rooms import them downwards.
 */

/**
 * A hint is actionable when it tells the agent to do something (starts with, or contains, a verb
 * of the trade) or points at something concrete (`code`, a path, a section, a URL).
 */
const ACTION_VERBS =
  /\b(read|review|see|check|use|follow|edit|add|update|run|refer|look|open|compare|create|write|call|import|test|ensure|keep|mirror|reuse|extend|consult|inspect|search|grep|find|replace|remove|delete|rename|move|implement|fix|verify|document|study|copy|match|wire|register|configure|install|start|stop|measure|profile|note|mind|avoid|return|handle|validate|parse|store|load|export|expose)\b/i;
const CONCRETE_REFERENCE = /`[^`]+`|\b[\w.-]+\/[\w./-]+|\b[\w-]+\.[a-z]{1,5}\b|\bsection\b|§|https?:\/\//i;

export const CREATES = /\b(create|add|write|new|generate|scaffold|introduce)\b/i;

/**
 * Paths that hints say are to be made ("Create `src/new.ts`"): a task may list a file it creates
 * in `relevant_file_paths` before the file exists.
 */
export function pathsToCreate(hints: readonly string[]): Set<string> {
  const created = new Set<string>();
  for (const hint of hints) {
    if (!CREATES.test(hint)) continue;
    for (const mentioned of mentionedPaths(hint)) created.add(mentioned.replace(/^\.\//, "").replace(/\/+$/, ""));
  }
  return created;
}

export function isActionableHint(hint: string): boolean {
  const text = hint.trim();
  return text.length >= 8 && (ACTION_VERBS.test(text) || CONCRETE_REFERENCE.test(text));
}

/** Paths a hint names in backticks (`src/models/user.py`), which must exist like listed paths. */
export function mentionedPaths(hint: string): string[] {
  return [...hint.matchAll(/`([^`\s]+)`/g)]
    .map((match) => match[1]!)
    .filter(
      (candidate) =>
        /^[\w.-]+(\/[\w.-]+)*\/?$/.test(candidate) && (candidate.includes("/") || /\.[a-z0-9]{1,6}$/i.test(candidate)),
    )
    .filter((candidate) => !/^\.+$/.test(candidate));
}
