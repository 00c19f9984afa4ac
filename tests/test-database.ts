import { randomBytes } from "node:crypto";
import pg from "pg";
import { findFreePort, startEmbeddedPostgres } from "../server/db/embedded";
import { migrateDatabase } from "../server/cli/bootstrap";
import { verifyAuditLog } from "../server/audit/verify";
import { formatAuditVerification } from "../server/cli/audit-verify";
import { builtinRegistry, type ToolRegistry } from "../server/tools/registry";

/**
 * A PostgreSQL server for one test run: DATABASE_URL's server when given, else an embedded one
 * in a temporary folder. A migrated template database is made once; every test file then gets
 * its own copy, and all of it is dropped at the end.
 */
export interface TestServer {
  serverUrl: string;
  templateDb: string;
  stop(): Promise<void>;
}

export function withDatabase(serverUrl: string, database: string): string {
  const url = new URL(serverUrl);
  url.pathname = `/${database}`;
  return url.toString();
}

async function admin<T>(serverUrl: string, work: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: serverUrl });
  await client.connect();
  try {
    return await work(client);
  } finally {
    await client.end();
  }
}

export async function startTestServer(dataDir: string): Promise<TestServer> {
  const external = process.env.DATABASE_URL;
  let serverUrl: string;
  let stopServer = async () => undefined as void;
  if (external) {
    serverUrl = withDatabase(external, "postgres");
  } else {
    // Loopback TCP (with the generated password): fault-injection tests put a proxy in between.
    const embedded = await startEmbeddedPostgres({
      dataDir,
      port: await findFreePort(),
      database: "postgres",
      access: "tcp",
      // Nothing here outlives the run, and no test crashes this server (those that do start their
      // own): flushing to disk bought nothing but a wait on every commit and every database
      // copied from the template, on a disk the whole machine shares.
      settings: ["fsync=off", "synchronous_commit=off", "full_page_writes=off"],
    });
    serverUrl = embedded.serverUrl;
    stopServer = () => embedded.stop();
  }
  const templateDb = `stepwise_test_${randomBytes(4).toString("hex")}`;
  await admin(serverUrl, (client) => client.query(`create database ${templateDb}`));
  await migrateDatabase(withDatabase(serverUrl, templateDb));
  return {
    serverUrl,
    templateDb,
    async stop() {
      await admin(serverUrl, async (client) => {
        const dbs = await client.query<{ datname: string }>("select datname from pg_database where datname like $1", [
          `${templateDb}%`,
        ]);
        for (const { datname } of dbs.rows) await client.query(`drop database if exists ${datname} with (force)`);
      });
      await stopServer();
    },
  };
}

/**
 * Effects a test file makes on purpose without a decision (a forged row, a step run behind the
 * engine's back), excused by name: only unauthorised effects whose subject matches are let
 * through, and only with the reason written next to them. Chain breaks are never excused.
 */
export interface AuditExemption {
  reason: string;
  subjects: RegExp;
}

export interface TestDatabase {
  url: string;
  /**
   * Verifies the audit log (`verifyAuditLog`: an unbroken chain, every side effect authorised),
   * then drops the database — whatever the verdict — and throws the report if it failed, so the
   * test file fails loudly after its own tests' results, which it does not replace.
   */
  drop(options?: { tools?: ToolRegistry }): Promise<void>;
}

/** A fresh, migrated database copied from the run's template. */
export async function createTestDatabase(options: { auditExemption?: AuditExemption } = {}): Promise<TestDatabase> {
  const serverUrl = process.env.STEPWISE_TEST_SERVER_URL;
  const template = process.env.STEPWISE_TEST_TEMPLATE_DB;
  if (!serverUrl || !template) throw new Error("Integration tests need tests/global-setup.ts");
  const name = `${template}_${randomBytes(3).toString("hex")}`;
  await admin(serverUrl, (client) => client.query(`create database ${name} template ${template}`));
  const url = withDatabase(serverUrl, name);
  return {
    url,
    async drop(dropOptions = {}) {
      let failure: string | undefined;
      try {
        failure = await auditFailure(url, dropOptions.tools ?? builtinRegistry, options.auditExemption);
      } finally {
        await admin(serverUrl, (client) => client.query(`drop database if exists ${name} with (force)`));
      }
      if (failure) throw new Error(failure);
    },
  };
}

async function auditFailure(url: string, tools: ToolRegistry, exemption?: AuditExemption): Promise<string | undefined> {
  const report = await admin(url, (client) => verifyAuditLog(client, tools));
  const unexcused = report.unauthorised.filter((effect) => !exemption?.subjects.test(effect.subject));
  if (report.breaks.length === 0 && unexcused.length === 0) return undefined;
  return [
    "audit verify failed on this test file's database (tests/test-database.ts). If a test above failed, its",
    "state may be the cause: read that failure first.",
    ...formatAuditVerification({ ...report, unauthorised: unexcused }),
  ].join("\n");
}
