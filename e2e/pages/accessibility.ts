import type { Page } from "@playwright/test";
import axe from "axe-core";

/**
 * axe-core's findings on the page as it is now, each as "impact rule: the elements it found".
 *
 * axe is loaded into the page once, and again only when a navigation replaced the document: an
 * init script puts it into every later document, so a check is one `axe.run` (0.05–0.3 s here).
 * `@axe-core/playwright` injected the 0.5 MB script into every frame on every check and opened a
 * blank page to finish each run: 1.5–2.7 s a check, most of the contrast suite's time. These pages
 * have no frames, so axe's cross-frame run has nothing to add.
 */
export async function axeViolations(page: Page, { seriousOnly = false } = {}): Promise<string[]> {
  if (!prepared.has(page)) {
    prepared.add(page);
    await page.addInitScript({ content: axe.source });
  }
  if (!(await page.evaluate(() => "axe" in window))) await page.evaluate(axe.source);
  const violations = await page.evaluate(async () => {
    const results = await (window as unknown as { axe: typeof axe }).axe.run(document, {
      resultTypes: ["violations"],
    });
    return results.violations.map((violation) => ({
      id: violation.id,
      impact: violation.impact ?? "unknown",
      nodes: violation.nodes.map((node) => node.target.join(" ")),
    }));
  });
  return violations
    .filter((violation) => !seriousOnly || violation.impact === "serious" || violation.impact === "critical")
    .map((violation) => `${violation.impact} ${violation.id}: ${violation.nodes.join(", ")}`);
}

const prepared = new WeakSet<Page>();
