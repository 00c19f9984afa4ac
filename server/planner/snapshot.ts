import fs from "node:fs/promises";
import path from "node:path";
import ignore, { type Ignore } from "ignore";

/** Bounds of what the model sees of a workspace, so a huge repository cannot blow up a prompt. */
export interface SnapshotLimits {
  maxEntries: number;
  maxKeyFiles: number;
  maxKeyFileBytes: number;
  maxTotalBytes: number;
}

export const DEFAULT_SNAPSHOT_LIMITS: SnapshotLimits = {
  maxEntries: 400,
  maxKeyFiles: 6,
  maxKeyFileBytes: 4_000,
  maxTotalBytes: 24_000,
};

export interface WorkspaceSnapshot {
  /** Workspace-relative paths, directories with a trailing slash, in walk order. */
  entries: string[];
  truncated: boolean;
  keyFiles: { path: string; content: string; truncated: boolean }[];
  /** The snapshot as the prompt shows it, within maxTotalBytes. */
  text: string;
}

/** Files that usually explain a project; read first. */
const KEY_FILE_PATTERNS = [
  /^readme(\.\w+)?$/i,
  /^package\.json$/,
  /^pyproject\.toml$/,
  /^cargo\.toml$/i,
  /^go\.mod$/,
  /^makefile$/i,
  /^(spec|plan|todo|contributing)(\.\w+)?$/i,
  /^docs\/[^/]+\.md$/i,
];

const ALWAYS_SKIPPED = new Set([".git", "node_modules", ".next", ".plans"]);

interface IgnoreLayer {
  /** Directory (workspace-relative, "" for the root) the .gitignore lives in. */
  base: string;
  rules: Ignore;
}

async function readIgnoreLayer(root: string, dir: string): Promise<IgnoreLayer | undefined> {
  try {
    const text = await fs.readFile(path.join(root, dir, ".gitignore"), "utf8");
    return { base: dir, rules: ignore().add(text) };
  } catch {
    return undefined;
  }
}

function isIgnored(layers: IgnoreLayer[], relative: string, isDir: boolean): boolean {
  for (const layer of layers) {
    const inside = layer.base ? relative.slice(layer.base.length + 1) : relative;
    if (inside && layer.rules.ignores(isDir ? `${inside}/` : inside)) return true;
  }
  return false;
}

/**
 * Walks the workspace breadth first, honouring every .gitignore on the way (as git does, each
 * relative to its own directory), and yields workspace-relative paths. Stops after `limit` entries.
 */
export async function walkWorkspace(
  root: string,
  visit: (relative: string, isDir: boolean) => boolean | void,
  limit = Number.POSITIVE_INFINITY,
): Promise<{ truncated: boolean }> {
  const queue: { dir: string; layers: IgnoreLayer[] }[] = [];
  const rootLayer = await readIgnoreLayer(root, "");
  queue.push({ dir: "", layers: rootLayer ? [rootLayer] : [] });
  let seen = 0;
  while (queue.length > 0) {
    const { dir, layers } = queue.shift()!;
    let entries: import("node:fs").Dirent[];
    try {
      entries = await fs.readdir(path.join(root, dir), { withFileTypes: true });
    } catch {
      continue;
    }
    entries.sort((a, b) => a.name.localeCompare(b.name));
    for (const entry of entries) {
      if (ALWAYS_SKIPPED.has(entry.name)) continue;
      const relative = dir ? `${dir}/${entry.name}` : entry.name;
      const isDir = entry.isDirectory();
      if (!isDir && !entry.isFile()) continue; // symlinks and devices: not followed
      if (isIgnored(layers, relative, isDir)) continue;
      if (seen >= limit) return { truncated: true };
      seen++;
      if (visit(relative, isDir) === false) return { truncated: true };
      if (isDir) {
        const layer = await readIgnoreLayer(root, relative);
        queue.push({ dir: relative, layers: layer ? [...layers, layer] : layers });
      }
    }
  }
  return { truncated: false };
}

