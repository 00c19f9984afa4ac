import { ESLint } from "eslint";
import { describe, expect, it } from "vitest";
// @ts-expect-error eslint.config.js is plain JavaScript, without declarations.
import { FLOORS, FLOOR_EXCEPTIONS } from "../eslint.config.js";

/**
 * The floor order in ESLint (eslint.config.js, FLOORS): an import that runs up the floors is an
 * error whose message names the room, its floor, and where what was wanted belongs instead — for
 * every room above the ground floor, not a generic "move it down".
 */
type Floor = { name: string; rooms: string[] };
const floors = FLOORS as Floor[];
const GENERIC = "move what both need down to your floor or below";

describe("the floor order in ESLint", () => {
  const eslint = new ESLint();
  const messagesFor = async (code: string, filePath: string) => {
    const [result] = await eslint.lintText(code, { filePath });
    return result!.messages.filter((message) => message.ruleId === "@typescript-eslint/no-restricted-imports");
  };

  it("refuses an import of every room above the ground floor from below, saying where it belongs", async () => {
    // From the ground floor (server/vocabulary.ts), every other room is above.
    for (const room of floors.slice(0, -1).flatMap((floor) => floor.rooms)) {
      const specifier = room.endsWith(".ts") ? `./${room.replace(/\.ts$/, "")}` : `./${room}/anything`;
      const messages = await messagesFor(`export * from "${specifier}";\n`, "server/vocabulary.ts");
      // (`./db/…` names both the db/ folder and db.ts: two messages.)
      const named = messages.find((message) => message.message.includes(`server/${room} is on the`));
      expect(named?.message, room).toBeDefined();
      expect(named!.message, room).not.toContain(GENERIC);
    }
    // Planning sessions live in planner/: reaching up into agent sessions is refused, with the way round.
    const [up] = await messagesFor(`export * from "../agents/sessions";\n`, "server/planner/plan-mode.ts");
    expect(up!.message).toContain("above server/planner on the planning floor");
    expect(up!.message).toContain("planning sessions (plan mode, its timers and state) live in server/planner");
    // Looking down is allowed.
    expect(await messagesFor(`export * from "../plans/service";\n`, "server/planner/plan-mode.ts")).toEqual([]);
    // Loading the project's ESLint configuration took tens of seconds on a busy machine.
  }, 300_000);

  it("lists at most three exceptions, each with its reason", () => {
    expect(FLOOR_EXCEPTIONS.length).toBeLessThanOrEqual(3);
    for (const exception of FLOOR_EXCEPTIONS as { why: string }[]) expect(exception.why.length).toBeGreaterThan(10);
  });
});
