import pg from "pg";
import { APP_ROLE } from "./embedded-credentials";

export async function connectAsSuperuser(url: string, work: (client: pg.Client) => Promise<void>): Promise<void> {
  const client = new pg.Client({ connectionString: url });
  client.on("error", () => undefined);
  await client.connect();
  try {
    await work(client);
  } finally {
    await client.end().catch(() => undefined);
  }
}

/** The app's login role: no superuser, no role or database creation; its password kept in step. */
export async function ensureAppRole(client: pg.Client, password: string): Promise<void> {
  const attributes = "login nosuperuser nocreatedb nocreaterole noreplication nobypassrls";
  const exists = await client.query("select 1 from pg_roles where rolname = $1", [APP_ROLE]);
  // The password is generated hex, so it is safe inside the literal.
  if (exists.rowCount === 0) await client.query(`create role ${APP_ROLE} ${attributes} password '${password}'`);
  else await client.query(`alter role ${APP_ROLE} ${attributes} password '${password}'`);
}

/**
 * The app database, owned by the app role — with everything in it: a database created by an older
 * Stepwise belongs to the superuser, and migrations must be able to alter its tables.
 */
export async function ensureAppDatabase(
  client: pg.Client,
  database: string,
  superuserServerUrl: string,
): Promise<void> {
  const quoted = `"${database.replaceAll('"', '""')}"`;
  const found = await client.query<{ owner: string }>(
    "select pg_get_userbyid(datdba) as owner from pg_database where datname = $1",
    [database],
  );
  if (found.rowCount === 0) {
    await client.query(`create database ${quoted} owner ${APP_ROLE}`);
    return;
  }
  if (found.rows[0]!.owner === APP_ROLE) return;
  await client.query(`alter database ${quoted} owner to ${APP_ROLE}`);
  const url = new URL(superuserServerUrl);
  url.pathname = `/${encodeURIComponent(database)}`;
  await connectAsSuperuser(url.toString(), async (inDatabase) => {
    await inDatabase.query(TRANSFER_OWNERSHIP);
  });
}

/** Hands every object of the app's schemas from the superuser to the app role (one transaction). */
const TRANSFER_OWNERSHIP = `
do $$
declare
  item record;
begin
  for item in
    select format('alter schema %I owner to ${APP_ROLE}', nspname) as statement
    from pg_namespace
    where nspname not like 'pg\\_%' and nspname <> 'information_schema' and nspowner <> 'pg_database_owner'::regrole
  loop execute item.statement; end loop;
  -- Tables first: their owned sequences and indexes follow them.
  for item in
    select format('alter %s %I.%I owner to ${APP_ROLE}',
             case c.relkind when 'v' then 'view' when 'm' then 'materialized view' when 'f' then 'foreign table' else 'table' end,
             n.nspname, c.relname) as statement
    from pg_class c join pg_namespace n on n.oid = c.relnamespace
    where c.relkind in ('r', 'p', 'v', 'm', 'f')
      and n.nspname not like 'pg\\_%' and n.nspname <> 'information_schema'
      and c.relowner <> '${APP_ROLE}'::regrole
  loop execute item.statement; end loop;
  for item in
    select format('alter sequence %I.%I owner to ${APP_ROLE}', n.nspname, c.relname) as statement
    from pg_class c join pg_namespace n on n.oid = c.relnamespace
    where c.relkind = 'S' and n.nspname not like 'pg\\_%' and n.nspname <> 'information_schema'
      and c.relowner <> '${APP_ROLE}'::regrole
  loop execute item.statement; end loop;
  for item in
    select format('alter routine %s owner to ${APP_ROLE}', p.oid::regprocedure) as statement
    from pg_proc p join pg_namespace n on n.oid = p.pronamespace
    where n.nspname not like 'pg\\_%' and n.nspname <> 'information_schema' and p.prokind in ('f', 'p')
      and p.proowner <> '${APP_ROLE}'::regrole
  loop execute item.statement; end loop;
  -- Enums, domains and free-standing composite types (a table's row type follows its table).
  for item in
    select format('alter type %s owner to ${APP_ROLE}', t.oid::regtype) as statement
    from pg_type t join pg_namespace n on n.oid = t.typnamespace
    left join pg_class c on c.oid = t.typrelid
    where n.nspname not like 'pg\\_%' and n.nspname <> 'information_schema'
      and t.typowner <> '${APP_ROLE}'::regrole
      and t.typtype in ('e', 'd', 'c', 'r') and (t.typrelid = 0 or c.relkind = 'c')
      and t.typelem = 0
  loop execute item.statement; end loop;
end $$;
`;
