/**
 * The `stepwise` command. `serve`, `worker` and `migrate` run Stepwise itself; `backup` and
 * `restore` keep its data; `start`, `status`, `update`, `alert` and `suggest` are seed 003's
 * agent loop, spoken to a running server over HTTP
 * (`server/cli/client.ts` says how it is found). With `--json`, stdout carries exactly the seed's
 * JSON and nothing else; errors then are JSON too: `{"status":"error","error_type":…,"message":…}`,
 * usage errors (`error_type` "usage", exit 2) included.
 *
 * Exit codes: 0 success · 1 the server refused (plan_validation_failed, a task not ready, no
 * session…) · 2 bad usage · 3 no server reachable · 4 not authorised · 75 the database is
 * unavailable for now: try again (EX_TEMPFAIL).
 */
import fs from "node:fs";
import path from "node:path";
import { Command, CommanderError, InvalidArgumentError, Option } from "commander";
import type { AuditVerification } from "../audit/verify";
import { formatAuditVerification } from "./audit-verify";
import { callOperation, CliError, EXIT, resolveConnection } from "./client";
import { printHuman } from "./human-output";
import { failureReason } from "./failure-reason";

interface ConnectionOptions {
  server?: string;
  token?: string;
  agent?: string;
  session?: string;
  json?: boolean | string;
}

/** The installation's own version, from its package.json (the CLI runs from the checkout). */
const { version } = JSON.parse(fs.readFileSync(new URL("../../package.json", import.meta.url), "utf8")) as {
  version: string;
};

const program = new Command("stepwise")
  .description("Plan-review and live-execution workbench for AI agents")
  .version(version, "-V, --version", "print the version of this Stepwise")
  .showHelpAfterError("(run with --help for usage)")
  .exitOverride();

/**
 * An agent that asked for `--json` parses whatever comes back, so a refusal of its command line
 * (a bad payload, an unknown option) is seed 003's error object on stdout too, not commander's text.
 */
const jsonRequested = process.argv.slice(2).some((arg) => arg === "--json" || arg.startsWith("--json="));

function printJsonError(errorType: string, message: string, details?: unknown): void {
  process.stdout.write(
    `${JSON.stringify({ status: "error", error_type: errorType, message, ...(details !== undefined && { details }) }, null, 2)}\n`,
  );
}

program.configureOutput({
  writeErr: (text) => (jsonRequested ? true : process.stderr.write(text)),
  outputError: (text, write) => write(text),
});

function withConnection(command: Command): Command {
  return command
    .addOption(new Option("--server <url>", "Stepwise server address").env("STEPWISE_URL"))
    .addOption(new Option("--token <token>", "access or agent token (default: from server.json)").env("STEPWISE_TOKEN"))
    .addOption(new Option("--agent <name>", "which agent you are, shown to people").env("STEPWISE_AGENT"))
    .addOption(new Option("--session <id>", "the session (default: the newest open one)").env("STEPWISE_SESSION"));
}

/** Runs one agent operation and prints its answer; the exit code follows the answer. */
async function agentCall(
  name: string,
  input: Record<string, unknown>,
  options: ConnectionOptions,
  jsonOutput: boolean,
) {
  try {
    const connection = await resolveConnection(options);
    const output = await callOperation(connection, name, {
      ...(options.session && { session: options.session }),
      ...input,
    });
    if (jsonOutput) process.stdout.write(`${JSON.stringify(output, null, 2)}\n`);
    else printHuman(name, output);
    const refused = (output as { status?: string }).status === "error";
    process.exitCode = refused ? EXIT.refused : EXIT.ok;
  } catch (error) {
    if (!(error instanceof CliError)) throw error;
    const details = (error as CliError & { details?: unknown }).details;
    if (jsonOutput) {
      printJsonError(error.errorType, error.message, details);
    } else {
      process.stderr.write(`stepwise: ${error.message}\n`);
    }
    process.exitCode = error.exitCode;
  }
}

function positiveInteger(value: string): number {
  const number = Number(value);
  if (!Number.isInteger(number) || number <= 0) throw new InvalidArgumentError("must be a positive whole number");
  return number;
}