/** A bounded picture of the workspace for a prompt: the file tree and the key files' heads. */
export async function snapshotWorkspace(
  root: string,
  limits: SnapshotLimits = DEFAULT_SNAPSHOT_LIMITS,
): Promise<WorkspaceSnapshot> {
  const entries: string[] = [];
  const { truncated } = await walkWorkspace(
    root,
    (relative, isDir) => {
      entries.push(isDir ? `${relative}/` : relative);
    },
    limits.maxEntries,
  );
  const keyFiles: WorkspaceSnapshot["keyFiles"] = [];
  const candidates = entries
    .filter((entry) => !entry.endsWith("/") && KEY_FILE_PATTERNS.some((pattern) => pattern.test(entry)))
    .sort((a, b) => a.split("/").length - b.split("/").length);
  for (const candidate of candidates.slice(0, limits.maxKeyFiles)) {
    try {
      const handle = await fs.open(path.join(root, candidate), "r");
      try {
        const buffer = Buffer.alloc(limits.maxKeyFileBytes + 1);
        const { bytesRead } = await handle.read(buffer, 0, buffer.length, 0);
        const content = buffer.subarray(0, Math.min(bytesRead, limits.maxKeyFileBytes)).toString("utf8");
        if (content.includes("\u0000")) continue; // binary
        keyFiles.push({ path: candidate, content, truncated: bytesRead > limits.maxKeyFileBytes });
      } finally {
        await handle.close();
      }
    } catch {
      // unreadable: leave it out
    }
  }
  return { entries, truncated, keyFiles, text: renderSnapshot(entries, truncated, keyFiles, limits.maxTotalBytes) };
}

function renderSnapshot(
  entries: string[],
  truncated: boolean,
  keyFiles: WorkspaceSnapshot["keyFiles"],
  maxBytes: number,
): string {
  const tree = entries.length
    ? entries.join("\n") + (truncated ? `\n… (more entries not shown)` : "")
    : "(the workspace is empty)";
  let text = `File tree (honours .gitignore):\n${tree}\n`;
  for (const file of keyFiles) {
    const block = `\n--- ${file.path}${file.truncated ? " (first part)" : ""} ---\n${file.content}\n`;
    if (Buffer.byteLength(text + block) > maxBytes) break;
    text += block;
  }
  if (Buffer.byteLength(text) > maxBytes) text = Buffer.from(text).subarray(0, maxBytes).toString("utf8") + "\n…";
  return text;
}

export interface TodoMarker {
  path: string;
  line: number;
  kind: string;
  text: string;
}

/**
 * Stepwise's own rulebook in a workspace (the agent loop writes `docs/agents.md` there): it speaks
 * of the TODO status, which is not work left in the project.
 */
export const STEPWISE_INSTRUCTION_FILES: ReadonlySet<string> = new Set(["docs/agents.md"]);

/**
 * A real marker is a comment (`// TODO: …`, `# FIXME`, `/* XXX`, `<!-- TODO`, `-- HACK`) or a line
 * that starts with one followed by a colon (`TODO: …` in notes); a word in prose or in backticks
 * (the TODO status of a task) is not.
 */
const COMMENTED_MARKER = /(?:\/\/+|#+|\/\*+|<!--|--|;+|^\s*\*+)\s*\b(TODO|FIXME|XXX|HACK)\b(?!`)[:\s-]*(.*)$/;
const LEADING_MARKER = /^\s*(?:[-*]\s+)?(TODO|FIXME|XXX|HACK)\b\s*(?:\([^)]*\))?\s*:\s*(.*)$/;

export function todoMarkerIn(line: string): { kind: string; text: string } | undefined {
  const match = COMMENTED_MARKER.exec(line) ?? LEADING_MARKER.exec(line);
  return match ? { kind: match[1]!, text: match[2]!.trim().slice(0, 200) } : undefined;
}

/** TODO / FIXME / XXX / HACK comments in text files of the workspace, for `suggest`. */
export async function findTodoMarkers(root: string, limit = 50): Promise<TodoMarker[]> {
  const files: string[] = [];
  await walkWorkspace(
    root,
    (relative, isDir) => {
      if (!isDir && !STEPWISE_INSTRUCTION_FILES.has(relative.split(path.sep).join("/"))) files.push(relative);
    },
    2_000,
  );
  const markers: TodoMarker[] = [];
  for (const file of files) {
    if (markers.length >= limit) break;
    try {
      const stat = await fs.stat(path.join(root, file));
      if (stat.size > 200_000) continue;
      const text = await fs.readFile(path.join(root, file), "utf8");
      if (text.includes("\u0000")) continue;
      text.split("\n").forEach((line, index) => {
        const marker = todoMarkerIn(line);
        if (marker && markers.length < limit) markers.push({ path: file, line: index + 1, ...marker });
      });
    } catch {
      // unreadable: skip
    }
  }
  return markers;
}
