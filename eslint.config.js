// @ts-check
import js from "@eslint/js";
import { defineConfig, globalIgnores } from "eslint/config";
import tseslint from "typescript-eslint";

const TS_FILES = ["**/*.{ts,tsx,mts,cts}"];

/** Prisma's generated client is a server-only implementation detail (type imports included). */
const NO_GENERATED_PRISMA = {
  group: ["**/generated/prisma", "**/generated/prisma/*"],
  message: "Generated Prisma code may only be imported from server/.",
};

/**
 * UI code (components/, app/ pages) may only `import type` from the server — except the shared
 * words of server/vocabulary.ts (statuses, kinds, levels: zod and plain constants, nothing of the
 * server's), which the UI imports as values so that a status is spelled once.
 * The negations keep server/generated out of this type-import allowance so that
 * NO_GENERATED_PRISMA still reports `import type` from the generated client.
 */
const NO_SERVER_VALUES = {
  group: [
    "@/server/*",
    "**/server/*",
    "!@/server/generated",
    "!**/server/generated",
    "!@/server/vocabulary",
    "!**/server/vocabulary",
  ],
  allowTypeImports: true,
  message: "UI code may only `import type` from the server; go through tRPC (components/trpc.tsx) for values.",
};

/**
 * Files that still break the size rules (see the block "Rooms a person can read"), each with the
 * rules it breaks and why it is allowed to for now. Remove an entry when its file is split.
 * @type {{ file: string; rules: ("max-lines" | "max-lines-per-function")[]; reason: string }[]}
 */
const OVERSIZED = [];

/**
 * The floors of the server, top to bottom: a room (a server/ folder or top-level module) may import
 * rooms on its own floor or below, never above. `npm run arch` (scripts/architecture.ts) reads the
 * same list to report the graph, the imports that run up and the cycles; docs/architecture.md
 * ("Floors") records its figures. Type-only imports count: a type ties a room to another as a value
 * does.
 */
export const FLOORS = [
  {
    name: "roof",
    rooms: ["cli", "app-context.ts"],
    holds: "the composition root and the command that start everything; nothing imports them",
  },
  { name: "doors", rooms: ["trpc", "http", "mcp"], holds: "adapters from a protocol to the operations" },
  { name: "operations", rooms: ["operations"], holds: "use cases: input, output, who may call" },
  {
    name: "features",
    rooms: ["decisions", "webhooks", "inbox", "templates", "ops", "mcp-servers"],
    holds:
      "features over the domain: decision links, outgoing webhooks, the inbox, plan templates, readiness and backup, configured MCP servers",
  },
  { name: "agent sessions", rooms: ["agents"], holds: "agent sessions, their tasks, leases and worktrees" },
  { name: "planning", rooms: ["planner"], holds: "planning sessions and the planner" },
  { name: "services", rooms: ["services.ts"], holds: "the services type (AppContext), types only" },
  { name: "engine", rooms: ["engine"], holds: "runs: state machine, scheduler, worker, approvals" },
  { name: "plans", rooms: ["plans"], holds: "plans and their versions, validation, quality gates" },
  { name: "policy", rooms: ["policy"], holds: "who may do what, asked at the moment of effect" },
  { name: "people", rooms: ["people"], holds: "principals and approver policies" },
  { name: "events", rooms: ["events"], holds: "the event store, bus and streams" },
  { name: "audit", rooms: ["audit"], holds: "the audit log, its chain and the approval binding" },
  { name: "tools", rooms: ["tools"], holds: "the tools steps run: shell, files, git, the sandbox's policy" },
  {
    name: "infrastructure",
    rooms: ["db", "db.ts", "database-faults.ts", "queue", "metrics"],
    holds:
      "the database (embedded server, migrations, LISTEN), its client and what its failures mean, the job queue and process metrics",
  },
  {
    name: "launcher",
    rooms: ["launcher"],
    holds: "the one place programs start: the launcher, its forker, the sandbox's command line",
  },
  {
    name: "ground",
    rooms: [
      "vocabulary.ts",
      "plan-schema.ts",
      "identity.ts",
      "caller-context.ts",
      "hint-text.ts",
      "errors.ts",
      "env.ts",
      "logger.ts",
      "telemetry.ts",
      "redact.ts",
      "safe-input.ts",
      "session-cookie.ts",
      "fan-out-instance.ts",
    ],
    holds: "shared words and pure helpers: statuses and kinds, the plan schema, identity, errors, logging",
  },
];

