import fs from "node:fs";
import readline from "node:readline";
import { pipeline } from "node:stream/promises";
import { createGunzip, createGzip } from "node:zlib";
import { Readable } from "node:stream";
import pg from "pg";

/**
 * A backup of Stepwise's database and its data folder's secrets in one file, taken while Stepwise
 * runs, and its restore into an empty database. No program is started: the dump is read over an
 * ordinary connection in ONE read-only REPEATABLE READ transaction, so every table is seen as of
 * one moment (what pg_dump does) whatever the server and workers write meanwhile; and it works
 * with the embedded PostgreSQL, whose package ships no pg_dump, as with any DATABASE_URL.
 *
 * The file is gzip'd JSON lines: a header (format, Stepwise version, the migrations the schema
 * had, the secrets), then each table's column list and its rows in batches, the sequences'
 * values, and an end line with the counts — a file cut short has none and is refused. The schema
 * itself is not in the file: a restore applies the same migrations, loads the rows, then applies
 * any migrations the backup predates.
 */

export const BACKUP_FORMAT = "stepwise-backup";
export const BACKUP_VERSION = 1;
/** Stepwise's own tables and the job queue's (its pending jobs: a step ready to run stays queued). */
const SCHEMAS = ["public", "graphile_worker"];
const BATCH_ROWS = 500;

export interface BackupHeader {
  format: typeof BACKUP_FORMAT;
  version: number;
  createdAt: string;
  stepwiseVersion: string;
  /** The Stepwise migrations applied when the backup was taken. */
  migrations: string[];
  /** Data-folder files (name → base64 content): the access token, the decision-link key. */
  secrets: Record<string, string>;
}

type Line =
  | ({ kind: "header" } & BackupHeader)
  | { kind: "table"; schema: string; name: string; columns: string[] }
  | { kind: "rows"; rows: unknown[] }
  | { kind: "sequence"; schema: string; name: string; value: string; called: boolean }
  | { kind: "end"; tables: number; rows: number };

export interface BackupSummary {
  tables: number;
  rows: number;
}

const quote = (name: string) => `"${name.replaceAll('"', '""')}"`;
const qualified = (schema: string, name: string) => `${quote(schema)}.${quote(name)}`;

/** Writes the backup of `databaseUrl` (one snapshot) and `secrets` to `file`. */
export async function writeBackup(options: {
  databaseUrl: string;
  file: string;
  stepwiseVersion: string;
  secrets: Record<string, Buffer>;
}): Promise<BackupSummary> {
  const client = new pg.Client({ connectionString: options.databaseUrl, application_name: "stepwise-backup" });
  await client.connect();
  const summary = { tables: 0, rows: 0 };
  try {
    await client.query("begin isolation level repeatable read read only");
    const lines = async function* (): AsyncGenerator<string> {
      const migrations = await appliedMigrations(client);
      const secrets = Object.fromEntries(
        Object.entries(options.secrets).map(([name, value]) => [name, value.toString("base64")]),
      );
      yield line({
        kind: "header",
        format: BACKUP_FORMAT,
        version: BACKUP_VERSION,
        createdAt: new Date().toISOString(),
        stepwiseVersion: options.stepwiseVersion,
        migrations,
        secrets,
      });
      for (const table of await listTables(client)) {
        summary.tables++;
        yield line({ kind: "table", ...table });
        // A cursor, so a table of millions of events is read in batches, not held in memory.
        const columns = table.columns.map(quote).join(", ");
        await client.query(
          `declare backup_rows no scroll cursor for select json_build_array(${columns}) as r from ${qualified(table.schema, table.name)}`,
        );
        for (;;) {
          const batch = await client.query<{ r: unknown }>(`fetch ${BATCH_ROWS} from backup_rows`);
          if (batch.rows.length === 0) break;
          summary.rows += batch.rows.length;
          yield line({ kind: "rows", rows: batch.rows.map((row) => row.r) });
        }
        await client.query("close backup_rows");
      }
      for (const sequence of await listSequences(client)) yield line({ kind: "sequence", ...sequence });
      yield line({ kind: "end", ...summary });
    };
    const partial = `${options.file}.partial`;
    await pipeline(Readable.from(lines()), createGzip(), fs.createWriteStream(partial, { mode: 0o600 }));
    // Only a whole backup takes the name: a failure leaves no file that looks like one.
    await fs.promises.rename(partial, options.file);
    return summary;
  } finally {
    await client.query("rollback").catch(() => undefined);
    await client.end();
  }
}

