import { describe, expect, it } from "vitest";
import { CappedText, LOG_LINE_CHARACTERS, LineSplitter } from "./output-capture";

const MB = 1 << 20;

function endlessLine(total: number, chunkSize: number): string[] {
  const chunk = "1234567890".repeat(Math.ceil(chunkSize / 10)).slice(0, chunkSize);
  return Array.from({ length: Math.ceil(total / chunkSize) }, () => chunk);
}

describe("a command's output is split and kept in linear work", () => {
  it("50 MB on one line in 64 kB chunks: each character copied at most once, one capped line streamed", () => {
    const lines: string[] = [];
    let limitNoted = 0;
    const splitter = new LineSplitter<"stdout">(
      2_000,
      (_stream, line) => lines.push(line),
      () => limitNoted++,
    );
    const chunks = endlessLine(50 * MB, 64 * 1024);
    const total = chunks.length * chunks[0]!.length;
    for (const chunk of chunks) splitter.append("stdout", chunk);
    // Re-joining the partial line with every chunk copied about chunks²/2 × 64 kB (20 GB here).
    expect(splitter.copied).toBeLessThanOrEqual(LOG_LINE_CHARACTERS);
    splitter.append("stdout", "\nnext\n");
    expect(lines).toHaveLength(2);
    expect(lines[0]!.length).toBeLessThan(LOG_LINE_CHARACTERS + 100);
    expect(lines[0]).toContain(`[${total - LOG_LINE_CHARACTERS} more characters on this line]`);
    expect(lines[1]).toBe("next");
    expect(limitNoted).toBe(0);
  });

  it("streams lines across chunk borders and stops at the line limit", () => {
    const lines: string[] = [];
    let limitNoted = 0;
    const splitter = new LineSplitter<"stdout" | "stderr">(
      3,
      (stream, line) => lines.push(`${stream}:${line}`),
      () => limitNoted++,
    );
    splitter.append("stdout", "a");
    splitter.append("stderr", "e\r\n");
    splitter.append("stdout", "b\nc\n");
    splitter.append("stdout", "d\ne\n");
    splitter.flush();
    expect(lines).toEqual(["stderr:e", "stdout:ab", "stdout:c"]);
    expect(limitNoted).toBe(1);
  });

  it.each([
    [64 * 1024, "64 kB"],
    [1, "1 character"],
    [1_000, "1 kB"],
  ])("CappedText keeps head and tail of 20 MB in chunks of %s, copying no more than it received", (size) => {
    const limit = 100_000;
    const text = new CappedText(limit);
    const chunks = endlessLine(size === 1 ? 2 * MB : 20 * MB, size as number);
    const total = chunks.length * chunks[0]!.length;
    for (const chunk of chunks) text.append(chunk);
    expect(text.copied).toBeLessThanOrEqual(total);
    expect(text.truncated).toBe(true);
    const kept = text.text();
    expect(kept.length).toBeLessThan(limit + 100);
    expect(kept).toContain(`[${total - limit} characters omitted]`);
  });

  it("CappedText keeps a short output whole", () => {
    const text = new CappedText(100);
    text.append("abc");
    text.append("def");
    expect(text.text()).toBe("abcdef");
    expect(text.truncated).toBe(false);
  });
});
