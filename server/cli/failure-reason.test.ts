import { describe, expect, it } from "vitest";
import { failureReason } from "./failure-reason";

describe("failureReason", () => {
  it("is the message when there is one", () => {
    expect(failureReason(new Error("Port 3000 is in use"))).toBe("Port 3000 is in use");
  });

  it("is never empty: an error without a message names itself, its code and its cause", () => {
    const bare = Object.assign(new Error(""), { code: "EACCES" });
    expect(failureReason(bare)).toMatch(/^Error EACCES without a message \(at /);
    expect(failureReason(new Error("", { cause: new Error("initdb: permission denied") }))).toBe(
      "Error without a message: initdb: permission denied",
    );
    expect(failureReason(undefined)).toMatch(/^failed without giving a reason/);
    expect(failureReason("")).toMatch(/^failed without giving a reason/);
  });
});
