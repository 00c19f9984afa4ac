"use client";

import { useMutation } from "@tanstack/react-query";
import { useRouter } from "next/navigation";
import { useMemo, useState, type FormEvent } from "react";
import { useTRPC } from "@/components/trpc";
import { ErrorMessage } from "@/components/ui/error-message";
import { WorkspaceSelect } from "@/components/workspaces/workspace-select";
import { groupIssuesByStep, issuesFromError } from "./plan-issues";

const EXAMPLE = JSON.stringify(
  {
    steps: [
      { id: "step_1", description: "Look at the workspace", tool: "list_dir", args: { path: "." } },
      { id: "step_2", description: "Wait a moment", tool: "sleep", args: { ms: 300 }, dependsOn: ["step_1"] },
      {
        id: "step_3",
        description: "Echo the listing",
        tool: "echo",
        args: { value: "$step_1" },
        dependsOn: ["step_1"],
      },
      { id: "step_4", description: "Finish", tool: "echo", args: { value: "done" }, dependsOn: ["step_2", "step_3"] },
    ],
  },
  null,
  2,
);

interface PreviewStep {
  id?: unknown;
  description?: unknown;
  tool?: unknown;
}

export function NewPlanForm() {
  const trpc = useTRPC();
  const router = useRouter();
  const [goal, setGoal] = useState("");
  const [planJson, setPlanJson] = useState("");
  const [workspaceId, setWorkspaceId] = useState("");
  const create = useMutation(
    trpc.plans.createFromJson.mutationOptions({ onSuccess: (plan) => router.push(`/plans/${plan.id}`) }),
  );
  const issues = issuesFromError(create.error);
  const byStep = groupIssuesByStep(issues);
  const preview = useMemo(() => previewSteps(planJson), [planJson]);

  function submit(event: FormEvent) {
    event.preventDefault();
    create.mutate({ goal, planJson, ...(workspaceId && { workspaceId }) });
  }

  return (
    <form onSubmit={submit} className="stack" aria-label="New plan">
      <h1>New plan</h1>
      <label className="field">
        <span>Goal</span>
        <input
          name="goal"
          value={goal}
          onChange={(e) => setGoal(e.target.value)}
          placeholder="What should this plan achieve?"
          required
        />
      </label>
      <WorkspaceSelect value={workspaceId} onChange={setWorkspaceId} />
      <label className="field">
        <span>
          Plan as JSON <span className="muted">(an object with a steps array, or an array of steps)</span>
        </span>
        <textarea
          name="planJson"
          value={planJson}
          onChange={(e) => setPlanJson(e.target.value)}
          rows={16}
          className="mono"
          spellCheck={false}
          placeholder={EXAMPLE}
        />
      </label>
      <div className="row">
        <button type="submit" className="primary" disabled={create.isPending || !goal.trim() || !planJson.trim()}>
          {create.isPending ? "Creating…" : "Create plan"}
        </button>
        <button type="button" onClick={() => setPlanJson(EXAMPLE)}>
          Insert example
        </button>
      </div>
      {issues.length > 0 ? (
        <div role="alert" className="error">
          The plan has {issues.length} problem{issues.length === 1 ? "" : "s"}; nothing was saved.
        </div>
      ) : (
        <ErrorMessage error={create.error} />
      )}
      {(byStep.get("") ?? []).map((issue, index) => (
        <p key={index} className="issue" data-testid="plan-issue">
          {issue.message}
        </p>
      ))}
      {preview && preview.length > 0 && (
        <ol className="steps" aria-label="Steps preview">
          {preview.map((step, index) => {
            const id = typeof step.id === "string" ? step.id : `#${index + 1}`;
            const stepIssues = byStep.get(id) ?? [];
            return (
              <li key={index} className={`card ${stepIssues.length ? "invalid" : ""}`} data-step-id={id}>
                <div className="row">
                  <strong className="mono">{id}</strong>
                  <span>{typeof step.description === "string" ? step.description : ""}</span>
                  <span className="muted mono">{typeof step.tool === "string" ? step.tool : "?"}</span>
                </div>
                {stepIssues.map((issue, issueIndex) => (
                  <p key={issueIndex} className="issue" data-testid="step-issue" data-code={issue.code}>
                    {issue.message}
                  </p>
                ))}
              </li>
            );
          })}
        </ol>
      )}
    </form>
  );
}

function previewSteps(text: string): PreviewStep[] | undefined {
  try {
    const parsed: unknown = JSON.parse(text);
    const steps = Array.isArray(parsed) ? parsed : (parsed as { steps?: unknown })?.steps;
    return Array.isArray(steps) ? (steps as PreviewStep[]) : undefined;
  } catch {
    return undefined;
  }
}
