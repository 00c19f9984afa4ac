import fs from "node:fs/promises";
import path from "node:path";
import { AppError } from "../errors";
import { logger } from "../logger";
import { openWorkspaceDirectory, writeWorkspaceFile } from "../tools/workspace-path";
import { exportPlanJson, exportPlanMarkdown } from "./export";
import type { Plan } from "../plan-schema";

/**
 * Seed 001's artifacts: `.plans/<id>/plan.json` and `.plans/<id>/plan.md` in the plan's workspace,
 * written when the plan is created through the HTTP API and rewritten with every new version.
 * They go through the file tools' confinement layer (server/tools/workspace-path.ts): every
 * directory is entered without following symlinks and each file is written to a temporary name
 * inside the held directory and renamed into place, so a reader never sees half a plan and a
 * `.plans` (or plan directory) that is — or is swapped for — a symlink out of the workspace is
 * refused, with nothing written there. Add `.plans/` to the workspace's .gitignore to keep them
 * out of commits.
 */
export async function writePlanArtifacts(
  workspaceRoot: string,
  plan: Plan,
): Promise<{ json: string; markdown: string }> {
  if (!/^plan-[0-9a-f]+$/.test(plan.id)) throw new Error(`Unexpected plan id ${plan.id}`);
  const relative = {
    json: path.join(".plans", plan.id, "plan.json"),
    markdown: path.join(".plans", plan.id, "plan.md"),
  };
  const options = { mode: 0o644, createParents: true };
  await writeWorkspaceFile(workspaceRoot, relative.json, exportPlanJson(plan).content, options);
  await writeWorkspaceFile(workspaceRoot, relative.markdown, exportPlanMarkdown(plan).content, options);
  return { json: path.join(workspaceRoot, relative.json), markdown: path.join(workspaceRoot, relative.markdown) };
}

/**
 * After a new version: rewrites the artifacts of a plan that has them (created through the HTTP
 * API). The version is already saved, so a refusal (a `.plans` leading out of the workspace) is
 * reported in the server log rather than failing the save.
 */
export async function refreshPlanArtifacts(workspaceRoot: string | undefined, plan: Plan): Promise<void> {
  if (!workspaceRoot) return;
  try {
    const root = await fs.realpath(workspaceRoot);
    const dir = await openWorkspaceDirectory(root, path.join(".plans", plan.id), `.plans/${plan.id}`);
    await dir.close();
  } catch (error) {
    // No artifacts (or no workspace any more): nothing to refresh.
    if (error instanceof AppError && error.code === "not_found") return;
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return;
    logger.warn({ planId: plan.id, err: error }, "the plan's artifacts were not rewritten");
    return;
  }
  try {
    await writePlanArtifacts(workspaceRoot, plan);
  } catch (error) {
    if (!(error instanceof AppError)) throw error;
    logger.warn({ planId: plan.id, err: error }, "the plan's artifacts were not rewritten");
  }
}
