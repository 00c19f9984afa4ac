import type { AuditVerification } from "../audit/verify";

/**
 * `stepwise audit verify` for a person at a terminal: the verdict first, then every broken link
 * and every effect without an authorising decision, each on one line a person can act on.
 */
export function formatAuditVerification(report: AuditVerification): string[] {
  const lines: string[] = [];
  const authorisedCount = report.authorised.length;
  const systemCount = Object.values(report.systemDecided).reduce((sum, count) => sum + count, 0);
  lines.push(
    report.ok
      ? `Audit log verified: ${report.entries} entries in one unbroken chain; every side effect has its decision.`
      : `Audit log NOT verified: ${report.breaks.length} broken link${report.breaks.length === 1 ? "" : "s"}, ${report.unauthorised.length} effect${report.unauthorised.length === 1 ? "" : "s"} without an authorising decision.`,
  );
  lines.push(
    `Head: seq ${report.head.seq}, hash ${report.head.rowHash ?? "(unsealed)"} — keep it elsewhere to detect a rewrite.`,
  );
  lines.push(`Effects: ${authorisedCount} authorised by decisions, ${systemCount} read-only (no decision needed).`);
  for (const brk of report.breaks) {
    lines.push(
      `  BROKEN seq ${brk.seq}: ${brk.kind.replaceAll("_", " ")} — expected ${brk.expected ?? "-"}, found ${brk.found ?? "-"}`,
    );
  }
  for (const effect of report.unauthorised) {
    const seen = effect.decisions
      .map((decision) => `${decision.kind.replace("_", " ")} by ${decision.actor}`)
      .join(", ");
    lines.push(
      `  UNAUTHORISED ${effect.kind} ${effect.subject}: ${effect.problem ?? ""}${seen ? ` (on record: ${seen})` : ""}`,
    );
  }
  return lines;
}
