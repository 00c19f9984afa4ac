import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { InMemoryTransport } from "@modelcontextprotocol/sdk/inMemory.js";
import { TRPCError } from "@trpc/server";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startHarness, type Harness } from "../../tests/app-harness";
import { isAppError } from "../errors";
import { IDENTITY_HEADER, signIdentity } from "../http/door";
import { handleOperation } from "../http/operations-endpoint";
import { createMcpServer, toolName } from "../mcp/server";
import { createTrpcContext } from "../trpc/init";
import { appRouter, createCaller } from "../trpc/root";
import { ROLES, roleAtLeast, type CallerKind, type Role } from "../vocabulary";
import type { Identity } from "../identity";
import { invokeOperation } from "./operation";
import type { AnyOperation } from "./operation";
import { operations } from "./registry";

/**
 * The authority matrix, generated from the operations registry: every operation × {a person, an
 * agent, no credential} through every door that exposes it — `invokeOperation` itself, `POST
 * /api/ops/<name>`, the tRPC procedures that adapt it, and the MCP tool list — allowed or refused
 * exactly as the operation declares. The declarations themselves are pinned below: a new
 * operation, or a change of who may call one, has to be stated here as well as in the code.
 *
 * Every call sends `{}`: a refused caller is refused before the input is looked at, so an allowed
 * call shows as anything but that refusal (usually `invalid_input`), and nothing changes.
 */
const P = ["person"] as const;
const PA = ["person", "agent"] as const;
const AUTHORITY: Record<string, readonly CallerKind[]> = {
  "agent.start": PA,
  "agent.status": PA,
  "agent.update": PA,
  "agent.alert": PA,
  "agent.suggest": PA,
  "agent.set_concurrency": P,
  "plan.create": PA,
  "plan.get": PA,
  "plan.markdown": PA,
  "plan.list": PA,
  "plan.edit": PA,
  "plan.review_status": PA,
  "plan.review": P,
  "plan.approve": P,
  "plan.archive": P,
  "plan.restore": P,
  "run.get": PA,
  "run.wait": PA,
  "run.list": PA,
  "run.events": PA,
  "run.decisions": PA,
  "inbox.list": P,
  "planning.list": P,
  "planning.state": P,
  "agent.sessions": P,
  "agent.session_of_run": P,
  "run.list_for_plan": PA,
  "run.decide": P,
  "run.group": PA,
  "run.decide_group": P,
  "run.answer": P,
  "run.cancel": PA,
  "run.pause": PA,
  "run.resume": PA,
  "run.retry_step": P,
  "run.skip_step": P,
  "workspace.list": PA,
  "workspace.for_plan": PA,
  "workspace.register": P,
  "workspace.rename": P,
  "workspace.remove": P,
  "audit.list": PA,
  "audit.verify": P,
  "template.detect_parameters": PA,
  "template.save": PA,
  "template.list": PA,
  "template.get": PA,
  "template.instantiate": PA,
  "template.delete": PA,
  "planning.command": P,
  "planning.message": P,
  "plan.comments": PA,
  "plan.comment": PA,
  "plan.comment_resolve": P,
  "plan.revise_from_comments": P,
  "run.approval": PA,
  "decision_link.create": P,
  "decision_link.view": P,
  "decision_link.decide": P,
  "webhook.create": P,
  "webhook.list": P,
  "webhook.update": P,
  "webhook.delete": P,
  "webhook.test": P,
  "webhook.deliveries": P,
  "webhook.redeliver": P,
  "plan.import": PA,
  "run.rerun_from": P,
  "run.apply_recovery": P,
  "signal.clear": P,
  "planner.start": P,
  "planner.cancel": P,
  "planner.retry": P,
  "planner.answer": P,
  "planner.regenerate": P,
  "planner.suggest": P,
  "planner.add_suggestion": P,
  "recovery.propose": P,
  "recovery.decide": P,
  "plan.view": PA,
  "plan.assessments": PA,
  "plan.overlaps": PA,
  "plan.lifecycle": PA,
  "plan.versions": PA,
  "plan.diff": PA,
  "plan.export": PA,
  "plan.tools": PA,
  "planner.options": P,
  "planner.session": P,
  "planner.sessions": P,
  "planner.events": P,
  "planner.usage": P,
  "recovery.proposals": P,
  "plan.submit": PA,
  "chat.complete": P,
  "plan.events": PA,
  "people.me": PA,
  "people.list": P,
  "people.add": P,
  "people.add_credential": P,
  "people.revoke_credential": P,
  "people.set_role": P,
  "workspace.approver_policy": PA,
  "workspace.set_approver_policy": P,
  // Seed 000's todo plan and seed 002's plan mode: the caller's own, through MCP or the CLI.
  "planning.setup_plan": PA,
  "planning.add_step": PA,
  "planning.update_step": PA,
  "planning.read_plan": PA,
  "plan_mode.enter": PA,
  "plan_mode.ask_user": PA,
  "plan_mode.get_answer": PA,
  "plan_mode.exit": PA,
  "plan_mode.submit": PA,
  "mcpServer.add": P,
  "mcpServer.list": P,
  "mcpServer.refresh": P,
  "mcpServer.remove": P,
};

