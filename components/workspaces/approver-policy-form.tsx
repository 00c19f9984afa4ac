"use client";

import { useMutation, useQuery } from "@tanstack/react-query";
import { useEffect, useId, useState, type FormEvent } from "react";
import type { WorkspaceView } from "@/server/plans/workspaces";
import { useTRPC } from "@/components/trpc";
import { ErrorMessage } from "@/components/ui/error-message";

const RISKS = ["low", "medium", "high"] as const;
type Policy = { approvals: Record<(typeof RISKS)[number], number>; authorMayApprove: boolean };

/**
 * A workspace's approver policy: how many distinct people must approve a gated step of each
 * computed risk, and whether the plan's author may be one of them. The engine enforces it on every
 * decision (an admin's setting; others see it refused with the role needed).
 */
export function ApproverPolicyForm({ workspaces }: { workspaces: WorkspaceView[] }) {
  const trpc = useTRPC();
  const id = useId();
  const [workspaceId, setWorkspaceId] = useState(workspaces[0]?.id ?? "");
  const current = useQuery({
    ...trpc.people.approverPolicy.queryOptions({ workspaceId }),
    enabled: workspaceId !== "",
  });
  const [policy, setPolicy] = useState<Policy | undefined>(undefined);
  useEffect(() => {
    if (current.data) setPolicy(current.data);
  }, [current.data]);
  const save = useMutation(trpc.people.setApproverPolicy.mutationOptions({ onSuccess: () => current.refetch() }));
  const submit = (event: FormEvent) => {
    event.preventDefault();
    if (policy) save.mutate({ workspaceId, policy });
  };
  if (workspaces.length === 0) return null;
  return (
    <form onSubmit={submit} className="card stack-sm" aria-label="Approver policy">
      <h2>Approver policy</h2>
      <p className="muted">
        How many different people must approve a step before it runs, by the risk Stepwise computes for it, and whether
        the plan’s author may approve it. Applies to every decision from now on.
      </p>
      <label className="field" htmlFor={`${id}-workspace`}>
        <span>Workspace</span>
        <select id={`${id}-workspace`} value={workspaceId} onChange={(event) => setWorkspaceId(event.target.value)}>
          {workspaces.map((workspace) => (
            <option key={workspace.id} value={workspace.id}>
              {workspace.name}
            </option>
          ))}
        </select>
      </label>
      <ErrorMessage error={current.error} />
      {policy && (
        <>
          <div className="row">
            {RISKS.map((risk) => (
              <label key={risk} className="field" htmlFor={`${id}-${risk}`}>
                <span>Approvals for {risk} risk</span>
                <input
                  id={`${id}-${risk}`}
                  type="number"
                  min={1}
                  max={5}
                  value={policy.approvals[risk]}
                  onChange={(event) =>
                    setPolicy({ ...policy, approvals: { ...policy.approvals, [risk]: Number(event.target.value) } })
                  }
                  required
                />
              </label>
            ))}
          </div>
          <label className="row" htmlFor={`${id}-author`}>
            <input
              id={`${id}-author`}
              type="checkbox"
              checked={policy.authorMayApprove}
              onChange={(event) => setPolicy({ ...policy, authorMayApprove: event.target.checked })}
            />
            <span>The plan’s author may approve its steps</span>
          </label>
          <div className="row">
            <button type="submit" className="primary" disabled={save.isPending}>
              {save.isPending ? "Saving…" : "Save policy"}
            </button>
            {save.isSuccess && <span role="status">Saved.</span>}
          </div>
        </>
      )}
      <ErrorMessage error={save.error} />
    </form>
  );
}
