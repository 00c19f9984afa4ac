import { createHmac } from "node:crypto";

/**
 * The value a signed-in browser's session cookie holds: derived from the credential, never the
 * credential itself. Shared by the door (which checks it) and the people store (which keeps only
 * its hash), so neither reaches into the other.
 */
export function sessionValue(token: string): string {
  return createHmac("sha256", token).update("stepwise session v1").digest("base64url");
}