/**
 * The least role a person needs for each operation, pinned: viewer reads; reviewer comments,
 * requests changes and proposes or revises plans; approver approves, denies, answers, decides and
 * steers runs; admin manages people, credentials, workspaces and policies.
 */
const V = "viewer" as const;
const R = "reviewer" as const;
const A = "approver" as const;
const ADMIN = "admin" as const;
const ROLE: Record<string, Role> = {
  "agent.start": R,
  "agent.status": V,
  "agent.update": R,
  "agent.alert": R,
  "agent.suggest": R,
  "plan.create": R,
  "plan.get": V,
  "plan.markdown": V,
  "plan.list": V,
  "plan.edit": R,
  "plan.review_status": V,
  "plan.review": R,
  "plan.approve": A,
  "plan.archive": A,
  "plan.restore": A,
  "run.get": V,
  "run.wait": V,
  "run.list": V,
  "run.events": V,
  "run.decisions": V,
  "inbox.list": V,
  "planning.list": V,
  "planning.state": V,
  "agent.sessions": V,
  "agent.session_of_run": V,
  "run.list_for_plan": V,
  "run.decide": A,
  "run.group": V,
  "run.decide_group": A,
  "agent.set_concurrency": A,
  "plan.overlaps": V,
  "run.answer": A,
  "run.cancel": A,
  "run.pause": A,
  "run.resume": A,
  "run.retry_step": A,
  "run.skip_step": A,
  "workspace.list": V,
  "workspace.for_plan": V,
  "workspace.register": ADMIN,
  "workspace.rename": ADMIN,
  "workspace.remove": ADMIN,
  "audit.list": V,
  "audit.verify": V,
  "template.detect_parameters": R,
  "template.save": R,
  "template.list": V,
  "template.get": V,
  "template.instantiate": R,
  "template.delete": A,
  "planning.command": R,
  "planning.message": R,
  "plan.comments": V,
  "plan.comment": R,
  "plan.comment_resolve": R,
  "plan.revise_from_comments": R,
  "run.approval": V,
  "decision_link.create": A,
  "decision_link.view": V,
  "decision_link.decide": A,
  "plan.import": R,
  "run.rerun_from": A,
  "run.apply_recovery": A,
  "signal.clear": A,
  "planner.start": R,
  "planner.cancel": R,
  "planner.retry": R,
  "planner.answer": R,
  "planner.regenerate": R,
  "planner.suggest": R,
  "planner.add_suggestion": R,
  "recovery.propose": R,
  "recovery.decide": A,
  "plan.view": V,
  "plan.assessments": V,
  "plan.lifecycle": V,
  "plan.versions": V,
  "plan.diff": V,
  "plan.export": V,
  "plan.tools": V,
  "planner.options": V,
  "planner.session": V,
  "planner.sessions": V,
  "planner.events": V,
  "planner.usage": V,
  "recovery.proposals": V,
  "plan.submit": R,
  "chat.complete": R,
  "plan.events": V,
  "people.me": V,
  "people.list": ADMIN,
  "people.add": ADMIN,
  "people.add_credential": ADMIN,
  "people.revoke_credential": ADMIN,
  "people.set_role": ADMIN,
  "workspace.approver_policy": V,
  "workspace.set_approver_policy": ADMIN,
  "webhook.create": ADMIN,
  "webhook.list": ADMIN,
  "webhook.update": ADMIN,
  "webhook.delete": ADMIN,
  "webhook.test": ADMIN,
  "webhook.deliveries": ADMIN,
  "webhook.redeliver": ADMIN,
  "planning.setup_plan": R,
  "planning.add_step": R,
  "planning.update_step": R,
  "planning.read_plan": V,
  "plan_mode.enter": R,
  "plan_mode.ask_user": R,
  "plan_mode.get_answer": V,
  "plan_mode.exit": R,
  "plan_mode.submit": R,
  "mcpServer.add": ADMIN,
  "mcpServer.list": V,
  "mcpServer.refresh": ADMIN,
  "mcpServer.remove": ADMIN,
};