function line(value: Line): string {
  return `${JSON.stringify(value)}\n`;
}

async function appliedMigrations(client: pg.Client): Promise<string[]> {
  const { rows } = await client.query<{ migration_name: string }>(
    `select migration_name from _prisma_migrations
      where finished_at is not null and rolled_back_at is null order by migration_name`,
  );
  return rows.map((row) => row.migration_name);
}

/** Tables of the backed-up schemas, parents before the tables whose foreign keys point at them. */
async function listTables(client: pg.ClientBase): Promise<{ schema: string; name: string; columns: string[] }[]> {
  const tables = await client.query<{ oid: number; schema: string; name: string; columns: string[] }>(
    `select c.oid::int as oid, n.nspname as schema, c.relname as name,
            array(select a.attname::text from pg_attribute a
                   where a.attrelid = c.oid and a.attnum > 0 and not a.attisdropped and a.attgenerated = ''
                   order by a.attnum) as columns
       from pg_class c join pg_namespace n on n.oid = c.relnamespace
      where c.relkind in ('r', 'p') and n.nspname = any($1::text[])
      order by n.nspname, c.relname`,
    [SCHEMAS],
  );
  const references = await client.query<{ child: number; parent: number }>(
    `select conrelid::int as child, confrelid::int as parent from pg_constraint
      where contype = 'f' and conrelid <> confrelid`,
  );
  const parents = new Map<number, number[]>();
  for (const { child, parent } of references.rows) parents.set(child, [...(parents.get(child) ?? []), parent]);
  const ordered: typeof tables.rows = [];
  const placed = new Set<number>();
  const visit = (table: (typeof tables.rows)[number], path: Set<number>) => {
    if (placed.has(table.oid)) return;
    if (path.has(table.oid)) throw new Error(`Foreign keys form a cycle through ${table.schema}.${table.name}`);
    path.add(table.oid);
    for (const parent of parents.get(table.oid) ?? []) {
      const found = tables.rows.find((candidate) => candidate.oid === parent);
      if (found) visit(found, path);
    }
    placed.add(table.oid);
    ordered.push(table);
  };
  for (const table of tables.rows) visit(table, new Set());
  return ordered.map(({ schema, name, columns }) => ({ schema, name, columns }));
}

async function listSequences(
  client: pg.ClientBase,
): Promise<{ schema: string; name: string; value: string; called: boolean }[]> {
  const { rows } = await client.query<{ schema: string; name: string; value: string | null }>(
    `select schemaname as schema, sequencename as name, last_value::text as value
       from pg_sequences where schemaname = any($1::text[]) order by 1, 2`,
    [SCHEMAS],
  );
  // A sequence never used has no last value: restored as never used.
  return rows.flatMap((row) => (row.value === null ? [] : [{ ...row, value: row.value, called: true }]));
}

/** The header of a backup file, read without loading the rest (refuses what is not a backup). */
export async function readBackupHeader(file: string): Promise<BackupHeader> {
  for await (const entry of readLines(file)) {
    if (entry.kind !== "header") break;
    const { kind: _kind, ...header } = entry;
    return header;
  }
  throw new Error(`${file} is not a Stepwise backup`);
}

async function* readLines(file: string): AsyncGenerator<Line> {
  const input = fs.createReadStream(file).pipe(createGunzip());
  const lines = readline.createInterface({ input, crlfDelay: Infinity });
  let first = true;
  try {
    for await (const text of lines) {
      let entry: Line;
      try {
        entry = JSON.parse(text) as Line;
      } catch (error) {
        throw new Error(`${file} is not a Stepwise backup, or is damaged`, { cause: error });
      }
      if (first && (entry.kind !== "header" || entry.format !== BACKUP_FORMAT)) {
        throw new Error(`${file} is not a Stepwise backup`);
      }
      if (first && entry.kind === "header" && entry.version > BACKUP_VERSION) {
        throw new Error(
          `${file} was written by a newer Stepwise (backup format ${entry.version}); update to restore it`,
        );
      }
      first = false;
      yield entry;
    }
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === "Z_DATA_ERROR" || code === "Z_BUF_ERROR") {
      throw new Error(`${file} is not a Stepwise backup, or is damaged`, { cause: error });
    }
    throw error;
  } finally {
    lines.close();
    input.destroy();
  }
}

