/**
 * `npm run bench:agents [-- --tasks 30] [-- --waves 5] [-- --agents 3] [-- --sessions 3] [-- --work-ms 0]
 * [-- --poll-ms 10]`:
 * several agents on one plan. A session's plan has 30 agent tasks in 5 waves (each task after two of the
 * wave before); 3 agents work it at once through the operations layer (what the HTTP, MCP and CLI
 * doors call), each looping status → IN_PROGRESS → DONE. Measures Stepwise's own time per
 * hand-out (a `status` that leases a new task), per IN_PROGRESS and per DONE (`update`), and checks
 * that no task was handed out twice and none before its dependencies were done.
 * All of it twice: in a plain directory, and in a git repository, where each task gets a worktree
 * of its own (made ahead of its hand-out) and its DONE is committed and merged into the run's
 * integration branch off the call (the makespan counts it); the git workspace's medians are also
 * given as a multiple of the plain one's. An agent told to wait asks again after `--poll-ms`: its
 * asking competes for the machine with the merges it waits for.
 * With `--work-ms N`, each agent works on its task between IN_PROGRESS and DONE as an agent does:
 * it writes a file of its own in the task's working directory (so a DONE in a git workspace
 * commits and merges real work) and takes N ms; without, it reports at once and writes nothing,
 * so every call competes with the others' (the most Stepwise's own work can cost per call).
 * Real PostgreSQL (embedded unless DATABASE_URL), in-process worker. Prints a table and writes
 * bench/results/agents.json; it asserts nothing about time.
 */
import fs from "node:fs/promises";
import path from "node:path";
import { createAppContext } from "../server/app-context";
import type { AppContext } from "../server/services";
import { readEvents } from "../server/events/store";
import { agentStart, agentStatus, agentUpdate } from "../server/operations/agent";
import { invokeOperation, type Operation } from "../server/operations/operation";
import type { StatusResponse } from "../server/agents/contract";
import { repositoryForGit, workspaceRepository } from "../server/agents/worktree-repository";
import { worktreeWorkSettled } from "../server/agents/worktrees-ahead";
import { runGit } from "../server/tools/git";
import { programsLaunched } from "../server/launcher/launcher";
import { git } from "../tests/git-fixture";
import { scratchDatabase } from "./scratch-database";
import { percentile, round } from "./stats";

function option(name: string, fallback: number): number {
  const index = process.argv.indexOf(`--${name}`);
  return index > 0 ? Number(process.argv[index + 1]) : fallback;
}

const TASKS = option("tasks", 30);
const WAVES = option("waves", 5);
const AGENTS = option("agents", 3);
const SESSIONS = option("sessions", 3);
const WORK_MS = option("work-ms", 0);
/** How long an agent told to wait (a task merging, others' tasks) waits before it asks again. */
const POLL_MS = option("poll-ms", 10);

type Call = (operation: Operation<never, never>, input: unknown) => Promise<unknown>;

function caller(app: AppContext, name: string): Call {
  return (operation, input) =>
    invokeOperation(operation as Operation<never, never>, { app, identity: { kind: "agent", name } }, input);
}

/** Tasks 2..TASKS+1 in waves; a task of wave k depends on two tasks of wave k-1. */
function waveTasks() {
  const perWave = Math.ceil(TASKS / WAVES);
  return Array.from({ length: TASKS }, (_, index) => {
    const wave = Math.floor(index / perWave);
    const inWave = index % perWave;
    const previous = (offset: number) => 2 + (wave - 1) * perWave + ((inWave + offset) % perWave);
    return {
      title: `Wave ${wave + 1} task ${inWave + 1}`,
      type: "chore",
      context_hints: [`Read \`README.md\` and write part ${index + 1}.`],
      relevant_file_paths: ["README.md"],
      dependencies: wave === 0 ? [] : [...new Set([previous(0), previous(1)])],
    };
  });
}

async function oneSession(app: AppContext, workspace: string) {
  const planner = caller(app, "planner");
  const created = (await planner(agentStart as never, {
    goal: "Benchmark several agents",
    agentConcurrency: AGENTS,
  })) as {
    session_id: string;
  };
  const session = created.session_id;
  await planner(agentStatus as never, { session }); // the session's instructions sync
  await planner(agentUpdate as never, {
    session,
    payload: { add_tasks: waveTasks(), update_tasks: [{ id: 1, status: "DONE", notes: "planned" }] },
  });
  const handOut: number[] = [];
  const started: number[] = [];
  const done: number[] = [];
  const timed = async <T>(into: number[], work: () => Promise<T>): Promise<T> => {
    const t0 = performance.now();
    const result = await work();
    into.push(performance.now() - t0);
    return result;
  };
  const programsBefore = programsLaunched();
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: AGENTS }, async (_, n) => {
      const call = caller(app, `agent-${n + 1}`);
      for (;;) {
        const t = performance.now();
        const status = (await call(agentStatus as never, { session })) as StatusResponse;
        if (status.now.reason === "plan_completed") return;
        if (status.now.reason !== "ready_for_task") {
          await new Promise((resolve) => setTimeout(resolve, POLL_MS));
          continue;
        }
        handOut.push(performance.now() - t);
        const id = status.now.current_task.id;
        await timed(started, () =>
          call(agentUpdate as never, { session, payload: { update_tasks: [{ id, status: "IN_PROGRESS" }] } }),
        );
        if (WORK_MS > 0) {
          const directory = status.now.current_task.working_directory ?? workspace;
          await fs.writeFile(path.join(directory, `part-${id}.md`), `Part ${id}, by agent ${n + 1}\n`);
          await new Promise((resolve) => setTimeout(resolve, WORK_MS));
        }
        await timed(done, () =>
          call(agentUpdate as never, { session, payload: { update_tasks: [{ id, status: "DONE", notes: "ok" }] } }),
        );
      }
    }),
  );
  const makespan = performance.now() - t0;
  // Worktrees made ahead of hand-outs and removed after merges run after the calls: counted too.
  await worktreeWorkSettled();
  const programs = programsLaunched() - programsBefore;
  const run = await app.db.pool.query<{ run_id: string }>("select run_id from agent_sessions where id = $1", [session]);
  const events = await readEvents(app.db.pool, run.rows[0]!.run_id, 0);
  const leased = events.filter((event) => event.type === "agent.task_leased");
  const completedAt = new Map(
    events.filter((event) => event.type === "step.completed").map((event) => [event.stepId!, event.seq]),
  );
  const tasks = waveTasks();
  const orderOk = leased.every((event) => {
    const task = tasks[Number(event.stepId!.slice(5)) - 2]!;
    return task.dependencies.every((dep) => (completedAt.get(`step_${dep}`) ?? Infinity) < event.seq);
  });
  const once = new Set(leased.map((event) => event.stepId)).size === leased.length && leased.length === TASKS;
  return { handOut, started, done, makespan, programs, orderOk, once };
}

