"use client";

import { useQuery } from "@tanstack/react-query";
import type { ReactNode } from "react";
import { useTRPC } from "@/components/trpc";
import type { Step } from "@/server/plan-schema";

interface SubPlanArgs {
  plan_id?: unknown;
  version?: unknown;
  template_id?: unknown;
  params?: unknown;
}

/**
 * What a `run_plan` step will run, shown where the step is reviewed: the approval of the step
 * binds to this plan version (or template), so the person sees its goal and steps before deciding.
 * The child's gated steps still wait for their own approval in the child run.
 */
export function SubPlanPreview({ step }: { step: Step }) {
  const args = step.args as SubPlanArgs;
  if (typeof args.plan_id === "string" && typeof args.version === "number") {
    return <SavedPlanPreview planId={args.plan_id} version={args.version} />;
  }
  if (typeof args.template_id === "string") {
    return <TemplatePreview templateId={args.template_id} params={args.params} />;
  }
  return null;
}

function SavedPlanPreview({ planId, version }: { planId: string; version: number }) {
  const trpc = useTRPC();
  const plan = useQuery({ ...trpc.plans.get.queryOptions({ planId, version }), retry: false });
  if (plan.isPending) return <p className="muted">Loading the sub-plan…</p>;
  if (plan.error) {
    return (
      <p className="warn-text" data-testid="sub-plan-missing">
        The sub-plan {planId} version {version} cannot be read: {plan.error.message}
      </p>
    );
  }
  const { steps, goal } = plan.data.plan;
  return (
    <SubPlanSteps
      heading={
        <>
          Runs <a href={`/plans/${planId}?history=1`}>“{goal}”</a>, version {version}, as a child run
        </>
      }
      steps={steps.map((child) => ({
        id: child.id,
        label: child.title || child.description || child.id,
        tool: child.tool,
        gated: child.approvalRequired,
      }))}
    />
  );
}

function TemplatePreview({ templateId, params }: { templateId: string; params: unknown }) {
  const trpc = useTRPC();
  const template = useQuery({ ...trpc.templates.get.queryOptions({ templateId }), retry: false });
  if (template.isPending) return <p className="muted">Loading the template…</p>;
  if (template.error) {
    return (
      <p className="warn-text" data-testid="sub-plan-missing">
        The template {templateId} cannot be read: {template.error.message}
      </p>
    );
  }
  const values = Object.entries((params as Record<string, unknown> | undefined) ?? {});
  return (
    <SubPlanSteps
      heading={
        <>
          Runs the template “{template.data.name}” filled with{" "}
          {values.length ? values.map(([name, value]) => `${name} = ${String(value)}`).join(", ") : "its defaults"}, as
          a child run
        </>
      }
      steps={template.data.steps.map((child) => ({ id: child.id, label: child.id, tool: child.tool, gated: false }))}
    />
  );
}

function SubPlanSteps({
  heading,
  steps,
}: {
  heading: ReactNode;
  steps: { id: string; label: string; tool: string; gated: boolean }[];
}) {
  return (
    <div className="stack-sm" data-testid="sub-plan-preview">
      <p>{heading}:</p>
      <ol>
        {steps.map((child) => (
          <li key={child.id}>
            {child.label} <span className="mono muted">({child.tool})</span>
            {child.gated && <span className="tag"> needs its own approval</span>}
          </li>
        ))}
      </ol>
    </div>
  );
}
