import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { AppError } from "../errors";
import { SEARCH_MAX_FILE_BYTES, searchTextTool } from "./search-text";
import { createTempWorkspace, createToolContext, rejectionOf, removeTempWorkspace, runTool } from "./tool-test-support";

let root: string;
let outside: string;

beforeAll(async () => {
  root = await createTempWorkspace({
    ".gitignore": "dist/\n",
    "src/a.ts": "const x = 1;\n// TODO: fix x\nexport { x };\n",
    "src/b.ts": "function todo() {}\r\nconst y = 'TODO later';\r\n",
    "src/nested/c.md": "Nothing here\nTODO in markdown\n",
    "dist/bundle.js": "// TODO generated\n",
    "image.png": Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x00, 0x01, 0x54, 0x4f, 0x44, 0x4f]),
    "big.txt": "TODO " + "x".repeat(SEARCH_MAX_FILE_BYTES),
    "long.txt": "TODO " + "y".repeat(2_000),
    "regex.txt": "a.b\naxb\n(paren)\n",
  });
  outside = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), "stepwise-outside-")));
  await fs.writeFile(path.join(outside, "secret.txt"), "TODO secret\n");
  await fs.symlink(path.join(outside, "secret.txt"), path.join(root, "secret-link.txt"));
  await fs.symlink(outside, path.join(root, "out-dir"));
});

afterAll(async () => {
  await removeTempWorkspace(root);
  await removeTempWorkspace(outside);
});

const search = (input: Record<string, unknown>) => runTool(searchTextTool, input, createToolContext(root));

describe("search_text", () => {
  it("finds a literal string with path, line and column, honouring .gitignore", async () => {
    const result = await search({ pattern: "TODO" });
    expect(result.matches.map((m) => `${m.path}:${m.line}:${m.column}`)).toEqual([
      "long.txt:1:1",
      "src/a.ts:2:4",
      "src/b.ts:2:12",
      "src/nested/c.md:2:1",
    ]);
    expect(result.matches[1]!.text).toBe("// TODO: fix x");
    expect(result.truncated).toBe(false);
  });

  it("skips binary and oversized files and reports how many", async () => {
    const result = await search({ pattern: "TODO" });
    expect(result.skipped).toEqual({ binary: 1, tooLarge: 1 });
    expect(result.matches.some((m) => m.path === "image.png" || m.path === "big.txt")).toBe(false);
  });

  it("never reads through symlinks that leave the workspace", async () => {
    const result = await search({ pattern: "secret" });
    expect(result.matches).toEqual([]);
  });

  it("searches ignored files on request", async () => {
    const result = await search({ pattern: "generated", includeIgnored: true });
    expect(result.matches.map((m) => m.path)).toEqual(["dist/bundle.js"]);
  });

  it("treats the pattern literally unless regex is set", async () => {
    expect((await search({ pattern: "a.b" })).matches.map((m) => m.line)).toEqual([1]);
    expect((await search({ pattern: "a.b", regex: true, path: "regex.txt" })).matches.map((m) => m.line)).toEqual([
      1, 2,
    ]);
    expect((await search({ pattern: "(paren)" })).matches.map((m) => m.path)).toEqual(["regex.txt"]);
  });

  it("matches case-insensitively on request", async () => {
    const result = await search({ pattern: "todo", caseSensitive: false, path: "src" });
    expect(result.matches.map((m) => `${m.path}:${m.line}`)).toEqual([
      "src/a.ts:2",
      "src/b.ts:1",
      "src/b.ts:2",
      "src/nested/c.md:2",
    ]);
  });

  it("limits the search to a directory, a file, or an include glob", async () => {
    expect((await search({ pattern: "TODO", path: "src/nested" })).matches.map((m) => m.path)).toEqual([
      "src/nested/c.md",
    ]);
    expect((await search({ pattern: "TODO", path: "src/a.ts" })).matches.map((m) => m.path)).toEqual(["src/a.ts"]);
    expect((await search({ pattern: "TODO", include: "**/*.ts" })).matches.map((m) => m.path)).toEqual([
      "src/a.ts",
      "src/b.ts",
    ]);
  });

  it("caps the number of matches and clips long lines", async () => {
    const result = await search({ pattern: "TODO", maxResults: 2 });
    expect(result.matches).toHaveLength(2);
    expect(result.truncated).toBe(true);
    expect(result.matches[0]!.text.length).toBeLessThanOrEqual(501);
  });

  it("refuses an invalid regular expression at validation time", async () => {
    const parsed = searchTextTool.inputSchema.safeParse({ pattern: "(unclosed", regex: true });
    expect(parsed.success).toBe(false);
    expect(parsed.error!.issues[0]!.path).toEqual(["pattern"]);
    expect(searchTextTool.inputSchema.safeParse({ pattern: "(unclosed" }).success).toBe(true);
  });

  it("refuses to search outside the workspace and reports a missing path", async () => {
    const forbidden = await rejectionOf(search({ pattern: "x", path: "../" }));
    expect((forbidden as AppError).code).toBe("forbidden");
    const missing = await rejectionOf(search({ pattern: "x", path: "nope" }));
    expect((missing as AppError).code).toBe("not_found");
  });

  it("stops when aborted", async () => {
    const controller = new AbortController();
    controller.abort(new Error("cancelled"));
    const error = await rejectionOf(
      runTool(searchTextTool, { pattern: "TODO" }, createToolContext(root, controller.signal)),
    );
    expect(error.message).toBe("cancelled");
  });
});

describe("search_text with a pathological regular expression", () => {
  it("keeps the thread responsive and fails the step instead of hanging", async () => {
    const workspace = await createTempWorkspace({ "evil.txt": `${"a".repeat(40)}!\n` });
    try {
      const controller = new AbortController();
      let ticks = 0;
      const ticker = setInterval(() => ticks++, 20);
      const pending = runTool(
        searchTextTool,
        { pattern: "(a+)+$", regex: true },
        createToolContext(workspace, controller.signal),
      );
      setTimeout(() => controller.abort(new Error("Timed out after 1s")), 500);
      const error = await rejectionOf(pending);
      clearInterval(ticker);
      expect(error.message).toBe("Timed out after 1s");
      // Timers kept firing while the regex ran: the event loop was never blocked.
      expect(ticks).toBeGreaterThan(10);
    } finally {
      await removeTempWorkspace(workspace);
    }
  });
});
