import fs from "node:fs/promises";
import path from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startHarness, type Harness } from "../../tests/app-harness";
import { startApiServer } from "../../tests/door-http-server";
import { findOperation } from "../operations/registry";
import { invokeOperation } from "../operations/operation";
import { planCreate, planEdit } from "../operations/plans";
import { templateInstantiate } from "../operations/templates";
import { runQualityGates } from "../planner/gates";
import { AGENT_TASK_TOOL } from "../tools/agent-task";
import { registerWorkspace } from "./workspaces";

/**
 * One gate pipeline: the same bad plan gets the same verdict, with the same actionable details,
 * from every door that stores a plan or a new version — and nothing is stored.
 */
const AGENT_TOKEN = "gates-test-agent-token";
let harness: Harness;
let api: Awaited<ReturnType<typeof startApiServer>>;
let mcp: Client;
const person = { kind: "person" as const, name: "tester" };

beforeAll(async () => {
  harness = await startHarness();
  await fs.writeFile(path.join(harness.workspace, "README.md"), "# Demo\n");
  api = await startApiServer(harness.app, { agentToken: AGENT_TOKEN });
  mcp = new Client({ name: "gates-test", version: "1.0.0" });
  await mcp.connect(
    new StreamableHTTPClientTransport(new URL("/api/mcp", api.url), {
      requestInit: { headers: { authorization: `Bearer ${AGENT_TOKEN}`, "x-stepwise-agent": "gates-agent" } },
    }),
  );
}, 120_000);
afterAll(async () => {
  await mcp?.close().catch(() => undefined);
  await api?.close();
  await harness?.close();
});

/** An agent task with a vague hint, a hint naming a missing file, and no relevant paths. */
const badStep = {
  id: "step_1",
  title: "Update the parser",
  description: "Update the parser",
  tool: AGENT_TASK_TOOL,
  type: "chore",
  contextHints: ["stuff", "Read `docs/missing-spec.md` first"],
  relevantFilePaths: [] as string[],
};
const badPlan = { goal: "Improve the parser", steps: [badStep] };
const expected = [
  `Step 'Update the parser' (step_1) has a hint that is not actionable: "stuff". Start it with a verb (Read, Edit, Run…) or point at a file or section.`,
  "Step 'Update the parser' (step_1) has a hint pointing to a non-existent file: `docs/missing-spec.md`.",
  "Step 'Update the parser' (step_1) is missing the `relevant_file_paths` field: list the files the task will read or change.",
];

/** An agent task with neither title nor description, otherwise fine. */
const untitledPlan = {
  goal: "Say something",
  steps: [
    {
      id: "step_1",
      tool: AGENT_TASK_TOOL,
      type: "chore",
      contextHints: ["Read `README.md` first"],
      relevantFilePaths: ["README.md"],
    },
  ],
};
const untitled = ["Step step_1 has no `title`: say in a sentence what the task achieves."];

/** Every issue message in a refusal, whatever envelope the door puts around it. */
function issueMessages(value: unknown, found = new Set<string>()): string[] {
  if (Array.isArray(value)) value.forEach((item) => issueMessages(item, found));
  else if (value !== null && typeof value === "object") {
    const record = value as Record<string, unknown>;
    // `stepId` on the tRPC and HTTP doors, `step_id` on MCP's.
    if (
      typeof record.message === "string" &&
      typeof record.code === "string" &&
      ("stepId" in record || "step_id" in record)
    ) {
      found.add(record.message);
    }
    Object.values(record).forEach((item) => issueMessages(item, found));
  }
  return [...found];
}

async function refusal(work: () => Promise<unknown>): Promise<string[]> {
  let outcome: unknown;
  try {
    outcome = await work();
  } catch (error) {
    // tRPC wraps the domain's error; its cause carries the details.
    const domain = (error as { cause?: unknown }).cause ?? error;
    const messages = issueMessages((domain as { details?: unknown }).details);
    if (messages.length === 0) throw error;
    return messages;
  }
  throw new Error(`The door accepted the plan: ${JSON.stringify(outcome).slice(0, 300)}`);
}

async function planCount() {
  return harness.app.db.prisma.planVersion.count();
}

/** A good plan to edit: in a registered workspace, or (by default) in none, checked in the default one. */
async function basePlanId(registered = false) {
  const workspace = registered ? await registerWorkspace(harness.app.db.pool, harness.workspace) : undefined;
  const good = await invokeOperation(
    planCreate,
    { app: harness.app, identity: person },
    {
      ...(workspace && { workspaceId: workspace.id }),
      draft: {
        goal: "Improve the parser",
        steps: [{ id: "step_1", title: "Read the README", tool: "read_file", args: { path: "README.md" } }],
      },
    },
  );
  return good.id;
}

type Door = { name: string; submit: (plan: typeof badPlan | typeof untitledPlan) => Promise<string[]> };

