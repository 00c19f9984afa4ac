"use client";

import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import Link from "next/link";
import { useId, useState, type FormEvent } from "react";
import { useTRPC } from "@/components/trpc";
import { ApprovalDetails } from "@/components/runs/approval-details";
import { ErrorMessage } from "@/components/ui/error-message";
import type { InboxItem } from "@/server/inbox/inbox";
import { INBOX_POLL_MS } from "./inbox-nav-link";

const KIND_LABEL: Record<InboxItem["kind"], string> = {
  planning_question: "Planning question",
  plan_review: "Plan to review",
  step_approval: "Step to approve",
  step_input: "Run question",
  agent_blocker: "Agent blocked",
  workspace_unserved: "No worker",
  timed_out: "Timed out",
};

/** Everything waiting for the person, oldest first, each with where it is decided. */
export function InboxView() {
  const trpc = useTRPC();
  const inbox = useQuery({ ...trpc.inbox.list.queryOptions(), refetchInterval: INBOX_POLL_MS, staleTime: 0 });
  return (
    <section className="stack" aria-labelledby="inbox-heading">
      <h1 id="inbox-heading">Inbox</h1>
      <p className="muted">Everything that waits for you: questions, plans to review, steps to approve.</p>
      <ErrorMessage error={inbox.error} />
      {inbox.isPending && <p aria-busy="true">Loading the inbox…</p>}
      {inbox.data && inbox.data.items.length === 0 && (
        <div className="empty">
          <p>Nothing waits for you.</p>
          <p>
            Questions from the planner, plans ready for review, gated steps and run questions appear here. Start
            planning with <Link href="/tasks/new">New task</Link>, or see <Link href="/planning">Planning</Link> and{" "}
            <Link href="/runs">Runs</Link>.
          </p>
        </div>
      )}
      {inbox.data && inbox.data.items.length > 0 && (
        <ul className="stack-sm inbox-list" aria-label="Waiting for you">
          {inbox.data.items.map((item) => (
            <li key={item.id} className="card stack-sm" data-kind={item.kind} data-testid="inbox-item">
              <div className="row spread">
                <span className="tag">{KIND_LABEL[item.kind]}</span>
                <time className="muted" dateTime={item.since}>
                  since {new Date(item.since).toLocaleString()}
                </time>
              </div>
              <InboxEntry item={item} />
            </li>
          ))}
        </ul>
      )}
    </section>
  );
}

function useRefreshInbox() {
  const trpc = useTRPC();
  const queryClient = useQueryClient();
  return () => void queryClient.invalidateQueries({ queryKey: trpc.inbox.list.queryKey() });
}

function InboxEntry({ item }: { item: InboxItem }) {
  switch (item.kind) {
    case "planning_question":
      return (
        <>
          <strong>{item.question}</strong>
          <p className="muted">
            {item.external ? "An agent planning" : "The planner"} “{item.goal}” asks.{" "}
            <Link href={item.href}>Open the planning session</Link>
          </p>
          <TextAnswer
            label={`Answer: ${item.question}`}
            mutation="planning"
            ids={{ sessionId: item.sessionId, questionId: item.questionId }}
          />
        </>
      );
    case "plan_review":
      return (
        <>
          <strong>
            {item.goal} — version {item.version} is ready for your review
          </strong>
          <p className="row">
            <Link className="button primary" href={item.href}>
              Review plan v{item.version}
            </Link>
            {item.sessionId && <Link href={`/tasks/${item.sessionId}`}>The planning session</Link>}
          </p>
        </>
      );
    case "step_approval":
      return <StepApproval item={item} />;
    case "step_input":
      return (
        <>
          <strong>{item.question}</strong>
          <p className="muted">
            Step {item.stepId} of “{item.goal}” asks. <Link href={item.href}>Open the run</Link>
          </p>
          <TextAnswer
            label={`Answer: ${item.question}`}
            mutation="run"
            ids={{ runId: item.runId, stepId: item.stepId }}
            choices={item.choices}
          />
        </>
      );
    case "agent_blocker":
      return (
        <>
          <strong>{item.message}</strong>
          <p className="muted">
            {item.raisedBy} is blocked in “{item.goal}”. <Link href={item.href}>Open its run</Link>
          </p>
        </>
      );
    case "workspace_unserved":
      return (
        <>
          <strong>{item.message}</strong>
          <p className="muted">
            {item.stepIds.length === 1 ? `Step ${item.stepIds[0]}` : `Steps ${item.stepIds.join(", ")}`} of “{item.goal}
            ” wait. Start <code>stepwise worker --workspace {item.workspace}</code> on a machine that has it.{" "}
            <Link href={item.href}>Open the run</Link>
          </p>
        </>
      );
    case "timed_out":
      return (
        <p>
          {item.message} <Link href={item.href}>Open it</Link>
        </p>
      );
  }
}

