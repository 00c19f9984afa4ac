import { AsyncLocalStorage } from "node:async_hooks";
import type { IdentityKind } from "./vocabulary";

/**
 * The identity an operation runs for, carried with the call (set by `invokeOperation` and the tRPC
 * adapter), so that every decision and audit entry the call writes — however deep in the engine —
 * stores the kind of identity that acted, not only its name: an agent calling itself "owner" stays
 * an agent in the log. Work outside any call (the worker, timers, recovery by policy) is the
 * system's.
 */
interface Caller {
  kind: IdentityKind;
  name: string;
}

const current = new AsyncLocalStorage<Caller>();

export function withCaller<T>(caller: Caller, work: () => T): T {
  return current.run({ kind: caller.kind, name: caller.name }, work);
}

/**
 * The kind of identity behind `actor`: the caller's kind when the caller acts under its own name;
 * `system` for the engine's own decisions and for work no caller started.
 */
export function actorKindOf(actor: string): IdentityKind {
  const caller = current.getStore();
  if (caller && caller.name === actor) return caller.kind;
  return "system";
}
