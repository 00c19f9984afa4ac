import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { AppError } from "../errors";
import { globTool } from "./glob";
import { createTempWorkspace, createToolContext, rejectionOf, removeTempWorkspace, runTool } from "./tool-test-support";

let root: string;
let outside: string;

beforeAll(async () => {
  root = await createTempWorkspace({
    "README.md": "# r",
    "notes.txt": "n",
    ".gitignore": "build/\n*.log\n!keep.log\n",
    ".env": "SECRET=1",
    "src/index.ts": "",
    "src/util.ts": "",
    "src/app/page.tsx": "",
    "src/app/deep/er/x.ts": "",
    "src/.hidden/h.ts": "",
    "src/generated/.gitignore": "*.gen.ts\n",
    "src/generated/a.gen.ts": "",
    "src/generated/b.ts": "",
    "build/out.ts": "",
    "debug.log": "",
    "keep.log": "",
    "docs/guide.md": "",
  });
  await fs.mkdir(path.join(root, ".git"));
  await fs.writeFile(path.join(root, ".git", "config.ts"), "");
  outside = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), "stepwise-outside-")));
  await fs.writeFile(path.join(outside, "secret.ts"), "");
  await fs.symlink(outside, path.join(root, "src", "out-link"));
  await fs.symlink(path.join(root, "src", "app"), path.join(root, "app-link"));
});

afterAll(async () => {
  await removeTempWorkspace(root);
  await removeTempWorkspace(outside);
});

const glob = (input: Record<string, unknown>) => runTool(globTool, input, createToolContext(root));

describe("glob", () => {
  it("matches a recursive pattern under its literal base, sorted, relative to the workspace root", async () => {
    const result = await glob({ pattern: "src/**/*.ts" });
    expect(result).toEqual({
      paths: ["src/app/deep/er/x.ts", "src/generated/b.ts", "src/index.ts", "src/util.ts"],
      truncated: false,
    });
  });

  it("matches one directory level only without a globstar", async () => {
    expect((await glob({ pattern: "src/*.ts" })).paths).toEqual(["src/index.ts", "src/util.ts"]);
    expect((await glob({ pattern: "*.md" })).paths).toEqual(["README.md"]);
  });

  it("supports braces and a base directory", async () => {
    expect((await glob({ pattern: "*.{md,txt}" })).paths).toEqual(["README.md", "notes.txt"]);
    expect((await glob({ pattern: "**/*.tsx", path: "src" })).paths).toEqual(["src/app/page.tsx"]);
  });

  it("honours the root .gitignore, negations and nested .gitignore files", async () => {
    const all = (await glob({ pattern: "**/*" })).paths;
    expect(all).not.toContain("build/out.ts");
    expect(all).not.toContain("debug.log");
    expect(all).toContain("keep.log");
    expect(all).not.toContain("src/generated/a.gen.ts");
    expect(all).toContain("src/generated/b.ts");
  });

  it("includes ignored files on request, but never .git", async () => {
    const all = (await glob({ pattern: "**/*.ts", includeIgnored: true })).paths;
    expect(all).toContain("build/out.ts");
    expect(all).toContain("src/generated/a.gen.ts");
    expect(all.some((p) => p.startsWith(".git/"))).toBe(false);
  });

  it("leaves hidden files out unless the pattern names them", async () => {
    expect((await glob({ pattern: "**/*" })).paths).not.toContain(".env");
    expect((await glob({ pattern: "**/*.ts" })).paths).not.toContain("src/.hidden/h.ts");
    expect((await glob({ pattern: ".env" })).paths).toEqual([".env"]);
    expect((await glob({ pattern: "src/.hidden/*.ts" })).paths).toEqual(["src/.hidden/h.ts"]);
  });

  it("does not follow symlinks out of the workspace nor into linked directories", async () => {
    const all = (await glob({ pattern: "**/*.ts", includeIgnored: true })).paths;
    expect(all.some((p) => p.includes("out-link"))).toBe(false);
    expect(all.some((p) => p.startsWith("app-link/"))).toBe(false);
    expect((await glob({ pattern: "app-link", includeDirs: true })).paths).toEqual(["app-link"]);
  });

  it("returns directories only when asked", async () => {
    expect((await glob({ pattern: "src/*" })).paths).toEqual(["src/index.ts", "src/util.ts"]);
    expect((await glob({ pattern: "src/*", includeDirs: true })).paths).toEqual([
      "src/app",
      "src/generated",
      "src/index.ts",
      "src/util.ts",
    ]);
  });

  it("excludes paths matching exclude globs", async () => {
    expect((await glob({ pattern: "src/**/*.ts", exclude: ["src/app/**"] })).paths).toEqual([
      "src/generated/b.ts",
      "src/index.ts",
      "src/util.ts",
    ]);
  });

  it("caps the result and says so", async () => {
    const result = await glob({ pattern: "**/*", maxResults: 2 });
    expect(result.paths).toHaveLength(2);
    expect(result.truncated).toBe(true);
  });

  it("returns nothing for a literal base that does not exist", async () => {
    expect(await glob({ pattern: "nope/**/*.ts" })).toEqual({ paths: [], truncated: false });
  });

  it("refuses patterns and bases that leave the workspace", async () => {
    expect(globTool.inputSchema.safeParse({ pattern: "../**/*.ts" }).success).toBe(false);
    expect(globTool.inputSchema.safeParse({ pattern: "/etc/*" }).success).toBe(false);
    const error = await rejectionOf(glob({ pattern: "*", path: ".." }));
    expect(error).toBeInstanceOf(AppError);
    expect((error as AppError).code).toBe("forbidden");
  });
});
