import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startHarness, type Harness } from "../../tests/app-harness";
import { startApiServer } from "../../tests/door-http-server";
import { addPrincipal } from "../people/principals";
import { invokeOperation } from "../operations/operation";
import { findOperation } from "../operations/registry";
import { withCaller } from "../caller-context";

/** What the admin does on the People page, under the admin's name (audit verify checks who). */
const asAdmin = <T>(work: () => T): T => withCaller({ kind: "person", name: "user" }, work);

let harness: Harness;
beforeAll(async () => {
  harness = await startHarness({ worker: false });
});
afterAll(async () => {
  await harness.close();
});

const parameterised = {
  goal: "Release {{service}} to {{env}}",
  steps: [
    {
      id: "step_1",
      title: "Announce {{service}}",
      description: "Tell the team that {{ service }} goes to {{env}}",
      tool: "echo",
      args: { value: { text: "deploying {{service}}", tags: ["{{env}}", "fixed"], count: 3 } },
    },
    { id: "step_2", description: "Pass it on", tool: "echo", args: { value: "$step_1" }, dependsOn: ["step_1"] },
  ],
};

async function savedTemplate(parameters?: { name: string; label?: string; default?: string }[]) {
  const plan = await harness.caller.plans.createFromJson({ planJson: JSON.stringify(parameterised) });
  return harness.caller.templates.save({
    planId: plan.id,
    version: plan.version,
    name: "Release",
    description: "Release a service",
    ...(parameters && { parameters }),
  });
}

function issueOf(error: unknown) {
  return error as { code: string; message: string; cause: { code: string; details: Record<string, unknown> } };
}

