import { describe, expect, it } from "vitest";
import { describeValue, formatDuration, formatTimeLeft } from "./format";

describe("formatDuration", () => {
  it.each([
    [850, "850 ms"],
    [12_400, "12.4 s"],
    [185_000, "3 min 05 s"],
    [7_440_000, "2 h 04 min"],
    [-1, "–"],
  ])("%d ms reads %s", (ms, text) => expect(formatDuration(ms)).toBe(text));
});

describe("formatTimeLeft", () => {
  it("counts down to the deadline and then says expired", () => {
    const deadline = "2024-01-01T00:10:00.000Z";
    expect(formatTimeLeft(deadline, Date.parse("2024-01-01T00:05:00.000Z"))).toBe("5 min 00 s left");
    expect(formatTimeLeft(deadline, Date.parse("2024-01-01T00:09:59.500Z"))).toBe("1.0 s left");
    expect(formatTimeLeft(deadline, Date.parse("2024-01-01T00:10:00.000Z"))).toBe("expired");
  });
});

describe("describeValue", () => {
  it("keeps small values inline and marks large ones", () => {
    expect(describeValue({ a: 1 })).toEqual({ text: '{\n  "a": 1\n}', large: false });
    expect(describeValue("x".repeat(500)).large).toBe(true);
    expect(describeValue(Array.from({ length: 20 }, (_, i) => i)).large).toBe(true);
  });
});
