import { describe, expect, it } from "vitest";
import {
  STEP_LOG_CHARACTERS,
  STEP_LOG_LINE_CHARACTERS,
  STEP_LOG_LINE_OVERHEAD,
  StepLogBuffer,
  type StepLogLine,
} from "./progress";

const stored = (lines: StepLogLine[]) =>
  lines.reduce((sum, line) => sum + line.message.length + STEP_LOG_LINE_OVERHEAD, 0);
const at = "2026-01-01T00:00:00.000Z";

describe("a step's log is bounded, keeping head and tail", () => {
  it("stores about STEP_LOG_CHARACTERS of 50 MB of lines, the first and the last with a note between", () => {
    const buffer = new StepLogBuffer();
    const written: StepLogLine[] = [];
    const line = (index: number) => `${index}:`.padEnd(1_000, "x");
    const count = 50_000; // 50 MB
    for (let index = 0; index < count; index++) {
      buffer.add(line(index), "info", at);
      if (index % 1_000 === 0) written.push(...buffer.take());
    }
    written.push(...buffer.finish());
    expect(stored(written)).toBeLessThanOrEqual(STEP_LOG_CHARACTERS + 2 * (STEP_LOG_LINE_OVERHEAD + 200));
    expect(written[0]!.message).toBe(line(0));
    expect(written.at(-1)!.message).toBe(line(count - 1));
    expect(written.some((entry) => entry.message.includes("its last part is written when the step ends"))).toBe(true);
    const note = written.find((entry) => /lines \(\d+ characters\) of log left out/.test(entry.message));
    const kept = written.filter((entry) => /^\d+:x/.test(entry.message)).length;
    expect(note?.message).toContain(`… ${count - kept} lines`);
    // Nothing but the note lies between the head and the tail: the kept lines are two runs.
    const numbers = written
      .filter((entry) => /^\d+:x/.test(entry.message))
      .map((entry) => Number.parseInt(entry.message));
    const gaps = numbers.slice(1).filter((value, index) => value !== numbers[index]! + 1);
    expect(gaps).toHaveLength(1);
  });

  it("counts empty lines, so endless blank output is bounded too", () => {
    const buffer = new StepLogBuffer();
    for (let index = 0; index < 200_000; index++) buffer.add("", "info", at);
    const lines = buffer.take().concat(buffer.finish());
    expect(lines.length).toBeLessThanOrEqual(STEP_LOG_CHARACTERS / STEP_LOG_LINE_OVERHEAD + 3);
    expect(lines.some((entry) => entry.message.includes("lines (0 characters) of log left out"))).toBe(true);
  });

  it("caps one line and says how much of it was left out", () => {
    const buffer = new StepLogBuffer();
    buffer.add("y".repeat(50_000), "info");
    const [line] = buffer.finish();
    expect(line!.message.startsWith("y".repeat(STEP_LOG_LINE_CHARACTERS))).toBe(true);
    expect(line!.message).toContain(`[${50_000 - STEP_LOG_LINE_CHARACTERS} more characters on this line]`);
  });

  it("writes a short log as it came", () => {
    const buffer = new StepLogBuffer();
    buffer.add("one", "info");
    buffer.add("two", "warn");
    expect(buffer.take().map((line) => [line.message, line.level])).toEqual([
      ["one", "info"],
      ["two", "warn"],
    ]);
    expect(buffer.finish()).toEqual([]);
  });
});
