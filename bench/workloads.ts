import type { StepInput } from "../server/plan-schema";

/** mulberry32: the deterministic PRNG the workload definitions prescribe. */
export function mulberry32(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Layers of `width` steps; each step of layer k > 0 depends on `fanIn` distinct steps of layer k−1. */
export function layeredSteps(
  layers: number,
  width: number,
  tool: string,
  args: (i: number) => Record<string, unknown>,
  fanIn = 2,
): StepInput[] {
  const rand = mulberry32(42);
  const steps: StepInput[] = [];
  for (let layer = 0; layer < layers; layer++) {
    for (let j = 0; j < width; j++) {
      const i = layer * width + j;
      const dependsOn: string[] = [];
      if (layer > 0) {
        while (dependsOn.length < Math.min(fanIn, width)) {
          const pick = `s${(layer - 1) * width + Math.floor(rand() * width)}`;
          if (!dependsOn.includes(pick)) dependsOn.push(pick);
        }
      }
      steps.push({ id: `s${i}`, description: `step ${i}`, tool, args: args(i), dependsOn });
    }
  }
  return steps;
}

export function chainSteps(length: number, tool: string): StepInput[] {
  return Array.from({ length }, (_, i) => ({
    id: `s${i}`,
    description: `step ${i}`,
    tool,
    args: { i },
    dependsOn: i === 0 ? [] : [`s${i - 1}`],
  }));
}

/** A random valid DAG of `size` steps with `fanIn` dependencies each, for validation timing. */
export function randomDagSteps(size: number, fanIn: number): StepInput[] {
  const rand = mulberry32(42);
  return Array.from({ length: size }, (_, i) => {
    const dependsOn = new Set<string>();
    while (i > 0 && dependsOn.size < Math.min(fanIn, i)) dependsOn.add(`s${Math.floor(rand() * i)}`);
    const deps = [...dependsOn];
    return {
      id: `s${i}`,
      description: `step ${i}`,
      tool: "bench_noop",
      args: { i, ...(deps[0] && { from: `$${deps[0]}` }) },
      dependsOn: deps,
    };
  });
}
