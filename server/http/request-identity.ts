import type { Identity } from "../operations/identity";

/**
 * The identity the door proved for a request. Every route handler (tRPC, the HTTP API, MCP, the
 * operations endpoint) asks here and nowhere else; nothing behind the door reads identity from a
 * header a client could set.
 *
 * Until the door is in place every request is the local person.
 */
export function identityOf(_request: Request): Identity {
  return { kind: "person", name: "user" };
}
