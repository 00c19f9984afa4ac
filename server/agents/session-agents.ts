import type { AppContext } from "../services";
import { recordAudit } from "../audit/audit-log";
import { inTransaction } from "../db";
import { AppError } from "../errors";
import { appendEvents } from "../events/store";
import type { TaskBrief } from "./contract";
import { taskNumber } from "../engine/agent-signals";
import type { LeaseRow } from "./leases";

/** A session's agents as people see them (the run's live view) and the cap a person sets on them. */
type App = Pick<AppContext, "db">;

export interface SessionAgentView {
  name: string;
  lastSeenAt: string;
  idleSeconds: number;
  tasks: {
    taskId: number;
    stepId: string;
    title: string;
    leasedAt: string;
    expiresAt: string;
    leaseAgeSeconds: number;
    secondsLeft: number;
    brief: TaskBrief;
  }[];
}

/** Who works on what, for the run's live view: each agent, its leased tasks and when it last called. */
export async function agentsOfSession(app: Pick<App, "db">, sessionId: string): Promise<SessionAgentView[]> {
  const [agents, leases] = await Promise.all([
    app.db.pool.query<{ agent: string; last_seen_at: Date; idle_seconds: number }>(
      `select agent, last_seen_at, extract(epoch from now() - last_seen_at)::int as idle_seconds
         from session_agents where session_id = $1 order by first_seen_at, agent`,
      [sessionId],
    ),
    app.db.pool.query<LeaseRow & { age_seconds: number; seconds_left: number }>(
      `select step_id, agent, leased_at, expires_at, brief,
              extract(epoch from now() - leased_at)::int as age_seconds,
              greatest(0, extract(epoch from expires_at - now()))::int as seconds_left
         from agent_task_leases where session_id = $1 order by leased_at`,
      [sessionId],
    ),
  ]);
  const views = new Map<string, SessionAgentView>(
    agents.rows.map((row) => [
      row.agent,
      { name: row.agent, lastSeenAt: row.last_seen_at.toISOString(), idleSeconds: row.idle_seconds, tasks: [] },
    ]),
  );
  for (const lease of leases.rows) {
    // A person who took a task with `status` is not listed as an agent, but holds it all the same.
    if (!views.has(lease.agent)) {
      views.set(lease.agent, {
        name: lease.agent,
        lastSeenAt: lease.leased_at.toISOString(),
        idleSeconds: 0,
        tasks: [],
      });
    }
    views.get(lease.agent)!.tasks.push({
      taskId: taskNumber(lease.step_id) ?? 0,
      stepId: lease.step_id,
      title: lease.brief.title,
      leasedAt: lease.leased_at.toISOString(),
      expiresAt: lease.expires_at.toISOString(),
      leaseAgeSeconds: lease.age_seconds,
      secondsLeft: lease.seconds_left,
      brief: lease.brief,
    });
  }
  return [...views.values()];
}

/** A person's (or the session start's) cap on agent tasks in progress at once. */
export async function setAgentConcurrency(
  app: Pick<App, "db">,
  input: { sessionId: string; agentConcurrency: number; actor: string },
): Promise<void> {
  await inTransaction(app.db.pool, async (client) => {
    const rows = await client.query<{ run_id: string; plan_id: string; trace_id: string; plan_version: number }>(
      `update agent_sessions s set agent_concurrency = $2 from runs r
        where s.id = $1 and r.id = s.run_id returning s.run_id, s.plan_id, r.trace_id, r.plan_version`,
      [input.sessionId, input.agentConcurrency],
    );
    const session = rows.rows[0];
    if (!session) throw new AppError("not_found", `No session ${input.sessionId}`);
    await appendEvents(
      client,
      { streamId: session.run_id, planId: session.plan_id, runId: session.run_id, traceId: session.trace_id },
      [
        {
          type: "agent.concurrency_set",
          stepId: null,
          data: { agentConcurrency: input.agentConcurrency, actor: input.actor },
        },
      ],
    );
    await recordAudit(client, {
      actor: input.actor,
      action: "session.agent_concurrency_set",
      planId: session.plan_id,
      planVersion: session.plan_version,
      runId: session.run_id,
      detail: { sessionId: input.sessionId, agentConcurrency: input.agentConcurrency },
    });
  });
}
