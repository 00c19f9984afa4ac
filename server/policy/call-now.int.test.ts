import { afterEach, describe, expect, it } from "vitest";
import { startHarness, type Harness } from "../../tests/app-harness";
import { withCaller } from "../caller-context";
import { addPrincipal, revokeCredential, setRole } from "../people/principals";
import { enterPlanMode } from "../planner/plan-mode";
import { decideCallNow, type CallAbout } from "./call-now";

/**
 * `decideCallNow`: the one question every door's call, every live stream's delivery and every
 * report merged after its call asks of the policy, with the caller as they stand at that moment.
 */

let harness: Harness | undefined;
afterEach(async () => {
  await harness?.close();
  harness = undefined;
});

const edit: CallAbout = {
  name: "plan.edit",
  callers: ["person", "agent"],
  role: "reviewer",
  readOnly: false,
  planModeConversation: false,
};
const read: CallAbout = { ...edit, name: "plan.get", role: "viewer", readOnly: true };
const asAdmin = <T>(work: () => Promise<T>) => withCaller({ kind: "person", name: "user" }, work);

describe("decideCallNow", () => {
  it("reads the caller as they stand now: a revoked credential, a lowered role, plan mode, a revoked principal", async () => {
    harness = await startHarness({ worker: false });
    const { pool } = harness.app.db;
    const authority = harness.app.engine.authority;
    const rita = await asAdmin(() =>
      addPrincipal(pool, { kind: "person", name: "rita", role: "reviewer", createdBy: "user" }),
    );
    const ritaNow = { kind: "person", name: "rita", role: "reviewer", tokenId: rita.credentialId } as const;

    expect(await decideCallNow(pool, authority, edit, ritaNow, { recheck: true })).toMatchObject({ allowed: true });
    await asAdmin(() => setRole(pool, rita.principalId, "viewer", "user"));
    // The door's own identity (just proven) still says reviewer; asked again, the role is viewer now.
    expect(await decideCallNow(pool, authority, edit, ritaNow, { recheck: false })).toMatchObject({ allowed: true });
    expect(await decideCallNow(pool, authority, edit, ritaNow, { recheck: true })).toMatchObject({
      allowed: false,
      identity: { role: "viewer" },
      decision: { rule: "role-bounds-operations" },
    });
    expect(await decideCallNow(pool, authority, read, ritaNow, { recheck: true })).toMatchObject({ allowed: true });
    await asAdmin(() => revokeCredential(pool, rita.credentialId, "user"));
    expect(await decideCallNow(pool, authority, read, ritaNow, { recheck: true })).toEqual({
      allowed: false,
      identity: undefined,
    });

    // An agent held by plan mode may read, not change; a caller refused by name is refused by the rule.
    const agent = { kind: "agent", name: "planner-bot" } as const;
    await enterPlanMode(harness.app, { reason: "plan first", actor: agent.name, credential: null });
    expect(await decideCallNow(pool, authority, read, agent, { recheck: true })).toMatchObject({ allowed: true });
    expect(await decideCallNow(pool, authority, edit, agent, { recheck: false })).toMatchObject({
      allowed: false,
      decision: { rule: "agents-in-plan-mode-read-only" },
    });
    expect(await decideCallNow(pool, authority, read, agent, { recheck: false, revoked: true })).toMatchObject({
      allowed: false,
      decision: { rule: "revoked-principals-do-nothing" },
    });
  });
});
