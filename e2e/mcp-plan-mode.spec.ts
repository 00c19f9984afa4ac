import fs from "node:fs/promises";
import path from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { expect, test } from "@playwright/test";
import { E2E_DATA_DIR } from "./e2e-env";
import { PlanCommandBox } from "./pages/planner-pages";

/**
 * Seed 002's planning mode for an external agent: an MCP client enters plan mode, asks the person
 * a question and waits while the person answers in the browser, submits its plan, is sent back
 * with instructions, revises, and learns of the approval — every decision made in the page — then
 * works through the approved plan's tasks until planning mode ends.
 */
async function connect(baseURL: string): Promise<Client> {
  const { token } = JSON.parse(await fs.readFile(path.join(E2E_DATA_DIR, "server.json"), "utf8"));
  const client = new Client({ name: "plan-mode-e2e", version: "1.0.0" });
  await client.connect(
    new StreamableHTTPClientTransport(new URL("/api/mcp", baseURL), {
      requestInit: { headers: { authorization: `Bearer ${token}`, "x-stepwise-agent": "planner-agent" } },
    }),
  );
  return client;
}

async function call(client: Client, name: string, args: Record<string, unknown> = {}) {
  const result = await client.callTool({ name, arguments: args }, undefined, { timeout: 120_000 });
  const body = JSON.parse((result.content as { text: string }[])[0]!.text);
  if (result.isError) throw new Error(`${name}: ${JSON.stringify(body)}`);
  return body;
}

test("an MCP agent plans with the person: a question answered and a plan reviewed in the browser", async ({
  page,
  baseURL,
}) => {
  test.setTimeout(120_000);
  const client = await connect(baseURL!);
  try {
    const entered = await call(client, "enter_plan_mode", { reason: "The migration touches every table." });
    expect(entered.message).toBe(
      "I'd like to plan this out before proceeding. Reason: The migration touches every table.",
    );
    await page.goto(entered.review_url);
    await expect(page.getByTestId("plan-mode-reason")).toHaveText(
      "I'd like to plan this out before proceeding. Reason: The migration touches every table.",
    );

    // The agent waits on its question while the person answers it in the page.
    const asked = call(client, "ask_user", { question: "May I take the database offline?", wait_seconds: 60 });
    const question = page.getByRole("form", { name: "Question from the planner" });
    await expect(question).toContainText("The planner asks: May I take the database offline?");
    await question.getByLabel("Your answer").fill("Yes, after 18:00");
    await question.getByRole("button", { name: "Send answer" }).click();
    expect(await asked).toMatchObject({ status: "answered", answer: "Yes, after 18:00" });

    const submitted = await call(client, "submit_plan", {
      summary: "Migrate in two steps",
      steps: [
        { description: "Dump the database", relevant_file_paths: ["."], tools: ["shell"], risk: "medium" },
        { description: "Run the migration", relevant_file_paths: ["."], tools: ["shell"], risk: "high" },
      ],
      questions: [],
      context_notes: "Offline window after 18:00",
    });
    expect(submitted).toMatchObject({ status: "submitted", version: 1 });
    await page.goto(submitted.review_url);
    await expect(page.getByRole("heading", { level: 1 })).toHaveText("The migration touches every table.");

    // Sent back with instructions; the agent sees them and revises into version 2.
    const review = page.getByRole("group", { name: "Review the agent's plan" });
    await review.getByLabel("Instructions for the agent").fill("Add a backup check first.");
    await review.getByRole("button", { name: "Send back for changes" }).click();
    await expect(page.getByTestId("review-state")).toContainText("Sent back for changes");
    const sentBack = await call(client, "plan_review_status", { plan_id: submitted.plan_id });
    expect(sentBack).toMatchObject({ state: "changes_requested", comment: "Add a backup check first." });
    const revised = await call(client, "submit_plan", {
      summary: "Migrate in three steps",
      steps: [
        { description: "Dump the database", relevant_file_paths: ["."], tools: ["shell"], risk: "medium" },
        { description: "Check the backup restores", relevant_file_paths: ["."], tools: ["shell"], risk: "low" },
        { description: "Run the migration", relevant_file_paths: ["."], tools: ["shell"], risk: "high" },
      ],
    });
    expect(revised.version).toBe(2);

    // The person approves version 2 while the agent waits for the decision.
    const decision = call(client, "plan_review_status", { plan_id: submitted.plan_id, wait_seconds: 60 });
    await page.reload();
    await expect(page.getByTestId("plan-version")).toHaveText("version 2");
    await page.getByRole("button", { name: "Approve and run v2" }).click();
    await expect(page).toHaveURL(/\/runs\//);
    expect(await decision).toMatchObject({ state: "approved", version: 2, approved_by: "user" });

    // The same agent is handed the approved plan's tasks in order, reports them DONE, and planning
    // mode ends.
    let status = await call(client, "status");
    if (status.now.reason === "sync_instructions") status = await call(client, "status");
    const done: string[] = [];
    while (status.now.reason === "ready_for_task") {
      done.push(status.now.current_task.title);
      await call(client, "update", {
        payload: { update_tasks: [{ id: status.now.current_task.id, status: "DONE", notes: "Done" }] },
      });
      status = await call(client, "status");
    }
    expect(done).toEqual(["Dump the database", "Check the backup restores", "Run the migration"]);
    expect(status.now.reason).toBe("plan_completed");
    await page.goto(entered.review_url);
    await expect(page.getByTestId("planning-execution")).toContainText("Planning is done");
    const commands = new PlanCommandBox(page);
    await commands.run("/plan status");
    await expect(commands.result()).toContainText("done");
  } finally {
    await client.close();
  }
});
