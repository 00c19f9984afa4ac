/**
 * The colour tokens and base font of every page, light and dark (prefers-color-scheme): the one
 * source for the app (app/layout.tsx puts it in each page's head, app/globals.css uses the
 * variables) and for the pages the server renders itself (the decision link's page,
 * server/http/decision-link-page.ts), so those look like the app and follow the same scheme.
 * Text tokens are chosen for at least 4.5:1 on the surfaces they sit on (e2e/contrast.spec.ts).
 */
export const THEME_CSS = `:root {
  color-scheme: light dark;
  --bg: #f7f7f8;
  --fg: #18181b;
  --muted: #6b6b76;
  --card: #ffffff;
  --surface: #f0f0f3;
  --border: #dcdce2;
  --primary: #3346c9;
  --on-primary: #ffffff;
  --primary-hover: #2a3bab;
  --danger: #b42318;
  --on-danger: #ffffff;
  --danger-hover: #912018;
  --warn: #b54708;
  --on-warn: #ffffff;
  --ok: #067647;
  --input-bg: #ffffff;
  --button-bg: #ffffff;
  --button-hover: #eef0f4;
  --pressed-bg: #e0e5ff;
  --disabled-bg: #eeeef1;
  --disabled-fg: #62626c;
  --topbar-bg: #101828;
  --topbar-fg: #ffffff;
  --danger-soft: #fee4e2;
  --danger-softer: #fef3f2;
  --danger-line: #fecdca;
  --warn-soft: #fef0c7;
  --warn-softer: #fffaeb;
  --warn-line: #fdb022;
  --ok-soft: #d1fadf;
  --ok-softer: #ecfdf3;
  --ok-line: #abefc6;
  --ok-strong-line: #47cd89;
  --danger-strong-line: #f04438;
  --info-soft: #d1e0ff;
  --info-softer: #eff4ff;
  --info-fg: #1d3a8a;
  --agent-soft: #ebe9fe;
  --agent-fg: #4a1fb8;
  --agent-line: #6938ef;
  --badge-bg: #eaecf0;
  --step-number-bg: #eeeeff;
  --on-tint-muted: #475467;
  --log-bg: #101828;
  --log-fg: #e4e7ec;
  --log-muted: #98a2b3;
  --log-warn: #fec84b;
  --log-error: #fda29b;
  --graph-edge: #8c8c96;
  --graph-dots: #91919a;
  --shadow: rgba(16, 24, 40, 0.18);
  font-family:
    system-ui,
    -apple-system,
    "Segoe UI",
    sans-serif;
  color: var(--fg);
  background: var(--bg);
}
@media (prefers-color-scheme: dark) {
  :root {
    --bg: #0f1117;
    --fg: #e7e8ec;
    --muted: #a3a7b3;
    --card: #181b22;
    --surface: #222631;
    --border: #3a3f4c;
    --primary: #8fa3ff;
    --on-primary: #0b1026;
    --primary-hover: #a9b8ff;
    --danger: #f97066;
    --on-danger: #1f0603;
    --danger-hover: #fb8d85;
    --warn: #fdb022;
    --on-warn: #1f1400;
    --ok: #47cd89;
    --input-bg: #12151b;
    --button-bg: #222631;
    --button-hover: #2c3140;
    --pressed-bg: #2a3566;
    --disabled-bg: #1d2028;
    --disabled-fg: #9a9eaa;
    --topbar-bg: #05070b;
    --topbar-fg: #ffffff;
    --danger-soft: #4a1a17;
    --danger-softer: #2d1413;
    --danger-line: #7a271a;
    --warn-soft: #4a3208;
    --warn-softer: #2b2110;
    --warn-line: #93600a;
    --ok-soft: #0f3a25;
    --ok-softer: #10261b;
    --ok-line: #1f7a4d;
    --ok-strong-line: #32a56b;
    --danger-strong-line: #e0493d;
    --info-soft: #1e2d5c;
    --info-softer: #17213f;
    --info-fg: #b2c6ff;
    --agent-soft: #2d2358;
    --agent-fg: #cbbdff;
    --agent-line: #9b8afb;
    --badge-bg: #2c3140;
    --step-number-bg: #2a3566;
    --on-tint-muted: #c0c4ce;
    --log-bg: #05070b;
    --graph-edge: #7d8290;
    --graph-dots: #4b505c;
    --shadow: rgba(0, 0, 0, 0.5);
  }
}
`;
