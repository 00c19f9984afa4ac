import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { ACCESS_TOKEN_FILE, resolvePersonAccess, signInLink } from "./access-token";

let dataDir: string;

beforeEach(async () => {
  dataDir = path.join(await fs.mkdtemp(path.join(os.tmpdir(), "stepwise-access-")), "data");
});

afterEach(async () => {
  await fs.rm(path.dirname(dataDir), { recursive: true, force: true });
});

const resolve = (options: { host?: string; configuredToken?: string; trustLocal?: boolean } = {}) =>
  resolvePersonAccess({
    dataDir,
    host: options.host ?? "127.0.0.1",
    configuredToken: options.configuredToken,
    trustLocal: options.trustLocal ?? false,
  });

describe("the person's access token", () => {
  it("is made on loopback too, stored 0600 in the data folder, and the same after a restart", async () => {
    const first = await resolve();
    expect(first).toMatchObject({ kind: "stored", created: true });
    expect(first.token).toMatch(/^[A-Za-z0-9_-]{32,}$/);
    const file = path.join(dataDir, ACCESS_TOKEN_FILE);
    expect((await fs.stat(file)).mode & 0o777).toBe(0o600);
    expect((await fs.readFile(file, "utf8")).trim()).toBe(first.token);
    const second = await resolve();
    expect(second).toMatchObject({ kind: "stored", created: false, token: first.token });
  });

  it("replaces a file that holds no token of ours, and tightens loose permissions", async () => {
    await fs.mkdir(dataDir, { recursive: true });
    const file = path.join(dataDir, ACCESS_TOKEN_FILE);
    await fs.writeFile(file, "short\n", { mode: 0o644 });
    const replaced = await resolve();
    expect(replaced).toMatchObject({ kind: "stored", created: true });
    expect(replaced.token).not.toBe("short");
    await fs.chmod(file, 0o644);
    expect(await resolve()).toMatchObject({ token: replaced.token, created: false });
    expect((await fs.stat(file)).mode & 0o777).toBe(0o600);
  });

  it("uses STEPWISE_ACCESS_TOKEN as given, storing nothing", async () => {
    expect(await resolve({ configuredToken: "given-token" })).toEqual({ kind: "configured", token: "given-token" });
    await expect(fs.readdir(dataDir)).rejects.toThrow();
  });

  it("trusts local callers without a token only when asked, and never beyond loopback", async () => {
    expect(await resolve({ trustLocal: true })).toEqual({ kind: "trust-local", token: undefined });
    expect(await resolve({ trustLocal: true, host: "localhost" })).toMatchObject({ kind: "trust-local" });
    for (const host of ["0.0.0.0", "::", "192.168.1.5", "stepwise.example"]) {
      await expect(resolve({ trustLocal: true, host }), host).rejects.toThrow(/only applies on loopback/);
    }
    // A configured token wins over the opt-out.
    expect(await resolve({ trustLocal: true, configuredToken: "given" })).toMatchObject({ kind: "configured" });
  });

  it("prints a sign-in link that carries the token", () => {
    expect(signInLink("http://127.0.0.1:3000", "a-b_c")).toBe("http://127.0.0.1:3000/sign-in?token=a-b_c");
  });
});