function parsePayload(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch (error) {
    throw new InvalidArgumentError(`not valid JSON (${(error as Error).message})`);
  }
}

program
  .command("serve", { isDefault: true })
  .description("start the web app, the API and an in-process worker (embedded PostgreSQL unless DATABASE_URL)")
  .option("--dev", "Next.js development mode")
  .action(async (options: { dev?: boolean }) => {
    // What `next dev` sets before Next.js loads: without it, Next.js takes the development server
    // for a build and rewrites tsconfig.json with a types path that does not exist.
    if (options.dev) Object.assign(process.env, { NODE_ENV: "development" });
    await (await import("./preflight")).preflight("serve");
    await (await import("./serve")).serve(options.dev === true);
  });

program
  .command("worker")
  .description("run a worker process that executes steps (scale out beside `serve`)")
  .option(
    "--workspace <name...>",
    "serve only these workspaces (registered names or paths); default: every registered workspace whose folder exists on this machine",
  )
  .action(async (options: { workspace?: string[] }) => {
    await (await import("./preflight")).preflight("worker");
    await (await import("./serve")).worker({ workspaces: options.workspace });
  });

program
  .command("migrate")
  .description("apply database migrations and exit")
  .action(async () => {
    await (await import("./preflight")).preflight("migrate");
    await (await import("./serve")).migrate();
  });

program
  .command("backup")
  .description("back up the database and the data folder's secrets to FILE, consistent while Stepwise runs")
  .argument("<file>", "the backup file to write (must not exist yet)")
  .action(async (file: string) => {
    await (await import("./backup")).backup(path.resolve(file), version);
  });

program
  .command("restore")
  .description("restore a backup into an empty database: a fresh data folder, or a new DATABASE_URL database")
  .argument("<file>", "a file written by `stepwise backup`")
  .action(async (file: string) => {
    await (await import("./backup")).restore(path.resolve(file));
  });

withConnection(
  program
    .command("mcp")
    .description("MCP over stdio, relayed to the running server's /api/mcp (for clients that launch a command)"),
).action(async (options: ConnectionOptions) => {
  try {
    const { relayStdioToServer } = await import("./mcp-bridge");
    await relayStdioToServer(await resolveConnection(options));
  } catch (error) {
    if (!(error instanceof CliError)) throw error;
    process.stderr.write(`stepwise mcp: ${error.message}\n`);
    process.exit(error.exitCode);
  }
});

withConnection(
  program
    .command("start")
    .description("start an agent session for a goal")
    .requiredOption("--goal <goal>", "what the session should achieve")
    .option("--workspace <dir>", "the directory the agent works in (default: the current one, for a local server)")
    .option(
      "--max-agents <n>",
      "agent tasks in progress at once, one per agent (1: one after another; default 3)",
      positiveInteger,
    )
    .option(
      "--lease-seconds <s>",
      "how long a handed-out task stays an agent's without it calling (default 600)",
      positiveInteger,
    )
    .option("--json", "print the JSON answer only"),
).action(
  async (
    options: ConnectionOptions & { goal: string; workspace?: string; maxAgents?: number; leaseSeconds?: number },
  ) => {
    const connection = await resolveConnection(options).catch(() => undefined);
    const local = connection ? /^https?:\/\/(127\.0\.0\.1|localhost|\[::1\])(:|\/|$)/.test(connection.url) : false;
    const workspace = options.workspace ? path.resolve(options.workspace) : local ? process.cwd() : undefined;
    await agentCall(
      "agent.start",
      {
        goal: options.goal,
        ...(workspace && { workspace }),
        ...(options.maxAgents !== undefined && { agentConcurrency: options.maxAgents }),
        ...(options.leaseSeconds !== undefined && { leaseSeconds: options.leaseSeconds }),
      },
      options,
      options.json === true,
    );
  },
);

withConnection(
  program
    .command("status")
    .description("what to do now: sync instructions, the next task, a blocking signal, or completion")
    .option("--json", "print the JSON answer only"),
).action((options: ConnectionOptions) => agentCall("agent.status", {}, options, options.json === true));

