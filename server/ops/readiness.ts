import fs from "node:fs/promises";
import path from "node:path";
import { fileURLToPath } from "node:url";
import type pg from "pg";
import { MISSED_BEATS } from "../engine/queue-locks";

/**
 * What a supervisor or a load balancer asks before sending work here (`GET /api/ready`): can this
 * process reach its database, is the schema the one this code expects, and is some worker alive
 * to run steps. Each check answers on its own, so the answer says which one failed. Liveness
 * (`/api/health`) asks none of this: a process that answers at all is alive.
 */
export interface ReadinessCheck {
  ok: boolean;
  detail: string;
}

export interface Readiness {
  ready: boolean;
  checks: { database: ReadinessCheck; migrations: ReadinessCheck; worker: ReadinessCheck };
}

// Not `new URL("…", import.meta.url)`: the web server's bundler takes that for an asset to bundle.
const defaultMigrationsDir = path.join(
  path.dirname(fileURLToPath(import.meta.url)),
  "..",
  "..",
  "prisma",
  "migrations",
);
/** However slow the database, the probe answers within this: a hung probe is a failed one to a balancer. */
const CHECK_TIMEOUT_MS = 5_000;

/**
 * The migrations this code ships. Read where the code lies, so read once by the process that
 * starts the server (`createAppContext`, run by `serve` outside Next.js's bundles) and handed to
 * the probe: a route handler's bundle may lie elsewhere.
 */
export async function shippedMigrations(migrationsDir = defaultMigrationsDir): Promise<string[]> {
  const entries = await fs.readdir(migrationsDir, { withFileTypes: true });
  return entries.filter((entry) => entry.isDirectory()).map((entry) => entry.name);
}

export async function checkReadiness(
  pool: pg.Pool,
  /** `shipped`: the migrations this code ships, when known; else read from `migrationsDir`. */
  options: { shipped?: readonly string[]; migrationsDir?: string; timeoutMs?: number } = {},
): Promise<Readiness> {
  const timeoutMs = options.timeoutMs ?? CHECK_TIMEOUT_MS;
  const database = await withTimeout(
    pool.query("select 1").then(() => ({ ok: true, detail: "reachable" })),
    timeoutMs,
  );
  const skipped = { ok: false, detail: "not checked: the database is unreachable" };
  const [migrations, worker] = database.ok
    ? await Promise.all([
        withTimeout(
          (async () => checkMigrations(pool, options.shipped ?? (await shippedMigrations(options.migrationsDir))))(),
          timeoutMs,
        ),
        withTimeout(checkWorker(pool), timeoutMs),
      ])
    : [skipped, skipped];
  return { ready: database.ok && migrations.ok && worker.ok, checks: { database, migrations, worker } };
}

/** The migrations this code ships, against those the database records as applied. */
async function checkMigrations(pool: pg.Pool, shipped: readonly string[]): Promise<ReadinessCheck> {
  const { rows } = await pool.query<{ migration_name: string }>(
    "select migration_name from _prisma_migrations where finished_at is not null and rolled_back_at is null",
  );
  const applied = new Set(rows.map((row) => row.migration_name));
  const pending = shipped.filter((name) => !applied.has(name)).sort();
  if (pending.length > 0) {
    return {
      ok: false,
      detail: `${pending.length} migration(s) not applied, first ${pending[0]}: run stepwise migrate`,
    };
  }
  return { ok: true, detail: `${shipped.length} migrations applied` };
}

/** A worker counts as alive as recovery judges it: beaten within MISSED_BEATS of its own intervals. */
async function checkWorker(pool: pg.Pool): Promise<ReadinessCheck> {
  const { rows } = await pool.query<{ alive: string; last_seen: Date | null }>(
    `select count(*) filter (where last_seen > now() - make_interval(secs => heartbeat_ms * ${MISSED_BEATS} / 1000.0)) as alive,
            max(last_seen) as last_seen
       from workers where stopped_at is null`,
  );
  const alive = Number(rows[0]?.alive ?? 0);
  if (alive > 0) return { ok: true, detail: `${alive} worker(s) with a recent heartbeat` };
  const lastSeen = rows[0]?.last_seen;
  return {
    ok: false,
    detail: lastSeen
      ? `no worker has beaten recently (last heartbeat ${lastSeen.toISOString()})`
      : "no worker is running: start `stepwise worker` or serve with its in-process worker",
  };
}

async function withTimeout(check: Promise<ReadinessCheck>, ms: number): Promise<ReadinessCheck> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<ReadinessCheck>((resolve) => {
    timer = setTimeout(() => resolve({ ok: false, detail: `no answer within ${ms} ms` }), ms);
  });
  try {
    return await Promise.race([
      check.catch((error: unknown) => ({ ok: false, detail: (error as Error).message || String(error) })),
      late,
    ]);
  } finally {
    clearTimeout(timer);
  }
}
