import { describe, expect, it } from "vitest";
import { RelayRouter } from "./relay-protocol";

const subscribe = (id: number, runId: string) =>
  JSON.stringify({ id, method: "subscription", params: { path: "runs.events", input: { json: { runId } } } });

describe("the live relay's id bookkeeping", () => {
  it("gives two tabs' equal request ids distinct ids on the shared socket and routes answers back", () => {
    const router = new RelayRouter<string>();
    const fromA = JSON.parse(router.outgoing("tab A", subscribe(1, "run-a"))!);
    const fromB = JSON.parse(router.outgoing("tab B", subscribe(1, "run-b"))!);
    expect(fromA.id).not.toBe(fromB.id);
    expect(fromB.params.input.json.runId).toBe("run-b");

    const answer = router.incoming(JSON.stringify({ id: fromB.id, result: { type: "data", data: { seq: 7 } } }));
    expect(answer).toEqual({
      to: "one",
      client: "tab B",
      data: JSON.stringify({ id: 1, result: { type: "data", data: { seq: 7 } } }),
    });
  });

  it("rewrites every message of a batch and keeps a stop on the subscription's shared id", () => {
    const router = new RelayRouter<string>();
    const batch = JSON.parse(
      router.outgoing("tab", JSON.stringify([JSON.parse(subscribe(1, "a")), JSON.parse(subscribe(2, "b"))]))!,
    );
    expect(batch.map((message: { id: number }) => message.id)).toEqual([1, 2]);
    const stop = JSON.parse(router.outgoing("tab", JSON.stringify({ id: 2, method: "subscription.stop" }))!);
    expect(stop).toEqual({ id: 2, method: "subscription.stop" });
    // The server's "stopped" ends the route; a late frame for it goes nowhere.
    expect(router.incoming(JSON.stringify({ id: 2, result: { type: "stopped" } }))).toMatchObject({ to: "one" });
    expect(router.incoming(JSON.stringify({ id: 2, result: { type: "data", data: 1 } }))).toBeUndefined();
    expect(router.size).toBe(1);
  });

  it("keeps PING and PONG on the shared socket and sends the server's own requests to every tab", () => {
    const router = new RelayRouter<string>();
    expect(router.outgoing("tab", "PING")).toBeUndefined();
    expect(router.outgoing("tab", "PONG")).toBeUndefined();
    const reconnect = JSON.stringify({ id: null, method: "reconnect" });
    expect(router.incoming(reconnect)).toEqual({ to: "all", data: reconnect });
  });

  it("stops a departed tab's subscriptions on the server, and only its own", () => {
    const router = new RelayRouter<string>();
    router.outgoing("closed tab", subscribe(1, "a"));
    router.outgoing("closed tab", subscribe(2, "b"));
    router.outgoing("open tab", subscribe(1, "c"));
    const stops = router.remove("closed tab").map((frame) => JSON.parse(frame));
    expect(stops).toEqual([
      { id: 1, method: "subscription.stop" },
      { id: 2, method: "subscription.stop" },
    ]);
    expect(router.size).toBe(1);
    expect(router.incoming(JSON.stringify({ id: 3, result: { type: "data", data: 1 } }))).toMatchObject({
      client: "open tab",
    });
  });
});
