"use client";

import { useQuery } from "@tanstack/react-query";
import Link from "next/link";
import { IntentLink } from "@/components/ui/intent-link";
import { useState } from "react";
import { useTRPC } from "@/components/trpc";
import { ErrorMessage } from "@/components/ui/error-message";
import { StatusBadge } from "@/components/ui/status-badge";

export function PlanList() {
  const trpc = useTRPC();
  // Archived and rejected plans are set aside: hidden unless asked for (the "Archived" filter).
  const [show, setShow] = useState<"active" | "archived">("active");
  const plans = useQuery(trpc.plans.list.queryOptions({ show }));
  if (plans.isPending) return <p aria-busy="true">Loading plans…</p>;
  if (plans.error) return <ErrorMessage error={plans.error} />;
  return (
    <section>
      <div className="row spread">
        <h1>Plans</h1>
        <Link className="button primary" href="/new">
          New plan
        </Link>
      </div>
      <div className="row" role="group" aria-label="Show plans">
        <button type="button" aria-pressed={show === "active"} onClick={() => setShow("active")}>
          Active
        </button>
        <button type="button" aria-pressed={show === "archived"} onClick={() => setShow("archived")}>
          Archived
        </button>
      </div>
      {plans.data.length === 0 && show === "archived" ? (
        <div className="empty">
          <p>No archived or rejected plans.</p>
          <p>Plans you archive or reject on their page are listed here, where they can be restored.</p>
        </div>
      ) : plans.data.length === 0 ? (
        <div className="empty">
          <p>No plans yet.</p>
          <p>
            Describe a goal and let the planner draft one (<Link href="/tasks/new">from a goal</Link>), paste steps as
            JSON (<Link href="/plans/new">from JSON</Link>), or let an agent create one through the API or MCP.
          </p>
        </div>
      ) : (
        <table className="table">
          <thead>
            <tr>
              <th>Goal</th>
              <th>Steps</th>
              <th>Version</th>
              <th>Source</th>
              {show === "archived" && <th>State</th>}
              <th>Last run</th>
              <th>Updated</th>
            </tr>
          </thead>
          <tbody>
            {plans.data.map((plan) => (
              <tr key={plan.id}>
                <td>
                  <IntentLink href={`/plans/${plan.id}`}>{plan.goal}</IntentLink>
                  <div className="muted mono">{plan.id}</div>
                </td>
                <td>{plan.steps}</td>
                <td>v{plan.version}</td>
                <td>{plan.source}</td>
                {show === "archived" && (
                  <td>
                    <span className={`badge ${plan.state === "rejected" ? "planning-rejected" : ""}`}>
                      {plan.state}
                    </span>
                  </td>
                )}
                <td>
                  {plan.lastRun ? (
                    <StatusBadge status={plan.lastRun.status} />
                  ) : (
                    <span className="muted">never run</span>
                  )}
                </td>
                <td>{new Date(plan.updatedAt).toLocaleString()}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </section>
  );
}
