import { createHash } from "node:crypto";
import { describe, expect, it } from "vitest";
import { canonicalContent, chainHash, GENESIS_HASH } from "./chain";

describe("canonicalContent", () => {
  it("sorts keys at every level, keeps array order and writes no whitespace", () => {
    expect(canonicalContent({ b: 1, a: { d: [3, { z: 1, y: 2 }], c: null } })).toBe(
      '{"a":{"c":null,"d":[3,{"y":2,"z":1}]},"b":1}',
    );
  });

  it("hashes what the jsonb column stores: undefined members vanish, dates are ISO strings", () => {
    expect(
      canonicalContent({ gone: undefined, at: new Date("2026-01-02T03:04:05.678Z"), list: [undefined], n: NaN }),
    ).toBe('{"at":"2026-01-02T03:04:05.678Z","list":[null],"n":null}');
  });

  it("is the same text however the keys were inserted", () => {
    expect(canonicalContent({ x: 1, y: "two" })).toBe(canonicalContent({ y: "two", x: 1 }));
  });

  // Frozen: entries already in databases were hashed with exactly this text. If this fails, the
  // serialisation changed and every stored chain would stop verifying.
  it("matches the frozen vector", () => {
    const vector = {
      zeta: 'Grüße \u2028 "quoted" \\ / 😀',
      alpha: [1, 1.5, -0, 1e21, 5e-7, 123456789012, true, false, null],
      "": { nested: { b: "2", a: "1" } },
      Beta: "upper case sorts before lower",
      é: "non-ASCII keys sort by code unit",
    };
    const text = canonicalContent(vector);
    expect(text).toBe(
      '{"":{"nested":{"a":"1","b":"2"}},"Beta":"upper case sorts before lower","alpha":[1,1.5,0,1e+21,5e-7,123456789012,true,false,null],"zeta":"Grüße \u2028 \\"quoted\\" \\\\ / 😀","é":"non-ASCII keys sort by code unit"}',
    );
    expect(createHash("sha256").update(text, "utf8").digest("hex")).toBe(
      "99b3548adc607c2bf79841d781fd5d1831577514a3641ead1836175f318b48b3",
    );
  });
});

describe("chainHash", () => {
  const content = canonicalContent({
    actor: "rita",
    actorKind: "person",
    action: "step.approved",
    planId: "plan-1",
    planVersion: 2,
    runId: null,
    stepId: "step_1",
    detail: { definitionHash: "abc" },
  });
  const at = new Date("2026-11-28T19:00:00.123Z");

  // Frozen: the writer computes this in SQL (recordAudit), the verifier here.
  it("matches the frozen vector", () => {
    expect(chainHash(GENESIS_HASH, content, 1n, at)).toBe(FROZEN_ROW_HASH);
  });

  it("changes with every part: predecessor, content, seq and time", () => {
    const base = chainHash(GENESIS_HASH, content, 1, at);
    expect(chainHash("1".repeat(64), content, 1, at)).not.toBe(base);
    expect(chainHash(GENESIS_HASH, content.replace("rita", "rito"), 1, at)).not.toBe(base);
    expect(chainHash(GENESIS_HASH, content, 2, at)).not.toBe(base);
    expect(chainHash(GENESIS_HASH, content, 1, new Date(at.getTime() + 1))).not.toBe(base);
  });
});

const FROZEN_ROW_HASH = "a4383dbd05d3f6bf1aa752bb479495657cadde5f2cf5937129b2e216b547e7ef";
