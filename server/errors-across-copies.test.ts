import { describe, expect, it, vi } from "vitest";

/**
 * `stepwise serve` holds two copies of the server's modules in one process — the CLI's and the
 * web server bundle's — sharing one app context. Errors made by one copy's classes must still be
 * recognised by the other's: a gentle stop, a retryable tool error, an AppError's status.
 */
async function twoCopies() {
  const load = async () => ({
    errors: await import("./errors"),
    tools: await import("./tools/types"),
    git: await import("./tools/git"),
    engine: await import("./engine/step-runner"),
    links: await import("./decisions/decision-links"),
  });
  const first = await load();
  vi.resetModules();
  const second = await load();
  return { first, second };
}

describe("error classes across two copies of a module", () => {
  it("are different classes, and instanceof still holds from one copy to the other", async () => {
    const { first, second } = await twoCopies();
    expect(first.errors.AppError).not.toBe(second.errors.AppError);
    expect(new first.errors.AppError("not_found", "x")).toBeInstanceOf(second.errors.AppError);
    expect(second.errors.isAppError(new first.errors.AppError("forbidden", "x"))).toBe(true);
    expect(new first.tools.RetryableToolError("blip")).toBeInstanceOf(second.tools.RetryableToolError);
    expect(new first.engine.WorkerShutdownError()).toBeInstanceOf(second.engine.WorkerShutdownError);
    const gitError = new first.git.GitCommandError(["status"], {
      exitCode: 1,
      stdout: "",
      stderr: "no",
      truncated: false,
    });
    expect(gitError).toBeInstanceOf(second.git.GitCommandError);
    expect(new first.links.DecisionLinkRefused("expired")).toBeInstanceOf(second.links.DecisionLinkRefused);
  });

  it("tells kinds apart: a plain error or another kind is not taken for one", async () => {
    const { first, second } = await twoCopies();
    expect(new Error("x")).not.toBeInstanceOf(second.errors.AppError);
    expect(new first.tools.RetryableToolError("blip")).not.toBeInstanceOf(second.errors.AppError);
    // A subclass names itself: an AppError is not a DecisionLinkRefused, though the reverse holds.
    expect(new first.errors.AppError("forbidden", "x")).not.toBeInstanceOf(second.links.DecisionLinkRefused);
    expect(new first.links.DecisionLinkRefused("expired")).toBeInstanceOf(second.errors.AppError);
    expect(new first.errors.AppError("forbidden", "x")).toBeInstanceOf(Error);
  });

  it("knows a zod error by its name and issues, whichever copy of zod made it", async () => {
    const { z } = await import("zod");
    const parsed = z.object({ a: z.string() }).safeParse({ a: 1 });
    expect(parsed.success).toBe(false);
    const { second } = await twoCopies();
    expect(second.errors.isZodError(parsed.error)).toBe(true);
    // The same shape from another copy of the library: a plain Error named ZodError with issues.
    const foreign = Object.assign(new Error("bad"), { name: "ZodError", issues: [] });
    expect(second.errors.isZodError(foreign)).toBe(true);
    expect(second.errors.isZodError(new Error("bad"))).toBe(false);
  });
});
