"use client";

import { useId } from "react";
import { ArgsForm } from "./args-form";
import { FormActions } from "@/components/ui/form-actions";
import {
  DependsOnPicker,
  StepBranchingFields,
  PositionField,
  StepContextFields,
  StepEditorNotices,
  StepRunOptionsFields,
  TitleAndToolFields,
} from "./step-editor-fields";
import { useStepEditorState, type StepEditorProps } from "./use-step-editor-state";

export type { StepEditorTarget } from "./use-step-editor-state";

/**
 * Every field of a step in one form. Used in the list (inline, under the card), in the graph
 * (beside it) and for adding a step. Problems come back inline, next to the field they concern.
 */
export function StepEditor(props: StepEditorProps) {
  const { steps, tools, onClose } = props;
  const formId = useId();
  const state = useStepEditorState(props);
  const { step, tool, toolName, ownIssues } = state;
  const heading = step ? `Edit ${step.id}` : "Add a step";

  return (
    <form className="step-editor card" aria-labelledby={`${formId}-title`} onSubmit={state.submit} noValidate>
      <h3 id={`${formId}-title`}>{heading}</h3>
      <StepEditorNotices state={state} />
      {!step && <PositionField formId={formId} state={state} steps={steps} />}
      <TitleAndToolFields formId={formId} state={state} tools={tools} />
      <label className="field">
        <span>Description</span>
        <textarea rows={2} value={state.description} onChange={(e) => state.setDescription(e.target.value)} />
      </label>

      {tool && (
        <ArgsForm
          key={`${toolName}-${state.argsVersion}`}
          stepId={step?.id ?? "the new step"}
          schema={state.schema}
          value={state.args}
          onChange={state.setArgs}
          dependencies={state.dependsOn}
          errors={state.argErrors}
          onRawError={state.setRawError}
        />
      )}

      <DependsOnPicker state={state} />
      <StepBranchingFields formId={formId} state={state} />

      <StepRunOptionsFields formId={formId} state={state} />
      <StepContextFields state={state} />
      {ownIssues
        .filter(
          (issue) =>
            !["args", "dependsOn", "when", "forEach"].includes(String(issue.path?.[0])) && issue.code !== "cycle",
        )
        .map((issue, index) => (
          <p key={index} className="issue">
            {issue.message}
          </p>
        ))}
      <FormActions label={step ? "Save changes" : "Add step"} pending={state.saving} onCancel={onClose} />
    </form>
  );
}