function StepApproval({ item }: { item: Extract<InboxItem, { kind: "step_approval" }> }) {
  const trpc = useTRPC();
  const refresh = useRefreshInbox();
  const decide = useMutation(trpc.runs.decide.mutationOptions({ onSuccess: refresh }));
  const [note, setNote] = useState("");
  const noteId = useId();
  const { approval } = item;
  const withNote = note.trim() ? { note: note.trim() } : {};
  return (
    <>
      <strong>{item.title}</strong>
      <p className="muted">
        Step {item.stepId} of “{item.goal}” waits for approval
        {item.expiresAt && ` until ${new Date(item.expiresAt).toLocaleTimeString()}`}.{" "}
        <Link href={item.href}>Open the run</Link>
      </p>
      {/* Approve is offered only next to exactly what it lets run; the decision carries its hash. */}
      {approval ? (
        <ApprovalDetails approval={approval} />
      ) : (
        <p className="warn-text">What this step would run could not be shown; decide on the run page.</p>
      )}
      <label className="field" htmlFor={noteId}>
        <span>Note (optional)</span>
        <input
          id={noteId}
          value={note}
          maxLength={4000}
          onChange={(event) => setNote(event.target.value)}
          placeholder="Kept with the decision and shown to the agent"
        />
      </label>
      <div className="row">
        <button
          type="button"
          className="primary"
          aria-label={`Approve ${item.stepId} of ${item.goal}`}
          disabled={decide.isPending || !approval}
          onClick={() =>
            approval &&
            decide.mutate({
              runId: item.runId,
              stepId: item.stepId,
              approve: true,
              definitionHash: approval.definitionHash,
              ...withNote,
            })
          }
        >
          Approve
        </button>
        <button
          type="button"
          className="danger"
          aria-label={`Deny ${item.stepId} of ${item.goal}`}
          disabled={decide.isPending}
          onClick={() => decide.mutate({ runId: item.runId, stepId: item.stepId, approve: false, ...withNote })}
        >
          Deny
        </button>
      </div>
      <ErrorMessage error={decide.error} />
    </>
  );
}

type AnswerTarget =
  | { mutation: "planning"; ids: { sessionId: string; questionId: string } }
  | { mutation: "run"; ids: { runId: string; stepId: string } };

function TextAnswer({ label, choices, ...target }: { label: string; choices?: string[] | null } & AnswerTarget) {
  const trpc = useTRPC();
  const refresh = useRefreshInbox();
  const id = useId();
  const [answer, setAnswer] = useState("");
  const planning = useMutation(trpc.planner.answer.mutationOptions({ onSuccess: refresh }));
  const run = useMutation(trpc.runs.answer.mutationOptions({ onSuccess: refresh }));
  const pending = planning.isPending || run.isPending;
  const send = (value: string) => {
    if (target.mutation === "planning") planning.mutate({ ...target.ids, answer: value });
    else run.mutate({ ...target.ids, answer: value });
  };
  const submit = (event: FormEvent) => {
    event.preventDefault();
    send(answer.trim());
  };
  if (choices && choices.length > 0) {
    return (
      <div className="stack-sm">
        <div className="row" role="group" aria-label={label}>
          {choices.map((choice) => (
            <button type="button" key={choice} disabled={pending} onClick={() => send(choice)}>
              {choice}
            </button>
          ))}
        </div>
        <ErrorMessage error={planning.error ?? run.error} />
      </div>
    );
  }
  return (
    <form className="stack-sm" onSubmit={submit} aria-label={label}>
      <label className="field" htmlFor={`${id}-answer`}>
        <span>Your answer</span>
        <textarea id={`${id}-answer`} rows={2} value={answer} onChange={(event) => setAnswer(event.target.value)} />
      </label>
      <div className="row">
        <button type="submit" className="primary" disabled={pending || !answer.trim()}>
          {pending ? "Sending…" : "Send answer"}
        </button>
      </div>
      <ErrorMessage error={planning.error ?? run.error} />
    </form>
  );
}
