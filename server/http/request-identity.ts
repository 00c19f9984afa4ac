import { AppError } from "../errors";
import type { Identity } from "../identity";
import { IDENTITY_HEADER, verifyIdentity } from "./door";

/**
 * The identity the door proved for a request. Every route handler (tRPC, the HTTP API, MCP, the
 * operations endpoint) asks here and nowhere else. The door deletes any identity header a client
 * sent and sets its own, signed with a key only this process knows; a request that did not come
 * through the door has none, and is refused rather than trusted.
 */
export function identityOf(request: Request): Identity {
  const identity = verifyIdentity(request.headers.get(IDENTITY_HEADER));
  if (!identity) throw new AppError("unauthorized", "This request did not pass the server's door.");
  return identity;
}
