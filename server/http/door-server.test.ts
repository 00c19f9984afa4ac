import { createServer, request as httpRequest, type IncomingMessage, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { doorConfig } from "./door";
import { behindDoor, MAX_BODY_BYTES, MAX_SIGN_IN_BYTES } from "./door-server";
import { toProblem } from "./problem";

/**
 * The door in front of a real Node HTTP server, with a route that reads and keeps every byte of
 * its body as a JSON handler does: what the route ever holds is what the server's memory holds.
 */
const token = "door-server-token";
let server: Server;
let base: string;
const seen: { bytes: number; outcome: "end" | "error" | "reading"; errorStatus?: number }[] = [];

beforeAll(async () => {
  const route = (req: IncomingMessage, res: import("node:http").ServerResponse) => {
    const record: (typeof seen)[number] = { bytes: 0, outcome: "reading" };
    seen.push(record);
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => {
      chunks.push(chunk);
      record.bytes += chunk.length;
    });
    req.on("end", () => {
      record.outcome = "end";
      if (!res.headersSent) res.writeHead(200, { "content-type": "application/json" }).end('{"ok":true}');
    });
    req.on("error", (error) => {
      record.outcome = "error";
      // What a route's error handling makes of it: the status it would answer and log by.
      record.errorStatus = toProblem(error).status;
    });
    req.on("aborted", () => (record.outcome = "error"));
  };
  server = createServer(behindDoor(route, doorConfig({ host: "127.0.0.1", accessToken: token })));
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  base = `127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
});

interface Sent {
  status: number | undefined;
  contentType: string | undefined;
  body: string;
  written: number;
}

/**
 * Streams up to `total` bytes in `chunk`-sized pieces (chunked unless a length is declared),
 * honouring backpressure, and stops as soon as the server answers or closes the connection.
 */
function send(
  path: string,
  options: { total: number; chunk?: number; fill?: string; headers?: Record<string, string> },
): Promise<Sent> {
  const piece = Buffer.alloc(options.chunk ?? 64 * 1024, options.fill ?? "a");
  return new Promise((resolve) => {
    let written = 0;
    let done = false;
    const result: Sent = { status: undefined, contentType: undefined, body: "", written: 0 };
    const finish = () => {
      if (done) return;
      done = true;
      result.written = written;
      resolve(result);
    };
    const req = httpRequest(`http://${base}${path}`, {
      method: "POST",
      headers: { host: base, authorization: `Bearer ${token}`, "content-type": "application/json", ...options.headers },
    });
    req.on("response", (response) => {
      result.status = response.statusCode;
      result.contentType = response.headers["content-type"];
      response.setEncoding("utf8");
      response.on("data", (text: string) => (result.body += text));
      response.on("end", finish);
      response.on("error", finish);
    });
    req.on("error", () => {
      // The server closed the connection after its answer; a connection dropped before any answer
      // shows as status undefined.
      setTimeout(finish, 200);
    });
    const write = () => {
      while (!done && result.status === undefined && written < options.total) {
        const ok = req.write(piece);
        written += piece.length;
        if (!ok) return void req.once("drain", write);
      }
      if (written >= options.total && !done) req.end();
    };
    write();
  });
}

describe("the body limit", () => {
  it("cuts a 200 MB chunked body at the limit: 413, and the route never holds more than the limit", async () => {
    seen.length = 0;
    const sent = await send("/api/ops/plan.create", { total: 200 * 1024 * 1024 });
    expect(sent.status).toBe(413);
    expect(sent.contentType).toContain("application/problem+json");
    expect(JSON.parse(sent.body)).toMatchObject({ status: 413, title: "Request too large" });
    expect(sent.written).toBeLessThan(200 * 1024 * 1024);
    expect(seen).toHaveLength(1);
    expect(seen[0]!.bytes).toBeLessThanOrEqual(MAX_BODY_BYTES);
    // The route's read ends in an error once the connection closes, never in a truncated "end".
    await expect.poll(() => seen[0]!.outcome, { timeout: 15_000 }).toBe("error");
    // An error of the client's (413), so the route does not log it as a failure of its own.
    await expect.poll(() => seen[0]!.errorStatus, { timeout: 15_000 }).toBe(413);
  });

  it("refuses a declared length over the limit before the route is called", async () => {
    seen.length = 0;
    const sent = await send("/api/ops/plan.create", {
      total: 2 * MAX_BODY_BYTES,
      headers: { "content-length": String(2 * MAX_BODY_BYTES) },
    });
    expect(sent.status).toBe(413);
    expect(seen).toHaveLength(0);
  });

  it("passes a body under the limit whole", async () => {
    seen.length = 0;
    const sent = await send("/api/ops/plan.create", { total: MAX_BODY_BYTES, chunk: MAX_BODY_BYTES / 4 });
    expect(sent.status).toBe(200);
    expect(seen[0]).toEqual({ bytes: MAX_BODY_BYTES, outcome: "end" });
  });

  it("answers an oversized sign-in form with 413 instead of dropping the connection, chunked or declared", async () => {
    const form = { "content-type": "application/x-www-form-urlencoded" };
    const chunked = await send("/sign-in", { total: 50 * MAX_SIGN_IN_BYTES, chunk: 4096, headers: form });
    expect(chunked.status).toBe(413);
    expect(chunked.contentType).toContain("application/problem+json");
    const declared = await send("/sign-in", {
      total: 2 * MAX_SIGN_IN_BYTES,
      chunk: 2 * MAX_SIGN_IN_BYTES,
      headers: { ...form, "content-length": String(2 * MAX_SIGN_IN_BYTES) },
    });
    expect(declared.status).toBe(413);
    // A form within the limit still signs in.
    const small = Buffer.from(`token=${token}`);
    const signedIn = await send("/sign-in", {
      fill: small.toString(),
      total: small.length,
      chunk: small.length,
      headers: { ...form, "content-length": String(small.length) },
    });
    expect(signedIn.status).toBe(303);
  });
});
