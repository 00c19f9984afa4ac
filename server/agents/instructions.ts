import { createHash } from "node:crypto";

/**
 * The canonical agent instructions (seed 003 I-1, "the Constitution"). A session's first `status`
 * hands them to the agent to write to its `docs/agents.md`; a new version of this text is synced
 * again. `docs/agents.md` in this repository is the same text (a unit test keeps them equal).
 */
export const AGENT_INSTRUCTIONS = `# Working with Stepwise — instructions for agents

You work through a Stepwise session: a goal, a plan of tasks, and a person who can watch and
steer it in the browser. Stepwise tells you what to do next; you do it and report back.

## The loop

1. Run \`stepwise status --json\` and act on \`now.reason\`:
   - \`sync_instructions\`: overwrite \`docs/agents.md\` with \`now.instructions_content\`, then ask again.
   - \`ready_for_task\`: \`now.current_task\` is yours. Read every \`context_hints\` entry and every
     file in \`relevant_file_paths\` before you change anything. Mark it started with
     \`{"update_tasks": [{"id": N, "status": "IN_PROGRESS"}]}\`, do the work, then mark it
     \`DONE\` (add \`"notes"\` with what you did).
     When the task has a \`working_directory\`, work there, and only there: it is the task's own
     git worktree, on its own branch, holding its dependencies' merged work. After your DONE
     Stepwise commits what you left uncommitted, runs the task's \`verify\` commands there (all
     must pass, and its \`acceptance\` criteria must hold), then merges the branch; the answer
     comes at once, and until then the task's \`state\` is \`merging\` — ask \`status\` for your
     next task meanwhile. A failing check hands the task back as TODO with \`findings\` (command,
     exit code, output tail): fix them, then DONE again.
     A task with \`instance\` is one element of a task that runs once per element of a list
     (\`for_each\`): \`item\` is its element, already written into its \`instructions\`. Report it with
     its \`instance\` too: \`{"update_tasks": [{"id": N, "instance": K, "status": "DONE"}]}\`. The task
     that groups them (\`executor: "stepwise"\`) settles when they do.
   - \`waiting_on_signal\`: a blocker (for example a failed test run) holds the session. Read
     \`signal.message\`, fix the cause, then clear it with \`stepwise alert --clear <signal id>\`.
     Clearing a failed step's signal runs that step again. A \`merge_conflict_N\` signal names the
     files: in task N's worktree merge the branch it names, resolve, commit, and report task N
     DONE again — that retries the merge and clears the signal.
   - \`waiting\`: Stepwise is running a step (tests, a build), merging a task reported DONE, or a
     person must approve one. Wait \`now.retry_after_seconds\`, then ask again. Do not work
     around it.
   - \`plan_completed\`: every task is settled. Send \`{"final_summary": "..."}\` once; after that
     the session is finished.
2. Repeat: status → gather context → work → update.

## Updating the plan

\`stepwise update --json '<payload>'\` takes any of:

- \`update_tasks\`: \`[{"id": N, "status": "IN_PROGRESS" | "DONE" | "TODO" | "CANCELLED", "notes": "..."}]\`.
  With DONE a task may report \`"items": [...]\`, a list it found (the failing test files) that a
  later task's \`for_each\` runs over. TODO hands a task back; CANCELLED drops it (tasks that depend on it still run). An item may
  also change any other field of an open task (\`title\`, \`type\`, \`description\`,
  \`dependencies\`, \`context_hints\`, \`relevant_file_paths\`, \`acceptance\`, \`verify\`), with or
  without a status; it passes the same checks as a new task, and a task a person approved waits
  for their approval again once changed.
- \`add_tasks\`: new tasks. Each needs a \`title\`, a \`type\` (feature, bugfix, chore, test,
  docs, refactor, research, ops), \`context_hints\` (short, actionable: "Read \`spec.md\` section 2",
  "Follow the pattern in \`src/api/users.ts\`") and \`relevant_file_paths\` that exist in the
  workspace (or that a hint says the task creates). \`dependencies\` lists task ids that must be done first; new tasks take the next
  free numbers in the order you give them, so a new task may depend on one added before it.
  Optional: \`acceptance\` (what must be true when done, in words) and \`verify\` (shell commands
  such as \`npm test -- src/x.test.ts\`, run in the task's worktree on DONE; one that is not
  read-only puts the task behind a person's approval first).
- \`final_summary\`: once every task is settled.

A rejected \`add_tasks\` answers \`plan_validation_failed\` with \`details\`: fix every listed
problem and resubmit. Nothing of a rejected update is applied.

## Planning well (the Definition of Good)

- One responsibility per task, small enough for one commit, with a verifiable outcome.
- The title states what will be true when the task is done.
- Hints tell your future self where to look and what pattern to follow.
- Dependencies name what must be done first, and never form a cycle.

## Signals

\`stepwise alert --id <name> --level blocker|warning|info --message "..." [--task N]\` raises a
signal for the person watching (a blocker also holds the session until cleared);
\`stepwise alert --clear <name>\` clears one.

## Several agents on one plan

Any number of agents can work one session at once: each runs the same loop with its own name
(\`stepwise status --json --session <id> --agent <name>\`, or the name its MCP client sends).

- \`status\` hands each agent a different ready task under a lease: \`now.brief\` has everything
  for it — the title, hints, files, \`acceptance\` criteria, the goal, the DONE notes of the
  tasks it depends on, what the approvers said, and \`working_directory\` (where to do the work).
  Ask again and you get the same task until you report it DONE, CANCELLED or TODO.
- Every call you make on the session renews your lease. If you stop calling for the lease's
  length (10 minutes by default), the task goes back to the ready tasks for another agent.
- Report only on your own tasks: an update on a task leased to another agent is refused.
- \`waiting\` can mean the other agents hold every ready task, or the session's cap on tasks in
  progress at once is reached; ask again after \`retry_after_seconds\`.
- Give useful \`notes\` with DONE: the agents doing the tasks after yours read them in their brief.

## Plan first when the task is complex or ambiguous

Before acting on a task that touches several files or steps, changes something hard to undo, or
leaves you unsure what is wanted, plan first (MCP \`enter_plan_mode\` with your reason). In plan
mode only read-only tools and the plan-mode tools are offered: gather context, ask the person
with \`ask_user\` (\`get_answer\` keeps waiting), then \`submit_plan\` — \`summary\`, steps of
\`{description, tools, risk}\`, \`questions\`, \`context_notes\`; \`context_hints\` and
\`relevant_file_paths\` per step are welcome but optional. A step may also carry \`when\` (run it
only if this holds, like \`$step_1.items.length == 0\`) and \`for_each\` with \`max_items\` (run it once
per element of an earlier task's \`items\`, like \`$step_1.items\`); these are checked as
\`plan_create\` checks them, and a plan whose condition or list cannot be read is refused. The plan goes to the person as written;
what the checks find (a vague hint, a file that does not exist) is shown to the reviewer as
advice. When you resubmit after changes were requested, send the whole plan again: steps you
left as they were keep their identity, so their review comments stay open. The person approves, rejects
or sends the plan back with instructions (\`plan_review_status\`); a message the person adds while
you plan comes with your next tool answer — take it into account. Once approved, \`status\` hands
you the plan's tasks in order; report each with \`update\` as above, and planning mode ends when
every task is settled. \`exit_plan_mode\` leaves without a decision. A question unanswered for 30
minutes, a plan unreviewed for 30 minutes, or an hour without any call while you gather ends
plan mode. Simple, clear tasks need no plan: act directly.

A plan of agent tasks you write yourself with \`plan_create\` comes back to you the same way once
a person approves it: \`status\` hands you its tasks (each element of a \`for_each\` task on its own)
and \`update\` reports them. It is yours alone — your name under the credential you wrote it with.

## Todo lists for your own multi-step work

For work of several steps that needs no review, keep a todo list over MCP: \`planning_setup_plan\`
(objective and first steps) → \`planning_add_step\` → \`planning_update_step\` (pending,
in_progress, done; a done step can be reopened) → \`planning_read_plan\`. Skip it for trivial,
single-step tasks. The list ends with your MCP session.

## MCP conventions

Every MCP tool takes and answers snake_case names (\`plan_id\`, \`wait_seconds\`, \`run_id\`). A
parameter a tool does not know is refused with the names it accepts, never ignored. Every plan
and every new version passes the same quality gates whichever tool sends it (\`plan_create\`,
\`plan_edit\`, \`add_tasks\`): hints must be actionable and name files that exist (or that a hint
says the task creates), and agent tasks need a title and \`relevant_file_paths\`. \`submit_plan\`
runs the same checks and shows what they find to the reviewer instead of refusing.

## Rules

- Work only on the task \`status\` gives you, and only inside the workspace.
- Never mark a task DONE that you did not finish; hand it back (TODO) with notes instead.
- Steps run by Stepwise (\`executor: "stepwise"\`) are not yours to update; their failures come
  to you as signals.
- \`stepwise suggest --json\` proposes further tasks; add the ones worth doing with \`add_tasks\`.
`;

export const AGENT_INSTRUCTIONS_VERSION = createHash("sha256").update(AGENT_INSTRUCTIONS).digest("hex").slice(0, 16);
