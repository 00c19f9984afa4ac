import type { IdentityKind, Role } from "./vocabulary";

/**
 * Who is calling. The door (`server/http/door.ts`) establishes it from a credential — a token or
 * the session cookie of the sign-in page — and nothing behind the door reads identity from a
 * request header. The name is what approvals and the audit record as the actor; the kind, stored
 * next to it, is what tells an agent from a person whatever name either goes by.
 */
export interface Identity {
  /**
   * person: reviews, approves, waives gates, decides.
   * agent: creates, updates and follows plans and agent tasks; never approves.
   * system: the engine's own decisions (timeouts, recovery).
   */
  kind: IdentityKind;
  name: string;
  /** The named token that proved this identity, when one did. */
  tokenId?: string;
  /**
   * A person's role, which bounds the operations they may call (`Operation.role`). The door sets
   * it from the principal the credential belongs to; a person identity made without one is the
   * bootstrap admin — the access token's holder, or the trusted local user.
   */
  role?: Role;
}

/** The role a person identity acts with (agents and the system have none: their kind bounds them). */
export function roleOf(identity: Identity): Role {
  return identity.role ?? "admin";
}

export const SYSTEM: Identity = { kind: "system", name: "system" };
