import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { AppError } from "../errors";
import { editFileTool } from "./edit-file";
import { createTempWorkspace, createToolContext, rejectionOf, removeTempWorkspace, runTool } from "./tool-test-support";

let root: string;

beforeEach(async () => {
  root = await createTempWorkspace({
    "src/a.ts": "const a = 1;\nconst b = 2;\nconst a2 = 1;\n",
    "crlf.txt": "one\r\ntwo\r\n",
    "script.sh": "#!/bin/sh\necho old\n",
  });
});

afterEach(async () => {
  await removeTempWorkspace(root);
});

const edit = (input: Record<string, unknown>) => runTool(editFileTool, input, createToolContext(root));
const read = (relative: string) => fs.readFile(path.join(root, relative), "utf8");

async function expectAppError(promise: Promise<unknown>, code: AppError["code"]): Promise<AppError> {
  const error = await rejectionOf(promise);
  expect(error).toBeInstanceOf(AppError);
  expect((error as AppError).code).toBe(code);
  return error as AppError;
}

describe("edit_file", () => {
  it("replaces a unique exact string and reports one replacement", async () => {
    const result = await edit({ path: "src/a.ts", oldString: "const b = 2;", newString: "const b = 3;" });
    expect(result).toEqual({ path: "src/a.ts", replacements: 1 });
    expect(await read("src/a.ts")).toBe("const a = 1;\nconst b = 3;\nconst a2 = 1;\n");
  });

  it("refuses an ambiguous string, naming the lines, and leaves the file unchanged", async () => {
    const error = await expectAppError(
      edit({ path: "src/a.ts", oldString: "= 1;", newString: "= 9;" }),
      "invalid_input",
    );
    expect(error.message).toContain("occurs 2 times");
    expect(error.details).toEqual({ occurrences: 2, lines: [1, 3] });
    expect(await read("src/a.ts")).toBe("const a = 1;\nconst b = 2;\nconst a2 = 1;\n");
  });

  it("replaces every occurrence with replaceAll and counts them", async () => {
    const result = await edit({ path: "src/a.ts", oldString: "= 1;", newString: "= 9;", replaceAll: true });
    expect(result.replacements).toBe(2);
    expect(await read("src/a.ts")).toBe("const a = 9;\nconst b = 2;\nconst a2 = 9;\n");
  });

  it("refuses when the string is absent and changes nothing", async () => {
    const error = await expectAppError(edit({ path: "src/a.ts", oldString: "nope", newString: "x" }), "invalid_input");
    expect(error.details).toEqual({ occurrences: 0 });
    expect(await read("src/a.ts")).toBe("const a = 1;\nconst b = 2;\nconst a2 = 1;\n");
  });

  it("matches exactly: no line-ending normalisation", async () => {
    await expectAppError(edit({ path: "crlf.txt", oldString: "one\ntwo", newString: "x" }), "invalid_input");
    await edit({ path: "crlf.txt", oldString: "one\r\ntwo", newString: "x" });
    expect(await read("crlf.txt")).toBe("x\r\n");
  });

  it("keeps replacement patterns like $& literal", async () => {
    await edit({ path: "src/a.ts", oldString: "const b = 2;", newString: "const b = '$&$1';" });
    expect(await read("src/a.ts")).toContain("const b = '$&$1';");
  });

  it("keeps the file's permissions and leaves no temporary file behind", async () => {
    await fs.chmod(path.join(root, "script.sh"), 0o755);
    await edit({ path: "script.sh", oldString: "old", newString: "new" });
    expect((await fs.stat(path.join(root, "script.sh"))).mode & 0o777).toBe(0o755);
    expect(await fs.readdir(root)).toEqual(["crlf.txt", "script.sh", "src"]);
  });

  it("rejects a no-op edit and an empty old string at validation time", () => {
    expect(editFileTool.inputSchema.safeParse({ path: "a", oldString: "x", newString: "x" }).success).toBe(false);
    expect(editFileTool.inputSchema.safeParse({ path: "a", oldString: "", newString: "x" }).success).toBe(false);
  });

  it("reports a missing file and refuses a directory", async () => {
    await expectAppError(edit({ path: "missing.ts", oldString: "a", newString: "b" }), "not_found");
    await expectAppError(edit({ path: "src", oldString: "a", newString: "b" }), "invalid_input");
  });

  it("cannot edit outside the workspace, directly or through a symlink", async () => {
    const outside = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), "stepwise-outside-")));
    try {
      await fs.writeFile(path.join(outside, "victim.txt"), "keep");
      await fs.symlink(path.join(outside, "victim.txt"), path.join(root, "link.txt"));
      await expectAppError(edit({ path: "../victim.txt", oldString: "keep", newString: "x" }), "forbidden");
      await expectAppError(edit({ path: "link.txt", oldString: "keep", newString: "x" }), "forbidden");
      expect(await fs.readFile(path.join(outside, "victim.txt"), "utf8")).toBe("keep");
    } finally {
      await removeTempWorkspace(outside);
    }
  });

  it("declares itself a destructive, gated file write", () => {
    expect(editFileTool).toMatchObject({ capability: "fs.write", destructive: true, requiresApproval: true });
  });
});
