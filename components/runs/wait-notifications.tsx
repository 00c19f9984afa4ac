"use client";

import { useEffect, useRef, useSyncExternalStore } from "react";
import type { Step } from "@/server/plan-schema";
import type { LiveStep } from "./run-state";

const PREFERENCE_KEY = "stepwise.notify";
const listeners = new Set<() => void>();

function subscribe(listener: () => void) {
  listeners.add(listener);
  window.addEventListener("storage", listener);
  return () => {
    listeners.delete(listener);
    window.removeEventListener("storage", listener);
  };
}

/** "on" only when the person chose it here and the browser still allows it. */
function currentPreference(): "on" | "off" | "blocked" | "unsupported" {
  if (typeof Notification === "undefined") return "unsupported";
  if (Notification.permission === "denied") return "blocked";
  return localStorage.getItem(PREFERENCE_KEY) === "on" && Notification.permission === "granted" ? "on" : "off";
}

function setPreference(on: boolean) {
  if (on) localStorage.setItem(PREFERENCE_KEY, "on");
  else localStorage.removeItem(PREFERENCE_KEY);
  for (const listener of listeners) listener();
}

export function useNotificationPreference() {
  return useSyncExternalStore(subscribe, currentPreference, () => "unsupported" as const);
}

/**
 * The opt-in: nothing is asked of the browser until the person presses it. Shared by every tab
 * (localStorage), so turning it off anywhere turns it off everywhere.
 */
export function NotificationToggle() {
  const preference = useNotificationPreference();
  if (preference === "unsupported") return null;
  if (preference === "blocked") {
    return (
      <span className="muted" data-testid="notify-blocked">
        Notifications are blocked for this site in the browser&apos;s settings.
      </span>
    );
  }
  const on = preference === "on";
  return (
    <button
      type="button"
      className="small"
      aria-pressed={on}
      onClick={async () => {
        if (on) return setPreference(false);
        const permission = await Notification.requestPermission();
        setPreference(permission === "granted");
      }}
    >
      {on ? "Notifying you" : "Notify me"}
      <span className="visually-hidden"> when a step waits for you while this tab is in the background</span>
    </button>
  );
}

/**
 * With notifications on and the tab in the background, says once per step when an approval or a
 * question starts waiting. The tag makes several tabs on one run show a single notification.
 */
export function useWaitNotifications(
  runId: string,
  goal: string,
  /** Undefined until the run has loaded. */
  waiting: LiveStep[] | undefined,
  steps: ReadonlyMap<string, Step>,
) {
  const preference = useNotificationPreference();
  const announced = useRef<Set<string> | null>(null);
  useEffect(() => {
    if (!waiting) return;
    // What already waited when the page opened was seen by the person opening it.
    if (announced.current === null) {
      announced.current = new Set(waiting.map((step) => step.stepId));
      return;
    }
    const fresh = waiting.filter((step) => !announced.current!.has(step.stepId));
    for (const step of fresh) announced.current.add(step.stepId);
    if (preference !== "on" || document.visibilityState === "visible") return;
    for (const state of fresh) {
      const step = steps.get(state.stepId);
      const what = state.status === "awaiting_input" ? "A question for you" : "Approval needed";
      const notification = new Notification(`${what} · Stepwise`, {
        body: `${goal}: ${step?.title ?? step?.description ?? state.stepId}`,
        tag: `stepwise-${runId}-${state.stepId}`,
      });
      notification.onclick = () => {
        window.focus();
        window.location.hash = `pending-${state.stepId}`;
        notification.close();
      };
    }
  }, [waiting, preference, runId, goal, steps]);
}
