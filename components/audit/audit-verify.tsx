"use client";

import { useMutation } from "@tanstack/react-query";
import { useTRPC } from "@/components/trpc";
import { ErrorMessage } from "@/components/ui/error-message";

/**
 * "Verify the log": replays the hash chain and checks every side effect against its decisions
 * (`audit.verify`), then says what it found — every broken link by seq, every effect without a
 * decision — as `stepwise audit verify` does at a terminal.
 */
export function AuditVerifyPanel() {
  const trpc = useTRPC();
  const verify = useMutation(trpc.audit.verify.mutationOptions());
  const report = verify.data;
  const systemDecided = report ? Object.values(report.systemDecided).reduce((sum, count) => sum + count, 0) : 0;
  return (
    <section className="stack" aria-label="Verify the audit log">
      <div className="row align-end">
        <button onClick={() => verify.mutate({})} disabled={verify.isPending}>
          {verify.isPending ? "Verifying…" : "Verify the log"}
        </button>
        <span className="muted">
          Replays the hash chain and checks every side effect has the decision that allowed it.
        </span>
      </div>
      <ErrorMessage error={verify.error} />
      {report && (
        <div role="status" data-testid="audit-verify-result" data-ok={report.ok}>
          <p>
            <strong>
              {report.ok
                ? `Verified: ${report.entries} entries in one unbroken chain; every side effect has its decision.`
                : `Not verified: ${report.breaks.length} broken link${report.breaks.length === 1 ? "" : "s"}, ${report.unauthorised.length} effect${report.unauthorised.length === 1 ? "" : "s"} without a decision.`}
            </strong>{" "}
            <span className="muted">
              {report.authorised.length} effects authorised by decisions, {systemDecided} read-only. Head: seq{" "}
              {report.head.seq}, <span className="mono">{report.head.rowHash ?? "unsealed"}</span>
            </span>
          </p>
          {report.breaks.length > 0 && (
            <ul aria-label="Broken links">
              {report.breaks.map((brk, index) => (
                <li key={index}>
                  Seq {brk.seq}: {brk.kind.replaceAll("_", " ")} — expected{" "}
                  <span className="mono">{brk.expected ?? "–"}</span>, found{" "}
                  <span className="mono">{brk.found ?? "–"}</span>
                </li>
              ))}
            </ul>
          )}
          {report.unauthorised.length > 0 && (
            <ul aria-label="Effects without a decision">
              {report.unauthorised.map((effect, index) => (
                <li key={index}>
                  <span className="mono">{effect.subject}</span>: {effect.problem}
                </li>
              ))}
            </ul>
          )}
        </div>
      )}
    </section>
  );
}
