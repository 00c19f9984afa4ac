import fs from "node:fs/promises";
import { z } from "zod";
import { defineTool } from "./types";
import path from "node:path";
import { fdPath, openWorkspaceDirectory, resolveInWorkspace } from "./workspace-path";

export const listDirTool = defineTool({
  name: "list_dir",
  description: "List the entries of a workspace directory.",
  inputSchema: z.object({ path: z.string().default(".").describe("Directory relative to the workspace root") }),
  outputSchema: z.array(z.object({ name: z.string(), type: z.enum(["file", "dir", "other"]) })),
  capability: "fs.read",
  capabilityLabel: "Read files",
  readOnly: true,
  destructive: false,
  idempotent: true,
  requiresApproval: false,
  defaultTimeoutSeconds: 30,
  async execute(input, context) {
    const root = await fs.realpath(context.workspaceRoot);
    const resolved = await resolveInWorkspace(root, input.path);
    // List through the held descriptor: a swap after the check cannot point the listing elsewhere.
    const dir = await openWorkspaceDirectory(root, path.relative(root, resolved), input.path);
    const entries = await fs.readdir(fdPath(dir.handle), { withFileTypes: true }).finally(() => dir.close());
    return entries
      .map((entry) => ({
        name: entry.name,
        type: entry.isDirectory() ? ("dir" as const) : entry.isFile() ? ("file" as const) : ("other" as const),
      }))
      .sort((a, b) => a.name.localeCompare(b.name));
  },
});
