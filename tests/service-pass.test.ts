import fs from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { SERVICE_PASS_FILES } from "./service-pass";

const root = path.resolve(import.meta.dirname, "..");

describe("the PostgreSQL service pass", () => {
  it("names only integration files that exist, so a rename cannot drop one silently", () => {
    for (const file of SERVICE_PASS_FILES) {
      expect(file, file).toMatch(/\.int\.test\.ts$/);
      expect(fs.existsSync(path.join(root, file)), `${file} exists`).toBe(true);
    }
    expect(new Set(SERVICE_PASS_FILES).size).toBe(SERVICE_PASS_FILES.length);
  });
});
