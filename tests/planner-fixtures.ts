/** Plans a scripted model returns in planner tests: one that passes every gate, and broken ones. */

export const goodStep = (id: string, extra: Record<string, unknown> = {}) => ({
  id,
  title: `Read the README (${id})`,
  description: "Read the README to learn what the project is",
  tool: "read_file",
  args: { path: "README.md" },
  dependsOn: [],
  risk: "low",
  type: "research",
  contextHints: ["Read `README.md` from the top"],
  relevantFilePaths: ["README.md"],
  ...extra,
});

/** Passes every quality gate in a workspace that has README.md. */
export const goodPlan = {
  summary: "Read the README, then echo what it says.",
  steps: [
    goodStep("step_1"),
    {
      id: "step_2",
      title: "Echo the README",
      description: "Echo the README's text so the run shows it",
      tool: "echo",
      args: { value: "$step_1" },
      dependsOn: ["step_1"],
      risk: "low",
      type: "chore",
      contextHints: ["Use the output of step_1"],
      relevantFilePaths: ["README.md"],
    },
  ],
  successCriteria: ["The README's text is shown"],
  questions: [],
  contextNotes: "The workspace has a README.",
  estimatedDuration: 5,
};

/** A cycle (step_1 ↔ step_2) and an unknown tool: the quality gates reject it. */
export const cyclicPlanWithUnknownTool = {
  summary: "Broken first draft",
  steps: [
    goodStep("step_1", { dependsOn: ["step_2"] }),
    goodStep("step_2", { dependsOn: ["step_1"] }),
    { ...goodStep("step_3"), tool: "teleport_file", args: { to: "mars" } },
  ],
};
