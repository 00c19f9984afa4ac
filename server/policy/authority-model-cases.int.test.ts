import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  ApprovePlan,
  Claim,
  CreatePlan,
  Decide,
  MakeLink,
  Revoke,
  SetRole,
  UseLink,
  type Command,
} from "../../tests/authority-model/commands";
import { coverage } from "../../tests/authority-model/coverage";
import { CreateFanOutPlan, DecideGroup } from "../../tests/authority-model/fan-out-commands";
import { CreateSubPlanPlan, StartChild } from "../../tests/authority-model/sub-plan-commands";
import type { Model } from "../../tests/authority-model/model";
import { checkAuthorityModel } from "../../tests/authority-model/run";

/**
 * Given sequences of the model-based authority test (authority-model.int.test.ts) for the paths
 * issue 40 added — a fan-out group's decision, a sub-plan's child started by a job after its
 * step's claim, an MCP server's gated tool — which random sequences
 * reach only now and then. Each is checked against the model command by command, as a random one
 * is, and must also reach the path it is about (the coverage figures), so that it cannot pass by
 * stopping short of it.
 */
async function check(policy: Model["policy"], commands: Command[], reaches: Record<string, number>) {
  const before = new Map(coverage);
  const { details } = await checkAuthorityModel({ numRuns: 1, sequence: { policy, commands } });
  if (details.failed)
    throw new Error(`${fc.defaultReportMessage(details) ?? "failed"}\n${String(details.errorInstance)}`);
  for (const [what, times] of Object.entries(reaches)) {
    expect({ what, times: (coverage.get(what) ?? 0) - (before.get(what) ?? 0) }).toEqual({ what, times });
  }
}

const ONE = { authorMayApprove: true, approvals: 1 };
/** A fan-out plan of two elements by the reviewer, approved by bea, its list step claimed. */
const fannedOut = (approver: "ann" | "bea" = "bea") => [
  new CreateFanOutPlan("rev", 1),
  new ApprovePlan(approver, 0, true),
  new Claim(-1, "fan-out"),
];

describe("authority model: fan-out groups, sub-plans and MCP tools", () => {
  it("an approval of the group whose maker is demoted, or revoked, before the claim runs no instance", async () => {
    for (const undo of [new SetRole("ann", "reviewer"), new Revoke("ann")]) {
      await check(ONE, [...fannedOut(), new DecideGroup("ann", 0, true, undefined), undo, new Claim(-1, "fan-out")], {
        "group approval by a person allowed": 1,
        "fan-out instance held at its claim": 2,
      });
    }
  }, 120_000);

  it("a group decided on a list that changed since it was shown is refused; on the list as it is now, it runs", async () => {
    await check(
      { authorMayApprove: true, approvals: 2 },
      [
        ...fannedOut("ann"),
        // Shown with both instances waiting: ann's approval is one of two on each.
        new DecideGroup("ann", 0, true, undefined),
        // bea's second approval of t[0] lets it run: the waiting list is t[1] alone now.
        new Decide("bea", 0, 0, true),
        new DecideGroup("bea", 0, true, 0),
        new DecideGroup("bea", 0, true, undefined),
        new Claim(-1, "fan-out"),
      ],
      {
        "group approval by a person on a changed list refused": 1,
        "group approval by a person allowed": 2,
        "fan-out instance ran at its claim": 2,
      },
    );
  }, 120_000);

  it("a group decision refused for one instance is refused whole: no other instance keeps the approval", async () => {
    await check(
      { authorMayApprove: true, approvals: 2 },
      [
        ...fannedOut(),
        // ann's approval of t[1] alone; her group approval then asks a second one of t[1].
        new Decide("ann", 0, 1, true),
        new DecideGroup("ann", 0, true, undefined),
        new DecideGroup("bea", 0, true, undefined),
        new Claim(-1, "fan-out"),
      ],
      {
        "group approval by a person refused": 1,
        "group approval by a person allowed": 1,
        "fan-out instance ran at its claim": 1,
      },
    );
  }, 120_000);

  it("the agent, a reviewer and a revoked approver may not decide a group; a link's holder decides an instance as its maker now", async () => {
    await check(
      ONE,
      [
        ...fannedOut(),
        new DecideGroup("agent", 0, true, undefined),
        new DecideGroup("rev", 0, true, undefined),
        new Revoke("bea"),
        new DecideGroup("bea", 0, true, undefined),
        new DecideGroup("ann", 0, false, undefined),
      ],
      {
        "group approval by the agent refused": 1,
        "group approval by a person refused": 2,
        "group denial by a person allowed": 1,
      },
    );
    await check(
      ONE,
      [
        ...fannedOut(),
        new MakeLink("ann", 0, 0),
        new SetRole("ann", "reviewer"),
        new UseLink(0, true),
        new SetRole("ann", "approver"),
        new UseLink(0, true),
        new Claim(-1, "fan-out"),
      ],
      { "fan-out instance ran at its claim": 1 },
    );
  }, 120_000);

  it("a sub-plan whose approver is demoted, or revoked, between its claim and its job starts no child", async () => {
    for (const undo of [new SetRole("ann", "reviewer"), new Revoke("ann")]) {
      await check(
        ONE,
        [
          new CreateSubPlanPlan("rev"),
          new ApprovePlan("bea", 0, true),
          new Decide("ann", 0, 0, true),
          new Claim(0),
          undo,
          new StartChild(0),
          // bea decides again: the step is claimed and its child starts, approved by her.
          new Decide("bea", 0, 0, true),
          new Claim(0),
          new StartChild(0),
        ],
        {
          "sub-plan step ran at its claim": 2,
          "sub-plan child held by its job": 1,
          "sub-plan child started by its job": 1,
        },
      );
    }
  }, 120_000);

  it("an MCP server's gated tool: a demoted approver's approval does not run it, a current approver's does", async () => {
    await check(
      ONE,
      [
        new CreatePlan("rev", true),
        new ApprovePlan("ann", 0, true),
        // Waiting: g and m; the pick 1 is m, the MCP tool's step.
        new Decide("bea", 0, 1, true),
        new SetRole("bea", "reviewer"),
        new Claim(0),
        new Decide("ann", 0, 1, true),
        new Claim(0),
      ],
      { "MCP tool step held at its claim": 1, "MCP tool step ran at its claim": 1 },
    );
  }, 120_000);
});
