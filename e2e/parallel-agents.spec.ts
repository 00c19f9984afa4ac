import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { expect, test } from "@playwright/test";
import { readyForTaskSchema } from "../server/agents/contract";
import { E2E_DATA_DIR } from "./e2e-env";
import { RunViewPage } from "./pages/run-pages";

/**
 * Several agents, one plan, watched live: three agents (named by the door's agent header, with the
 * server's agent token) take tasks of one session over HTTP while a person watches the run page
 * show who works on what, reads the brief each was given, and sets the cap on tasks at once.
 */
async function agentCaller(name: string) {
  const { url, token } = JSON.parse(await fs.readFile(path.join(E2E_DATA_DIR, "server.json"), "utf8")) as {
    url: string;
    token: string;
  };
  return async (operation: string, data: unknown) => {
    const response = await fetch(`${url}/api/ops/${operation}`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${token}`, "x-stepwise-agent": name },
      body: JSON.stringify(data),
    });
    const body = (await response.json()) as unknown;
    if (!response.ok) throw new Error(`${operation} as ${name}: ${response.status} ${JSON.stringify(body)}`);
    return body;
  };
}

test("the run page shows which agent works on what, with each agent's brief, live", async ({ page, request }) => {
  test.setTimeout(120_000);
  const workspace = await fs.mkdtemp(path.join(os.tmpdir(), "stepwise-parallel-ws-"));
  try {
    await fs.writeFile(path.join(workspace, "README.md"), "# Demo\n");
    const tag = Date.now().toString(36);
    const started = await request.post("/api/ops/agent.start", {
      data: { goal: `Three agents ${tag}`, workspace, agentConcurrency: 3 },
    });
    expect(started.ok()).toBe(true);
    const session = ((await started.json()) as { session_id: string }).session_id;
    await request.post("/api/ops/agent.status", { data: { session } });
    const task = (n: number, dependencies: number[] = []) => ({
      title: `Part ${n} of the demo`,
      type: "docs",
      context_hints: [`Read \`README.md\` and add the section for part ${n}.`],
      relevant_file_paths: ["README.md"],
      dependencies,
      acceptance: [`README.md has a section for part ${n}`],
    });
    const planned = await request.post("/api/ops/agent.update", {
      data: {
        session,
        payload: {
          add_tasks: [task(2), task(3), task(4), task(5, [2])],
          update_tasks: [{ id: 1, status: "DONE", notes: "four parts" }],
        },
      },
    });
    expect(planned.ok()).toBe(true);
    const sessions = (await (await request.get("/api/trpc/agents.list")).json()).result.data.json as {
      id: string;
      runId: string;
    }[];
    const runId = sessions.find((candidate) => candidate.id === session)!.runId;

    const runPage = new RunViewPage(page);
    await runPage.open(runId);
    const agents = page.getByRole("table", { name: "Agents" });
    await expect(page.getByTestId("no-agents")).toBeVisible();

    const [ada, bob, cy] = await Promise.all(["ada", "bob", "cy"].map(agentCaller));
    const given = [];
    for (const agent of [ada!, bob!, cy!])
      given.push(readyForTaskSchema.parse(await agent("agent.status", { session })));
    expect(given.map((answer) => answer.now.current_task.id)).toEqual([2, 3, 4]);

    // Live: each agent's row with its task and lease; each task's assignee.
    for (const [name, id] of [
      ["ada", 2],
      ["bob", 3],
      ["cy", 4],
    ] as const) {
      const row = agents.locator(`tr[data-agent="${name}"]`);
      await expect(row).toContainText(`Task ${id}: Part ${id} of the demo`);
      await expect(row.getByTestId("lease")).toContainText("left");
    }
    await expect(page.getByTestId("assignees")).toContainText("Task 2 → ada · Task 3 → bob · Task 4 → cy");

    // ada finishes; the next wave's task, which needs hers, goes to her with her notes in its brief.
    await ada!("agent.update", {
      session,
      payload: { update_tasks: [{ id: 2, status: "DONE", notes: "Part 2 written in README.md" }] },
    });
    await expect(agents.locator('tr[data-agent="ada"]')).toContainText("no task");
    const next = readyForTaskSchema.parse(await ada!("agent.status", { session }));
    expect(next.now.current_task.id).toBe(5);
    expect(next.now.brief?.dependency_notes).toEqual([
      { task_id: 2, title: "Part 2 of the demo", notes: "Part 2 written in README.md" },
    ]);
    const adaRow = agents.locator('tr[data-agent="ada"]');
    await expect(adaRow).toContainText("Task 5: Part 5 of the demo");

    // The brief shown is the one ada was given.
    await adaRow.getByText("Task 5: Part 5 of the demo").click();
    const brief = adaRow.getByTestId("brief");
    await expect(brief).toContainText(`Three agents ${tag}`);
    await expect(brief).toContainText("Task 2 (Part 2 of the demo): Part 2 written in README.md");
    await expect(brief).toContainText("README.md has a section for part 5");
    await expect(brief).toContainText(next.now.brief!.working_directory);

    // bob reporting on ada's task is refused, naming her.
    await expect(
      bob!("agent.update", { session, payload: { update_tasks: [{ id: 5, status: "DONE" }] } }),
    ).rejects.toThrow("is leased to agent 'ada'");

    // The person sets the cap to one task at a time.
    await page.getByLabel("Agent tasks in progress at once").fill("1");
    await page.getByRole("button", { name: "Set", exact: true }).click();
    await expect(page.getByTestId("agent-concurrency")).toContainText("now 1 (one after another)");
  } finally {
    await fs.rm(workspace, { recursive: true, force: true });
  }
});
