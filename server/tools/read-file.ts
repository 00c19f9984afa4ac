import fs from "node:fs/promises";
import { z } from "zod";
import { defineTool } from "./types";
import { resolveInWorkspace } from "./workspace-path";

const MAX_BYTES = 1_000_000;

export const readFileTool = defineTool({
  name: "read_file",
  description: "Read a UTF-8 text file from the workspace.",
  inputSchema: z.object({ path: z.string().min(1).describe("Path relative to the workspace root") }),
  outputSchema: z.string(),
  capability: "fs.read",
  capabilityLabel: "Read files",
  readOnly: true,
  destructive: false,
  idempotent: true,
  requiresApproval: false,
  defaultTimeoutSeconds: 30,
  async execute({ path }, context) {
    const file = await resolveInWorkspace(context.workspaceRoot, path);
    const stat = await fs.stat(file);
    if (stat.size > MAX_BYTES) throw new Error(`${path} is ${stat.size} bytes; read_file reads at most ${MAX_BYTES}`);
    return fs.readFile(file, { encoding: "utf8", signal: context.signal });
  },
});
