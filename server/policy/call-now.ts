import type pg from "pg";
import type { Identity } from "../identity";
import { currentIdentity } from "../people/principals";
import { principalOf, type Authority, type AuthorityDecision, type Principal, type Resource } from "./authority";
import { planModeOf, planModeOwnerOf } from "./plan-mode-fact";

/** The operation a call is about, as `operation.call` reads it. */
export type CallAbout = Required<NonNullable<Resource["operation"]>>;

export type CallDecision =
  | { allowed: true; identity: Identity; principal: Principal; decision: AuthorityDecision }
  /** `identity` undefined: the named credential that proved the caller has been revoked since. */
  | { allowed: false; identity: Identity | undefined; principal?: Principal; decision?: AuthorityDecision };

/**
 * `operation.call` asked of the one policy with the caller as they stand at the moment of effect.
 * Every path that lets a caller's call have its effect asks this: a door's call (`recheck: false`:
 * the door has just proven the credential), a live stream before each delivery and a report
 * merged after its call (`recheck: true`: proven earlier, so the named credential is looked up
 * again — revoked, it refuses; the role is read again). For an agent about to change something,
 * whether its plan mode holds it read-only is read now; a caller the policy refuses anyway costs
 * no such lookup. `revoked`: the caller's principal was found revoked by name (a stored report's
 * reporter without a named credential), which the policy's own rule then refuses.
 */
export async function decideCallNow(
  db: pg.Pool,
  authority: Authority,
  operation: CallAbout,
  identity: Identity,
  options: { recheck: boolean; revoked?: boolean },
): Promise<CallDecision> {
  const now = options.recheck ? await currentIdentity(db, identity) : identity;
  if (!now) return { allowed: false, identity: undefined };
  const base = principalOf(now);
  const principal: Principal =
    base.kind === "agent"
      ? { ...base, credential: now.tokenId ?? null, ...(options.revoked && { revoked: true }) }
      : base.kind === "person" && options.revoked
        ? { ...base, revoked: true }
        : base;
  const first = authority.authorize(principal, "operation.call", { operation });
  if (!first.allowed || principal.kind !== "agent" || operation.readOnly) {
    return { allowed: first.allowed, identity: now, principal, decision: first } as CallDecision;
  }
  const planMode = (await planModeOf(db, planModeOwnerOf(now))) !== undefined;
  if (!planMode) return { allowed: true, identity: now, principal, decision: first };
  const held: Principal = { ...principal, planMode: true };
  const decision = authority.authorize(held, "operation.call", { operation });
  return { allowed: decision.allowed, identity: now, principal: held, decision } as CallDecision;
}
