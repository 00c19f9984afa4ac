"use client";

import { useMutation, useQuery } from "@tanstack/react-query";
import { useEffect } from "react";
import { useTRPC } from "@/components/trpc";
import { ErrorMessage } from "@/components/ui/error-message";

/**
 * Above the steps of an agent session's run: whose session it is, its open signals — blockers
 * first, each clearable by the person watching — and the agent's final summary once given.
 * Signals arrive as `signal.*` events in the run's stream; `signalSeq` changes with each, and the
 * panel reloads then. Runs that are not a session's show nothing.
 */
export function SessionPanel({ runId, signalSeq }: { runId: string; signalSeq: number | undefined }) {
  const trpc = useTRPC();
  const session = useQuery(trpc.agents.sessionOfRun.queryOptions({ runId }));
  const clear = useMutation(trpc.agents.clearSignal.mutationOptions({ onSuccess: () => void session.refetch() }));
  const { refetch } = session;
  useEffect(() => {
    if (signalSeq !== undefined) void refetch();
  }, [signalSeq, refetch]);

  if (!session.data) return null;
  const { data } = session;
  const signals = [...data.signals].sort((a, b) => rank(a.level) - rank(b.level));
  return (
    <section className="card stack-sm session-panel" aria-label="Agent session">
      <div className="row spread">
        <strong>Agent session {data.id}</strong>
        <span className="muted">{data.closed ? "finished" : "the agent drives it with the stepwise CLI"}</span>
      </div>
      {!data.closed && (
        <p className="muted" data-testid="agent-last-seen">
          {data.agent}{" "}
          {data.lastSeenAt
            ? `last called ${idle(data.idleSeconds)} ago`
            : `has not called yet (${idle(data.idleSeconds)})`}
          {data.idleSeconds >= 15 * 60 &&
            " — if the agent is gone, skip its tasks or cancel the run, or hand the session to another agent (stepwise status --session " +
              data.id +
              ")."}
        </p>
      )}
      {signals.length === 0 ? (
        <p className="muted" data-testid="no-signals">
          No open signals.
        </p>
      ) : (
        <ul className="signal-list" aria-label="Open signals">
          {signals.map((signal) => (
            <li key={signal.id} className={`signal signal-${signal.level}`} data-signal-id={signal.id}>
              <span>
                <strong>
                  {signal.level === "blocker" ? "Blocker" : signal.level === "warning" ? "Warning" : "Info"}
                </strong>{" "}
                <span className="mono">{signal.id}</span>
                {signal.task_id !== null && ` · task ${signal.task_id}`}: {signal.message}
                <span className="muted"> — raised by {signal.raised_by}</span>
              </span>
              <button
                className="small"
                onClick={() => clear.mutate({ sessionId: data.id, signalId: signal.id })}
                disabled={clear.isPending}
                aria-label={`Clear signal ${signal.id}`}
              >
                Clear
              </button>
            </li>
          ))}
        </ul>
      )}
      {clear.error && <ErrorMessage error={clear.error} />}
      {data.verifications.length > 0 && (
        <div className="stack-sm" data-testid="verifications">
          <strong>Verifier results</strong>
          <ul className="signal-list" aria-label="Verifier results">
            {data.verifications.map((check) => (
              <li
                key={check.stepId}
                className={`signal ${check.passed ? "signal-info" : "signal-blocker"}`}
                data-verification-step={check.stepId}
              >
                <div className="stack-sm">
                  <span>
                    <strong>{check.taskId !== null ? `Task ${check.taskId}` : check.stepId}</strong>:{" "}
                    {check.passed ? "all checks passed" : "a check failed — the task went back to TODO"}
                    <span className="muted"> — {new Date(check.at).toLocaleString()}</span>
                  </span>
                  <ul>
                    {check.results.map((result, index) => (
                      <li key={index}>
                        <span className="mono">{result.command}</span>{" "}
                        {result.passed
                          ? "passed"
                          : `${result.level ? `[${result.level}] ` : ""}${result.error ?? `exited with code ${result.exitCode ?? "none"}`}`}
                        {!result.passed && result.tail && <pre className="mono">{result.tail}</pre>}
                      </li>
                    ))}
                  </ul>
                </div>
              </li>
            ))}
          </ul>
        </div>
      )}
      {data.finalSummary && (
        <p data-testid="final-summary">
          <strong>Final summary:</strong> {data.finalSummary}
        </p>
      )}
    </section>
  );
}

function idle(seconds: number): string {
  if (seconds < 60) return `${seconds} s`;
  if (seconds < 3600) return `${Math.floor(seconds / 60)} min`;
  return `${Math.floor(seconds / 3600)} h ${Math.floor((seconds % 3600) / 60)} min`;
}

function rank(level: string): number {
  return level === "blocker" ? 0 : level === "warning" ? 1 : 2;
}
