import { readdirSync, readFileSync, statSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";

/**
 * session-store.ts is the only writer of planning_sessions rows: a status change anywhere else
 * would skip the transition table. This test reads every source file outside the store (tests,
 * which set up rows directly, and the generated client excepted) and fails on a write.
 */
const ROOTS = ["server", "app", "scripts"];
const STORE = path.join("server", "planner", "session-store.ts");
const SKIP_DIRS = new Set(["generated", "node_modules", ".next"]);

/** SQL writes and Prisma writes of the table, however they are spaced or cased. */
const WRITES = [
  /\b(?:update|insert\s+into|delete\s+from|merge\s+into|truncate(?:\s+table)?)\s+(?:"?public"?\.)?"?planning_sessions"?\b/i,
  /\bplanningSession\s*\.\s*(?:create|createMany|createManyAndReturn|update|updateMany|updateManyAndReturn|upsert|delete|deleteMany)\s*\(/,
];

export function writesPlanningSessions(source: string): string[] {
  return source.split("\n").filter((line) => WRITES.some((pattern) => pattern.test(line)));
}

function sourceFiles(dir: string): string[] {
  const files: string[] = [];
  for (const entry of readdirSync(dir)) {
    const full = path.join(dir, entry);
    if (statSync(full).isDirectory()) {
      if (!SKIP_DIRS.has(entry)) files.push(...sourceFiles(full));
    } else if (/\.(ts|tsx)$/.test(entry) && !/\.test\.tsx?$/.test(entry)) {
      files.push(full);
    }
  }
  return files;
}

describe("planning_sessions has one writer", () => {
  it("recognises every kind of write (so the check below can fail)", () => {
    for (const write of [
      "await pool.query(\"update planning_sessions set status = 'running' where id = $1\", [id]);",
      "`UPDATE  planning_sessions s SET worker_id = null`",
      '"insert into planning_sessions (id, kind) values ($1, $2)"',
      "delete from planning_sessions where id = $1",
      "await tx.planningSession.create({ data });",
      "await deps.prisma.planningSession.update({ where: { id }, data: { draft } });",
      "prisma.planningSession.upsert({",
      "prisma.planningSession.deleteMany({ where: {} })",
    ]) {
      expect(writesPlanningSessions(write), write).toHaveLength(1);
    }
    for (const read of [
      "select status from planning_sessions where id = $1",
      "from planning_sessions s join plans p on p.id = s.plan_id",
      "await deps.prisma.planningSession.findUnique({ where: { id } })",
      "update planning_questions set answer = $2",
    ]) {
      expect(writesPlanningSessions(read), read).toEqual([]);
    }
  });

  it("no file but session-store.ts writes planning_sessions", () => {
    const root = path.resolve(__dirname, "..", "..");
    const offenders: string[] = [];
    const files = ROOTS.flatMap((dir) => sourceFiles(path.join(root, dir)));
    expect(files.length).toBeGreaterThan(50);
    for (const file of files) {
      const relative = path.relative(root, file);
      if (relative === STORE) continue;
      for (const line of writesPlanningSessions(readFileSync(file, "utf8")))
        offenders.push(`${relative}: ${line.trim()}`);
    }
    expect(offenders, "write through server/planner/session-store.ts instead").toEqual([]);
    expect(writesPlanningSessions(readFileSync(path.join(root, STORE), "utf8")).length).toBeGreaterThan(0);
  });
});