const PERSON: Identity = { kind: "person", name: "owner" };
// An agent that calls itself "owner" is still an agent.
const AGENT: Identity = { kind: "agent", name: "owner" };
const CALLERS: [label: string, identity: Identity | undefined][] = [
  ["person", PERSON],
  ...ROLES.map((role): [string, Identity] => [`a ${role}`, { kind: "person", name: `a ${role}`, role }]),
  ["agent", AGENT],
  ["no credential", undefined],
];

type Outcome = "allowed" | "forbidden" | "unauthorized";

function expected(operation: AnyOperation, identity: Identity | undefined): Outcome {
  if (!identity) return "unauthorized";
  if (!(operation.callers as readonly string[]).includes(identity.kind)) return "forbidden";
  // A person without a role is the access token's holder, the bootstrap admin.
  if (identity.kind === "person" && !roleAtLeast(identity.role ?? "admin", operation.role)) return "forbidden";
  return "allowed";
}

/** A refusal by the authority check names the operation; any other outcome means it let the call through. */
function outcomeOfError(error: unknown, operation: string): Outcome {
  const cause = error instanceof TRPCError ? error.cause : error;
  if (isAppError(cause) && cause.code === "unauthorized") return "unauthorized";
  if (
    isAppError(cause) &&
    cause.code === "forbidden" &&
    (cause.details as { operation?: string })?.operation === operation
  )
    return "forbidden";
  return "allowed";
}

let harness: Harness;
beforeAll(async () => {
  harness = await startHarness({ worker: false });
});
afterAll(async () => {
  await harness?.close();
});

