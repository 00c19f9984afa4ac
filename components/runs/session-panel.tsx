"use client";

import { useMutation, useQuery } from "@tanstack/react-query";
import { useEffect, useState } from "react";
import { useTRPC } from "@/components/trpc";
import { ErrorMessage } from "@/components/ui/error-message";
import type { SessionOfRunView } from "@/server/operations/reads";
import { IntegrationBranch } from "./integration-branch";

/**
 * Above the steps of an agent session's run: whose session it is, its open signals — blockers
 * first, each clearable by the person watching — and the agent's final summary once given.
 * Signals arrive as `signal.*` events in the run's stream; `signalSeq` changes with each, and the
 * panel reloads then. Runs that are not a session's show nothing.
 */
export function SessionPanel({ runId, signalSeq }: { runId: string; signalSeq: number | undefined }) {
  const trpc = useTRPC();
  // Heartbeats renew leases without an event; a slow poll keeps "last seen" and leases current.
  const session = useQuery({ ...trpc.agents.sessionOfRun.queryOptions({ runId }), refetchInterval: 10_000 });
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
      {!data.closed && <AgentsAtWork data={data} onChanged={() => void session.refetch()} />}
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
      {data.verifications.length > 0 && <VerifierResults verifications={data.verifications} />}
      {data.integration && <IntegrationBranch integration={data.integration} />}
      {data.finalSummary && (
        <p data-testid="final-summary">
          <strong>Final summary:</strong> {data.finalSummary}
        </p>
      )}
    </section>
  );
}

type SessionData = NonNullable<SessionOfRunView>;

/**
 * Who works on what: each agent that called on the session, the tasks it holds under a lease (with
 * the lease's age and time left, and the brief it was given), when it last called; and the cap on
 * tasks in progress at once, which the person can change.
 */
function AgentsAtWork({ data, onChanged }: { data: SessionData; onChanged: () => void }) {
  const trpc = useTRPC();
  const [cap, setCap] = useState(String(data.agentConcurrency));
  const setConcurrency = useMutation(trpc.agents.setConcurrency.mutationOptions({ onSuccess: onChanged }));
  // Counts down between reloads: seconds since the data was fetched.
  const [fetchedAt, setFetchedAt] = useState(() => Date.now());
  const [now, setNow] = useState(() => Date.now());
  useEffect(() => setFetchedAt(Date.now()), [data]);
  useEffect(() => {
    const timer = setInterval(() => setNow(Date.now()), 1_000);
    return () => clearInterval(timer);
  }, []);
  const elapsed = Math.max(0, Math.floor((now - fetchedAt) / 1000));
  const leased = data.agents.flatMap((agent) => agent.tasks.map((task) => ({ ...task, agent: agent.name })));
  return (
    <div className="stack-sm" data-testid="agents-at-work">
      <form
        className="row"
        onSubmit={(event) => {
          event.preventDefault();
          setConcurrency.mutate({ session: data.id, agentConcurrency: Number(cap) });
        }}
      >
        <label htmlFor="agent-concurrency">Agent tasks in progress at once</label>
        <input
          id="agent-concurrency"
          type="number"
          min={1}
          max={64}
          value={cap}
          onChange={(event) => setCap(event.target.value)}
          style={{ width: "5em" }}
        />
        <button
          className="small"
          type="submit"
          disabled={setConcurrency.isPending || Number(cap) === data.agentConcurrency}
        >
          Set
        </button>
        <span className="muted" data-testid="agent-concurrency">
          now {data.agentConcurrency}
          {data.agentConcurrency === 1 ? " (one after another)" : ""} · leases last {data.leaseSeconds} s without a call
        </span>
      </form>
      {setConcurrency.error && <ErrorMessage error={setConcurrency.error} />}
      {data.agents.length === 0 ? (
        <p className="muted" data-testid="no-agents">
          No agent has called yet. Agents join with: stepwise status --session {data.id} --agent &lt;name&gt;
        </p>
      ) : (
        <table className="agents-table" aria-label="Agents">
          <thead>
            <tr>
              <th scope="col">Agent</th>
              <th scope="col">Working on</th>
              <th scope="col">Lease</th>
              <th scope="col">Last seen</th>
            </tr>
          </thead>
          <tbody>
            {data.agents.map((agent) => (
              <AgentRow key={agent.name} agent={agent} elapsed={elapsed} />
            ))}
          </tbody>
        </table>
      )}
      {leased.length > 0 && (
        <p className="muted" data-testid="assignees">
          {leased.map((task) => `Task ${task.taskId} → ${task.agent}`).join(" · ")}
        </p>
      )}
    </div>
  );
}

