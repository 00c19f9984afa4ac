/**
 * The plan examples in a Markdown document, parsed from its ```json blocks as written: arrays of
 * steps, objects with steps, or a lone step (with a tool). Other JSON blocks (client settings) are
 * not plans.
 */
export function planExamples(markdown: string): unknown[] {
  const blocks = [...markdown.matchAll(/```json\n([\s\S]*?)```/g)].map((match) => JSON.parse(match[1]!) as unknown);
  const isObject = (block: unknown): block is object => typeof block === "object" && block !== null;
  return blocks.filter((block) => Array.isArray(block) || (isObject(block) && ("steps" in block || "tool" in block)));
}
