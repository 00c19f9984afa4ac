"use client";

import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import Link from "next/link";
import { useTRPC } from "@/components/trpc";
import { ErrorMessage } from "@/components/ui/error-message";
import { describeRecoveryAction } from "./planner-format";

/**
 * "Ask the planner" on a failed step: the planner proposes one recovery (retry with new
 * arguments, skip, insert steps, abort) with its reasoning; the person accepts or rejects it.
 * An accepted proposal is applied by the engine, so its effect arrives on the run's live stream.
 */
export function RecoveryPanel({ runId, stepId }: { runId: string; stepId: string }) {
  const trpc = useTRPC();
  const queryClient = useQueryClient();
  const options = useQuery(trpc.planner.options.queryOptions(undefined, { staleTime: 60_000 }));
  const proposalsKey = trpc.planner.recoveryProposals.queryKey({ runId, stepId });
  const proposals = useQuery(trpc.planner.recoveryProposals.queryOptions({ runId, stepId }));
  const refresh = () =>
    Promise.all([
      queryClient.invalidateQueries({ queryKey: proposalsKey }),
      queryClient.invalidateQueries({ queryKey: trpc.planner.usage.queryKey({ runId }) }),
    ]);
  const ask = useMutation(trpc.planner.proposeRecovery.mutationOptions({ onSuccess: refresh }));
  const decide = useMutation(trpc.planner.decideRecovery.mutationOptions({ onSettled: refresh }));

  const open = proposals.data?.find((proposal) => proposal.status === "proposed");
  const decided = proposals.data?.filter((proposal) => proposal.status !== "proposed") ?? [];
  const configured = options.data?.config.configured;

  return (
    <section className="stack-sm card" aria-label={`Recovery for ${stepId}`} data-testid="recovery-panel">
      {configured === false ? (
        <p className="muted">
          Asking the planner needs an LLM provider. <Link href="/settings">See how to configure one</Link>.
        </p>
      ) : !open ? (
        <div className="row">
          <button
            type="button"
            onClick={() => ask.mutate({ runId, stepId })}
            disabled={ask.isPending || configured === undefined}
          >
            {ask.isPending ? "The planner is thinking…" : ask.isError ? "Ask the planner again" : "Ask the planner"}
          </button>
          <span className="muted">proposes a retry with new arguments, a skip, new steps, or an abort</span>
        </div>
      ) : null}
      <ErrorMessage error={ask.error} />
      {open && (
        <div className="stack-sm" role="group" aria-label="Recovery proposal" data-testid="recovery-proposal">
          <strong>The planner proposes: {describeRecoveryAction(open.action)}</strong>
          {open.automatic && (
            <p className="muted" data-testid="recovery-held">
              Asked by the run&apos;s automatic recovery; {open.action.kind === "abort" ? "an abort" : "this"} needs
              your decision.
            </p>
          )}
          {open.action.kind === "retry" && open.action.args && (
            <pre className="args mono">{JSON.stringify(open.action.args, null, 2)}</pre>
          )}
          {open.action.kind === "insert_steps" && (
            <ol>
              {open.action.steps.map((step) => (
                <li key={step.id}>
                  {step.title ?? step.description} <span className="mono muted">{step.tool}</span>
                </li>
              ))}
            </ol>
          )}
          <p>
            <span className="muted">Reasoning: </span>
            {open.reasoning}
          </p>
          <div className="row">
            <button
              type="button"
              className="primary"
              disabled={decide.isPending}
              onClick={() => decide.mutate({ proposalId: open.id, accept: true })}
            >
              Accept proposal
            </button>
            <button
              type="button"
              disabled={decide.isPending}
              onClick={() => decide.mutate({ proposalId: open.id, accept: false })}
            >
              Reject proposal
            </button>
          </div>
        </div>
      )}
      <ErrorMessage error={decide.error} />
      {decided.length > 0 && (
        <ul className="muted" aria-label="Earlier proposals">
          {decided.map((proposal) => (
            <li key={proposal.id} data-proposal-status={proposal.status}>
              {describeRecoveryAction(proposal.action)}: {proposal.status}
              {proposal.automatic && proposal.status === "accepted"
                ? " automatically (run policy)"
                : proposal.decidedBy
                  ? ` by ${proposal.decidedBy}`
                  : ""}
              {proposal.error ? ` (${proposal.error})` : ""}
            </li>
          ))}
        </ul>
      )}
    </section>
  );
}
