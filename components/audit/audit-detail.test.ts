import { describe, expect, it } from "vitest";
import { hasMoreThanSummary, shortHash, summarizeDetail } from "./audit-detail";

const DIGEST = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08";

describe("summarizeDetail", () => {
  it("shortens a 64-character hash to 12 characters and keeps the full value", () => {
    const [part] = summarizeDetail({ definitionHash: DIGEST });
    expect(part).toEqual({ key: "definition hash", kind: "hash", short: DIGEST.slice(0, 12), full: DIGEST });
  });

  it("reads keys as words, leaves out empty values and summarises nested ones", () => {
    const parts = summarizeDetail({
      note: "looks fine",
      via: null,
      approvals: ["ann", "bob"],
      tally: { a: 1, b: 2 },
      required: 2,
    });
    expect(parts.map((part) => `${part.key}: ${part.kind === "text" ? part.text : part.short}`)).toEqual([
      "note: looks fine",
      "approvals: ann, bob",
      "tally: 2 fields",
      "required: 2",
    ]);
  });

  it("cuts long text in the summary but keeps it whole for the title", () => {
    const long = "x".repeat(200);
    const parts = summarizeDetail({ note: long });
    expect(parts).toEqual([{ key: "note", kind: "text", text: `${"x".repeat(79)}…`, full: long }]);
    expect(hasMoreThanSummary(parts)).toBe(true);
  });

  it("shows times in the reader's own zone and yes/no for flags", () => {
    const at = "2026-11-29T00:09:37.179Z";
    const parts = summarizeDetail({ expiresAt: at, released: true, withdrawn: false });
    expect(parts).toEqual([
      { key: "expires at", kind: "text", text: new Date(at).toLocaleString() },
      { key: "released", kind: "text", text: "yes" },
      { key: "withdrawn", kind: "text", text: "no" },
    ]);
    expect(parts[0]!.kind === "text" && parts[0]!.text).not.toContain("T00:09");
  });

  it("says when the raw JSON adds nothing to the summary line", () => {
    expect(hasMoreThanSummary(summarizeDetail({ note: "ok", released: true }))).toBe(false);
  });

  it("strips an algorithm prefix before shortening", () => {
    expect(shortHash(`sha256:${DIGEST}`)).toBe(DIGEST.slice(0, 12));
  });
});
