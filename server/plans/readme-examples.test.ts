import fs from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { builtinRegistry } from "../tools/registry";
import { planExamples } from "../../tests/doc-examples";
import { checkPlanDraft } from "./validate";

/**
 * The documentation's plan examples, parsed out of the files as written: a newcomer copies them, so
 * each must pass the same validation a plan gets before approval — including `$step` reference types.
 */
const root = path.resolve(__dirname, "../..");
const documents = ["README.md", ...fs.readdirSync(path.join(root, "docs")).map((name) => `docs/${name}`)].filter(
  (name) => name.endsWith(".md"),
);

describe("documented plan examples", () => {
  const examples = documents.flatMap((name) =>
    planExamples(fs.readFileSync(path.join(root, name), "utf8")).map((example) => ({ name, example })),
  );

  it("the README has a plan example that passes a step's output with $step", () => {
    expect(
      examples.some(({ name, example }) => name === "README.md" && JSON.stringify(example).includes("$step_")),
    ).toBe(true);
  });

  it.each(examples.map(({ name, example }, index) => [`${name} #${index + 1}`, example] as const))(
    "%s validates as written",
    (_, example) => {
      const draft = Array.isArray(example)
        ? { goal: "Documented example", steps: example }
        : "tool" in (example as object)
          ? { goal: "Documented example", steps: [example] }
          : example;
      expect(checkPlanDraft(draft, builtinRegistry).issues).toEqual([]);
    },
  );
});
