"use client";

import { useSyncExternalStore } from "react";

/**
 * The current time, re-rendering the caller once per `intervalMs`. One timer per interval is shared
 * by every caller, so a thousand ticking durations cost one timer. This is a clock, not polling:
 * nothing is fetched.
 */
const tickers = new Map<number, { now: number; listeners: Set<() => void>; timer?: ReturnType<typeof setInterval> }>();

function ticker(intervalMs: number) {
  let entry = tickers.get(intervalMs);
  if (!entry) {
    entry = { now: Date.now(), listeners: new Set() };
    tickers.set(intervalMs, entry);
  }
  return entry;
}

export function useNow(intervalMs = 1000, enabled = true): number {
  return useSyncExternalStore(
    (onChange) => {
      if (!enabled) return () => undefined;
      const entry = ticker(intervalMs);
      entry.listeners.add(onChange);
      entry.timer ??= setInterval(() => {
        entry.now = Date.now();
        for (const listener of entry.listeners) listener();
      }, intervalMs);
      return () => {
        entry.listeners.delete(onChange);
        if (entry.listeners.size === 0) {
          clearInterval(entry.timer);
          entry.timer = undefined;
        }
      };
    },
    () => (enabled ? ticker(intervalMs).now : 0),
    () => 0,
  );
}
