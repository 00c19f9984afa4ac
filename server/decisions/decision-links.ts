import { createHash, createHmac, randomBytes, randomUUID, timingSafeEqual } from "node:crypto";
import fs from "node:fs";
import path from "node:path";
import type { AppContext } from "../services";
import { recordAudit } from "../audit/audit-log";
import { approvalViewSchema, waitingApproval, type ApprovalView } from "../engine/approval-view";
import { decideApproval } from "../engine/engine";
import { withCaller } from "../caller-context";
import { readConfig } from "../env";
import { AppError, hasKind, markKind } from "../errors";
import type { Identity } from "../identity";
import { makerNow } from "../people/principals";
import type { Principal } from "../policy/authority";
import { z } from "zod";

/**
 * Decisions from wherever the person is: a signed, single-use, expiring link that lets its holder
 * make exactly one decision — approve or deny — on exactly one gated step of one run, for exactly
 * the step definition the link was made for. The link is the credential for that one decision and
 * for nothing else (it opens no page, no API, no other step); the decision is recorded as the person
 * who made the link, audited with `via: "link"`.
 *
 * Token: `<link id>.<mac>`, where the MAC is an HMAC-SHA256, under this server's link key, of
 * everything the link authorises (run, step, definition hash, decisions allowed, expiry, maker).
 * The database holds only the token's SHA-256, so a copy of the database does not hand out
 * decisions, and the key (0600 in the data folder) does not either without a row to match.
 */

export const DECISION_LINK_DEFAULT_TTL_SECONDS = 24 * 3600;
export const DECISION_LINK_MAX_TTL_SECONDS = 7 * 24 * 3600;
export const LINK_DECISIONS = ["approve", "deny"] as const;
export type LinkDecision = (typeof LINK_DECISIONS)[number];

type App = Pick<AppContext, "db" | "tools" | "engine">;

export const DECISION_LINK_KEY_FILE = "decision-link.key";
let cachedKey: { dir: string; key: Buffer } | undefined;

/**
 * The server's key for decision links: 32 random bytes in `<data>/decision-link.key`, made on first
 * use with mode 0600. Written to a temporary file and linked into place, so two processes starting
 * at once agree on one key and never read a half-written one.
 */
export function decisionLinkKey(dataDir = readConfig().dataDir): Buffer {
  if (cachedKey?.dir === dataDir) return cachedKey.key;
  const file = path.join(dataDir, DECISION_LINK_KEY_FILE);
  if (!fs.existsSync(file)) {
    fs.mkdirSync(dataDir, { recursive: true, mode: 0o700 });
    const temporary = `${file}.${process.pid}.${randomUUID()}`;
    fs.writeFileSync(temporary, randomBytes(32).toString("hex"), { mode: 0o600, flag: "wx" });
    try {
      fs.linkSync(temporary, file);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error;
    } finally {
      fs.rmSync(temporary, { force: true });
    }
  }
  const key = Buffer.from(fs.readFileSync(file, "utf8").trim(), "hex");
  if (key.length !== 32) throw new Error(`${file} does not hold a 32-byte key; remove it to make a new one`);
  cachedKey = { dir: dataDir, key };
  return key;
}

interface LinkRow {
  id: string;
  token_hash: string;
  run_id: string;
  step_id: string;
  definition_hash: string;
  decisions: string[];
  created_by: string;
  maker_credential_id: string | null;
  expires_at: Date;
  used_at: Date | null;
  used_decision: string | null;
}

function mac(row: Omit<LinkRow, "token_hash" | "used_at" | "used_decision">): string {
  const signed = [
    "stepwise decision link v1",
    row.id,
    row.run_id,
    row.step_id,
    row.definition_hash,
    row.decisions.join(","),
    row.expires_at.toISOString(),
    row.created_by,
    // Signed when set (links made before it existed have none and keep their signature).
    ...(row.maker_credential_id ? [row.maker_credential_id] : []),
  ].join("\n");
  return createHmac("sha256", decisionLinkKey()).update(signed).digest("base64url");
}

