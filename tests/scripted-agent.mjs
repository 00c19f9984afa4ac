#!/usr/bin/env node
// A scripted agent for tests: one process that drives a session with the real `stepwise` CLI, as
// an agent would — `status --json`, IN_PROGRESS, the work, DONE — until the plan is complete.
// Environment: STEPWISE_URL, STEPWISE_TOKEN, STEPWISE_AGENT (its name), STEPWISE_SESSION;
// HOLD_FILE: after starting a task, wait until this file exists before reporting it DONE (the
// test decides when work finishes; never a timing guess). Each hand-out and DONE is printed as a
// JSON line on stdout, so the test can follow what the agent was given.
import process from "node:process";
import { spawn } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { setTimeout } from "node:timers";
import { fileURLToPath } from "node:url";

const bin = path.join(path.dirname(fileURLToPath(import.meta.url)), "../bin/stepwise.mjs");
const agent = process.env.STEPWISE_AGENT;

function cli(...args) {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [bin, ...args], { stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (chunk) => (stdout += chunk));
    child.stderr.on("data", (chunk) => (stderr += chunk));
    child.on("error", reject);
    child.on("exit", (code) => {
      try {
        resolve({ code, body: JSON.parse(stdout) });
      } catch {
        reject(new Error(`stepwise ${args.join(" ")} (exit ${code}) printed no JSON: ${stdout}${stderr}`));
      }
    });
  });
}

const say = (line) => process.stdout.write(`${JSON.stringify({ agent, ...line })}\n`);
const pause = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

for (;;) {
  const { body } = await cli("status", "--json");
  const reason = body.now?.reason;
  if (reason === "plan_completed") {
    say({ event: "completed" });
    break;
  }
  if (reason !== "ready_for_task") {
    await pause(200);
    continue;
  }
  const task = body.now.current_task;
  say({ event: "handed", task: task.id, brief: body.now.brief });
  if (task.status === "TODO") {
    const started = await cli(
      "update",
      "--json",
      JSON.stringify({ update_tasks: [{ id: task.id, status: "IN_PROGRESS" }] }),
    );
    if (started.body.status !== "success") {
      say({ event: "refused", task: task.id, message: started.body.message });
      continue;
    }
  }
  if (process.env.HOLD_FILE) {
    while (!fs.existsSync(process.env.HOLD_FILE)) {
      // Keep the lease alive while working, as an agent's calls do.
      await cli("status", "--json");
      await pause(200);
    }
  }
  const done = await cli(
    "update",
    "--json",
    JSON.stringify({ update_tasks: [{ id: task.id, status: "DONE", notes: `task ${task.id} done by ${agent}` }] }),
  );
  say({ event: done.body.status === "success" ? "done" : "refused", task: task.id, message: done.body.message });
}
