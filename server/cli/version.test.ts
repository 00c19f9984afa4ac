import { execFile } from "node:child_process";
import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { expect, it } from "vitest";

const projectRoot = fileURLToPath(new URL("../../", import.meta.url));

it("stepwise --version prints the package's version, from any directory", { timeout: 60_000 }, async () => {
  const { version, name, bin } = JSON.parse(await fs.readFile(path.join(projectRoot, "package.json"), "utf8")) as {
    version: string;
    name: string;
    bin: Record<string, string>;
  };
  // The installed command is package.json's bin, run with the current directory elsewhere.
  const { stdout } = await promisify(execFile)(process.execPath, [path.join(projectRoot, bin.stepwise!), "--version"], {
    cwd: os.tmpdir(),
  });
  expect(stdout).toBe(`${version}\n`);
  // A name of its own: `stepwise` alone is an unrelated package on the public registry.
  expect(name).toBe("@stepwise-app/stepwise");
});