/**
 * Imports allowed to run up the floors, each for a reason and until it is gone (at most 3):
 * `{ files: ["server/…"], imports: ["server/…"], why: "…" }`. None today.
 */
export const FLOOR_EXCEPTIONS = [];

/**
 * Where a room that may not be imported from below sends the reader instead: every room above the
 * ground floor says where what is wanted from it belongs, so an arrow up is refused with the way
 * round it (GENERIC_BELONGS for a room not listed).
 */
const DOOR_BELONGS =
  "a door is an entry point nothing calls back: what it shares with the domain belongs in server/operations or below (errors in server/errors.ts, the caller in server/identity.ts)";
const BELONGS = {
  "app-context.ts": "import the services type from server/services.ts; only the roof builds the context",
  cli: "the command is the roof: move what you need from it down to the floor that owns it",
  trpc: DOOR_BELONGS,
  http: DOOR_BELONGS,
  mcp: DOOR_BELONGS,
  operations: "operations are called by doors only: the caller's identity is server/identity.ts",
  decisions:
    "decision links are a feature over the engine: let the engine emit an event (server/events) the feature follows, or move the shared part down",
  webhooks: "webhooks follow events: append an event (server/events/store.ts) instead of calling them",
  inbox: "the inbox only reads the domain: move the query you need into the room that owns the rows",
  templates:
    "templates build plans: plan and step shapes belong in server/plan-schema.ts, plan services in server/plans",
  ops: "readiness and backup serve operators: move the shared check down to server/db or the ground floor",
  "mcp-servers":
    "configured MCP servers are a feature: the tool registry below reads their tools through server/tools; pass what you need in rather than calling the feature",
  agents:
    "agent sessions sit above planning: planning sessions (plan mode, its timers and state) live in server/planner, and what a session and planning share belongs in server/planner or below",
  planner:
    "planning sits above the engine and plans: what they need of a planning session belongs in server/plans or below, or is passed in by the caller",
  "services.ts":
    "the services type bundles the rooms above the engine: take the narrower type you need (EngineDeps in server/engine/deps.ts, a pool from server/db.ts)",
  engine:
    "the engine runs plans: plans, policy and events below it may not call it; append an event (server/events) or let the engine call you",
  plans:
    "plans sit above the policy: pass what a rule reads about a plan as the policy's resource instead of reading plans there",
  policy:
    "the policy is asked from above: pass the principal and the resource in; principals' rows are server/people's",
  people: "principals sit above events and audit: pass the caller (server/identity.ts) or its name instead",
  events: "audit, tools and the database do not emit events: return what happened and let the caller append it",
  audit: "tools and the database do not write the audit log: return what happened and let the caller record it",
  tools: "tools sit above the database rooms: what a tool needs comes from its caller, through the launcher's context",
  db: "the database's server and LISTEN sit above the ground floor: take what you need as a parameter",
  "db.ts": "the database client sits above the ground floor: take a pool or a query function as a parameter",
  "database-faults.ts":
    "what a database failure means sits above the ground floor: classify the error where you catch it",
  queue:
    "the job queue sits above the ground floor: take the task's name from server/queue/jobs.ts's caller as a parameter",
  metrics: "process metrics sit above the ground floor: record them from the caller",
  launcher:
    "the launcher starts programs and decides nothing of a workspace: pass it the finished request (server/launcher/launcher.ts, Launch) from the caller",
};
const GENERIC_BELONGS =
  "move what both need down to your floor or below — words to server/vocabulary.ts, plan and step shapes to server/plan-schema.ts, pure helpers to the ground floor — or have the roof pass it in";

