/**
 * What the commands of a model run did, counted by kind (a group decision allowed, an instance
 * held at its claim, …): printed by the model test, so a change that leaves a path untried (a
 * fan-out never reaching its instances, an MCP tool never claimed) shows in the figures.
 */
export const coverage = new Map<string, number>();

export function count(what: string): void {
  coverage.set(what, (coverage.get(what) ?? 0) + 1);
}

export function describeCoverage(): string {
  return [...coverage.entries()]
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([what, times]) => `${what}: ${times}`)
    .join(", ");
}
