import { describe, expect, it } from "vitest";
import { AppError } from "../errors";
import { createRegexMatcher } from "./regex-matcher";
import { rejectionOf } from "./tool-test-support";

const EVIL = "(a+)+$";
const EVIL_INPUT = `${"a".repeat(40)}!`;

describe("createRegexMatcher", () => {
  it("returns matching lines with the column of the first match, up to a limit", async () => {
    const matcher = createRegexMatcher("b+", "u", { budgetMs: 5_000, signal: new AbortController().signal });
    try {
      expect(await matcher.matchLines("abc\nxyz\r\nbbb\nab", 10)).toEqual([
        [0, 1],
        [2, 0],
        [3, 1],
      ]);
      expect(await matcher.matchLines("b\nb\nb", 2)).toEqual([
        [0, 0],
        [1, 0],
      ]);
    } finally {
      await matcher.close();
    }
  });

  it("stops a catastrophically backtracking pattern at its budget with a clear error", async () => {
    const matcher = createRegexMatcher(EVIL, "u", { budgetMs: 300, signal: new AbortController().signal });
    // The main thread stays free while the match runs: a timer of its own keeps firing (the match
    // alone would take hours, so a blocked thread would see no tick and the test would time out).
    let ticks = 0;
    const ticker = setInterval(() => ticks++, 10);
    try {
      const error = await rejectionOf(matcher.matchLines(EVIL_INPUT, 10));
      expect(error).toBeInstanceOf(AppError);
      expect(error.message).toContain("took over 300 ms");
      expect(ticks).toBeGreaterThan(0);
    } finally {
      clearInterval(ticker);
      await matcher.close();
    }
  });

  it("stops when the step is aborted", async () => {
    const controller = new AbortController();
    const matcher = createRegexMatcher(EVIL, "u", { budgetMs: 60_000, signal: controller.signal });
    const pending = matcher.matchLines(EVIL_INPUT, 10);
    setTimeout(() => controller.abort(new Error("cancelled")), 100);
    const error = await rejectionOf(pending);
    expect(error.message).toBe("cancelled");
    await matcher.close();
  });
});
