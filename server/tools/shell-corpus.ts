/**
 * The read-only analysis's corpus: every category of attack the analysis must catch (each needs
 * approval), and the ordinary reading commands it must let through. Used by the corpus test
 * (each decision) and the differential test (each allowed command run under bash changes nothing).
 */

export { NEEDS_APPROVAL } from "./shell-corpus-needs-approval";
export { READ_ONLY } from "./shell-corpus-read-only";
