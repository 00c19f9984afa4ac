"use client";

import { useQuery } from "@tanstack/react-query";
import Link from "next/link";
import { IntentLink } from "@/components/ui/intent-link";
import { useState } from "react";
import { useTRPC } from "@/components/trpc";
import { ErrorMessage } from "@/components/ui/error-message";
import type { PlanningState } from "@/server/planner/session-list";
import type { inferRouterOutputs } from "@trpc/server";
import type { AppRouter } from "@/server/trpc/root";

type PlanningSessionRow = inferRouterOutputs<AppRouter>["planning"]["list"]["sessions"][number];

const STATES: { state: PlanningState; label: string }[] = [
  { state: "gathering", label: "Gathering" },
  { state: "waiting", label: "Question for you" },
  { state: "submitted", label: "Submitted" },
  { state: "approved", label: "Approved" },
  { state: "rejected", label: "Rejected" },
  { state: "cancelled", label: "Cancelled" },
  { state: "failed", label: "Failed" },
];
export const STATE_LABEL = Object.fromEntries(STATES.map(({ state, label }) => [state, label])) as Record<
  PlanningState,
  string
>;

/** Every planning session, newest first, with its state in words and what it waits for. */
export function PlanningList() {
  const trpc = useTRPC();
  // One filter at a time: a state, or everything whose next move is yours (as the inbox counts it).
  const [state, setState] = useState<PlanningState | "you" | undefined>(undefined);
  const list = useQuery({
    ...trpc.planning.list.queryOptions(state === "you" ? { waitsOn: "you" } : state ? { state } : {}),
    staleTime: 0,
    refetchInterval: 5_000,
  });
  const counts = list.data?.counts;
  const total = counts ? Object.values(counts).reduce((sum, n) => sum + n, 0) : 0;
  return (
    <section className="stack" aria-labelledby="planning-heading">
      <div className="row spread">
        <h1 id="planning-heading">Planning</h1>
        <Link className="button primary" href="/tasks/new">
          New task
        </Link>
      </div>
      <div className="row" role="group" aria-label="Filter by state">
        <button type="button" aria-pressed={state === undefined} onClick={() => setState(undefined)}>
          All ({total})
        </button>
        <button
          type="button"
          aria-pressed={state === "you"}
          onClick={() => setState(state === "you" ? undefined : "you")}
        >
          Waiting for you ({list.data?.waitingForYou ?? 0})
        </button>
        {STATES.map((option) => (
          <button
            type="button"
            key={option.state}
            aria-pressed={state === option.state}
            onClick={() => setState(state === option.state ? undefined : option.state)}
          >
            {option.label} ({counts?.[option.state] ?? 0})
          </button>
        ))}
      </div>
      <ErrorMessage error={list.error} />
      {list.isPending && <p aria-busy="true">Loading planning sessions…</p>}
      {list.data && list.data.sessions.length === 0 && (
        <div className="empty">
          {state === "you" ? (
            <p>
              Nothing waits for you: no question to answer and no plan to review. Choose “All” to see every session.
            </p>
          ) : state ? (
            <p>No planning session is {STATE_LABEL[state].toLowerCase()}. Choose “All” to see every session.</p>
          ) : (
            <>
              <p>No planning sessions yet.</p>
              <p>
                Start one with <Link href="/tasks/new">New task</Link>: describe the goal and the planner drafts a plan
                for you to review. Agents connected over MCP appear here when they ask to plan first.
              </p>
            </>
          )}
        </div>
      )}
      {list.data && list.data.sessions.length > 0 && (
        <table className="table" aria-label="Planning sessions">
          <thead>
            <tr>
              <th scope="col">Goal</th>
              <th scope="col">State</th>
              <th scope="col">Waiting for</th>
              <th scope="col">Kind</th>
              <th scope="col">Started</th>
            </tr>
          </thead>
          <tbody>
            {list.data.sessions.map((session) => (
              <PlanningRow key={session.id} session={session} />
            ))}
          </tbody>
        </table>
      )}
    </section>
  );
}

/** One session: its goal and plan, its state, what it waits for, its kind and when it started. */
function PlanningRow({ session }: { session: PlanningSessionRow }) {
  return (
    <tr data-session-id={session.id} data-state={session.state} data-waits-on={session.waitsOn ?? "nobody"}>
      <td>
        <IntentLink href={`/tasks/${session.id}`}>{session.goal}</IntentLink>
        {session.reason && session.reason !== session.goal && (
          <div className="muted">the agent planned because: {session.reason}</div>
        )}
        {session.planId && (
          <div className="muted">
            plan{" "}
            <IntentLink className="mono" href={`/plans/${session.planId}`}>
              {session.planId}
            </IntentLink>
            {session.planVersion !== null && ` v${session.planVersion}`}
          </div>
        )}
      </td>
      <td>
        <span className={`badge planning-${session.state}`}>{STATE_LABEL[session.state]}</span>
      </td>
      <td>
        {session.waitsFor ? (
          session.waitsOn === "you" ? (
            <strong>{session.waitsFor}</strong>
          ) : (
            session.waitsFor
          )
        ) : session.runId ? (
          <Link href={`/runs/${session.runId}`}>its run</Link>
        ) : (
          <span className="muted">nothing</span>
        )}
      </td>
      <td>
        {session.kind === "external"
          ? `agent ${session.actor}`
          : `${session.kind === "regenerate" ? "revision" : "new task"}, ${session.mode}`}
      </td>
      <td>
        <time dateTime={session.createdAt}>{new Date(session.createdAt).toLocaleString()}</time>
      </td>
    </tr>
  );
}
