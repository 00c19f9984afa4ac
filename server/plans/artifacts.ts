import { randomBytes } from "node:crypto";
import fs from "node:fs/promises";
import path from "node:path";
import { exportPlanJson, exportPlanMarkdown } from "./export";
import type { Plan } from "./schema";

/**
 * Seed 001's artifacts: `.plans/<id>/plan.json` and `.plans/<id>/plan.md` in the plan's workspace,
 * written when the plan is created through the HTTP API and rewritten with every new version.
 * Each file is written to a temporary name and renamed into place, so a reader never sees half a
 * plan. Add `.plans/` to the workspace's .gitignore to keep them out of commits.
 */
export async function writePlanArtifacts(
  workspaceRoot: string,
  plan: Plan,
): Promise<{ json: string; markdown: string }> {
  if (!/^plan-[0-9a-f]+$/.test(plan.id)) throw new Error(`Unexpected plan id ${plan.id}`);
  const dir = path.join(workspaceRoot, ".plans", plan.id);
  await fs.mkdir(dir, { recursive: true });
  const files = {
    json: path.join(dir, "plan.json"),
    markdown: path.join(dir, "plan.md"),
  };
  await writeAtomically(files.json, exportPlanJson(plan).content);
  await writeAtomically(files.markdown, exportPlanMarkdown(plan).content);
  return files;
}

async function writeAtomically(file: string, content: string): Promise<void> {
  const temporary = `${file}.${randomBytes(6).toString("hex")}.tmp`;
  const handle = await fs.open(temporary, "wx", 0o644);
  try {
    await handle.writeFile(content);
    await handle.sync();
  } finally {
    await handle.close();
  }
  await fs.rename(temporary, file);
}

/** After a new version: rewrites the artifacts of a plan that has them (created through the HTTP API). */
export async function refreshPlanArtifacts(workspaceRoot: string | undefined, plan: Plan): Promise<void> {
  if (!workspaceRoot) return;
  try {
    await fs.access(path.join(workspaceRoot, ".plans", plan.id));
  } catch {
    return;
  }
  await writePlanArtifacts(workspaceRoot, plan);
}
