import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { describeCoverage } from "../../tests/authority-model/coverage";
import { checkAuthorityModel } from "../../tests/authority-model/run";

/**
 * The model-based authority test (issue 35, item 6): random sequences of operations by random
 * principals — two approvers, a reviewer, a viewer, an agent, an approver demoted or with a revoked
 * credential, a decision link's holder — through the operations layer as the doors call it and the
 * engine's claim, on a real database. Every command is checked against the test's own model of who
 * may do what now (tests/authority-model/model.ts), and every sequence ends with `audit verify`.
 *
 * Seeded: a failure prints the seed and the shrunk sequence; replay it with
 * STEPWISE_MODEL_SEED=<seed>. The CI budget is small; STEPWISE_MODEL_RUNS=10000 runs the long one.
 */
const runs = Number(process.env.STEPWISE_MODEL_RUNS ?? 60);
const seed = process.env.STEPWISE_MODEL_SEED ? Number(process.env.STEPWISE_MODEL_SEED) : undefined;

describe("authority, model-based", () => {
  it(
    `${runs} random sequences: every effect and refusal is the model's, and audit verify finds nothing`,
    async () => {
      const { details, wallMs } = await checkAuthorityModel({ numRuns: runs, ...(seed !== undefined && { seed }) });
      console.info(`authority model: ${details.numRuns} sequences, seed ${details.seed}, ${wallMs} ms`);
      console.info(`covered: ${describeCoverage()}`);
      if (details.failed) {
        throw new Error(`${fc.defaultReportMessage(details) ?? "failed"}\n${String(details.errorInstance)}`);
      }
      expect(details.numRuns).toBe(runs);
    },
    Math.max(600_000, runs * 2_000),
  );
});
