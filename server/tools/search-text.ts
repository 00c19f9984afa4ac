import picomatch from "picomatch";
import { z } from "zod";
import { AppError } from "../errors";
import { createRegexMatcher, type LineHit } from "./regex-matcher";
import { defineTool } from "./types";
import { walkWorkspace } from "./workspace-files";
import { openWorkspaceFileForRead } from "./workspace-path";

/** Files above this size are skipped (reported in `skipped.tooLarge`), to keep a search fast and bounded. */
export const SEARCH_MAX_FILE_BYTES = 1_000_000;
/** A match's line text is cut to this length so one minified file cannot flood the result. */
const MAX_LINE_CHARS = 500;
/** How much of a file's start is inspected for NUL bytes to decide it is binary (as git and grep do). */
const BINARY_SNIFF_BYTES = 8000;
/** Longest a regular expression may spend on one file before the search is stopped. */
export const SEARCH_REGEX_BUDGET_MS = 5_000;

export interface TextMatch {
  path: string;
  /** 1-based line number. */
  line: number;
  /** 1-based column of the first match on the line. */
  column: number;
  text: string;
}

const inputSchema = z
  .object({
    pattern: z.string().min(1).describe("Text to find; a JavaScript regular expression when `regex` is true"),
    regex: z.boolean().default(false),
    caseSensitive: z.boolean().default(true),
    path: z.string().default(".").describe("File or directory to search in (workspace-relative)"),
    include: z.string().optional().describe("Only files whose workspace-relative path matches this glob"),
    includeIgnored: z.boolean().default(false).describe("Also search files excluded by .gitignore"),
    maxResults: z.number().int().min(1).max(5_000).default(200),
  })
  .superRefine((input, ctx) => {
    if (!input.regex) return;
    const problem = regexProblem(input.pattern);
    if (problem) ctx.addIssue({ code: "custom", path: ["pattern"], message: `Invalid regular expression: ${problem}` });
  });

export const searchTextTool = defineTool({
  name: "search_text",
  description:
    "Search workspace text files for a literal string or regular expression, line by line. Honours .gitignore, " +
    `skips binary files and files over ${SEARCH_MAX_FILE_BYTES} bytes, and stops after maxResults matching lines.`,
  inputSchema,
  outputSchema: z.object({
    matches: z.array(z.object({ path: z.string(), line: z.number(), column: z.number(), text: z.string() })),
    truncated: z.boolean(),
    filesSearched: z.number(),
    skipped: z.object({ binary: z.number(), tooLarge: z.number() }),
  }),
  capability: "fs.read",
  capabilityLabel: "Read files",
  readOnly: true,
  destructive: false,
  idempotent: true,
  requiresApproval: false,
  defaultTimeoutSeconds: 60,
  async execute(input, context) {
    const flags = input.caseSensitive ? "u" : "iu";
    if (input.regex) {
      const problem = regexProblem(input.pattern, flags);
      if (problem) throw new AppError("invalid_input", `Invalid regular expression: ${problem}`);
    }
    const regexMatcher = input.regex
      ? createRegexMatcher(input.pattern, flags, { budgetMs: SEARCH_REGEX_BUDGET_MS, signal: context.signal })
      : undefined;
    const included = input.include ? picomatch(input.include, { dot: true }) : () => true;
    const matches: TextMatch[] = [];
    const skipped = { binary: 0, tooLarge: 0 };
    let filesSearched = 0;

    try {
      for await (const entry of walkWorkspace(context.workspaceRoot, {
        start: input.path,
        includeIgnored: input.includeIgnored,
        signal: context.signal,
      })) {
        if (entry.type !== "file" || !included(entry.relativePath)) continue;
        // Opened afresh with no symlink followed and verified inside; hard-linked files are skipped.
        const opened = await openWorkspaceFileForRead(context.workspaceRoot, entry.relativePath).catch(() => undefined);
        if (!opened) continue;
        if (opened.size > SEARCH_MAX_FILE_BYTES) {
          await opened.handle.close();
          skipped.tooLarge++;
          continue;
        }
        const bytes = await opened.handle
          .readFile({ signal: context.signal })
          .catch(() => undefined)
          .finally(() => opened.handle.close());
        if (!bytes) continue;
        if (isBinary(bytes)) {
          skipped.binary++;
          continue;
        }
        filesSearched++;
        const text = bytes.toString("utf8");
        // One more than still fits, to tell "exactly full" from "more exist".
        const wanted = input.maxResults - matches.length + 1;
        const hits = regexMatcher
          ? await regexMatcher.matchLines(text, wanted)
          : literalHits(text, input.pattern, input.caseSensitive, wanted);
        if (hits.length === 0) continue;
        const lines = text.split(/\r?\n/);
        for (const [line, column] of hits) {
          if (matches.length === input.maxResults) return { matches, truncated: true, filesSearched, skipped };
          matches.push({ path: entry.relativePath, line: line + 1, column: column + 1, text: clip(lines[line]!) });
        }
      }
      return { matches, truncated: false, filesSearched, skipped };
    } finally {
      await regexMatcher?.close();
    }
  },
});

/** Literal search needs no worker: indexOf is linear. */
function literalHits(text: string, pattern: string, caseSensitive: boolean, limit: number): LineHit[] {
  const needle = caseSensitive ? pattern : pattern.toLowerCase();
  const hits: LineHit[] = [];
  const lines = text.split(/\r?\n/);
  for (let index = 0; index < lines.length && hits.length < limit; index++) {
    const column = (caseSensitive ? lines[index]! : lines[index]!.toLowerCase()).indexOf(needle);
    if (column >= 0) hits.push([index, column]);
  }
  return hits;
}

function regexProblem(pattern: string, flags = "u"): string | undefined {
  try {
    new RegExp(pattern, flags);
    return undefined;
  } catch (error) {
    return (error as Error).message;
  }
}
export function isBinary(bytes: Buffer): boolean {
  return bytes.subarray(0, BINARY_SNIFF_BYTES).includes(0);
}

function clip(line: string): string {
  return line.length > MAX_LINE_CHARS ? `${line.slice(0, MAX_LINE_CHARS)}…` : line;
}
