"use client";

import { useInfiniteQuery } from "@tanstack/react-query";
import Link from "next/link";
import { useRouter } from "next/navigation";
import { useId, type FormEvent } from "react";
import type { AuditAction } from "@/server/audit/actions";
import { useTRPC } from "@/components/trpc";
import { CopyButton } from "@/components/ui/copy-button";
import { ErrorMessage } from "@/components/ui/error-message";
import { hasMoreThanSummary, summarizeDetail } from "./audit-detail";
import { AuditVerifyPanel } from "./audit-verify";
import type { inferRouterOutputs } from "@trpc/server";
import type { AppRouter } from "@/server/trpc/root";

type AuditEntry = inferRouterOutputs<AppRouter>["audit"]["list"]["entries"][number];

export interface AuditFilters {
  plan?: string;
  run?: string;
  person?: string;
}

/** How each recorded action reads in the log: every action has its words (a compile error otherwise). */
const ACTIONS: Record<AuditAction, string> = {
  "plan.created": "created the plan",
  "plan.version_created": "saved a new version",
  "plan.approved": "approved the plan and started a run",
  "plan.rejected": "rejected the plan",
  "plan.changes_requested": "requested changes",
  "plan.archived": "archived the plan",
  "plan.restored": "restored the plan",
  "gate.waived": "waived the approval gate",
  "step.approved": "approved the step",
  "step.denied": "denied the step",
  "step.answered": "answered the question",
  "step.approval_expired": "let the approval expire",
  "step.retried": "retried the step",
  "step.skipped": "skipped the step",
  "step.recovered": "recovered the step",
  "run.cancelled": "cancelled the run",
  "run.child_started": "started a sub-plan's run",
  "run.child_held": "held a sub-plan back: its approver may not approve it now",
  "run.paused": "paused the run",
  "run.resumed": "resumed the run",
  "run.plan_adopted": "moved the run to a new plan version",
  "recovery.proposed": "asked the planner for a recovery",
  "recovery.accepted": "accepted the recovery",
  "recovery.rejected": "rejected the recovery",
  "task.done": "reported the task done",
  "task.in_progress": "started the task",
  "task.todo": "put the task back",
  "task.cancelled": "cancelled the task",
  "task.leased": "handed the task to an agent",
  "task.lease_expired": "returned the task to ready: the agent's lease expired",
  "session.agent_concurrency_set": "changed how many agents work at once",
  "signal.raised": "raised a signal",
  "signal.cleared": "cleared a signal",
  "session.summarised": "summarised the session",
  "recovery.auto_limit_reached": "stopped recovering automatically: the limit was reached",
  "recovery.auto_held": "held an automatic recovery for a person",
  "recovery.auto_failed": "could not recover automatically",
  "planning.answered": "answered the planner's question",
  "planning.cancelled": "cancelled the planning session",
  "planning.timed_out": "ended the planning session: nobody answered in time",
  "planning.exited": "left plan mode",
  "planning.message": "added a message while the planner gathered",
  "plan.review_timed_out": "ended the review: nobody decided in time",
  "agent_session.attached": "handed the approved plan to its agent",
  "todo.abandoned": "closed the todo plan: its MCP session ended",
  "todo.reopened": "reopened a done todo",
  "todo.resumed": "resumed the todo plan on a new MCP connection",
  "decision_link.created": "made a decision link for",
  "webhook.created": "added an outgoing webhook",
  "webhook.updated": "changed an outgoing webhook",
  "webhook.deleted": "removed an outgoing webhook",
  "webhook.secret_rotated": "made a new secret for an outgoing webhook",
  "person.added": "added a person or agent",
  "person.role_changed": "changed a person's role",
  "credential.issued": "issued a new sign-in token",
  "credential.revoked": "revoked a sign-in token",
  "workspace.approver_policy_set": "changed a workspace's approver policy",
  "mcp_server.added": "added an MCP server",
  "mcp_server.removed": "removed an MCP server",
  "mcp_server.refreshed": "listed an MCP server's tools again",
};

/** Entries written before an action was named here still read as something. */
function describeAction(action: string): string {
  return (ACTIONS as Record<string, string>)[action] ?? action;
}

/** The link to this page with the given filters, so a filtered view can be shared. */
export function auditHref(filters: AuditFilters): string {
  const params = new URLSearchParams();
  if (filters.plan) params.set("plan", filters.plan);
  if (filters.run) params.set("run", filters.run);
  if (filters.person) params.set("person", filters.person);
  const query = params.toString();
  return query ? `/audit?${query}` : "/audit";
}

/**
 * The detail cell: one readable line (hashes by their first 12 characters, the full value on hover
 * and to copy), and the raw JSON behind a toggle when it says more than the line.
 */
function DetailCell({ detail, entryId }: { detail: Record<string, unknown>; entryId: string }) {
  const parts = summarizeDetail(detail);
  if (parts.length === 0) return <span className="muted">–</span>;
  return (
    <div className="stack-sm audit-detail">
      <span data-testid="audit-summary">
        {parts.map((part, index) => (
          <span key={part.key}>
            {index > 0 && " · "}
            <span className="muted">{part.key}:</span>{" "}
            {part.kind === "hash" ? (
              <span className="copy">
                <code className="mono" title={part.full} data-testid="audit-hash">
                  {part.short}
                </code>
                <CopyButton text={part.full} what={`${part.key} of entry ${entryId}`} />
              </span>
            ) : (
              <span title={part.full}>{part.text}</span>
            )}
          </span>
        ))}
      </span>
      {hasMoreThanSummary(parts) && (
        <details>
          <summary>Raw JSON</summary>
          <pre className="mono args audit-raw">{JSON.stringify(detail, null, 2)}</pre>
        </details>
      )}
    </div>
  );
}