const floorIndex = (room) => FLOORS.findIndex((floor) => floor.rooms.includes(room));
const isFileRoom = (room) => room.endsWith(".ts");

/** Import specifiers that name `target` (a path under server/, `agents/*` or `services`) from a room's file. */
function specifiersOf(target, importerAtTop) {
  const relative = importerAtTop ? [`./${target}`] : [`../${target}`, `../../${target}`];
  return [`**/server/${target}`, `@/server/${target}`, ...relative];
}

const targetOf = (room) => (isFileRoom(room) ? room.replace(/\.ts$/, "") : `${room}/*`);

/**
 * The no-restricted-imports patterns that keep `room`'s files off every floor above it; `allowed`
 * lists files above (server/….ts) that a FLOOR_EXCEPTIONS entry lets these files import.
 */
function floorPatterns(room, allowed = []) {
  const placed = floorIndex(room);
  const level = placed === -1 ? FLOORS.length - 1 : placed;
  const here = placed === -1 ? undefined : FLOORS[placed];
  const atTop = isFileRoom(room);
  return FLOORS.slice(0, level).flatMap((floor) =>
    floor.rooms.map((above) => {
      const negations = allowed
        .filter((file) => file.startsWith(isFileRoom(above) ? `server/${above}` : `server/${above}/`))
        .flatMap((file) => specifiersOf(file.slice("server/".length).replace(/\.ts$/, ""), atTop))
        .map((specifier) => `!${specifier}`);
      const where = here
        ? `above server/${room} on the ${here.name} floor`
        : "and this file's room is on no floor yet (add it to FLOORS in eslint.config.js; until then it counts as the ground floor)";
      return {
        group: [...specifiersOf(targetOf(above), atTop), ...negations],
        message: `server/${above} is on the ${floor.name} floor (${floor.holds}), ${where}: ${BELONGS[above] ?? GENERIC_BELONGS}.`,
      };
    }),
  );
}

const filesOf = (room) => (isFileRoom(room) ? [`server/${room}`] : [`server/${room}/**/*.{ts,tsx}`]);

/** The server core (engine, planner, tools, plans, events, db) stays framework- and UI-free. */
const SERVER_CORE_PATHS = [
  { name: "next", message: "The server core must not depend on Next.js." },
  { name: "react", message: "The server core must not depend on React." },
  { name: "react-dom", message: "The server core must not depend on React." },
];
const SERVER_CORE_PATTERNS = [
  { group: ["next/*"], message: "The server core must not depend on Next.js." },
  { group: ["react/*", "react-dom/*"], message: "The server core must not depend on React." },
  { group: ["@trpc/*"], message: "The server core must not depend on tRPC; keep tRPC in server/trpc." },
  {
    group: ["@/components", "@/components/*", "**/components", "**/components/*"],
    message: "The server core must not import UI components.",
  },
  { group: ["@/app", "@/app/*", "**/app/*"], message: "The server core must not import from app/." },
];

/**
 * The layer order: doors (tRPC, MCP, the HTTP API, Next.js route handlers, the CLI's agent verbs)
 * are adapters over server/operations, which decides who may do what. A door may import the
 * operations and framework pieces (errors, the app context, the logger, the vocabulary), and types
 * from anywhere — but no value of the domain, so it cannot reach past the authority check.
 */
const DOMAIN_MODULES = [
  "engine",
  "plans",
  "agents",
  "planner",
  "audit",
  "inbox",
  "templates",
  "tools",
  "launcher",
  "db",
  "people",
  "webhooks",
];
const NO_DOMAIN_FROM_DOORS = {
  group: DOMAIN_MODULES.flatMap((module) => [
    `**/server/${module}/*`,
    `@/server/${module}/*`,
    `../${module}/*`,
    `../../${module}/*`,
  ]),
  allowTypeImports: true,
  message:
    "Doors are adapters: call an operation (server/operations) instead of the domain, so its authority check cannot be skipped.",
};
/** `server/plans/service.ts` → `plans`; `server/vocabulary.ts` → `vocabulary.ts`. */
function roomOfFile(file) {
  return file.slice("server/".length).split("/")[0];
}

