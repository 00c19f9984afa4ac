import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { builtinRegistry } from "../tools/registry";
import { sandboxAvailable } from "../tools/sandbox";
import { readOnlyShellTool } from "../tools/shell";
import { createTempWorkspace, createToolContext, removeTempWorkspace, runTool } from "../tools/tool-test-support";
import { gatheringTools } from "./deep-mode";

/** Seed 002: while planning, read files and run read-only bash; no writes, no git tools. */

let workspace: string;
beforeAll(async () => {
  workspace = await createTempWorkspace({ "README.md": "# planning\n" });
});
afterAll(() => removeTempWorkspace(workspace));

const names = () => gatheringTools(builtinRegistry.list()).map((tool) => tool.name);

describe("deep planning's tools", () => {
  it("offer reading and, with a sandbox, read-only bash; never git tools or anything that writes", () => {
    const offered = names();
    expect(offered).toEqual(expect.arrayContaining(["read_file", "list_dir", "search_text", "glob"]));
    for (const blocked of [
      "git_status",
      "git_diff",
      "git_log",
      "git_commit",
      "shell",
      "write_file",
      "edit_file",
      "delete_path",
    ]) {
      expect(offered).not.toContain(blocked);
    }
    expect(offered.includes("shell_read")).toBe(sandboxAvailable());
  });

  it("offer no shell at all where no sandbox works", () => {
    process.env.STEPWISE_SANDBOX = "off";
    try {
      expect(names()).not.toContain("shell_read");
    } finally {
      delete process.env.STEPWISE_SANDBOX;
    }
  });

  it.runIf(sandboxAvailable())(
    "read-only bash reads, and refuses writes with the reason instead of asking",
    async () => {
      const read = await runTool(readOnlyShellTool, { command: "cat README.md" }, createToolContext(workspace));
      expect(read.stdout).toContain("# planning");
      for (const command of ["touch x", "rm -rf .", "echo x > README.md", "git commit -m x"]) {
        await expect(runTool(readOnlyShellTool, { command }, createToolContext(workspace))).rejects.toThrow(
          /Blocked while planning/,
        );
      }
    },
  );
});
