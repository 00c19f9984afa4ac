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

describe("STEPWISE_WORKER_NICE", () => {
  it("defaults to 10, takes 0 to 19, and refuses anything else with the variable's name", () => {
    vi.stubEnv("STEPWISE_WORKER_NICE", undefined);
    expect(readConfig().workerNice).toBe(10);
    vi.stubEnv("STEPWISE_WORKER_NICE", "0");
    expect(readConfig().workerNice).toBe(0);
    vi.stubEnv("STEPWISE_WORKER_NICE", "19");
    expect(readConfig().workerNice).toBe(19);
    for (const bad of ["20", "-1", "5.5", "high"]) {
      vi.stubEnv("STEPWISE_WORKER_NICE", bad);
      expect(() => readConfig()).toThrow(/STEPWISE_WORKER_NICE must be a whole number from 0 to 19/);
    }
  });
});

describe("STEPWISE_RETENTION_DAYS", () => {
  it("is off by default and for 0 or off, takes a number of days, and refuses anything else", () => {
    vi.stubEnv("STEPWISE_RETENTION_DAYS", undefined);
    expect(readConfig().retentionDays).toBeUndefined();
    for (const off of ["", "0", "off", "OFF"]) {
      vi.stubEnv("STEPWISE_RETENTION_DAYS", off);
      expect(readConfig().retentionDays).toBeUndefined();
    }
    vi.stubEnv("STEPWISE_RETENTION_DAYS", "90");
    expect(readConfig().retentionDays).toBe(90);
    vi.stubEnv("STEPWISE_RETENTION_DAYS", "0.5");
    expect(readConfig().retentionDays).toBe(0.5);
    for (const bad of ["-3", "ninety", "Infinity"]) {
      vi.stubEnv("STEPWISE_RETENTION_DAYS", bad);
      expect(() => readConfig()).toThrow(/STEPWISE_RETENTION_DAYS/);
    }
  });
});
