"use client";

import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { useTRPC } from "@/components/trpc";
import { ErrorMessage } from "@/components/ui/error-message";
import { describeValue } from "./format";

/**
 * The gate on a fan-out's group: the instances waiting for approval, each with the arguments it
 * will run with, decided together. The decision carries the list's hash as shown, so it is refused
 * if the list is not the one on screen (docs/decisions.md, "Conditions and fan-out").
 */
export function GroupDecision({ runId, stepId, waiting }: { runId: string; stepId: string; waiting: number }) {
  const trpc = useTRPC();
  const queryClient = useQueryClient();
  // Re-read whenever the number waiting changes: what is shown is what is decided.
  const group = useQuery(trpc.runs.group.queryOptions({ runId, stepId }, { enabled: waiting > 0 }));
  const decide = useMutation(
    trpc.runs.decideGroup.mutationOptions({
      onSettled: () => queryClient.invalidateQueries({ queryKey: trpc.runs.group.queryKey({ runId, stepId }) }),
    }),
  );
  const shown = group.data?.instances.filter((instance) => instance.approval) ?? [];
  if (waiting === 0 || shown.length === 0) return null;
  const submit = (approve: boolean) => decide.mutate({ runId, stepId, approve, listHash: group.data!.listHash });
  return (
    <section className="group-decision" aria-label={`Decide the instances of ${stepId}`} data-testid="group-decision">
      <p>
        {shown.length} instance{shown.length === 1 ? "" : "s"} of this step wait for approval, one per element:
      </p>
      <ul className="mono">
        {shown.map((instance) => (
          <li key={instance.stepId}>
            {instance.stepId}: {describeValue(instance.approval!.resolvedArgs).text}
          </li>
        ))}
      </ul>
      <div className="row">
        <button className="primary" onClick={() => submit(true)} disabled={decide.isPending}>
          Approve all {shown.length} as shown
        </button>
        <button className="danger" onClick={() => submit(false)} disabled={decide.isPending}>
          Deny all
        </button>
      </div>
      <ErrorMessage error={decide.error ?? group.error} />
    </section>
  );
}