const doors: Door[] = [
  {
    name: "operation plan.create",
    submit: (plan) =>
      refusal(() => invokeOperation(planCreate, { app: harness.app, identity: person }, { draft: plan })),
  },
  {
    name: "operation plan.edit (a new version)",
    submit: async (plan) => {
      const planId = await basePlanId();
      return refusal(() =>
        invokeOperation(
          planEdit,
          { app: harness.app, identity: person },
          {
            planId,
            baseVersion: 1,
            edit: { kind: "import", planJson: JSON.stringify(plan) },
          },
        ),
      );
    },
  },
  {
    name: "operation plan.edit (a plan in a registered workspace)",
    submit: async (plan) => {
      const planId = await basePlanId(true);
      return refusal(() =>
        invokeOperation(
          planEdit,
          { app: harness.app, identity: person },
          {
            planId,
            baseVersion: 1,
            edit: { kind: "import", planJson: JSON.stringify(plan) },
          },
        ),
      );
    },
  },
  {
    name: "import (a new plan from JSON)",
    submit: (plan) =>
      refusal(() => harness.caller.plans.createFromJson({ planJson: JSON.stringify(plan), goal: plan.goal })),
  },
  {
    name: "POST /api/plan",
    submit: async (plan) => {
      const response = await fetch(new URL("/api/plan", api.url), {
        method: "POST",
        headers: {
          "content-type": "application/json",
          authorization: `Bearer ${AGENT_TOKEN}`,
          "x-stepwise-agent": "gates-agent",
        },
        body: JSON.stringify({ goal: plan.goal, steps: plan.steps }),
      });
      expect(response.status).toBe(422);
      return issueMessages(await response.json());
    },
  },
  {
    name: "template instantiate",
    submit: async (plan) => {
      const template = await harness.app.db.prisma.planTemplate.create({
        data: {
          name: `bad ${Math.random()}`,
          goal: plan.goal,
          content: { goal: plan.goal, steps: plan.steps },
          createdBy: "tester",
        },
      });
      return refusal(() =>
        invokeOperation(templateInstantiate, { app: harness.app, identity: person }, { templateId: template.id }),
      );
    },
  },
  {
    name: "the planner's gates on a draft",
    submit: async (plan) => {
      const result = await runQualityGates(plan, { tools: harness.app.tools, workspaceRoot: harness.workspace });
      expect(result.ok).toBe(false);
      // The planner asks its model for more than the other doors (every step typed and hinted).
      return issueMessages(result.issues).filter((message) => !/`context_hints` field|has no `type`/.test(message));
    },
  },
];

describe("one gate pipeline for every door", () => {
  it.each(doors)("$name refuses the bad plan with the same details and stores nothing", async (door) => {
    const before = await planCount();
    const messages = await door.submit(badPlan);
    expect(messages.sort()).toEqual([...expected].sort());
    expect(await planCount()).toBe(before + (door.name.startsWith("operation plan.edit") ? 1 : 0));
  });

  it.each(doors)("$name refuses an agent task with no title or description", async (door) => {
    expect((await door.submit(untitledPlan)).sort()).toEqual(untitled);
  });

  it("MCP submit_plan, through the SDK client, accepts the same plan and shows the same findings as advice", async () => {
    // Seed 002's plan mode: the agent's plan goes to a person's review as written; what the gates
    // find is shown to the reviewer rather than refused (the reviewer decides what matters).
    const entered = await mcp.callTool({ name: "enter_plan_mode", arguments: { reason: "Plan the parser change" } });
    expect(entered.isError, JSON.stringify(entered.content)).toBeFalsy();
    const result = await mcp.callTool({
      name: "submit_plan",
      arguments: {
        summary: "Improve the parser",
        steps: [
          {
            description: badStep.description,
            context_hints: badStep.contextHints,
            relevant_file_paths: badStep.relevantFilePaths,
          },
        ],
      },
    });
    expect(result.isError, JSON.stringify(result.content)).toBeFalsy();
    const submitted = JSON.parse((result.content as { text: string }[])[0]!.text) as { plan_id: string };
    const view = (await invokeOperation(
      findOperation("plan.view")!,
      { app: harness.app, identity: person },
      { planId: submitted.plan_id },
    )) as { plan: { advice?: { code: string; stepId?: string; message: string }[] } };
    expect(view.plan.advice?.map((item) => item.message).sort()).toEqual([...expected].sort());
    expect(view.plan.advice?.[0]).toMatchObject({ code: "vague_hint", stepId: "step_1" });
  });

  it("a legitimate manual tool plan (echo steps, no hints or paths) still passes every door", async () => {
    const plan = await invokeOperation(
      planCreate,
      { app: harness.app, identity: person },
      {
        draft: { goal: "Say hello", steps: [{ id: "a", title: "Say hello", tool: "echo", args: { value: "hi" } }] },
      },
    );
    expect(plan.version).toBe(1);
  });
});
