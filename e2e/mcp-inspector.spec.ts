import path from "node:path";
import { expect, test } from "@playwright/test";
import { E2E_DATA_DIR } from "./e2e-env";
import { RunViewPage } from "./pages/run-pages";
import { runNode, type ProcessResult } from "./run-node";

/**
 * An MCP client nobody here wrote — the MCP Inspector's CLI — against both transports of the real
 * server: Streamable HTTP at /api/mcp (with the agent token from server.json) and stdio through
 * `stepwise mcp`. The plan it creates is a run a person can watch in the browser.
 */
/** The README's route, verbatim: `npm run mcp:inspect -- [--http] <inspector options>`. */
const inspectScript = path.resolve("scripts/mcp-inspect.mjs");

function inspector(...args: string[]): Promise<ProcessResult> {
  return runNode(inspectScript, args, {
    cwd: path.resolve("."),
    env: { ...process.env, STEPWISE_DATA_DIR: E2E_DATA_DIR, STEPWISE_URL: "", STEPWISE_TOKEN: "" },
  });
}

function parsed(result: ProcessResult) {
  expect(result.code, result.stderr).toBe(0);
  return JSON.parse(result.stdout.slice(result.stdout.indexOf("{")));
}

test("the MCP Inspector lists tools and plans through Stepwise over HTTP and stdio", async ({ page }) => {
  // The script finds the server and its agent token in the data folder's server.json.
  const http = ["--http"];
  const stdio: string[] = [];

  for (const target of [http, stdio]) {
    const { tools } = parsed(await inspector(...target, "--method", "tools/list"));
    expect(tools.map((tool: { name: string }) => tool.name)).toEqual(
      expect.arrayContaining(["planning_setup_plan", "planning_read_plan", "status", "update"]),
    );
  }

  // Each Inspector call is a new MCP session: the plan is keyed by an explicit session_id.
  const created = parsed(
    await inspector(
      ...http,
      "--method",
      "tools/call",
      "--tool-name",
      "planning_setup_plan",
      "--tool-arg",
      "objective=Inspect Stepwise",
      'initial_steps=["Look around","Write notes"]',
      "session_id=inspector",
    ),
  ).structuredContent;
  expect(created).toMatchObject({ objective: "Inspect Stepwise", status: "active" });
  const read = parsed(
    await inspector(
      ...stdio,
      "--method",
      "tools/call",
      "--tool-name",
      "planning_read_plan",
      "--tool-arg",
      "session_id=inspector",
    ),
  );
  // Over stdio the relay names the agent's token holder the same: the plan is the one made over HTTP.
  expect(read.structuredContent ?? JSON.parse(read.content[0].text)).toMatchObject({
    objective: "Inspect Stepwise",
    steps: [
      { step_id: 1, title: "Look around", status: "pending" },
      { step_id: 2, title: "Write notes", status: "pending" },
    ],
  });

  const run = new RunViewPage(page);
  await run.open(created.run_id);
  await run.expectStepStatus("step_1", "awaiting_agent");
  await inspector(
    ...http,
    "--method",
    "tools/call",
    "--tool-name",
    "planning_update_step",
    "--tool-arg",
    "step_id=1",
    "status=done",
    "session_id=inspector",
  );
  await run.expectStepStatus("step_1", "completed");
});