type SessionResult = Awaited<ReturnType<typeof oneSession>>;

/** The figures of one kind of workspace, over all its sessions. */
function summarize(results: SessionResult[]) {
  const all = (pick: (r: SessionResult) => number[]) => results.flatMap(pick);
  return {
    hand_out_p50_ms: percentile(
      all((r) => r.handOut),
      50,
    ),
    hand_out_p95_ms: percentile(
      all((r) => r.handOut),
      95,
    ),
    in_progress_p50_ms: percentile(
      all((r) => r.started),
      50,
    ),
    done_p50_ms: percentile(
      all((r) => r.done),
      50,
    ),
    done_p95_ms: percentile(
      all((r) => r.done),
      95,
    ),
    // Every program Stepwise started (git, in its sandbox) per task, over the whole loop.
    programs_per_task: round(results.reduce((sum, r) => sum + r.programs, 0) / (TASKS * results.length)),
    makespan_median_ms: round(results.map((r) => r.makespan).sort((a, b) => a - b)[Math.floor((SESSIONS - 1) / 2)]!),
    every_task_handed_out_once: results.every((r) => r.once),
    dependencies_respected: results.every((r) => r.orderOk),
  };
}

/**
 * The same loop in a plain directory and in a git repository (each task then works in a worktree
 * of its own, and its DONE commits and merges it into the run's integration branch).
 */
async function workspaceRun(databaseUrl: string, workspace: string): Promise<ReturnType<typeof summarize>> {
  const app = await createAppContext({ databaseUrl, workspaceRoot: workspace, worker: { concurrency: 4 } });
  try {
    const results: SessionResult[] = [];
    for (let i = 0; i < SESSIONS; i++) results.push(await oneSession(app, workspace));
    return summarize(results);
  } finally {
    await app.close();
  }
}

/** The median time of one `git rev-parse HEAD` as Stepwise runs it (hardened, in the sandbox). */
async function oneGitProgram(repository: string): Promise<number> {
  const repo = await workspaceRepository(repository);
  if (!repo) return NaN;
  const repositoryNow = await repositoryForGit(repo);
  const times: number[] = [];
  for (let i = 0; i < 20; i++) {
    const t0 = performance.now();
    await runGit(["rev-parse", "HEAD"], {
      cwd: repo.root,
      signal: AbortSignal.timeout(60_000),
      repository: repositoryNow,
    });
    times.push(performance.now() - t0);
  }
  return percentile(times, 50);
}

async function main() {
  const { scratch, databaseUrl, drop } = await scratchDatabase("agents");
  try {
    const plain = path.join(scratch, "plain");
    await fs.mkdir(plain);
    await fs.writeFile(path.join(plain, "README.md"), "# Bench\n");
    const repository = path.join(scratch, "repository");
    await fs.mkdir(repository);
    await fs.writeFile(path.join(repository, "README.md"), "# Bench\n");
    git(repository, "init", "--quiet", "--initial-branch=main");
    git(repository, "add", "--all");
    git(repository, "commit", "--quiet", "--message=initial");
    const gitProgram = await oneGitProgram(repository);
    const summary = {
      tasks: TASKS,
      work_ms: WORK_MS,
      waves: WAVES,
      agents: AGENTS,
      sessions: SESSIONS,
      plain_directory: await workspaceRun(databaseUrl, plain),
      git_repository: await workspaceRun(databaseUrl, repository),
      // What one sandboxed git costs here (a report starts two on its path: `status`, `merge`).
      one_git_program_p50_ms: gitProgram,
    };
    const ratio = (pick: (figures: ReturnType<typeof summarize>) => number) =>
      round(pick(summary.git_repository) / pick(summary.plain_directory));
    // The target (issue 38, item 6): a git workspace's call within 2x of the plain directory's.
    const gitOverPlain = {
      hand_out_p50: ratio((figures) => figures.hand_out_p50_ms),
      done_p50: ratio((figures) => figures.done_p50_ms),
    };
    console.table({ plain_directory: summary.plain_directory, git_repository: summary.git_repository });
    console.log(`git workspace / plain directory, medians: ${JSON.stringify(gitOverPlain)}`);
    console.log(`one sandboxed git program (rev-parse), p50: ${gitProgram} ms`);
    await fs.mkdir(path.join(import.meta.dirname, "results"), { recursive: true });
    await fs.writeFile(
      path.join(import.meta.dirname, "results/agents.json"),
      `${JSON.stringify({ ...summary, git_over_plain: gitOverPlain }, null, 2)}\n`,
    );
  } finally {
    await drop();
  }
}

await main();
