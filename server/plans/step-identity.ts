/**
 * Which step of a revision is which step of the version it revises. An author who cannot know the
 * plan's ids — an agent resubmitting its plan, a model regenerating one — hands over a whole new
 * list of steps. Read naively every step is new: the diff shows the plan removed and re-added, and
 * a comment on a step nobody touched counts as answered. So a drafted step whose id the base
 * version does not have is matched to a base step before it is given a fresh id:
 *
 * 1. the same step — same tool, title, description and arguments — keeps the base step's id;
 * 2. otherwise, in plan order, a step with the same tool whose description shares most of its
 *    words with a base step that nothing else matched is that step, changed: it keeps the id, so
 *    the diff shows the change and a comment on it counts as answered by it;
 * 3. anything else is new.
 *
 * A drafted step that names a base id keeps it: that author said which step it is. Identity is only
 * bookkeeping for diffs and comments; approvals bind to a step's definition hash, so a kept id
 * never carries an approval over to changed content.
 */
export interface IdentityStep {
  id: string;
  tool: string;
  title?: string;
  description: string;
  args?: Record<string, unknown>;
}

/** How much of two descriptions' words must be shared for a changed step to keep its identity. */
const SAME_STEP_SIMILARITY = 0.5;

/** For each drafted step without a base id, the base step it is (when it is one). */
export function matchStepIdentities(
  baseSteps: readonly IdentityStep[],
  draftSteps: readonly IdentityStep[],
): Map<string, string> {
  const named = new Set(draftSteps.map((step) => step.id));
  const free = baseSteps.filter((step) => !named.has(step.id));
  const unmatched = draftSteps.filter((step) => !baseSteps.some((base) => base.id === step.id));
  const matches = new Map<string, string>();
  const take = (draft: IdentityStep, base: IdentityStep) => {
    matches.set(draft.id, base.id);
    free.splice(free.indexOf(base), 1);
  };
  for (const draft of unmatched) {
    const same = free.find((base) => sameDefinition(base, draft));
    if (same) take(draft, same);
  }
  for (const draft of unmatched) {
    if (matches.has(draft.id)) continue;
    let best: { base: IdentityStep; score: number } | undefined;
    for (const base of free) {
      if (base.tool !== draft.tool) continue;
      const score = wordSimilarity(describe(base), describe(draft));
      if (score >= SAME_STEP_SIMILARITY && (!best || score > best.score)) best = { base, score };
    }
    if (best) take(draft, best.base);
  }
  return matches;
}

function sameDefinition(left: IdentityStep, right: IdentityStep): boolean {
  return (
    left.tool === right.tool &&
    (left.title ?? "") === (right.title ?? "") &&
    left.description === right.description &&
    JSON.stringify(left.args ?? {}) === JSON.stringify(right.args ?? {})
  );
}

function describe(step: IdentityStep): string {
  return `${step.title ?? ""} ${step.description}`;
}

/** Jaccard similarity of the two texts' lower-cased words. */
export function wordSimilarity(left: string, right: string): number {
  const words = (text: string) => new Set(text.toLowerCase().match(/[\p{L}\p{N}_]+/gu) ?? []);
  const a = words(left);
  const b = words(right);
  if (a.size === 0 && b.size === 0) return 1;
  let shared = 0;
  for (const word of a) if (b.has(word)) shared += 1;
  return shared / (a.size + b.size - shared);
}
