import path from "node:path";
import { afterEach, describe, expect, it, vi } from "vitest";
import { readConfig } from "./env";

afterEach(() => {
  vi.unstubAllEnvs();
});

describe("readConfig workspace default", () => {
  it("is a workspace folder inside the data folder, not the current directory", () => {
    vi.stubEnv("STEPWISE_WORKSPACE", undefined);
    vi.stubEnv("STEPWISE_DATA_DIR", "/tmp/stepwise-data");
    const config = readConfig();
    expect(config.workspaceDir).toBe(path.resolve("/tmp/stepwise-data/workspace"));
    expect(config.workspaceDir).not.toBe(process.cwd());
  });

  it("follows STEPWISE_WORKSPACE when set", () => {
    vi.stubEnv("STEPWISE_WORKSPACE", "/tmp/some-project");
    expect(readConfig().workspaceDir).toBe(path.resolve("/tmp/some-project"));
  });
});
