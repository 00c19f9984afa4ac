"use client";

import { useMutation, useQueryClient } from "@tanstack/react-query";
import Link from "next/link";
import { useId, useState, type FormEvent } from "react";
import { useTRPC } from "@/components/trpc";
import { ErrorMessage } from "@/components/ui/error-message";

/**
 * Seed 002's `/plan` commands: `/plan <task>` starts deep planning (or, while a session is still
 * planning, tells its status), `/plan status`, `/plan cancel`. On a session's page they mean that
 * session; on the New task page, the default workspace's open one.
 */
export function PlanCommandBox({ sessionId }: { sessionId?: string }) {
  const trpc = useTRPC();
  const queryClient = useQueryClient();
  const id = useId();
  const [text, setText] = useState("");
  const run = useMutation(
    trpc.planner.command.mutationOptions({
      onSuccess: () => {
        setText("");
        void queryClient.invalidateQueries({ queryKey: trpc.planner.pathKey() });
      },
    }),
  );
  const submit = (event: FormEvent) => {
    event.preventDefault();
    run.mutate({ command: text, ...(sessionId && { sessionId }) });
  };
  const result = run.data;
  return (
    <form className="card stack-sm" onSubmit={submit} aria-label="Planning command">
      <label className="field" htmlFor={`${id}-command`}>
        <span>Planning command</span>
        <input
          id={`${id}-command`}
          type="text"
          className="mono"
          value={text}
          onChange={(event) => setText(event.target.value)}
          placeholder="/plan <task>, /plan status or /plan cancel"
          aria-describedby={`${id}-help`}
          autoComplete="off"
          required
        />
        <span id={`${id}-help`} className="muted">
          <code>/plan &lt;task&gt;</code> plans a task in the default workspace; <code>/plan status</code> and{" "}
          <code>/plan cancel</code> {sessionId ? "act on this session" : "act on the planning in progress"}.
        </span>
      </label>
      <div className="row">
        <button type="submit" disabled={run.isPending || !text.trim()}>
          {run.isPending ? "Running…" : "Run command"}
        </button>
      </div>
      <p role="status" data-testid="plan-command-result">
        {result && (
          <>
            {result.message}
            {result.sessionId && result.sessionId !== sessionId && (
              <>
                {" "}
                <Link href={`/tasks/${result.sessionId}`}>Open the planning session</Link>
              </>
            )}
          </>
        )}
      </p>
      <ErrorMessage error={run.error} />
    </form>
  );
}
