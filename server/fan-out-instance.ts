import type { Step } from "./plan-schema";

/**
 * A fan-out instance's definition, shared by the engine (which runs and hashes it) and the audit
 * verifier (which checks that what ran was approved): pure, so both read the same thing.
 */

/** The id of a fan-out instance: its template's id and its index in the list, `step_3[0]`. */
export function instanceId(templateId: string, index: number): string {
  return `${templateId}[${index}]`;
}

const INSTANCE_ID = /^(.+)\[(\d+)\]$/;

/** The template and index an instance id names, or undefined for an ordinary step id. */
export function parseInstanceId(stepId: string): { templateId: string; index: number } | undefined {
  const match = INSTANCE_ID.exec(stepId);
  return match ? { templateId: match[1]!, index: Number(match[2]) } : undefined;
}

/** `$item.field` naming a field the element does not have. */
export class ItemFieldError extends Error {}

/**
 * The template's definition with `$item` (or `$item.a.b`) replaced by the element: what the
 * instance runs and what an approval of it binds to. Its own dependencies are none: it is made
 * once the template's were satisfied; `forEach`, `maxItems` and `when` belong to the template.
 */
export function instanceDefinition(template: Step, index: number, item: unknown): Step {
  const { forEach: _list, maxItems: _cap, when: _when, ...rest } = template;
  void [_list, _cap, _when];
  return {
    ...rest,
    id: instanceId(template.id, index),
    args: substituteItem(template.args, item) as Record<string, unknown>,
    dependsOn: [],
  };
}

const ITEM = /^\$item((?:\.[\w-]+)*)$/;

function substituteItem(value: unknown, item: unknown): unknown {
  if (typeof value === "string") {
    const match = ITEM.exec(value);
    if (!match) return value;
    let found = item;
    for (const field of match[1] ? match[1].slice(1).split(".") : []) {
      // Own fields only: `$item.constructor` must not reach Object.prototype.
      if (found === null || typeof found !== "object" || !Object.hasOwn(found, field)) {
        throw new ItemFieldError(`${value}: element ${JSON.stringify(item)?.slice(0, 200)} has no field "${field}"`);
      }
      found = (found as Record<string, unknown>)[field];
    }
    return found;
  }
  if (Array.isArray(value)) return value.map((entry) => substituteItem(entry, item));
  if (value !== null && typeof value === "object") {
    return Object.fromEntries(Object.entries(value).map(([key, entry]) => [key, substituteItem(entry, item)]));
  }
  return value;
}
