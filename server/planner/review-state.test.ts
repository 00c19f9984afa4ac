import { describe, expect, it } from "vitest";
import { awaitsPersonReview, reviewStateOf, type PlanReviewFacts } from "./review-state";

const facts = (overrides: Partial<PlanReviewFacts> = {}): PlanReviewFacts => ({
  planId: "plan-1",
  version: 2,
  currentVersion: 2,
  rejected: false,
  archived: false,
  run: null,
  lastReview: null,
  revising: false,
  reviewSessionId: "session-1",
  ...overrides,
});

describe("reviewStateOf", () => {
  it("a version nobody decided on waits for review", () => {
    expect(reviewStateOf(facts())).toEqual({ state: "awaiting_review" });
    expect(awaitsPersonReview(facts())).toBe(true);
  });

  it("a run of the version is its approval, whatever else happened", () => {
    const approved = facts({ run: { id: "run-1", approvedBy: "ann" }, archived: true, rejected: true });
    expect(reviewStateOf(approved)).toEqual({ state: "approved", runId: "run-1", approvedBy: "ann" });
    expect(awaitsPersonReview(approved)).toBe(false);
  });

  it("a rejection (audited or on the plan) and a request for changes carry who decided and why", () => {
    expect(reviewStateOf(facts({ lastReview: { action: "plan.rejected", actor: "ann", comment: "no" } }))).toEqual({
      state: "rejected",
      reviewedBy: "ann",
      comment: "no",
    });
    expect(reviewStateOf(facts({ rejected: true })).state).toBe("rejected");
    expect(
      reviewStateOf(facts({ lastReview: { action: "plan.changes_requested", actor: "bob", comment: "split it" } })),
    ).toEqual({ state: "changes_requested", reviewedBy: "bob", comment: "split it" });
  });

  it("an older version is superseded; an archived or still revised plan waits for nobody", () => {
    expect(reviewStateOf(facts({ version: 1 })).state).toBe("superseded");
    expect(reviewStateOf(facts({ archived: true })).state).toBe("archived");
    expect(reviewStateOf(facts({ revising: true })).state).toBe("revising");
    expect(awaitsPersonReview(facts({ revising: true }))).toBe(false);
  });

  it("a plan no planning session completed is not a planned plan to review", () => {
    expect(awaitsPersonReview(facts({ reviewSessionId: null }))).toBe(false);
  });
});