/**
 * The schema's own bookkeeping: the target's rows describe the schema it has (the backup's
 * migrations, and the job queue's of the installed graphile-worker), so they are kept, not loaded.
 */
const SCHEMA_BOOKKEEPING = new Set(["public._prisma_migrations", "graphile_worker.migrations"]);
const isBookkeeping = (table: { schema: string; name: string }) =>
  SCHEMA_BOOKKEEPING.has(`${table.schema}.${table.name}`);

/** Tables whose rows mean the database has been used: a restore never writes over them. */
const USED_IF_ANY = ["plans", "runs", "audit_entries", "planning_sessions"];

/**
 * Loads a backup's rows into `databaseUrl`, whose schema the caller has brought to the backup's
 * migrations. All in one transaction: a failure (a damaged file, a cut connection) leaves the
 * database as it was. Refuses a database that holds plans, runs, planning sessions or audit entries.
 */
export async function loadBackup(options: { databaseUrl: string; file: string }): Promise<BackupSummary> {
  const client = new pg.Client({ connectionString: options.databaseUrl, application_name: "stepwise-restore" });
  await client.connect();
  try {
    await client.query("begin");
    for (const table of USED_IF_ANY) {
      const used = await client.query(`select 1 from ${quote(table)} limit 1`);
      if (used.rowCount) {
        throw new Error(
          `The target database already holds ${table.replace("_", " ")}: restore only into an empty one (a fresh data folder, or a new database for DATABASE_URL)`,
        );
      }
    }
    // What migrations seeded (initial rows such as the bootstrap admin) is replaced by the backup's own.
    const present = (await listTables(client)).filter((table) => !isBookkeeping(table));
    await client.query(`truncate ${present.map((table) => qualified(table.schema, table.name)).join(", ")}`);
    const summary = { tables: 0, rows: 0 };
    let current: { schema: string; name: string; columns: string[] } | undefined;
    let ended = false;
    for await (const entry of readLines(options.file)) {
      if (entry.kind === "table") {
        current = entry;
        summary.tables++;
      } else if (entry.kind === "rows") {
        if (!current) throw new Error(`${options.file} is damaged: rows before their table`);
        if (!isBookkeeping(current)) await insertRows(client, current, entry.rows);
        summary.rows += entry.rows.length;
      } else if (entry.kind === "sequence") {
        await client.query("select setval($1::regclass, $2::bigint, $3)", [
          qualified(entry.schema, entry.name),
          entry.value,
          entry.called,
        ]);
      } else if (entry.kind === "end") {
        if (entry.tables !== summary.tables || entry.rows !== summary.rows) {
          throw new Error(`${options.file} is damaged: it says ${entry.rows} rows, ${summary.rows} were read`);
        }
        ended = true;
      }
    }
    if (!ended) throw new Error(`${options.file} is incomplete (cut short while it was written or copied)`);
    await client.query("commit");
    return summary;
  } catch (error) {
    await client.query("rollback").catch(() => undefined);
    throw error;
  } finally {
    await client.end();
  }
}

/**
 * One batch of rows, each a JSON array in the table's column order, turned back into typed values
 * by PostgreSQL itself (`json_populate_record` on the table's row type): timestamps, arrays, JSON
 * and bytes come back as they were.
 */
async function insertRows(
  client: pg.ClientBase,
  table: { schema: string; name: string; columns: string[] },
  rows: unknown[],
): Promise<void> {
  const target = qualified(table.schema, table.name);
  const columns = table.columns.map(quote).join(", ");
  const objects = rows.map((row) =>
    Object.fromEntries(table.columns.map((column, index) => [column, (row as unknown[])[index]])),
  );
  await client.query(
    `insert into ${target} (${columns}) overriding system value
     select ${columns} from json_populate_recordset(null::${target}, $1::json)`,
    [JSON.stringify(objects)],
  );
}
