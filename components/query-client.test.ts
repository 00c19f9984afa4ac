import { QueryClient, QueryObserver } from "@tanstack/react-query";
import { describe, expect, it } from "vitest";
import { makeQueryClient } from "./query-client";

/**
 * A list whose first load is still in flight when the page changes what it lists: the load's
 * answer predates the change. Returns the data the page ends up showing.
 */
async function changeDuringFirstLoad(client: QueryClient): Promise<{ shown: string[]; fetches: number }> {
  let fetches = 0;
  let answerFirstLoad!: (value: string[]) => void;
  const observer = new QueryObserver<string[]>(client, {
    queryKey: ["workspaces"],
    queryFn: () => {
      fetches++;
      if (fetches === 1) return new Promise<string[]>((resolve) => (answerFirstLoad = resolve));
      return Promise.resolve(["/before", "/registered"]);
    },
  });
  const settled = new Promise<string[]>((resolve) => {
    const unsubscribe = observer.subscribe((result) => {
      if (result.status === "success" && result.fetchStatus === "idle") {
        unsubscribe();
        resolve(result.data);
      }
    });
  });
  while (fetches === 0) await new Promise((resolve) => setTimeout(resolve, 1));
  // The change (a directory registered) is made and acted on before the first load answers.
  const invalidated = client.invalidateQueries({ queryKey: ["workspaces"] });
  answerFirstLoad(["/before"]);
  await invalidated;
  return { shown: await settled, fetches };
}

describe("the app's query client", () => {
  it("refetches after a change made while a query's first load was in flight", async () => {
    const { shown, fetches } = await changeDuringFirstLoad(makeQueryClient());
    expect(shown).toEqual(["/before", "/registered"]);
    expect(fetches).toBe(2);
  });

  it("is needed: TanStack Query's own client joins the stale first load", async () => {
    const { shown, fetches } = await changeDuringFirstLoad(new QueryClient());
    expect(shown).toEqual(["/before"]);
    expect(fetches).toBe(1);
  });

  it("still refetches a query that has data, once", async () => {
    const client = makeQueryClient();
    let fetches = 0;
    const observer = new QueryObserver<number>(client, { queryKey: ["n"], queryFn: async () => ++fetches });
    const seen: number[] = [];
    const unsubscribe = observer.subscribe((result) => result.data !== undefined && seen.push(result.data));
    await client.refetchQueries({ queryKey: ["n"] });
    await client.invalidateQueries({ queryKey: ["n"] });
    unsubscribe();
    expect(fetches).toBe(2);
    expect(seen.at(-1)).toBe(2);
  });
});
