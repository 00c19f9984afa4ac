import { createHash, randomBytes } from "node:crypto";
import type { Pool } from "pg";
import { recordAudit } from "../audit/audit-log";
import { inTransaction } from "../db";
import { AppError } from "../errors";
import { sessionValue } from "../session-cookie";
import type { Identity } from "../identity";
import type { Role } from "../vocabulary";

/**
 * Named principals — people with a role, agents — and their credentials. A credential is a random
 * 32-byte token shown once when it is made; the database keeps only its SHA-256 and the SHA-256
 * of the session-cookie value derived from it, so a copy of the database signs nobody in. The
 * door looks a presented token up by those hashes (unique indexes: one indexed read per request),
 * so a revoked credential stops working with the next request, in every server process.
 *
 * The access token's holder is the principal "user", the bootstrap admin (made by the migration);
 * its token lives in `<data>/access-token`, not here.
 */
export const OWNER_NAME = "user";

/**
 * Changes to who may sign in, and with what role, are about no plan: their audit entries carry
 * `people:<principal id>` where a plan's id would be, and the audit page links them to /people.
 */
export const peopleAuditSubject = (principalId: string) => `people:${principalId}`;

export interface PrincipalView {
  id: string;
  kind: "person" | "agent";
  name: string;
  role: Role | null;
  createdAt: string;
  createdBy: string | null;
  /** The bootstrap admin, whose credential is the access token: not revocable or demotable here. */
  owner: boolean;
  credentials: { id: string; createdAt: string; lastUsedAt: string | null; revokedAt: string | null }[];
}

const TOKEN_PREFIX = "swp_";

export function hashCredential(value: string): string {
  return createHash("sha256").update(value).digest("hex");
}

/** A new credential: the token (shown once) and the two hashes stored. */
function newCredential(): { token: string; tokenHash: string; sessionHash: string } {
  const token = TOKEN_PREFIX + randomBytes(32).toString("base64url");
  return { token, tokenHash: hashCredential(token), sessionHash: hashCredential(sessionValue(token)) };
}

export async function listPrincipals(pool: Pool): Promise<PrincipalView[]> {
  const principals = await pool.query<{
    id: string;
    kind: "person" | "agent";
    name: string;
    role: Role | null;
    created_at: Date;
    created_by: string | null;
  }>("select id, kind, name, role, created_at, created_by from principals order by kind desc, name");
  const credentials = await pool.query<{
    id: string;
    principal_id: string;
    created_at: Date;
    last_used_at: Date | null;
    revoked_at: Date | null;
  }>("select id, principal_id, created_at, last_used_at, revoked_at from principal_credentials order by created_at");
  return principals.rows.map((row) => ({
    id: row.id,
    kind: row.kind,
    name: row.name,
    role: row.role,
    createdAt: row.created_at.toISOString(),
    createdBy: row.created_by,
    owner: row.name === OWNER_NAME && row.kind === "person",
    credentials: credentials.rows
      .filter((credential) => credential.principal_id === row.id)
      .map((credential) => ({
        id: credential.id,
        createdAt: credential.created_at.toISOString(),
        lastUsedAt: credential.last_used_at?.toISOString() ?? null,
        revokedAt: credential.revoked_at?.toISOString() ?? null,
      })),
  }));
}

/** A new person (with a role) or agent, and its first credential, whose token is returned once. */
export async function addPrincipal(
  pool: Pool,
  input: { kind: "person" | "agent"; name: string; role?: Role; createdBy: string },
): Promise<{ principalId: string; credentialId: string; token: string }> {
  if (input.kind === "person" && !input.role) throw new AppError("invalid_input", "Give the person a role");
  const client = await pool.connect();
  try {
    await client.query("begin");
    const made = await client.query<{ id: string }>(
      `insert into principals (id, kind, name, role, created_by) values (gen_random_uuid(), $1, $2, $3, $4)
       on conflict (name) do nothing returning id`,
      [input.kind, input.name, input.kind === "person" ? input.role : null, input.createdBy],
    );
    const principalId = made.rows[0]?.id;
    if (!principalId) throw new AppError("invalid_state", `There is already someone named ${input.name}`);
    const credential = await insertCredential(client, principalId);
    await recordAudit(client, {
      actor: input.createdBy,
      action: "person.added",
      planId: peopleAuditSubject(principalId),
      detail: { name: input.name, kind: input.kind, ...(input.kind === "person" && { role: input.role }) },
    });
    await client.query("commit");
    return { principalId, ...credential };
  } catch (error) {
    await client.query("rollback");
    throw error;
  } finally {
    client.release();
  }
}