/** One decision: when, who, what, about which plan, run and step, and its detail. */
function AuditRow({ entry, filters }: { entry: AuditEntry; filters: AuditFilters }) {
  return (
    <tr data-audit-action={entry.action}>
      <td>
        <time dateTime={entry.createdAt} className="when">
          {new Date(entry.createdAt).toLocaleDateString()}
          <br />
          {new Date(entry.createdAt).toLocaleTimeString()}
        </time>
      </td>
      <td>
        {/* The stored kind, not the name, tells a person from an agent that took a person's name. */}
        {entry.actorKind && entry.actorKind !== "person" && (
          <span className="muted" data-testid="actor-kind">
            {entry.actorKind}{" "}
          </span>
        )}
        <Link href={auditHref({ ...filters, person: entry.actor })} title={`Only ${entry.actor}'s decisions`}>
          {entry.actor}
        </Link>
      </td>
      <td>
        {describeAction(entry.action)} <span className="muted mono">{entry.action}</span>
      </td>
      <td>
        {entry.planningSessionId ? (
          <>
            <Link href={`/tasks/${entry.planningSessionId}`}>{entry.planGoal ?? "Planning session"}</Link>
            <span className="muted"> (planning session)</span>
          </>
        ) : entry.planId.startsWith("webhook:") ? (
          // Webhook configuration is about no plan; its entries name the settings page.
          <Link href="/settings/webhooks">Outgoing webhooks</Link>
        ) : entry.planId.startsWith("people:") ? (
          <Link href="/people">People</Link>
        ) : entry.planId.startsWith("workspace:") ? (
          <Link href="/workspaces">Workspaces</Link>
        ) : (
          <Link href={`/plans/${entry.planId}`}>{entry.planGoal ?? entry.planId}</Link>
        )}
        {entry.planVersion !== null && <span className="muted"> v{entry.planVersion}</span>}
      </td>
      <td>
        {entry.runId ? (
          <Link href={`/runs/${entry.runId}`} className="mono">
            {entry.runId.slice(0, 8)}
          </Link>
        ) : (
          <span className="muted">–</span>
        )}
        {entry.stepId && <span className="mono"> · {entry.stepId}</span>}
      </td>
      <td>
        <DetailCell detail={entry.detail} entryId={entry.id} />
      </td>
    </tr>
  );
}

/** Every decision, newest first, filtered by plan, run and person (from the address), older ones on request. */
export function AuditPage({ filters }: { filters: AuditFilters }) {
  const trpc = useTRPC();
  const router = useRouter();
  const id = useId();
  const entries = useInfiniteQuery({
    ...trpc.audit.list.infiniteQueryOptions(
      {
        ...(filters.plan && { planId: filters.plan }),
        ...(filters.run && { runId: filters.run }),
        ...(filters.person && { actor: filters.person }),
        limit: 50,
      },
      { getNextPageParam: (page) => page.nextCursor },
    ),
    staleTime: 0,
  });
  const rows = entries.data?.pages.flatMap((page) => page.entries) ?? [];
  const filtered = Boolean(filters.plan || filters.run || filters.person);

  const submit = (event: FormEvent<HTMLFormElement>) => {
    event.preventDefault();
    const form = new FormData(event.currentTarget);
    const value = (name: string) => String(form.get(name) ?? "").trim() || undefined;
    router.push(auditHref({ plan: value("plan"), run: value("run"), person: value("person") }));
  };

  return (
    <section className="stack" aria-label="Audit log">
      <h1>Audit log</h1>
      <p className="muted">Who decided what and when: approvals, denials, answers, cancellations, waived gates.</p>
      <AuditVerifyPanel />
      <form
        key={auditHref(filters)}
        onSubmit={submit}
        className="row align-end"
        role="search"
        aria-label="Filter the audit log"
      >
        <label className="field" htmlFor={`${id}-plan`}>
          <span>Plan</span>
          <input id={`${id}-plan`} name="plan" defaultValue={filters.plan} placeholder="plan-…" className="mono" />
        </label>
        <label className="field" htmlFor={`${id}-run`}>
          <span>Run</span>
          <input id={`${id}-run`} name="run" defaultValue={filters.run} placeholder="run id" className="mono" />
        </label>
        <label className="field" htmlFor={`${id}-person`}>
          <span>Person</span>
          <input id={`${id}-person`} name="person" defaultValue={filters.person} placeholder="name" />
        </label>
        <button type="submit" className="primary">
          Filter
        </button>
        {filtered && (
          <Link href="/audit" className="button">
            Clear filters
          </Link>
        )}
      </form>
      <ErrorMessage error={entries.error} />
      {entries.isPending && <p aria-busy="true">Loading the audit log…</p>}
      {entries.data && rows.length === 0 && (
        <p className="empty">
          {filtered ? "No decision matches these filters." : "No decisions yet. Approve a plan to start the log."}
        </p>
      )}
      {rows.length > 0 && (
        <table className="table audit-table" aria-label="Audit entries">
          <thead>
            <tr>
              <th scope="col">When</th>
              <th scope="col">Person</th>
              <th scope="col">Decision</th>
              <th scope="col">Plan</th>
              <th scope="col">Run and step</th>
              <th scope="col">Detail</th>
            </tr>
          </thead>
          <tbody>
            {rows.map((entry) => (
              <AuditRow key={entry.id} entry={entry} filters={filters} />
            ))}
          </tbody>
        </table>
      )}
      {entries.hasNextPage && (
        <button onClick={() => void entries.fetchNextPage()} disabled={entries.isFetchingNextPage}>
          {entries.isFetchingNextPage ? "Loading…" : "Older"}
        </button>
      )}
    </section>
  );
}
