import { z } from "zod";
import { AppError } from "../errors";
import { defineTool } from "./types";
import { openWorkspaceFileForRead, writeWorkspaceFile } from "./workspace-path";

const MAX_BYTES = 5_000_000;

export const editFileTool = defineTool({
  name: "edit_file",
  description:
    "Replace an exact string in a workspace text file (no regex, no whitespace or line-ending normalisation). " +
    "Refuses when the string is absent, or occurs more than once unless replaceAll is set; reports the number of replacements.",
  inputSchema: z
    .object({
      path: z.string().min(1).describe("Path relative to the workspace root"),
      oldString: z.string().min(1).describe("Exact text to replace, including indentation"),
      newString: z.string().describe("Replacement text"),
      replaceAll: z.boolean().default(false).describe("Replace every occurrence instead of requiring exactly one"),
    })
    .refine((input) => input.oldString !== input.newString, {
      path: ["newString"],
      message: "newString is the same as oldString; the edit would change nothing",
    }),
  outputSchema: z.object({ path: z.string(), replacements: z.number() }),
  capability: "fs.write",
  capabilityLabel: "Write files",
  readOnly: false,
  destructive: true,
  // A second run finds the old string gone and refuses, so a retry is never blind.
  idempotent: false,
  requiresApproval: true,
  defaultTimeoutSeconds: 30,
  marksEffectStart: true,
  async execute(input, context) {
    const { handle, size, mode } = await openWorkspaceFileForRead(context.workspaceRoot, input.path).catch(
      (error: unknown) => {
        if (error instanceof AppError && error.code === "not_found") {
          throw new AppError("not_found", `No such file in the workspace: ${input.path}`);
        }
        if (error instanceof AppError && error.message.endsWith("is a directory, not a file")) {
          throw new AppError("invalid_input", `${input.path} is not a file`);
        }
        throw error;
      },
    );
    let content: string;
    try {
      if (size > MAX_BYTES) {
        throw new AppError("payload_too_large", `${input.path} is ${size} bytes; edit_file edits at most ${MAX_BYTES}`);
      }
      content = await handle.readFile({ encoding: "utf8", signal: context.signal });
    } finally {
      await handle.close();
    }
    const positions = occurrences(content, input.oldString);
    if (positions.length === 0) {
      throw new AppError("invalid_input", `The text to replace was not found in ${input.path}`, { occurrences: 0 });
    }
    if (positions.length > 1 && !input.replaceAll) {
      const lines = positions.map((offset) => lineAt(content, offset));
      throw new AppError(
        "invalid_input",
        `The text to replace occurs ${positions.length} times in ${input.path} (lines ${lines.join(", ")}); ` +
          "include more surrounding text to make it unique, or set replaceAll",
        { occurrences: positions.length, lines },
      );
    }
    // split/join rather than String.replace: `$&` and friends in newString must stay literal.
    const updated = content.split(input.oldString).join(input.newString);
    await context.effectsStarting();
    // Written beside the file through the verified parent descriptor and renamed over it, so a
    // timeout or crash never leaves half a file and a swap cannot redirect the write.
    await writeWorkspaceFile(context.workspaceRoot, input.path, updated, {
      signal: context.signal,
      mode: mode & 0o7777,
    });
    return { path: input.path, replacements: positions.length };
  },
});

/** Non-overlapping occurrences, left to right, exactly as split() will cut them. */
function occurrences(content: string, needle: string): number[] {
  const found: number[] = [];
  for (let at = content.indexOf(needle); at !== -1; at = content.indexOf(needle, at + needle.length)) found.push(at);
  return found;
}

function lineAt(content: string, offset: number): number {
  let line = 1;
  for (let i = content.indexOf("\n"); i !== -1 && i < offset; i = content.indexOf("\n", i + 1)) line++;
  return line;
}
