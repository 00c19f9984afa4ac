import { describe, expect, it } from "vitest";
import { AUTHORITY_RULES, createAuthority, type Action, type Principal, type Resource } from "./authority";

/**
 * Each rule of the authority policy protects (or permits) one case: built without that rule, the
 * policy answers that case the other way. A rule no case needs would be a rule nobody can test.
 */
const approver: Principal = { kind: "person", name: "ann", role: "approver" };
const reviewer: Principal = { kind: "person", name: "rita", role: "reviewer" };
const agent: Principal = { kind: "agent", name: "bot" };
const system: Principal = { kind: "system", name: "system" };
const strict = { approvals: { low: 1, medium: 1, high: 2 }, authorMayApprove: false };
const operation = { name: "run.decide", callers: ["person"] as const, role: "approver" as const };

const cases: Record<string, { principal: Principal; action: Action; resource: Resource; allowed: boolean }> = {
  "operation-names-its-callers": {
    principal: approver,
    action: "operation.call",
    resource: { operation },
    allowed: true,
  },
  "role-bounds-operations": { principal: reviewer, action: "operation.call", resource: { operation }, allowed: false },
  // An agent whose planning session holds it may not call what changes something (agent.start).
  "agents-in-plan-mode-read-only": {
    principal: { ...agent, planMode: true },
    action: "operation.call",
    resource: { operation: { name: "agent.start", callers: ["agent"], role: "viewer", readOnly: false } },
    allowed: false,
  },
  "approvers-decide": { principal: approver, action: "gate.lower", resource: {}, allowed: true },
  "link-acts-for-its-maker": {
    principal: { kind: "link", name: "ann", role: "approver" },
    action: "link.decide",
    resource: {},
    allowed: true,
  },
  "agent-starts-its-session": { principal: agent, action: "session.start", resource: {}, allowed: true },
  // A wrote v1, B wrote v2: A is still an author.
  "authors-may-not-approve": {
    principal: approver,
    action: "step.approve",
    resource: { policy: strict, authors: ["ann", "bob"] },
    allowed: false,
  },
  "revoked-principals-do-nothing": {
    principal: { ...approver, revoked: true },
    action: "step.approve",
    resource: {},
    allowed: false,
  },
  "enough-distinct-approvals": {
    principal: system,
    action: "step.run",
    resource: {
      policy: strict,
      risk: "high",
      authors: [],
      decisions: [
        { principal: approver, via: "waiver" },
        { principal: { kind: "person", name: "carl", role: "admin" }, via: "approval" },
      ],
    },
    allowed: true,
  },
  "editors-propose": { principal: reviewer, action: "plan.edit", resource: { underWay: true }, allowed: true },
  "drafts-run-nothing-yet": {
    principal: reviewer,
    action: "plan.write_ungated_effect",
    resource: { underWay: false },
    allowed: true,
  },
  "approvers-leave-effects-ungated": {
    principal: approver,
    action: "plan.write_ungated_effect",
    resource: { underWay: true },
    allowed: true,
  },
  "admins-and-scrapers-read-metrics": {
    principal: { kind: "person", name: "metrics", role: "viewer", metricsCredential: true },
    action: "metrics.read",
    resource: {},
    allowed: true,
  },
};

describe("the authority policy", () => {
  it("has a case for every rule, and answers each as the rule says", () => {
    expect(Object.keys(cases).sort()).toEqual(AUTHORITY_RULES.map((rule) => rule.id).sort());
    const full = createAuthority(AUTHORITY_RULES);
    for (const [id, { principal, action, resource, allowed }] of Object.entries(cases)) {
      const decision = full.authorize(principal, action, resource);
      expect({ id, allowed: decision.allowed, rule: decision.rule }).toEqual({ id, allowed, rule: id });
    }
  });

  it.each(AUTHORITY_RULES.map((rule) => rule.id))("without %s, its case is answered the other way", (id) => {
    const without = createAuthority(AUTHORITY_RULES.filter((rule) => rule.id !== id));
    const { principal, action, resource, allowed } = cases[id]!;
    expect(without.authorize(principal, action, resource).allowed).toBe(!allowed);
  });

  it("counts a waiver as one decision: a reviewer's waiver and one approval do not make two", () => {
    const authority = createAuthority(AUTHORITY_RULES);
    const resource: Resource = {
      policy: { ...strict, authorMayApprove: true },
      risk: "high",
      decisions: [
        { principal: reviewer, via: "waiver" },
        { principal: approver, via: "approval" },
        { principal: approver, via: "approval" },
      ],
    };
    expect(authority.countedApprovers(resource)).toEqual(["ann"]);
    expect(authority.authorize(system, "step.run", resource).allowed).toBe(false);
  });

  it("lets an admin and the metrics credential read metrics, and no one else", () => {
    const authority = createAuthority(AUTHORITY_RULES);
    const admin: Principal = { kind: "person", name: "ada", role: "admin" };
    expect(authority.authorize(admin, "metrics.read").allowed).toBe(true);
    for (const principal of [approver, agent, { ...admin, revoked: true }] as Principal[]) {
      expect(authority.authorize(principal, "metrics.read").allowed, JSON.stringify(principal)).toBe(false);
    }
    // A person named "metrics" holds no metrics credential by the name.
    const namesake: Principal = { kind: "person", name: "metrics", role: "viewer" };
    expect(authority.authorize(namesake, "metrics.read").allowed).toBe(false);
  });

  it("a session bound to its plan's author is worked by that agent under that credential only", () => {
    const authority = createAuthority(AUTHORITY_RULES);
    const bound: Resource = { boundTo: { name: "bot", credential: "cred-1" } };
    expect(authority.authorize({ ...agent, credential: "cred-1" }, "session.work", bound).allowed).toBe(true);
    for (const caller of [
      { ...agent, credential: "cred-2" },
      { ...agent, credential: null },
      { kind: "agent", name: "other", credential: "cred-1" },
      { ...agent, credential: "cred-1", revoked: true },
    ] as Principal[]) {
      expect(authority.authorize(caller, "session.work", bound).allowed, JSON.stringify(caller)).toBe(false);
    }
    // A session no plan author holds is any agent's to join (several agents, one plan).
    expect(authority.authorize({ kind: "agent", name: "other" }, "session.work", {}).allowed).toBe(true);
    expect(authority.authorize(system, "session.work", {}).allowed).toBe(false);
  });

  it("an approval counts with the role its approver holds now", () => {
    const authority = createAuthority(AUTHORITY_RULES);
    const demoted: Resource = { decisions: [{ principal: { ...approver, role: "reviewer" }, via: "approval" }] };
    expect(authority.authorize(system, "step.run", demoted)).toMatchObject({ allowed: false, rule: undefined });
  });
});