const sha256 = (value: string) => createHash("sha256").update(value).digest("hex");

export const createDecisionLinkInput = z.object({
  runId: z.uuid(),
  stepId: z.string().min(1).max(64),
  expiresInSeconds: z
    .number()
    .int()
    .min(60)
    .max(DECISION_LINK_MAX_TTL_SECONDS)
    .default(DECISION_LINK_DEFAULT_TTL_SECONDS)
    .describe("How long the link is good for (never beyond the step's own approval expiry)"),
  decisions: z.array(z.enum(LINK_DECISIONS)).min(1).max(2).default(["approve", "deny"]),
});

/**
 * Whether the maker may still make a link's decision: a person principal of that name, with the
 * role a decision needs (approver) now, and — when the link was made with a named credential —
 * that credential unrevoked. A link is the maker's authority lent once; it is never more than
 * what the maker holds at the moment it is used.
 */
async function makerMayDecide(
  app: App,
  maker: { name: string; credentialId?: string | null },
  action: "link.make" | "link.decide",
): Promise<Identity | undefined> {
  const now = await makerNow(app.db.pool, maker);
  if (!now?.role) return undefined;
  // Asked of the authority policy: the maker as a person to make a link, the link's holder (acting
  // with the maker's name and role now) to decide through it.
  const principal: Principal =
    action === "link.make"
      ? { kind: "person", name: now.name, role: now.role }
      : { kind: "link", name: now.name, role: now.role };
  return app.engine.authority.authorize(principal, action).allowed ? now : undefined;
}

/**
 * Makes a link for a step waiting for a person's decision, bound to its current definition.
 * `maker.credentialId`: the named credential the maker used (revoking it kills the link).
 * Refused when the maker may not decide now — a webhook minting links for a demoted person.
 */
export async function createDecisionLink(
  app: App,
  maker: { name: string; credentialId?: string | undefined },
  input: z.output<typeof createDecisionLinkInput>,
): Promise<{ url: string; token: string; expiresAt: string; definitionHash: string }> {
  const actor = maker.name;
  if (!(await makerMayDecide(app, maker, "link.make"))) throw new DecisionLinkRefused("maker");
  const { view, run: planOf } = await waitingStep(app, input.runId, input.stepId);
  if (!view) throw new AppError("invalid_state", `${input.stepId} is not waiting for a person's approval`);
  const waiting = await app.db.pool.query<{ expires_at: string | null }>(
    "select waiting->>'expiresAt' as expires_at from run_steps where run_id = $1 and step_id = $2",
    [input.runId, input.stepId],
  );
  const now = await app.db.pool.query<{ now: Date }>("select now() as now");
  let expires = now.rows[0]!.now.getTime() + input.expiresInSeconds * 1000;
  // The step stops waiting at its approval expiry (it is skipped then): a link cannot outlive it.
  const stepExpiry = waiting.rows[0]?.expires_at ? Date.parse(waiting.rows[0].expires_at) : NaN;
  if (Number.isFinite(stepExpiry)) expires = Math.min(expires, stepExpiry);
  const row = {
    id: randomUUID(),
    run_id: input.runId,
    step_id: input.stepId,
    definition_hash: view.definitionHash,
    decisions: [...new Set(input.decisions)],
    created_by: actor,
    maker_credential_id: maker.credentialId ?? null,
    expires_at: new Date(expires),
  };
  const token = `${row.id}.${mac(row)}`;
  await app.db.pool.query(
    `insert into decision_links (id, token_hash, run_id, step_id, definition_hash, decisions, created_by,
                                 maker_credential_id, expires_at)
     values ($1, $2, $3, $4, $5, $6, $7, $8, $9)`,
    [
      row.id,
      sha256(token),
      row.run_id,
      row.step_id,
      row.definition_hash,
      row.decisions,
      actor,
      row.maker_credential_id,
      row.expires_at,
    ],
  );
  await recordAudit(app.db.pool, {
    actor,
    action: "decision_link.created",
    planId: planOf.plan_id,
    planVersion: planOf.plan_version,
    runId: input.runId,
    stepId: input.stepId,
    detail: {
      linkId: row.id,
      decisions: row.decisions,
      expiresAt: row.expires_at.toISOString(),
      definitionHash: row.definition_hash,
    },
  });
  return {
    url: `/decide/${token}`,
    token,
    expiresAt: row.expires_at.toISOString(),
    definitionHash: row.definition_hash,
  };
}

