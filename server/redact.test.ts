import { describe, expect, it } from "vitest";
import { redactSecrets, redactUrl } from "./redact";

describe("redaction", () => {
  it("drops a URL's userinfo and masks secret query values, keeping what explains it", () => {
    expect(redactUrl("https://user:hunter2@llm.example/v1?api-key=abc123&deployment=gpt")).toBe(
      "https://llm.example/v1?api-key=***&deployment=gpt",
    );
    expect(redactUrl("http://127.0.0.1:4000/v1")).toBe("http://127.0.0.1:4000/v1");
    expect(redactUrl("http://h/v1?opaque=0123456789abcdef0123")).toBe("http://h/v1?opaque=***");
    expect(redactUrl("not a url")).toBe("(not a valid URL)");
  });

  it("masks URLs and key-shaped strings inside free text", () => {
    const message =
      "Request to https://admin:pw@llm.example/v1/chat?key=SECRETKEY failed: invalid key sk-proj-ABCDEFGHIJKLMNOPQRST, " +
      'header Bearer abcdefghijklmnop, body {"api_key": "zzzzzzzzzz"}';
    const redacted = redactSecrets(message);
    for (const secret of ["pw@", "SECRETKEY", "sk-proj-ABCDEFGHIJKLMNOPQRST", "abcdefghijklmnop", "zzzzzzzzzz"]) {
      expect(redacted).not.toContain(secret);
    }
    expect(redacted).toContain("llm.example/v1/chat");
  });
});
