import { describe, expect, it } from "vitest";
import { findUnsafeInput, jsonDepthExceeds } from "./safe-input";

describe("unsafe input", () => {
  it("finds nesting beyond the limit without overflowing, however deep", () => {
    const deep = JSON.parse("[".repeat(10_000) + "]".repeat(10_000));
    expect(findUnsafeInput({ args: deep })).toMatchObject({ message: expect.stringContaining("nested more than 64") });
    expect(jsonDepthExceeds("[".repeat(10_000) + "]".repeat(10_000))).toBe(true);
    expect(findUnsafeInput({ a: { b: { c: [1, 2, { d: "fine" }] } } })).toBeUndefined();
  });

  it("counts only brackets outside strings", () => {
    expect(jsonDepthExceeds(JSON.stringify({ text: "[".repeat(500) }))).toBe(false);
    expect(jsonDepthExceeds(JSON.stringify({ text: '\\"[[[' + "[".repeat(500) }))).toBe(false);
  });

  it("names the field holding a NUL or a lone surrogate, in values and in keys", () => {
    expect(findUnsafeInput({ goal: "ok", steps: [{ id: "a\u0000b" }] })).toEqual({
      path: "steps.0.id",
      message: "steps.0.id contains a NUL character",
    });
    expect(findUnsafeInput({ goal: "bad \ud800 half" })?.path).toBe("goal");
    expect(findUnsafeInput({ goal: "trailing \udc00" })?.path).toBe("goal");
    expect(findUnsafeInput({ args: { ["k\u0000"]: 1 } })?.message).toContain("A key in args contains a NUL");
    expect(findUnsafeInput({ steps: [{ args: { list: ["ok", { deep: ["x", "\u0000"] }] } }] })?.path).toBe(
      "steps.0.args.list.1.deep.1",
    );
    expect(findUnsafeInput({ goal: "an emoji 😀 is a proper pair" })).toBeUndefined();
  });

  it("refuses keys that name prototype machinery, as JSON.parse would create them", () => {
    const parsed = JSON.parse('{"steps":[{"args":{"__proto__":{"polluted":true}}}]}');
    expect(findUnsafeInput(parsed)?.path).toBe("steps.0.args.__proto__");
    expect(findUnsafeInput({ args: { constructor: "x" } })?.path).toBe("args.constructor");
    expect(findUnsafeInput({ args: { prototype: 1 } })?.path).toBe("args.prototype");
    expect(findUnsafeInput({ args: { constructorName: 1 } })).toBeUndefined();
  });
});
