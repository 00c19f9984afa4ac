import type { PlanIssue } from "@/server/plan-schema";

/** Issues grouped by the step they belong to; plan-level issues under the empty key. */
export function groupIssuesByStep(issues: readonly PlanIssue[]): Map<string, PlanIssue[]> {
  const grouped = new Map<string, PlanIssue[]>();
  for (const issue of issues) {
    const key = issue.stepId ?? "";
    grouped.set(key, [...(grouped.get(key) ?? []), issue]);
    // A cycle concerns every step on it, so show it next to each of them.
    for (const other of issue.steps ?? []) {
      if (other !== key) grouped.set(other, [...(grouped.get(other) ?? []), issue]);
    }
  }
  return grouped;
}

/** Reads the plan issues a refused tRPC call carries, if any. */
export function issuesFromError(error: unknown): PlanIssue[] {
  const data = (error as { data?: { appError?: string; details?: unknown } } | null)?.data;
  return data?.appError === "invalid_plan" && Array.isArray(data.details) ? (data.details as PlanIssue[]) : [];
}