describe("authority matrix", () => {
  it("pins who may call every operation of the registry", () => {
    const declared = Object.fromEntries(operations.map((operation) => [operation.name, [...operation.callers].sort()]));
    const pinned = Object.fromEntries(Object.entries(AUTHORITY).map(([name, callers]) => [name, [...callers].sort()]));
    expect(declared).toEqual(pinned);
  });

  it("pins the least role a person needs for every operation of the registry", () => {
    const declared = Object.fromEntries(operations.map((operation) => [operation.name, operation.role]));
    expect(declared).toEqual(ROLE);
  });

  it("refuses a person below the operation's role with forbidden naming the role needed", async () => {
    const decide = operations.find((operation) => operation.name === "run.decide")!;
    const reviewer: Identity = { kind: "person", name: "rita", role: "reviewer" };
    const refusal = await invokeOperation(decide, { app: harness.app, identity: reviewer }, {}).catch(
      (error: unknown) => error,
    );
    expect(isAppError(refusal) && refusal.code).toBe("forbidden");
    expect((refusal as Error).message).toBe("run.decide needs the role approver or above; rita is a reviewer.");
  });

  it.each(operations.map((operation) => [operation.name, operation] as const))(
    "%s: invokeOperation allows and refuses as declared",
    async (_name, operation) => {
      for (const [label, identity] of CALLERS) {
        const outcome = await invokeOperation(operation, { app: harness.app, identity: identity! }, {}).then(
          () => "allowed" as const,
          (error: unknown) => outcomeOfError(error, operation.name),
        );
        expect(outcome, `${operation.name} as ${label}`).toBe(expected(operation, identity));
      }
    },
  );

  it.each(operations.map((operation) => [operation.name, operation] as const))(
    "%s: POST /api/ops/<name> allows and refuses as declared",
    async (_name, operation) => {
      for (const [label, identity] of CALLERS) {
        const request = new Request(`http://127.0.0.1/api/ops/${operation.name}`, {
          method: "POST",
          headers: {
            "content-type": "application/json",
            ...(identity && { [IDENTITY_HEADER]: signIdentity(identity) }),
          },
          body: "{}",
        });
        const response = await handleOperation(request, harness.app, operation.name);
        const body = (await response.json()) as { code?: string; details?: { operation?: string } };
        const outcome: Outcome =
          response.status === 401
            ? "unauthorized"
            : response.status === 403 && body.details?.operation === operation.name
              ? "forbidden"
              : "allowed";
        expect(outcome, `${operation.name} as ${label}: ${response.status} ${JSON.stringify(body)}`).toBe(
          expected(operation, identity),
        );
      }
    },
  );

  it("tRPC: every procedure that adapts an operation allows and refuses as declared", async () => {
    const procedures = Object.entries(
      appRouter._def.procedures as unknown as Record<string, { _def: { meta?: { operation?: string } } }>,
    )
      .map(([path, procedure]) => [path, procedure._def.meta?.operation] as const)
      .filter((entry): entry is readonly [string, string] => entry[1] !== undefined);
    // Every person-only decision the browser makes goes through its operation.
    for (const name of [
      "plan.approve",
      "plan.review",
      "run.decide",
      "run.answer",
      "run.resume",
      "run.retry_step",
      "run.rerun_from",
      "run.apply_recovery",
      "planner.answer",
      "recovery.decide",
      "planning.command",
    ]) {
      expect(procedures.map(([, operation]) => operation)).toContain(name);
    }
    for (const [path, name] of procedures) {
      const operation = operations.find((candidate) => candidate.name === name)!;
      for (const [label, identity] of CALLERS) {
        // Without a credential the route handler has no identity to put in the context.
        const context = identity ? createTrpcContext(harness.app, identity) : { app: harness.app, actor: "" };
        const caller = createCaller(context as ReturnType<typeof createTrpcContext>) as unknown as Record<
          string,
          Record<string, (input: unknown) => Promise<unknown>>
        >;
        const [namespace, procedure] = path.split(".") as [string, string];
        const outcome = await caller[namespace]![procedure]!({}).then(
          () => "allowed" as const,
          (error: unknown) => outcomeOfError(error, name),
        );
        expect(outcome, `tRPC ${path} (${name}) as ${label}`).toBe(expected(operation, identity));
      }
    }
  });

  it("MCP offers an agent exactly the operations an agent may call, and nothing else of the registry", async () => {
    const server = createMcpServer({ app: harness.app, identity: AGENT, sessionId: () => "matrix" });
    const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
    await server.connect(serverSide);
    const client = new Client({ name: "authority-matrix", version: "1.0.0" });
    await client.connect(clientSide);
    try {
      const { tools } = await client.listTools();
      const offered = new Set(tools.map((tool) => tool.name));
      for (const operation of operations) {
        const mayCall = (operation.callers as readonly string[]).includes("agent");
        expect(offered.has(toolName(operation)), `MCP ${toolName(operation)}`).toBe(mayCall);
        if (!mayCall) {
          const result = await client.callTool({ name: toolName(operation), arguments: {} });
          expect(result.isError, `MCP call of ${toolName(operation)}`).toBe(true);
        }
      }
    } finally {
      await client.close();
      await server.close();
    }
  });
});
