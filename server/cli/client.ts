import path from "node:path";
import { fileURLToPath } from "node:url";
import { processAlive, readConnectionFile } from "./connection-file";

/**
 * How the `stepwise` CLI reaches a server: `--server`/`--token` flags, else STEPWISE_URL /
 * STEPWISE_TOKEN, else the `server.json` a local server writes in its data folder
 * (STEPWISE_DATA_DIR, or `data/` of this Stepwise installation, as `npm start` uses).
 */
export interface Connection {
  url: string;
  token?: string;
  agentName?: string;
  /** Where the connection came from, for error messages. */
  source: string;
}

/** Failures of the transport itself, each with its documented exit code. */
export class CliError extends Error {
  constructor(
    message: string,
    readonly exitCode: number,
    readonly errorType: string,
  ) {
    super(message);
  }
}

/** `tryAgain` is EX_TEMPFAIL (sysexits.h): the server is up but its database is not; retry later. */
export const EXIT = { ok: 0, refused: 1, usage: 2, unreachable: 3, unauthorized: 4, tryAgain: 75 } as const;

const installationRoot = fileURLToPath(new URL("../../", import.meta.url));

export async function resolveConnection(options: {
  server?: string;
  token?: string;
  agent?: string;
}): Promise<Connection> {
  // An empty variable counts as unset (`STEPWISE_TOKEN= stepwise status` must not send no token).
  const agentName = options.agent || process.env.STEPWISE_AGENT || undefined;
  const url = options.server || process.env.STEPWISE_URL || undefined;
  const token = options.token || process.env.STEPWISE_TOKEN || undefined;
  if (url)
    return {
      url: url.replace(/\/+$/, ""),
      ...(token && { token }),
      ...(agentName && { agentName }),
      source: options.server ? "--server" : "STEPWISE_URL",
    };
  const dataDir = path.resolve(process.env.STEPWISE_DATA_DIR ?? path.join(installationRoot, "data"));
  const file = await readConnectionFile(dataDir);
  if (!file) {
    throw new CliError(
      `No Stepwise server found: ${path.join(dataDir, "server.json")} does not exist. Start one with \`npm start\` in ${installationRoot} (or \`stepwise serve\`), or pass --server URL --token TOKEN.`,
      EXIT.unreachable,
      "server_unreachable",
    );
  }
  if (!processAlive(file.pid)) {
    throw new CliError(
      `The Stepwise server recorded in ${path.join(dataDir, "server.json")} (pid ${file.pid}) is not running. Start it again with \`npm start\` in ${installationRoot}.`,
      EXIT.unreachable,
      "server_unreachable",
    );
  }
  return {
    url: file.url,
    token: token ?? file.token,
    ...(agentName && { agentName }),
    source: path.join(dataDir, "server.json"),
  };
}

export interface Problem {
  code?: string;
  detail?: string;
  title?: string;
  details?: unknown;
}

/** Calls `POST /api/ops/<name>`; an error answer becomes a CliError carrying the server's code. */
export async function callOperation(connection: Connection, name: string, input: unknown): Promise<unknown> {
  let response: Response;
  try {
    response = await fetch(`${connection.url}/api/ops/${name}`, {
      method: "POST",
      headers: {
        "content-type": "application/json",
        ...(connection.token && { authorization: `Bearer ${connection.token}` }),
        ...(connection.agentName && { "x-stepwise-agent": connection.agentName }),
      },
      body: JSON.stringify(input),
      signal: AbortSignal.timeout(60_000),
    });
  } catch (error) {
    throw new CliError(
      `Cannot reach Stepwise at ${connection.url} (from ${connection.source}): ${(error as Error).cause ?? (error as Error).message}. Is it running? Start it with \`npm start\`.`,
      EXIT.unreachable,
      "server_unreachable",
    );
  }
  const text = await response.text();
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    throw new CliError(
      `Unexpected answer from ${connection.url} (HTTP ${response.status})`,
      EXIT.unreachable,
      "bad_response",
    );
  }
  if (response.ok) return body;
  const problem = body as Problem;
  if (response.status === 503) {
    const retryAfter = response.headers.get("retry-after");
    throw new CliError(
      `Database unavailable, try again${retryAfter ? ` in ${retryAfter} s` : " shortly"}. (${problem.detail ?? `HTTP ${response.status}`})`,
      EXIT.tryAgain,
      problem.code ?? "unavailable",
    );
  }
  const exitCode = response.status === 401 || response.status === 403 ? EXIT.unauthorized : EXIT.refused;
  const error = new CliError(
    problem.detail ?? problem.title ?? `HTTP ${response.status}`,
    exitCode,
    problem.code ?? "error",
  );
  Object.assign(error, { details: problem.details });
  throw error;
}
