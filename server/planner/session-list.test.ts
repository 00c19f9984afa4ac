import { describe, expect, it } from "vitest";
import { derivePlanningState, type SessionFacts } from "./session-list";

const facts = (overrides: Partial<SessionFacts>): SessionFacts => ({
  status: "completed",
  kind: "create",
  planId: "plan-1",
  resultVersion: 1,
  planCurrentVersion: 1,
  planRejected: false,
  planArchived: false,
  runId: null,
  openQuestion: null,
  lastReview: null,
  ...overrides,
});

describe("derivePlanningState", () => {
  it("an answered question the planner has not picked up yet is the planner's turn, not yours", () => {
    expect(derivePlanningState(facts({ status: "awaiting_answer", openQuestion: null }))).toMatchObject({
      state: "gathering",
      waitsOn: "planner",
    });
    expect(derivePlanningState(facts({ status: "awaiting_answer", openQuestion: "Which?" }))).toMatchObject({
      state: "waiting",
      waitsOn: "you",
    });
  });

  it("an agent's plan sent back for changes waits for the agent's revision", () => {
    expect(derivePlanningState(facts({ kind: "external", lastReview: "plan.changes_requested" }))).toEqual({
      state: "gathering",
      waitsFor: "the agent's revision of the plan",
      waitsOn: "agent",
    });
  });

  it("names the current version to review after a later edit, and a run wins over everything else", () => {
    expect(derivePlanningState(facts({ planCurrentVersion: 3 })).waitsFor).toBe("your review of plan plan-1 v3");
    expect(derivePlanningState(facts({ runId: "r", planArchived: true })).state).toBe("approved");
  });

  it("an archived plan's session is cancelled; a rejected one's rejected, whatever the session's status", () => {
    expect(derivePlanningState(facts({ planArchived: true })).state).toBe("cancelled");
    expect(derivePlanningState(facts({ planRejected: true })).state).toBe("rejected");
    expect(derivePlanningState(facts({ status: "cancelled", kind: "external", planRejected: true })).state).toBe(
      "rejected",
    );
    expect(derivePlanningState(facts({ status: "invalid" })).state).toBe("failed");
  });
});