async function insertCredential(
  client: Pick<Pool, "query">,
  principalId: string,
): Promise<{ credentialId: string; token: string }> {
  const { token, tokenHash, sessionHash } = newCredential();
  const row = await client.query<{ id: string }>(
    `insert into principal_credentials (id, principal_id, token_hash, session_hash)
     values (gen_random_uuid(), $1, $2, $3) returning id`,
    [principalId, tokenHash, sessionHash],
  );
  return { credentialId: row.rows[0]!.id, token };
}

async function principalById(pool: Pool, id: string) {
  const row = await pool.query<{ id: string; kind: string; name: string; role: Role | null }>(
    "select id, kind, name, role from principals where id = $1",
    [id],
  );
  const principal = row.rows[0];
  if (!principal) throw new AppError("not_found", `No person or agent ${id}`);
  return principal;
}

/** Another credential for an existing principal (a lost token: revoke the old one, make a new one). */
export async function addCredential(
  pool: Pool,
  principalId: string,
  actor: string,
): Promise<{ credentialId: string; token: string; name: string }> {
  const principal = await principalById(pool, principalId);
  if (principal.name === OWNER_NAME && principal.kind === "person") {
    throw new AppError("invalid_input", `${OWNER_NAME}'s credential is the access token in the data folder`);
  }
  return inTransaction(pool, async (client) => {
    const made = await insertCredential(client, principalId);
    await recordAudit(client, {
      actor,
      action: "credential.issued",
      planId: peopleAuditSubject(principalId),
      detail: { name: principal.name, credentialId: made.credentialId },
    });
    return { ...made, name: principal.name };
  });
}

/** Revoked at once: the door reads credentials on every request, so the next one is refused. */
export async function revokeCredential(
  pool: Pool,
  credentialId: string,
  actor: string,
): Promise<{ name: string; revoked: boolean }> {
  return inTransaction(pool, async (client) => {
    const row = await client.query<{ name: string; principal_id: string }>(
      `with revoked as (
         update principal_credentials set revoked_at = coalesce(revoked_at, now()) where id = $1
         returning principal_id, revoked_at)
       select p.name, p.id as principal_id from revoked join principals p on p.id = revoked.principal_id`,
      [credentialId],
    );
    const result = row.rows[0];
    if (!result) throw new AppError("not_found", `No credential ${credentialId}`);
    await recordAudit(client, {
      actor,
      action: "credential.revoked",
      planId: peopleAuditSubject(result.principal_id),
      detail: { name: result.name, credentialId },
    });
    return { name: result.name, revoked: true };
  });
}

export async function setRole(
  pool: Pool,
  principalId: string,
  role: Role,
  actor: string,
): Promise<{ name: string; from: Role | null }> {
  const principal = await principalById(pool, principalId);
  if (principal.kind !== "person")
    throw new AppError("invalid_input", `${principal.name} is an agent; agents have no role`);
  if (principal.name === OWNER_NAME && role !== "admin") {
    // Someone must always be able to manage people: the access token's holder stays an admin.
    throw new AppError("invalid_input", `${OWNER_NAME} holds the access token and stays an admin`);
  }
  await inTransaction(pool, async (client) => {
    await client.query("update principals set role = $2 where id = $1", [principalId, role]);
    await recordAudit(client, {
      actor,
      action: "person.role_changed",
      planId: peopleAuditSubject(principalId),
      detail: { name: principal.name, from: principal.role, to: role },
    });
  });
  return { name: principal.name, from: principal.role };
}

