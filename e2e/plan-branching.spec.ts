import { expect, test } from "@playwright/test";
import { createPlanViaApi, PlanViewPage } from "./pages/plan-pages";

// step_2 runs once per file of step_1's output; step_3 only if step_1's code is not 0.
const plan = {
  goal: "Branch and fan out",
  steps: [
    { id: "step_1", description: "Report", tool: "echo", args: { value: { code: 1, files: ["a.ts", "b.ts"] } } },
    {
      id: "step_2",
      description: "Handle one file",
      tool: "echo",
      args: { value: "$item" },
      dependsOn: ["step_1"],
      forEach: "$step_1.files",
      maxItems: 10,
    },
    { id: "step_3", description: "Fix it", tool: "echo", args: { value: "fix" }, when: "$step_1.code != 0" },
  ],
};

let view: PlanViewPage;
test.beforeEach(async ({ page, request }) => {
  view = new PlanViewPage(page);
  await view.open(await createPlanViaApi(request, plan));
  await view.expectVersion(1);
});

test("the review shows a condition in words and a fan-out with its bound", async () => {
  await expect(view.step("step_3").getByTestId("step-condition")).toContainText("step_1's code is not 0");
  await expect(view.step("step_2").getByTestId("step-fan-out")).toContainText("$step_1.files");
  await expect(view.step("step_2").getByTestId("step-fan-out")).toContainText("at most 10");
});

test("a condition is edited in the step editor; one that does not parse is refused inline", async () => {
  const editor = await view.edit("step_3");
  const when = editor.getByLabel("Run only if");
  await when.fill("$step_1.code =");
  await editor.getByRole("button", { name: "Save changes" }).click();
  await expect(editor.getByText(/step_3: when:/).first()).toBeVisible();
  await view.expectVersion(1);
  await when.fill("$step_1.code == 0");
  await editor.getByRole("button", { name: "Save changes" }).click();
  await view.expectVersion(2);
  await expect(view.step("step_3").getByTestId("step-condition")).toContainText("step_1's code is 0");
});

test("the run shows each instance as a card of its own and skips the step whose condition is false", async () => {
  const editor = await view.edit("step_3");
  await editor.getByLabel("Run only if").fill("$step_1.code == 0");
  await editor.getByRole("button", { name: "Save changes" }).click();
  await view.expectVersion(2);
  const run = await view.approve();
  await run.expectRunStatus("completed");
  // Each instance has its own card, titled with its element, after its template's.
  for (const [id, file] of [
    ["step_2[0]", "a.ts"],
    ["step_2[1]", "b.ts"],
  ]) {
    await run.expectStepStatus(id!, "completed");
    await expect(run.step(id!)).toContainText(`"${file}"`);
  }
  await run.expectStepStatus("step_2", "completed");
  await run.expectStepStatus("step_3", "skipped");
});

test("a gated fan-out waits for one decision on its concrete list, shown on the step's card", async ({
  page,
  request,
}) => {
  const gated = new PlanViewPage(page);
  await gated.open(
    await createPlanViaApi(request, {
      goal: "Write one file per name",
      steps: [
        { id: "step_1", description: "Names", tool: "echo", args: { value: ["fan-a.txt", "fan-b.txt"] } },
        {
          id: "step_2",
          description: "Write the file",
          tool: "write_file",
          args: { path: "$item", content: "written" },
          dependsOn: ["step_1"],
          forEach: "$step_1",
        },
      ],
    }),
  );
  const run = await gated.approve();
  const decision = run.step("step_2").getByTestId("group-decision");
  await expect(decision).toContainText("step_2[0]");
  await expect(decision).toContainText("fan-a.txt");
  await expect(decision).toContainText("fan-b.txt");
  await run.expectStepStatus("step_2[0]", "awaiting_approval");
  await decision.getByRole("button", { name: "Approve all 2 as shown" }).click();
  await run.expectRunStatus("completed");
  await run.expectStepStatus("step_2[0]", "completed");
  await run.expectStepStatus("step_2[1]", "completed");
});