/** The import rule for `files` of `room`: its floor, the server core's and, for doors, the door's. */
function roomBlock(room, files, { allowed = [] } = {}) {
  const level = floorIndex(room);
  const core = level === -1 || level > floorIndex("operations");
  const door = level !== -1 && FLOORS[level].name === "doors";
  return {
    files,
    ignores: ["**/*.test.ts"],
    rules: {
      "@typescript-eslint/no-restricted-imports": [
        "error",
        {
          ...(core ? { paths: SERVER_CORE_PATHS } : {}),
          patterns: [
            ...floorPatterns(room, allowed),
            ...(core ? SERVER_CORE_PATTERNS : []),
            ...(door ? [NO_GENERATED_PRISMA, NO_DOMAIN_FROM_DOORS] : []),
          ],
        },
      ],
    },
  };
}

export default defineConfig([
  globalIgnores([
    "**/node_modules/",
    ".next/",
    ".next-*/",
    "server/generated/",
    "data/",
    ".stepwise/",
    "test-results/",
    ".test-bundles/",
    "playwright-report/",
    "bench/results/",
    "next-env.d.ts",
  ]),

  {
    linterOptions: { reportUnusedDisableDirectives: "warn" },
  },

  // TypeScript sources: @eslint/js recommended + typescript-eslint recommended (not type-checked).
  {
    files: TS_FILES,
    extends: [js.configs.recommended, tseslint.configs.recommended],
    languageOptions: { ecmaVersion: "latest", sourceType: "module" },
    rules: {
      "@typescript-eslint/no-unused-vars": [
        "error",
        {
          argsIgnorePattern: "^_",
          varsIgnorePattern: "^_",
          caughtErrorsIgnorePattern: "^_",
          destructuredArrayIgnorePattern: "^_",
          ignoreRestSiblings: true,
        },
      ],
      "@typescript-eslint/no-explicit-any": "warn",
    },
  },

  // Plain JS/ESM config files (next.config.js, this file).
  {
    files: ["**/*.{js,mjs,cjs}"],
    extends: [js.configs.recommended],
    languageOptions: {
      ecmaVersion: "latest",
      sourceType: "module",
      globals: { process: "readonly", console: "readonly", URL: "readonly" },
    },
  },

  // Server code logs through the structured logger (server/logger.ts: JSON lines with runId, stepId,
  // sessionId, err fields), never console.*. The exceptions are deliberate human output: the
  // CLI's terminal output writes to process.stdout/stderr (server/cli/human-output.ts), and
  // `stepwise serve`'s startup lines carry an eslint-disable comment saying so. Tests may print.
  {
    files: ["server/**/*.{ts,tsx}"],
    ignores: ["server/**/*.test.ts"],
    rules: { "no-console": "error" },
  },

  // Rooms a person can read: no source file over 450 lines, and in the product (server/,
  // components/, app/; not the benchmarks' and scripts' drivers) no function over 100, blank lines
  // and comments aside. Tests, generated code and CSS are not held to it; OVERSIZED names the files
  // still being split, each for the rule it still breaks.
  {
    files: ["server/**/*.{ts,tsx}", "components/**/*.{ts,tsx}", "app/**/*.{ts,tsx}", "bench/**/*.ts", "scripts/*.ts"],
    ignores: ["server/generated/**", "**/*.test.ts", "**/*.test.tsx"],
    rules: { "max-lines": ["error", { max: 450 }] },
  },
  {
    files: ["server/**/*.{ts,tsx}", "components/**/*.{ts,tsx}", "app/**/*.{ts,tsx}"],
    ignores: ["server/generated/**", "**/*.test.ts", "**/*.test.tsx"],
    rules: { "max-lines-per-function": ["error", { max: 100, skipBlankLines: true, skipComments: true }] },
  },
  ...OVERSIZED.map(({ file, rules }) => ({
    files: [file],
    rules: Object.fromEntries(rules.map((rule) => [rule, "off"])),
  })),

  // One way to start a program: server/launcher/launcher.ts, which confines by default and runs
  // unconfined only what a person approved or Stepwise's own processes (the forker, the embedded
  // PostgreSQL) (docs/security.md, "One launcher"). The core rule (not the typescript-eslint one
  // the import boundaries below use), so the two do not override each other, and it refuses type
  // imports too. Exceptions: scripts/, tests/, e2e/, bench/ and test files, which drive Stepwise
  // and git fixtures from outside.
  {
    files: ["**/*.{ts,tsx,mts,cts,js,mjs,cjs}"],
    ignores: [
      "server/launcher/launcher.ts",
      "scripts/**",
      "tests/**",
      "e2e/**",
      "bench/**",
      "**/*.test.ts",
      "**/*.spec.ts",
    ],
    rules: {
      "no-restricted-imports": [
        "error",
        ...["node:child_process", "child_process"].map((name) => ({
          name,
          message:
            "Programs start only through server/launcher/launcher.ts (launch): confined in the sandbox by default, unconfined only as a person approved.",
        })),
      ],
    },
  },

  // Import boundaries. Rule options do not merge across config objects (the last match wins),
  // so every block below carries the complete option set for the files it matches.

  // Everything outside server/: no generated Prisma code.
  {
    files: TS_FILES,
    ignores: ["server/**"],
    rules: {
      "@typescript-eslint/no-restricted-imports": ["error", { patterns: [NO_GENERATED_PRISMA] }],
    },
  },

  // UI code (route handlers excepted: app/api/**, Prometheus's app/metrics/**, and the decision
  // link's page app/decide/**, which is served as plain HTML by the server): type-only imports
  // from the server.
  {
    files: ["components/**/*.{ts,tsx}", "app/**/*.{ts,tsx}"],
    ignores: ["app/api/**", "app/metrics/**", "app/decide/**"],
    rules: {
      "@typescript-eslint/no-restricted-imports": ["error", { patterns: [NO_GENERATED_PRISMA, NO_SERVER_VALUES] }],
    },
  },

  // Doors outside the server's rooms (route handlers, the CLI's client and stdio bridge): the
  // operations layer and framework pieces only (see NO_DOMAIN_FROM_DOORS).
  {
    files: ["app/api/**/*.{ts,tsx}", "app/metrics/**/*.{ts,tsx}", "server/cli/client.ts", "server/cli/mcp-bridge.ts"],
    ignores: ["**/*.test.ts"],
    rules: {
      "@typescript-eslint/no-restricted-imports": [
        "error",
        {
          patterns: [NO_GENERATED_PRISMA, NO_DOMAIN_FROM_DOORS],
        },
      ],
    },
  },

  // The floors (FLOORS): each room's files import only their floor and those below; the server
  // core (every floor below the operations) also stays free of Next.js, React, tRPC and the UI,
  // and the doors stay off the domain. Then the listed exceptions, each for its files alone.
  // A module or folder new to server/ stands on the ground floor until it is given a floor.
  ...["*.ts", "*/**/*.{ts,tsx}"].map((glob) => ({
    ...roomBlock(glob.startsWith("*/") ? "(new folder)" : "(new module).ts", [`server/${glob}`]),
    ignores: [...FLOORS.flatMap((floor) => floor.rooms).flatMap(filesOf), "server/generated/**", "**/*.test.ts"],
  })),
  ...FLOORS.flatMap((floor) => floor.rooms).flatMap((room) => [
    roomBlock(room, filesOf(room)),
    ...FLOOR_EXCEPTIONS.filter((exception) => exception.files.some((file) => roomOfFile(file) === room)).map(
      (exception) => roomBlock(room, exception.files, { allowed: exception.imports }),
    ),
  ]),
]);
