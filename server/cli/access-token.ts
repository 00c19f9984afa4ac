import fs from "node:fs/promises";
import path from "node:path";
import { generateAccessToken } from "../http/door";

/**
 * The person's access token, secure by default as Jupyter is: even on loopback every request
 * needs it, because any web page the person opens and any local process can reach a loopback
 * port. The token is made on first start and kept in `<data>/access-token` (mode 0600, like
 * server.json), so a browser stays signed in across restarts; deleting the file makes a new one
 * and signs every browser out. STEPWISE_ACCESS_TOKEN, when set, is used instead and not stored.
 *
 * STEPWISE_TRUST_LOCAL=1 is the explicit opt-out for a single-user machine: no token, and every
 * local process and page that gets past the door's origin checks acts as the person. It is
 * refused beyond loopback, where it would open the server to the network.
 */
export type PersonAccess =
  | { kind: "configured"; token: string }
  | { kind: "stored"; token: string; file: string; created: boolean }
  | { kind: "trust-local"; token: undefined };

export const ACCESS_TOKEN_FILE = "access-token";
const LOOPBACK_HOSTS = ["127.0.0.1", "localhost", "::1"];
/** What generateAccessToken makes; anything else in the file is not ours and is replaced. */
const TOKEN_SHAPE = /^[A-Za-z0-9_-]{32,}$/;

export async function resolvePersonAccess(options: {
  dataDir: string;
  host: string;
  configuredToken: string | undefined;
  trustLocal: boolean;
}): Promise<PersonAccess> {
  if (options.configuredToken) return { kind: "configured", token: options.configuredToken };
  if (options.trustLocal) {
    if (!LOOPBACK_HOSTS.includes(options.host)) {
      throw new Error(
        `STEPWISE_TRUST_LOCAL=1 only applies on loopback (HOST=127.0.0.1); with HOST=${options.host} every request needs the access token.`,
      );
    }
    return { kind: "trust-local", token: undefined };
  }
  await fs.mkdir(options.dataDir, { recursive: true, mode: 0o700 });
  const file = path.join(options.dataDir, ACCESS_TOKEN_FILE);
  const stored = await fs.readFile(file, "utf8").then(
    (text) => text.trim(),
    () => undefined,
  );
  if (stored !== undefined && TOKEN_SHAPE.test(stored)) {
    await fs.chmod(file, 0o600); // in case it was copied in with looser permissions
    return { kind: "stored", token: stored, file, created: false };
  }
  const token = generateAccessToken();
  // Written whole under another name, then renamed: a reader never sees half a token.
  const partial = `${file}.${process.pid}.tmp`;
  await fs.writeFile(partial, `${token}\n`, { mode: 0o600 });
  await fs.rename(partial, file);
  return { kind: "stored", token, file, created: true };
}

/** The link `serve` prints: opening it signs the browser in (it sets the session cookie). */
export function signInLink(baseUrl: string, token: string): string {
  return `${baseUrl}/sign-in?token=${encodeURIComponent(token)}`;
}
