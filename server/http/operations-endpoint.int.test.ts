import { afterEach, describe, expect, it } from "vitest";
import { startHarness, type Harness } from "../../tests/app-harness";
import type { Identity } from "../identity";
import { IDENTITY_HEADER, signIdentity } from "./door";
import { handleOperation, listOperations } from "./operations-endpoint";

/** The operations door (`POST /api/ops/<name>`, the CLI's transport) on a real database. */
let harness: Harness | undefined;
afterEach(async () => {
  await harness?.close();
  harness = undefined;
});

const AGENT: Identity = { kind: "agent", name: "agent" };
const PERSON: Identity = { kind: "person", name: "user" };

function post(name: string, body: string, identity?: Identity) {
  const request = new Request(`http://127.0.0.1/api/ops/${name}`, {
    method: "POST",
    headers: { "content-type": "application/json", ...(identity && { [IDENTITY_HEADER]: signIdentity(identity) }) },
    body,
  });
  return handleOperation(request, harness!.app, name);
}

describe("POST /api/ops/<name>", () => {
  it("answers an operation's output as JSON, and problem+json with a stable code otherwise", async () => {
    harness = await startHarness({ worker: false });
    const created = await post("agent.start", JSON.stringify({ goal: "Do it" }), AGENT);
    expect(created.status).toBe(200);
    expect(await created.json()).toMatchObject({ status: "session_created" });

    const problems: [string, string, Identity | undefined, number, string][] = [
      ["agent.status", "{}", undefined, 401, "unauthorized"],
      ["no.such", "{}", AGENT, 404, "not_found"],
      ["agent.start", "{not json", AGENT, 400, "invalid_input"],
      ["agent.start", JSON.stringify({ goal: 5 }), AGENT, 400, "invalid_input"],
      [
        "agent.start",
        JSON.stringify({ goal: "x", __proto__: 1, constructor: { prototype: {} } }),
        AGENT,
        400,
        "invalid_input",
      ],
      [
        "agent.update",
        JSON.stringify({ payload: { update_tasks: [{ id: 7, status: "DONE" }] } }),
        AGENT,
        412,
        "invalid_state",
      ],
    ];
    for (const [name, body, identity, status, code] of problems) {
      const response = await post(name, body, identity);
      expect(response.status, `${name} ${body}`).toBe(status);
      expect(response.headers.get("content-type")).toBe("application/problem+json");
      expect(await response.json()).toMatchObject({ code, status });
    }
  });

  it("refuses an invalid plan with seed 003's plan_validation_failed details, storing nothing", async () => {
    harness = await startHarness({ worker: false });
    const response = await post(
      "plan.create",
      JSON.stringify({
        draft: {
          goal: "Broken",
          steps: [
            { id: "step_1", tool: "teleport", args: {} },
            { id: "step_2", tool: "echo", args: { value: 1 }, dependsOn: ["step_9"] },
          ],
        },
      }),
      AGENT,
    );
    expect(response.status).toBe(422);
    const problem = await response.json();
    expect(problem).toMatchObject({ code: "invalid_plan", details: { error_type: "plan_validation_failed" } });
    expect(problem.details.details).toEqual([expect.stringContaining("step_1: "), expect.stringContaining("step_2: ")]);
    expect((await harness.app.db.pool.query("select count(*)::int as n from plans")).rows[0].n).toBe(0);
  });

  it("keeps approvals a person's: an agent's credential cannot approve a plan or decide a gate", async () => {
    harness = await startHarness({ worker: false });
    const plan = await post(
      "plan.create",
      JSON.stringify({
        draft: { goal: "Gated", steps: [{ id: "step_1", tool: "write_file", args: { path: "a", content: "b" } }] },
      }),
      AGENT,
    );
    expect(plan.status).toBe(200);
    const { id, version, source } = await plan.json();
    expect(source).toBe("agent");
    const refused = await post("plan.approve", JSON.stringify({ planId: id, version }), AGENT);
    expect(refused.status).toBe(403);
    expect(await refused.json()).toMatchObject({ code: "forbidden", detail: expect.stringContaining("Only a person") });
    const approved = await post("plan.approve", JSON.stringify({ planId: id, version }), PERSON);
    expect(approved.status).toBe(200);
    const { runId } = await approved.json();
    const decide = await post("run.decide", JSON.stringify({ runId, stepId: "step_1", approve: true }), AGENT);
    expect(decide.status).toBe(403);
    const run = await (await post("run.get", JSON.stringify({ runId }), AGENT)).json();
    expect(run.steps[0]).toMatchObject({ stepId: "step_1", status: "awaiting_approval" });
  });

  it("lists every operation with JSON Schemas for its input and output", async () => {
    const unauthenticated = listOperations(new Request("http://127.0.0.1/api/ops"));
    expect(unauthenticated.status).toBe(401);
    const response = listOperations(
      new Request("http://127.0.0.1/api/ops", { headers: { [IDENTITY_HEADER]: signIdentity(AGENT) } }),
    );
    const { operations } = await response.json();
    const names = operations.map((operation: { name: string }) => operation.name);
    expect(names).toEqual(
      expect.arrayContaining(["agent.start", "agent.status", "agent.update", "plan.create", "run.events"]),
    );
    const update = operations.find((operation: { name: string }) => operation.name === "agent.update");
    expect(update.input.properties.payload.properties.update_tasks.items.properties.status.enum).toEqual([
      "TODO",
      "IN_PROGRESS",
      "DONE",
      "CANCELLED",
    ]);
  });
});