/** One agent: the tasks it holds with their briefs, how old and how long-lived each lease is, when it last called. */
function AgentRow({ agent, elapsed }: { agent: SessionData["agents"][number]; elapsed: number }) {
  return (
    <tr data-agent={agent.name}>
      <th scope="row" className="mono">
        {agent.name}
      </th>
      <td>
        {agent.tasks.length === 0 ? (
          <span className="muted">no task</span>
        ) : (
          agent.tasks.map((task) => (
            <details key={task.stepId} data-task-id={task.taskId}>
              <summary>
                Task {task.taskId}: {task.title}
              </summary>
              <BriefView brief={task.brief} />
            </details>
          ))
        )}
      </td>
      <td>
        {agent.tasks.map((task) => {
          const left = task.secondsLeft - elapsed;
          return (
            <div key={task.stepId} data-testid="lease">
              held {idle(task.leaseAgeSeconds + elapsed)},{" "}
              {left > 0 ? `${idle(left)} left` : "expired — returns to ready"}
            </div>
          );
        })}
      </td>
      <td>{idle(agent.idleSeconds + elapsed)} ago</td>
    </tr>
  );
}

/** What the verifier found for each task an agent finished: every check command and how it went. */
function VerifierResults({ verifications }: { verifications: SessionData["verifications"] }) {
  return (
    <div className="stack-sm" data-testid="verifications">
      <strong>Verifier results</strong>
      <ul className="signal-list" aria-label="Verifier results">
        {verifications.map((check) => (
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
  );
}

/** Exactly what the agent was given for the task (stored at hand-out, not recomputed). */
function BriefView({ brief }: { brief: SessionData["agents"][number]["tasks"][number]["brief"] }) {
  return (
    <dl className="brief" data-testid="brief">
      <dt>Goal</dt>
      <dd>{brief.goal}</dd>
      {brief.context_hints.length > 0 && (
        <>
          <dt>Hints</dt>
          <dd>
            <ul>
              {brief.context_hints.map((hint) => (
                <li key={hint}>{hint}</li>
              ))}
            </ul>
          </dd>
        </>
      )}
      <dt>Files</dt>
      <dd className="mono">{brief.relevant_file_paths.join(", ") || "—"}</dd>
      {brief.acceptance.length > 0 && (
        <>
          <dt>Acceptance</dt>
          <dd>
            <ul>
              {brief.acceptance.map((line) => (
                <li key={line}>{line}</li>
              ))}
            </ul>
          </dd>
        </>
      )}
      {brief.dependency_notes.length > 0 && (
        <>
          <dt>From the tasks it depends on</dt>
          <dd>
            <ul>
              {brief.dependency_notes.map((dep) => (
                <li key={dep.task_id}>
                  Task {dep.task_id} ({dep.title}): {dep.notes ?? "no notes"}
                </li>
              ))}
            </ul>
          </dd>
        </>
      )}
      {brief.approver_notes.length > 0 && (
        <>
          <dt>Approvers said</dt>
          <dd>
            <ul>
              {brief.approver_notes.map((note) => (
                <li key={`${note.about}-${note.by}-${note.note}`}>
                  {note.by}: {note.note}
                </li>
              ))}
            </ul>
          </dd>
        </>
      )}
      <dt>Working directory</dt>
      <dd className="mono">{brief.working_directory}</dd>
    </dl>
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
