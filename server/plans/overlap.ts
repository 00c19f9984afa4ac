import type { Step } from "../plan-schema";

/**
 * Overlap warnings before approval (issue "Parallel agent work"): two steps that may run at the
 * same time — neither depends on the other, directly or through others — and name the same files
 * or directories in their relevant paths (one path equal to, or a directory prefix of, the other)
 * will likely edit the same code in parallel and conflict when their branches merge. The plan page
 * warns and offers the dependency that serialises them. Pure: no I/O, shared by server and browser.
 *
 * `.` (the whole workspace — the decomposition task reads everything) is left out: it would overlap
 * every task and says nothing about what a task changes. Skipped steps never run, so never overlap.
 */

export interface OverlapWarning {
  /** The earlier step in plan order, and the later: the suggested dependency is later → earlier. */
  first: string;
  second: string;
  /**
   * The shared scope: for each overlapping pair of paths, the enclosing one — with a trailing `/`
   * when it is a directory (it encloses the other, or was written so).
   */
  paths: string[];
}

/** `./src//api/` → `src/api`; `.` and empty → undefined (the whole workspace). */
export function normalizeRelevantPath(raw: string): string | undefined {
  const parts = raw
    .trim()
    .replace(/\\/g, "/")
    .split("/")
    .filter((part) => part !== "" && part !== ".");
  return parts.length === 0 ? undefined : parts.join("/");
}

/** Whether `a` and `b` name the same file or directory, or one lies inside the other. */
export function pathsOverlap(a: string, b: string): boolean {
  return a === b || a.startsWith(`${b}/`) || b.startsWith(`${a}/`);
}

/** Every step's transitive dependencies. Unknown ids and cycles (refused elsewhere) are tolerated. */
function ancestors(steps: Pick<Step, "id" | "dependsOn">[]): Map<string, Set<string>> {
  const byId = new Map(steps.map((step) => [step.id, step]));
  const result = new Map<string, Set<string>>();
  const visit = (id: string, trail: Set<string>): Set<string> => {
    const known = result.get(id);
    if (known) return known;
    const found = new Set<string>();
    if (trail.has(id)) return found;
    trail.add(id);
    for (const dep of byId.get(id)?.dependsOn ?? []) {
      found.add(dep);
      for (const further of visit(dep, trail)) found.add(further);
    }
    trail.delete(id);
    result.set(id, found);
    return found;
  };
  for (const step of steps) visit(step.id, new Set());
  return result;
}

export function findOverlaps(
  steps: Pick<Step, "id" | "dependsOn" | "relevantFilePaths" | "skipped">[],
): OverlapWarning[] {
  const above = ancestors(steps);
  const candidates = steps
    .filter((step) => !step.skipped)
    .map((step) => {
      const directories = new Set<string>();
      const paths = new Set<string>();
      for (const raw of step.relevantFilePaths) {
        const normal = normalizeRelevantPath(raw);
        if (normal === undefined) continue;
        paths.add(normal);
        if (/[\\/]\s*$/.test(raw)) directories.add(normal);
      }
      return { id: step.id, paths: [...paths], directories };
    })
    .filter((step) => step.paths.length > 0);
  const warnings: OverlapWarning[] = [];
  for (const [index, first] of candidates.entries()) {
    for (const second of candidates.slice(index + 1)) {
      if (above.get(first.id)?.has(second.id) || above.get(second.id)?.has(first.id)) continue;
      const shared = new Set<string>();
      for (const a of first.paths) {
        for (const b of second.paths) {
          if (!pathsOverlap(a, b)) continue;
          const enclosing = a.length <= b.length ? a : b;
          const directory = a !== b || first.directories.has(enclosing) || second.directories.has(enclosing);
          shared.add(directory ? `${enclosing}/` : enclosing);
        }
      }
      if (shared.size > 0) warnings.push({ first: first.id, second: second.id, paths: [...shared].sort() });
    }
  }
  return warnings;
}

/** `step_3` → "Task 3"; any other id → "Step <id>". */
function stepName(stepId: string): string {
  const number = /^step_(\d+)$/.exec(stepId)?.[1];
  return number ? `Task ${number}` : `Step ${stepId}`;
}

/** "Tasks 3 and 5 may run at the same time and both touch src/api/". */
export function overlapMessage(warning: OverlapWarning): string {
  const a = stepName(warning.first);
  const b = stepName(warning.second);
  const names =
    a.startsWith("Task ") && b.startsWith("Task ") ? `Tasks ${a.slice(5)} and ${b.slice(5)}` : `${a} and ${b}`;
  return `${names} may run at the same time and both touch ${warning.paths.join(", ")}`;
}

/** The button's words: the later step comes to depend on the earlier, "add dependency 5 → 3". */
export function overlapFixLabel(warning: OverlapWarning): string {
  const number = (id: string) => /^step_(\d+)$/.exec(id)?.[1] ?? id;
  return `Add dependency ${number(warning.second)} → ${number(warning.first)}`;
}