/** Why a link cannot be used, in words for the page that refuses it. */
export type LinkRefusal = "invalid" | "used" | "expired" | "changed" | "not_waiting" | "maker";
const REFUSALS: Record<LinkRefusal, string> = {
  invalid: "This decision link is not valid: it was not made by this server, or it was altered.",
  used: "This decision link was already used. Each link decides once.",
  expired: "This decision link has expired. Open the run in Stepwise to decide.",
  changed:
    "The step changed after this link was made, so the link no longer says what would run. Open the run in Stepwise and decide on what it will run now.",
  not_waiting: "This step is no longer waiting for a decision.",
  maker:
    "The person who made this link may no longer make this decision (their role or credential changed), so the link no longer decides anything.",
};

export class DecisionLinkRefused extends AppError {
  // Its own mark: AppError's `instanceof` would otherwise take any AppError for this one.
  static [Symbol.hasInstance](value: unknown): boolean {
    return hasKind(value, "DecisionLinkRefused");
  }

  constructor(readonly refusal: LinkRefusal) {
    super(refusal === "invalid" || refusal === "maker" ? "forbidden" : "invalid_state", REFUSALS[refusal], {
      refusal,
    });
    markKind(this, "DecisionLinkRefused");
  }
}

export const decisionLinkViewSchema = z.object({
  runId: z.string(),
  stepId: z.string(),
  createdBy: z.string(),
  expiresAt: z.string(),
  decisions: z.array(z.enum(LINK_DECISIONS)),
  approval: approvalViewSchema,
});
export type DecisionLinkView = z.output<typeof decisionLinkViewSchema>;

/** The row a token names, when its signature and hash hold; `invalid` otherwise (same answer for every failure). */
async function verifiedRow(app: App, token: string): Promise<LinkRow> {
  const match = /^([0-9a-f-]{36})\.([A-Za-z0-9_-]{43})$/.exec(token);
  if (!match) throw new DecisionLinkRefused("invalid");
  const found = await app.db.pool.query<LinkRow>("select * from decision_links where id = $1", [match[1]]);
  const row = found.rows[0];
  if (!row) throw new DecisionLinkRefused("invalid");
  const expected = Buffer.from(mac(row));
  const given = Buffer.from(match[2]!);
  const hashOk = timingSafeEqual(Buffer.from(sha256(token)), Buffer.from(row.token_hash));
  if (given.length !== expected.length || !timingSafeEqual(given, expected) || !hashOk) {
    throw new DecisionLinkRefused("invalid");
  }
  return row;
}

async function waitingStep(
  app: App,
  runId: string,
  stepId: string,
): Promise<{ view: ApprovalView | undefined; run: { plan_id: string; plan_version: number } }> {
  const found = await waitingApproval(app.db.pool, app.tools, runId, stepId);
  if (!found) throw new AppError("not_found", `No step ${stepId} in run ${runId}`);
  return { view: found.view, run: { plan_id: found.planId, plan_version: found.planVersion } };
}

/**
 * What a link would decide, for its confirmation page: refused (with why) unless it is valid,
 * unused, unexpired, and its step still waits with the definition the link was made for.
 * Reading changes nothing.
 */