/**
 * The identity a presented bearer token or session cookie belongs to, or undefined (unknown or
 * revoked). One read by a unique index; `last_used_at` is written at most once a minute per
 * credential, and not waited for.
 */
/** Whether someone — a person or a named agent — goes by this name (names are unique across both). */
export async function principalNameTaken(pool: Pool, name: string): Promise<boolean> {
  const row = await pool.query("select 1 from principals where name = $1", [name]);
  return row.rowCount !== 0;
}

export async function resolveCredential(
  pool: Pool,
  presented: { bearer?: string; session?: string },
): Promise<Identity | undefined> {
  const hashes = [
    presented.bearer && hashCredential(presented.bearer),
    presented.session && hashCredential(presented.session),
  ];
  if (!hashes[0] && !hashes[1]) return undefined;
  const row = await pool.query<{
    id: string;
    kind: "person" | "agent";
    name: string;
    role: Role | null;
    stale: boolean;
  }>(
    `select c.id, p.kind, p.name, p.role,
            (c.last_used_at is null or c.last_used_at < now() - interval '1 minute') as stale
       from principal_credentials c join principals p on p.id = c.principal_id
      where c.revoked_at is null and (c.token_hash = $1 or c.session_hash = $2)
      limit 1`,
    [hashes[0] || null, hashes[1] || null],
  );
  const found = row.rows[0];
  if (!found) return undefined;
  if (found.stale) {
    pool
      .query("update principal_credentials set last_used_at = now() where id = $1", [found.id])
      .catch(() => undefined);
  }
  return found.kind === "person"
    ? { kind: "person", name: found.name, role: found.role ?? "viewer", tokenId: found.id }
    : { kind: "agent", name: found.name, tokenId: found.id };
}

/**
 * Who a caller is now, judged at the moment of effect rather than when a session, socket or link
 * began: the identity a named credential stands for today (its principal's current role), or
 * undefined when the credential was revoked or its principal removed. The access token's and the
 * agent token's holders are not principals' credentials (`tokenId` unset) and stay as they are:
 * people.* cannot revoke or demote them.
 */
export async function currentIdentity(pool: Pool, identity: Identity): Promise<Identity | undefined> {
  if (!identity.tokenId) return identity;
  const row = await pool.query<{ kind: "person" | "agent"; name: string; role: Role | null }>(
    `select p.kind, p.name, p.role
       from principal_credentials c join principals p on p.id = c.principal_id
      where c.id = $1 and c.revoked_at is null`,
    [identity.tokenId],
  );
  const found = row.rows[0];
  if (!found || found.kind !== identity.kind) return undefined;
  return found.kind === "person"
    ? { kind: "person", name: found.name, role: found.role ?? "viewer", tokenId: identity.tokenId }
    : { kind: "agent", name: found.name, tokenId: identity.tokenId };
}

/**
 * The person who made something that acts in their name later (a decision link, a webhook that
 * mints links), as they are now: a person principal of that name, with their current role, and —
 * when it was made with a named credential — that credential still unrevoked. Undefined when the
 * person is gone or the credential was revoked. The bootstrap admin (`user`) made it with the
 * access token, which has no row here: their principal's role alone decides.
 */
export async function makerNow(
  pool: Pool,
  maker: { name: string; credentialId?: string | null },
): Promise<Identity | undefined> {
  const row = await pool.query<{ role: Role | null; credential_ok: boolean }>(
    `select p.role,
            ($2::uuid is null or exists (
               select 1 from principal_credentials c
                where c.id = $2::uuid and c.principal_id = p.id and c.revoked_at is null)) as credential_ok
       from principals p where p.name = $1 and p.kind = 'person'`,
    [maker.name, maker.credentialId ?? null],
  );
  const found = row.rows[0];
  if (!found || !found.credential_ok) return undefined;
  const role: Role = found.role ?? (maker.name === OWNER_NAME ? "admin" : "viewer");
  return { kind: "person", name: maker.name, role, ...(maker.credentialId && { tokenId: maker.credentialId }) };
}
