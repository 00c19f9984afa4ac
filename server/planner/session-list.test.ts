import { describe, expect, it } from "vitest";
import type { PlanReviewFacts } from "./review-state";
import { derivePlanningState, type SessionFacts } from "./session-list";

const review = (overrides: Partial<PlanReviewFacts> = {}): PlanReviewFacts => ({
  planId: "plan-1",
  version: 1,
  currentVersion: 1,
  rejected: false,
  archived: false,
  run: null,
  lastReview: null,
  revising: false,
  reviewSessionId: "session-1",
  ...overrides,
});

const facts = (overrides: Partial<SessionFacts>, reviewOverrides: Partial<PlanReviewFacts> = {}): SessionFacts => ({
  id: "session-1",
  status: "completed",
  kind: "create",
  planId: "plan-1",
  openQuestion: null,
  review: review(reviewOverrides),
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

  it("an agent's plan sent back for changes waits for the agent's revision; a planner's waits for nobody", () => {
    const sentBack = { lastReview: { action: "plan.changes_requested" as const, actor: "ann", comment: "more" } };
    expect(derivePlanningState(facts({ kind: "external" }, sentBack))).toEqual({
      state: "gathering",
      waitsFor: "the agent's revision of the plan",
      waitsOn: "agent",
    });
    expect(derivePlanningState(facts({}, sentBack)).waitsOn).toBeNull();
  });

  it("names the current version to review after a later edit, and a run wins over everything else", () => {
    expect(derivePlanningState(facts({}, { version: 3, currentVersion: 3 })).waitsFor).toBe(
      "your review of plan plan-1 v3",
    );
    expect(derivePlanningState(facts({}, { run: { id: "r", approvedBy: "ann" }, archived: true })).state).toBe(
      "approved",
    );
  });

  it("an archived plan's session is cancelled; a rejected one's rejected, whatever the session's status", () => {
    expect(derivePlanningState(facts({}, { archived: true })).state).toBe("cancelled");
    expect(derivePlanningState(facts({}, { rejected: true })).state).toBe("rejected");
    expect(derivePlanningState(facts({ status: "cancelled", kind: "external" }, { rejected: true })).state).toBe(
      "rejected",
    );
    expect(derivePlanningState(facts({ status: "invalid" })).state).toBe("failed");
  });

  it("a plan is yours to review under its newest completed session only, and not while it is being revised", () => {
    expect(derivePlanningState(facts({}, { reviewSessionId: "session-2" }))).toMatchObject({
      state: "submitted",
      waitsOn: null,
    });
    expect(derivePlanningState(facts({}, { revising: true }))).toMatchObject({
      state: "submitted",
      waitsOn: "planner",
    });
    expect(derivePlanningState(facts({ planId: null, review: null })).state).toBe("cancelled");
  });
});
