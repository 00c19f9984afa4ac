"use client";

import { useMutation, useQuery } from "@tanstack/react-query";
import { useRouter } from "next/navigation";
import { useEffect, useId, useState, type FormEvent } from "react";
import { useTRPC } from "@/components/trpc";
import { ErrorMessage } from "@/components/ui/error-message";
import { WorkspaceSelect } from "@/components/workspaces/workspace-select";
import { ConfigureHelp } from "./configure-help";

/** Same bound as the server's (MAX_GOAL_CHARS); the server refuses longer goals too. */
const MAX_GOAL_CHARS = 4_000;

/** "New task": a goal, a workspace, a model and a mode; planning then continues on its own page. */
export function NewTaskForm() {
  const trpc = useTRPC();
  const router = useRouter();
  const id = useId();
  const options = useQuery(trpc.planner.options.queryOptions());
  const [goal, setGoal] = useState("");
  const [model, setModel] = useState("");
  const [workspaceId, setWorkspaceId] = useState("");
  const [mode, setMode] = useState<"quick" | "deep">("quick");
  const [useJudge, setUseJudge] = useState(false);
  const start = useMutation(
    trpc.planner.start.mutationOptions({ onSuccess: ({ sessionId }) => router.push(`/tasks/${sessionId}`) }),
  );
  const config = options.data?.config;

  useEffect(() => {
    if (config) {
      setModel((current) => current || config.defaultModel || "");
      setUseJudge(config.judgeByDefault);
    }
  }, [config]);

  const tooLong = goal.trim().length > MAX_GOAL_CHARS;
  const submit = (event: FormEvent) => {
    event.preventDefault();
    start.mutate({ goal, mode, model, workspaceId: workspaceId || null, useJudge });
  };

  if (options.isPending) return <p aria-busy="true">Loading the planner settings…</p>;
  if (options.error) return <ErrorMessage error={options.error} />;
  const disabled = !config?.configured;

  return (
    <form onSubmit={submit} className="stack" aria-label="New task">
      <h1>New task</h1>
      <p className="muted">
        The planner investigates the workspace and proposes a plan for you to review before anything runs.
      </p>
      {disabled && config && <ConfigureHelp help={config.help} />}
      <label className="field" htmlFor={`${id}-goal`}>
        <span>Goal</span>
        <textarea
          id={`${id}-goal`}
          name="goal"
          rows={4}
          value={goal}
          onChange={(event) => setGoal(event.target.value)}
          placeholder="What should be done? e.g. Add a CONTRIBUTING.md based on how this repository is organised"
          aria-describedby={`${id}-goal-help`}
          aria-invalid={tooLong}
          disabled={disabled}
          required
        />
        <span id={`${id}-goal-help`} className={tooLong ? "error" : "muted"}>
          {goal.trim().length} / {MAX_GOAL_CHARS} characters{tooLong ? ": too long, shorten the goal" : ""}
        </span>
      </label>
      <div className="row">
        <WorkspaceSelect value={workspaceId} onChange={setWorkspaceId} disabled={disabled} />
        <label className="field" htmlFor={`${id}-model`}>
          <span>Model</span>
          <select
            id={`${id}-model`}
            value={model}
            onChange={(event) => setModel(event.target.value)}
            disabled={disabled}
          >
            {config?.models.map((candidate) => (
              <option key={candidate.id} value={candidate.id}>
                {candidate.label}
              </option>
            ))}
          </select>
        </label>
      </div>
      <ModeChoice mode={mode} onChange={setMode} disabled={disabled} />
      <label className="field inline">
        <input
          type="checkbox"
          checked={useJudge}
          onChange={(event) => setUseJudge(event.target.checked)}
          disabled={disabled}
        />
        <span>Have an LLM judge review the plan before you see it</span>
      </label>
      <div className="row">
        <button type="submit" className="primary" disabled={disabled || start.isPending || !goal.trim() || tooLong}>
          {start.isPending ? "Starting…" : "Plan it"}
        </button>
      </div>
      <ErrorMessage error={start.error} />
    </form>
  );
}

/** Quick or deep planning. */
function ModeChoice({
  mode,
  onChange,
  disabled,
}: {
  mode: "quick" | "deep";
  onChange(mode: "quick" | "deep"): void;
  disabled: boolean;
}) {
  return (
    <fieldset className="stack-sm" disabled={disabled}>
      <legend>Mode</legend>
      <label className="field inline">
        <input type="radio" name="mode" value="quick" checked={mode === "quick"} onChange={() => onChange("quick")} />
        <span>
          Quick <span className="muted">— one call with a snapshot of the workspace</span>
        </span>
      </label>
      <label className="field inline">
        <input type="radio" name="mode" value="deep" checked={mode === "deep"} onChange={() => onChange("deep")} />
        <span>
          Deep <span className="muted">— investigates with read-only tools and may ask you questions</span>
        </span>
      </label>
    </fieldset>
  );
}
