import { z } from "zod";
import {
  createDecisionLink,
  createDecisionLinkInput,
  decisionLinkViewSchema,
  inspectDecisionLink,
  LINK_DECISIONS,
  useDecisionLink,
  useDecisionLinkInput,
} from "../decisions/decision-links";
import { AppError } from "../errors";
import type { Identity } from "../identity";
import { defineOperation } from "./operation";
import { PERSON_ONLY } from "./policy";
import type { AnyOperation } from "./operation";

/**
 * Decisions from wherever the person is (server/decisions/decision-links.ts): a person makes a
 * signed, single-use, expiring link for a step waiting for their approval; whoever holds the link
 * may make that one decision on that one step, recorded as the person who made it.
 */
const token = z.string().min(1).max(200);

/**
 * Who presents a link at `/decide/<token>` without signing in (a phone, a chat app): the link is
 * their credential for its one decision and nothing else.
 */
export const LINK_HOLDER: Identity = { kind: "person", name: "decision link holder" };

export const decisionLinkCreate = defineOperation({
  name: "decision_link.create",
  callers: PERSON_ONLY,
  role: "approver",
  summary:
    "A signed, single-use, expiring link (/decide/<token>) to approve or deny one step waiting for approval (a person only)",
  input: createDecisionLinkInput,
  output: z.object({
    url: z.string().describe("Relative to this server: /decide/<token>. The token is shown once"),
    token: z.string(),
    expiresAt: z.string(),
    definitionHash: z.string().describe("The step definition the link decides on; a changed step refuses it"),
  }),
  async run({ app, identity }, input) {
    // The credential it was made with is recorded: revoking it (or lowering the maker's role) kills the link.
    return createDecisionLink(app, { name: identity.name, credentialId: identity.tokenId }, input);
  },
});

export const decisionLinkView = defineOperation({
  name: "decision_link.view",
  callers: PERSON_ONLY,
  role: "viewer",
  summary: "What a decision link would decide: the step's tool, resolved arguments and computed risk (changes nothing)",
  input: z.object({ token }),
  output: decisionLinkViewSchema,
  annotations: { readOnly: true },
  async run({ app }, input) {
    return inspectDecisionLink(app, input.token);
  },
});

export const decisionLinkDecide = defineOperation({
  name: "decision_link.decide",
  callers: PERSON_ONLY,
  role: "approver",
  summary:
    "Make a decision link's one decision (approve or deny, with an optional note), as the person who made the link",
  input: useDecisionLinkInput,
  output: z.object({
    runId: z.string(),
    stepId: z.string(),
    decision: z.enum(LINK_DECISIONS),
    decidedAs: z.string(),
  }),
  async run({ app, identity }, input) {
    // The token is the credential for this one decision; an agent holding one still never decides.
    if (identity.kind === "agent") throw new AppError("forbidden", "An agent may not use a decision link");
    return useDecisionLink(app, input);
  },
});

export const decisionLinkOperations = [decisionLinkCreate, decisionLinkView, decisionLinkDecide] as AnyOperation[];
