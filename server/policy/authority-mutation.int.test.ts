import { describe, expect, it } from "vitest";
import { checkAuthorityModel } from "../../tests/authority-model/run";
import { AUTHORITY_RULES, createAuthority } from "./authority";

/**
 * The model-based authority test must catch a weakened policy: with any one rule of
 * AUTHORITY_RULES removed (the policy of the app context the doors and the engine ask, see
 * `EngineDeps.authority`), some sequence disagrees with the model or with `audit verify`.
 * Fixed seeds keep it deterministic; the budget per rule is what finds each breach with room.
 */
const RUNS_PER_RULE = Number(process.env.STEPWISE_MUTATION_RUNS ?? 300);

/** Runs the property under `authority`; it must fail (some sequence shows the breach). */
async function expectCaught(what: string, authority: ReturnType<typeof createAuthority>): Promise<void> {
  // Caught is what counts here: no shrinking (the model test shrinks what it finds).
  const { details, wallMs } = await checkAuthorityModel({ authority, numRuns: RUNS_PER_RULE, seed: 35, shrink: false });
  console.info(
    `${what}: ${details.failed ? `caught after ${details.numRuns} sequences` : "NOT caught"} (${wallMs} ms)` +
      (details.counterexample ? `; by ${String(details.counterexample[1])}` : ""),
  );
  expect(details.failed).toBe(true);
}

describe("authority model catches every missing rule", () => {
  for (const rule of AUTHORITY_RULES) {
    it(`without ${rule.id}`, async () => {
      await expectCaught(
        `without ${rule.id}`,
        createAuthority(AUTHORITY_RULES.filter((candidate) => candidate !== rule)),
      );
    }, 600_000);
  }

  // Weakened, not removed: the rule still lets agents start and work sessions, but no longer holds
  // a session attached from an agent's own plan to that agent and its credential.
  it("with agent-starts-its-session not binding a session to its author", async () => {
    const unbound = AUTHORITY_RULES.map((rule) =>
      rule.id === "agent-starts-its-session"
        ? { ...rule, when: (principal: { kind: string }) => principal.kind === "agent" }
        : rule,
    );
    await expectCaught("unbound sessions", createAuthority(unbound));
  }, 600_000);
});