describe("plan templates", () => {
  it("detects {{name}} placeholders in the goal, descriptions and string arguments", async () => {
    const plan = await harness.caller.plans.createFromJson({ planJson: JSON.stringify(parameterised) });
    expect(await harness.caller.templates.detect({ planId: plan.id })).toEqual({ parameters: ["service", "env"] });
    const template = await savedTemplate([{ name: "env", label: "Environment", default: "staging" }]);
    expect(template.parameters).toEqual([
      { name: "service", label: "service", required: true },
      { name: "env", label: "Environment", default: "staging", required: false },
    ]);
    expect((await harness.caller.templates.list({})).templates.map((t) => t.id)).toContain(template.id);
  });

  it("refuses to declare a parameter the plan does not hold", async () => {
    const error = await savedTemplate([{ name: "region" }]).catch((e: unknown) => e);
    expect(issueOf(error).message).toMatch(/"region" does not appear.*Found: service, env/);
  });

  it("starts a valid plan with source template, values inserted and defaults used", async () => {
    const template = await savedTemplate([{ name: "env", default: "staging" }]);
    const plan = await harness.caller.templates.instantiate({
      templateId: template.id,
      values: { service: "billing" },
    });
    expect(plan.source).toBe("template");
    expect(plan.goal).toBe("Release billing to staging");
    expect(plan.steps[0]).toMatchObject({
      title: "Announce billing",
      description: "Tell the team that billing goes to staging",
      args: { value: { text: "deploying billing", tags: ["staging", "fixed"], count: 3 } },
    });
    // Structure and references are untouched: the plan runs as the original would.
    expect(plan.steps[1]).toMatchObject({ args: { value: "$step_1" }, dependsOn: ["step_1"] });
    const stored = await harness.app.db.prisma.planVersion.findFirst({ where: { planId: plan.id } });
    expect(stored?.source).toBe("template");
  });

  it("names a missing required parameter and creates nothing", async () => {
    const template = await savedTemplate([{ name: "env", label: "Environment" }]);
    const before = await harness.app.db.prisma.plan.count();
    const error = await harness.caller.templates
      .instantiate({ templateId: template.id, values: { service: "billing" } })
      .catch((e: unknown) => e);
    expect(issueOf(error).code).toBe("BAD_REQUEST");
    expect(issueOf(error).message).toBe("Missing required parameter: Environment (env)");
    expect(await harness.app.db.prisma.plan.count()).toBe(before);
  });

  it("inserts values as plain text: no second expansion, no step references, size-limited", async () => {
    const template = await savedTemplate();
    const plan = await harness.caller.templates.instantiate({
      templateId: template.id,
      values: { service: "{{env}}", env: "prod" },
    });
    expect(plan.goal).toBe("Release {{env}} to prod");
    expect((plan.steps[0] as { args: unknown }).args).toEqual({
      value: { text: "deploying {{env}}", tags: ["prod", "fixed"], count: 3 },
    });

    const reference = await harness.caller.templates
      .instantiate({ templateId: template.id, values: { service: "x", env: "$step_1" } })
      .catch((e: unknown) => e);
    expect(issueOf(reference).message).toMatch(/parameter "env" would make an argument the step reference "\$step_1"/);

    const huge = await harness.caller.templates
      .instantiate({ templateId: template.id, values: { service: "x".repeat(10_001), env: "prod" } })
      .catch((e: unknown) => e);
    expect(issueOf(huge).code).toBe("BAD_REQUEST");

    const unknown = await harness.caller.templates
      .instantiate({ templateId: template.id, values: { service: "a", env: "b", region: "c" } })
      .catch((e: unknown) => e);
    expect(issueOf(unknown).message).toMatch(/no parameter "region"/);
  });

  it("starts the plan in the registered workspace asked for, and refuses an unknown one", async () => {
    const template = await savedTemplate();
    const dir = await fs.mkdtemp(path.join(os.tmpdir(), "stepwise-template-ws-"));
    try {
      const workspace = await harness.caller.workspaces.register({ path: dir, name: "Template target" });
      const plan = await harness.caller.templates.instantiate({
        templateId: template.id,
        values: { service: "api", env: "dev" },
        workspaceId: workspace.id,
      });
      const task = await harness.app.db.prisma.task.findUniqueOrThrow({ where: { id: plan.taskId as string } });
      expect(task.workspaceId).toBe(workspace.id);
      const missing = await harness.caller.templates
        .instantiate({
          templateId: template.id,
          values: { service: "api", env: "dev" },
          workspaceId: "00000000-0000-4000-8000-000000000000",
        })
        .catch((e: unknown) => e);
      expect(issueOf(missing).code).toBe("NOT_FOUND");
    } finally {
      await fs.rm(dir, { recursive: true, force: true });
    }
  });

  it("is reachable as operations (HTTP API, MCP); an agent uses a person's template but deletes only its own", async () => {
    const template = await savedTemplate();
    expect(template).toMatchObject({ createdBy: "tester", createdByKind: "person" });
    const context = { app: harness.app, identity: { kind: "agent" as const, name: "bot" } };
    const plan = (await invokeOperation(findOperation("template.instantiate")!, context, {
      templateId: template.id,
      values: { service: "api", env: "dev" },
    })) as { id: string; goal: string; author: string };
    expect(plan).toMatchObject({ goal: "Release api to dev", author: "bot" });

    // Through the real door, with the agent token: the person's template is not the agent's to delete.
    const api = await startApiServer(harness.app, {
      agentToken: "templates-agent-token",
      accessToken: "templates-access",
    });
    const reviewer = await asAdmin(() =>
      addPrincipal(harness.app.db.pool, {
        kind: "person",
        name: "rita-templates",
        role: "approver",
        createdBy: "user",
      }),
    );
    const remove = (bearer: string, templateId: string, agentName?: string) =>
      fetch(`${api.url}/api/ops/template.delete`, {
        method: "POST",
        headers: {
          "content-type": "application/json",
          authorization: `Bearer ${bearer}`,
          ...(agentName && { "x-stepwise-agent": agentName }),
        },
        body: JSON.stringify({ templateId }),
      });
    try {
      for (const [bearer, name] of [
        ["templates-agent-token", "bot"],
        ["templates-agent-token", "tester"],
        [reviewer.token, undefined],
      ] as const) {
        const refused = await remove(bearer, template.id, name);
        expect(refused.status, `${bearer} ${name}`).toBe(403);
        expect((await refused.json()).detail).toContain("Only tester (a person)");
      }
      expect((await harness.caller.templates.get({ templateId: template.id })).id).toBe(template.id);

      // The agent's own template is its to delete; an admin deletes anyone's.
      const own = (await invokeOperation(findOperation("template.save")!, context, {
        planId: plan.id,
        name: "Bot's own",
      })) as { id: string; createdBy: string; createdByKind: string };
      expect(own).toMatchObject({ createdBy: "bot", createdByKind: "agent" });
      expect((await remove("templates-agent-token", own.id, "bot")).status).toBe(200);
      expect((await remove("templates-access", template.id)).status).toBe(200);
    } finally {
      await api.close();
    }
    const gone = await harness.caller.templates.get({ templateId: template.id }).catch((e: unknown) => e);
    expect(issueOf(gone).code).toBe("NOT_FOUND");
  });
});
