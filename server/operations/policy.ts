import type { CallerKind } from "../vocabulary";

/**
 * The authority model, written once. A person disposes: approves, denies, answers, waives gates,
 * registers and changes workspaces, steers a run past what failed or was stopped. An agent
 * proposes: it reads, creates plans and new versions, adds and reports its tasks, raises signals —
 * and never authorises. Every operation names its callers with one of these; the finer rules
 * below are applied by the operations (and, where they must be atomic, by the engine).
 */
export const PERSON_ONLY = ["person"] as const satisfies readonly CallerKind[];
export const PERSON_OR_AGENT = ["person", "agent"] as const satisfies readonly CallerKind[];

/** Enforced by the engine inside the resume's transaction; the rule itself is the vocabulary's. */
export { outranks, mayLiftPause } from "../vocabulary";
