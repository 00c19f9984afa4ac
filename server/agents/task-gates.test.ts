import { describe, expect, it } from "vitest";
import type { NewTask } from "./contract";
import { isActionableHint, mentionedPaths } from "../hint-text";
import { checkNewTasks } from "./task-gates";

const files = new Set(["spec.md", "src/models/user.py", "src/models"]);
const context = {
  existingTaskIds: new Set([1, 2]),
  firstNewId: 3,
  fileExists: async (p: string) => files.has(p.replace(/\/$/, "")),
};

function good(overrides: Partial<NewTask> = {}): NewTask {
  return {
    title: "Add password_hash to User model",
    type: "feature",
    dependencies: [],
    context_hints: ["Edit the User class in `src/models/user.py`."],
    relevant_file_paths: ["src/models/user.py"],
    ...overrides,
  };
}

describe("seed 003 quality gates for added tasks", () => {
  it("accepts a complete, valid task list, including dependencies on earlier new tasks", async () => {
    expect(await checkNewTasks([good(), good({ title: "Second", dependencies: [1, 3] })], context)).toEqual([]);
  });

  it.each<[string, Partial<NewTask>, string]>([
    ["a title", { title: " " }, "has no `title`"],
    ["a type", { type: undefined }, "is missing the `type` field"],
    ["a known type", { type: "epic" }, "has an unknown `type` 'epic'"],
    ["context hints", { context_hints: [] }, "is missing the `context_hints` field"],
    ["actionable hints", { context_hints: ["misc"] }, 'has a hint that is not actionable: "misc"'],
    ["file paths", { relevant_file_paths: [] }, "is missing the `relevant_file_paths` field"],
    [
      "existing paths",
      { relevant_file_paths: ["src/api/utils.py"] },
      "lists a non-existent file in `relevant_file_paths`: `src/api/utils.py`",
    ],
    [
      "hints naming real files",
      { context_hints: ["Use `src/auth/utils.py` for hashing."] },
      "has a hint pointing to a non-existent file: `src/auth/utils.py`",
    ],
    ["known dependencies", { dependencies: [9] }, "depends on task 9, which does not exist in the plan"],
    ["no self-dependency", { dependencies: [3] }, "depends on itself"],
  ])("requires %s", async (_name, change, expected) => {
    const details = await checkNewTasks([good(change)], context);
    expect(details).toEqual([expect.stringContaining(expected)]);
  });

  it("reports a cycle among the new tasks, and every problem at once", async () => {
    const details = await checkNewTasks(
      [good({ title: "A", dependencies: [4] }), good({ title: "B", dependencies: [3], type: undefined })],
      context,
    );
    expect(details).toEqual([
      expect.stringContaining("Task 'B' is missing the `type` field"),
      "The dependencies form a cycle: task 3 → task 4 → task 3. Tasks must form a DAG.",
    ]);
  });

  it("accepts acceptance criteria and verifiers, and refuses empty ones with what to give instead", async () => {
    expect(
      await checkNewTasks([good({ acceptance: ["Login works"], verify: ["npm test -- src/login.test.ts"] })], context),
    ).toEqual([]);
    expect(await checkNewTasks([good({ acceptance: [" "], verify: [""] })], context)).toEqual([
      "Task 'Add password_hash to User model' has an empty `acceptance` criterion: say what must be true when the task is done.",
      "Task 'Add password_hash to User model' has an empty `verify` command: give a shell command such as `npm test -- src/x.test.ts`.",
    ]);
  });

  it("lets a hint that creates a file name one that does not exist yet", async () => {
    expect(
      await checkNewTasks([good({ context_hints: ["Create `src/auth/login.py` with the endpoint."] })], context),
    ).toEqual([]);
  });

  it("lets a task list a file it says it creates, and still refuses any other missing file", async () => {
    const creates = ["Create `src/auth/login.py` with the endpoint."];
    expect(
      await checkNewTasks(
        [good({ context_hints: creates, relevant_file_paths: ["src/auth/login.py", "src/models/user.py"] })],
        context,
      ),
    ).toEqual([]);
    expect(
      await checkNewTasks([good({ context_hints: creates, relevant_file_paths: ["src/auth/other.py"] })], context),
    ).toEqual([
      "Task 'Add password_hash to User model' lists a non-existent file in `relevant_file_paths`: `src/auth/other.py`.",
    ]);
  });

  it("judges hints actionable by a verb or a concrete reference", () => {
    expect(isActionableHint("Read the 'Database Schema' section in `spec.md`.")).toBe(true);
    expect(isActionableHint("Endpoints should follow the pattern in src/api/routes.py")).toBe(true);
    expect(isActionableHint("See section 2.1")).toBe(true);
    expect(isActionableHint("important")).toBe(false);
    expect(isActionableHint("be careful here")).toBe(false);
  });

  it("finds paths named in backticks, not code or words", () => {
    expect(mentionedPaths("Use `src/a.ts` and `README.md`, not `npm test` or `x`")).toEqual(["src/a.ts", "README.md"]);
  });
});