export async function inspectDecisionLink(app: App, token: string): Promise<DecisionLinkView> {
  const row = await verifiedRow(app, token);
  if (row.used_at) throw new DecisionLinkRefused("used");
  const now = await app.db.pool.query<{ now: Date }>("select now() as now");
  if (row.expires_at.getTime() <= now.rows[0]!.now.getTime()) throw new DecisionLinkRefused("expired");
  const { view } = await waitingStep(app, row.run_id, row.step_id);
  if (!view) throw new DecisionLinkRefused("not_waiting");
  if (view.definitionHash !== row.definition_hash) throw new DecisionLinkRefused("changed");
  if (!(await makerMayDecide(app, makerOf(row), "link.decide"))) throw new DecisionLinkRefused("maker");
  return {
    runId: row.run_id,
    stepId: row.step_id,
    createdBy: row.created_by,
    expiresAt: row.expires_at.toISOString(),
    decisions: row.decisions.filter((d): d is LinkDecision => (LINK_DECISIONS as readonly string[]).includes(d)),
    approval: view,
  };
}

function makerOf(row: LinkRow) {
  return { name: row.created_by, credentialId: row.maker_credential_id };
}

export const useDecisionLinkInput = z.object({
  token: z.string().min(1).max(200),
  decision: z.enum(LINK_DECISIONS),
  note: z.string().trim().max(4_000).optional(),
});

/**
 * Makes the link's one decision, as the person who made the link. The link is claimed (marked
 * used, if unused and unexpired) in one statement, so two presses of it decide once; if the engine
 * then refuses the decision (the step changed or was decided meanwhile) the claim is released and
 * nothing is decided.
 */
export async function useDecisionLink(
  app: App,
  input: z.output<typeof useDecisionLinkInput>,
): Promise<{ runId: string; stepId: string; decision: LinkDecision; decidedAs: string }> {
  const row = await verifiedRow(app, input.token);
  if (!row.decisions.includes(input.decision)) {
    throw new AppError("forbidden", `This link does not allow the decision "${input.decision}"`);
  }
  // Judged at use: the maker's role and credential now, not when the link was made.
  const maker = await makerMayDecide(app, makerOf(row), "link.decide");
  if (!maker) throw new DecisionLinkRefused("maker");
  const claimed = await app.db.pool.query<{ id: string }>(
    `update decision_links set used_at = now(), used_decision = $2
      where id = $1 and used_at is null and expires_at > now() returning id`,
    [row.id, input.decision],
  );
  if (claimed.rowCount === 0) {
    const current = await app.db.pool.query<{ used: boolean }>(
      "select used_at is not null as used from decision_links where id = $1",
      [row.id],
    );
    throw new DecisionLinkRefused(current.rows[0]?.used ? "used" : "expired");
  }
  try {
    const { view } = await waitingStep(app, row.run_id, row.step_id);
    if (!view) throw new DecisionLinkRefused("not_waiting");
    if (view.definitionHash !== row.definition_hash) throw new DecisionLinkRefused("changed");
    // The engine checks the definition again inside its decision (approve and, for links, deny).
    // The decision is the maker's, a person's: it runs as them, so it is stored with kind person.
    await withCaller(maker, () =>
      decideApproval(app.engine, {
        runId: row.run_id,
        stepId: row.step_id,
        approve: input.decision === "approve",
        actor: row.created_by,
        definitionHash: row.definition_hash,
        via: "link",
        ...(input.note && { comment: input.note }),
      }),
    );
  } catch (error) {
    await app.db.pool.query("update decision_links set used_at = null, used_decision = null where id = $1", [row.id]);
    if (error instanceof AppError && error.code === "version_conflict") throw new DecisionLinkRefused("changed");
    if (error instanceof AppError && error.code === "invalid_state" && !(error instanceof DecisionLinkRefused)) {
      throw new DecisionLinkRefused("not_waiting");
    }
    throw error;
  }
  return { runId: row.run_id, stepId: row.step_id, decision: input.decision, decidedAs: row.created_by };
}