withConnection(
  program
    .command("update")
    .description("report progress, add tasks, or give the final summary")
    .requiredOption("--json <payload>", "the update payload: add_tasks, update_tasks, final_summary", parsePayload)
    .addHelpText(
      "after",
      `\nExample:\n  stepwise update --json '{"update_tasks": [{"id": 2, "status": "DONE"}]}'\n\nThe answer is JSON: {"status":"success",…} or {"status":"error","error_type":"plan_validation_failed","details":[…]} (exit 1).`,
    ),
).action((options: ConnectionOptions & { json: unknown }) =>
  agentCall("agent.update", { payload: options.json }, options, true),
);

withConnection(
  program
    .command("alert")
    .description("raise a signal (a blocker holds the session until cleared), or clear one")
    .option("--id <id>", "the signal's name, e.g. test_failure")
    .addOption(new Option("--level <level>", "how serious").choices(["blocker", "warning", "info"]).default("blocker"))
    .option("--message <text>", "what is wrong")
    .option("--task <id>", "the task it is about", positiveInteger)
    .option("--clear <id>", "clear the signal with this id")
    .option("--json", "print JSON only"),
).action(
  async (
    options: ConnectionOptions & { id?: string; level: string; message?: string; task?: number; clear?: string },
  ) => {
    if (options.clear && (options.id || options.message)) {
      throw new CommanderError(EXIT.usage, "stepwise.usage", "Give either --clear <id>, or --id and --message.");
    }
    if (!options.clear && (!options.id || !options.message)) {
      throw new CommanderError(
        EXIT.usage,
        "stepwise.usage",
        "Raising a signal needs --id and --message (or --clear <id>).",
      );
    }
    const alert = options.clear
      ? { clear: options.clear }
      : {
          id: options.id,
          level: options.level,
          message: options.message,
          ...(options.task && { task_id: options.task }),
        };
    await agentCall("agent.alert", { alert }, options, options.json === true);
  },
);

withConnection(
  program
    .command("suggest")
    .description("suggest new, non-duplicate tasks from the workspace (TODO markers; the planner with an LLM)")
    .option("--json", "print the JSON answer only"),
).action((options: ConnectionOptions) => agentCall("agent.suggest", {}, options, options.json === true));

const auditCommand = program.command("audit").description("the audit log");
withConnection(
  auditCommand
    .command("verify")
    .description("replay the audit hash chain and check every side effect has an authorising decision (exit 1 if not)")
    .option("--json", "print the report as JSON only"),
).action(async (options: ConnectionOptions & { json?: boolean }) => {
  try {
    const report = (await callOperation(await resolveConnection(options), "audit.verify", {})) as AuditVerification;
    if (options.json) process.stdout.write(`${JSON.stringify(report, null, 2)}\n`);
    else for (const line of formatAuditVerification(report)) process.stdout.write(`${line}\n`);
    process.exitCode = report.ok ? EXIT.ok : EXIT.refused;
  } catch (error) {
    if (!(error instanceof CliError)) throw error;
    if (options.json) printJsonError(error.errorType, error.message);
    else process.stderr.write(`stepwise: ${error.message}\n`);
    process.exitCode = error.exitCode;
  }
});

try {
  await program.parseAsync(process.argv);
} catch (error) {
  if (error instanceof CommanderError) {
    // Help and version are not errors; everything else commander refuses is a usage error.
    if (
      error.code === "commander.helpDisplayed" ||
      error.code === "commander.version" ||
      error.code === "commander.help"
    ) {
      process.exitCode = EXIT.ok;
    } else {
      if (jsonRequested) printJsonError("usage", error.message.replace(/^error: /, ""));
      else if (error.code === "stepwise.usage") process.stderr.write(`stepwise: ${error.message}\n`);
      process.exitCode = EXIT.usage;
    }
  } else if (jsonRequested) {
    printJsonError("internal", failureReason(error));
    process.exit(1);
  } else {
    // serve, worker and migrate may have started things (a database): exit rather than linger.
    // Written synchronously: stderr to a pipe is asynchronous, and exit would cut the line off.
    fs.writeSync(2, `[stepwise] ${failureReason(error)}\n`);
    process.exit(1);
  }
}
