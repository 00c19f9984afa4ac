import { z } from "zod";
import { defineTool } from "./types";
import { openWorkspaceFileForRead } from "./workspace-path";

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
    // Read through the verified descriptor, never by name again: a swap cannot redirect it.
    const { handle, size } = await openWorkspaceFileForRead(context.workspaceRoot, path);
    try {
      if (size > MAX_BYTES) throw new Error(`${path} is ${size} bytes; read_file reads at most ${MAX_BYTES}`);
      return await handle.readFile({ encoding: "utf8", signal: context.signal });
    } finally {
      await handle.close();
    }
  },
});
