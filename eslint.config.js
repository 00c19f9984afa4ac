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
 * UI code (components/, app/ pages) may only `import type` from the server.
 * The negations keep server/generated out of this type-import allowance so that
 * NO_GENERATED_PRISMA still reports `import type` from the generated client.
 */
const NO_SERVER_VALUES = {
  group: ["@/server/*", "**/server/*", "!@/server/generated", "!**/server/generated"],
  allowTypeImports: true,
  message: "UI code may only `import type` from the server; go through tRPC (components/trpc.tsx) for values.",
};

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
const DOOR_FILES = [
  "server/trpc/**/*.{ts,tsx}",
  "server/mcp/**/*.{ts,tsx}",
  "server/http/**/*.{ts,tsx}",
  "app/api/**/*.{ts,tsx}",
  "app/metrics/**/*.{ts,tsx}",
  "server/cli/client.ts",
  "server/cli/mcp-bridge.ts",
];
/**
 * Doors that still call the domain directly, until their use cases are operations too. Each entry
 * is a bypass of the operations layer's authority check that is known and listed, not new (every
 * tRPC procedure adapts an operation, and each event subscription is authorised by one):
 * - MCP: seed 000's planning_* todo tools, seed 002's plan-mode tools and their tool filter
 *   (plan-mode-tools.ts), plan resources, and closing a session's todo plan (http.ts).
 * - HTTP: /api/chat (seed 001's pass-through to the model provider, which answers a stream).
 */
const DOOR_EXCEPTIONS = ["server/mcp/server.ts", "server/mcp/plan-mode-tools.ts", "server/mcp/http.ts"];

export default defineConfig([
  globalIgnores([
    "**/node_modules/",
    ".next/",
    ".next-*/",
    "server/generated/",
    "data/",
    ".stepwise/",
    "test-results/",
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

  // One way to start a program: server/tools/launcher.ts, which confines by default and runs
  // unconfined only what a person approved (docs/security.md, "One launcher"). The core rule
  // (not the typescript-eslint one the import boundaries below use), so the two do not override
  // each other. Exceptions, each for a reason:
  // - server/db/embedded.ts starts Stepwise's own PostgreSQL binary, never a workspace program;
  // - scripts/, tests/, e2e/, bench/ and test files drive Stepwise and git fixtures from outside.
  {
    files: ["**/*.{ts,tsx,mts,cts,js,mjs,cjs}"],
    ignores: [
      "server/tools/launcher.ts",
      "server/db/embedded.ts",
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
            "Programs start only through server/tools/launcher.ts (launch): confined in the sandbox by default, unconfined only as a person approved.",
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

  // Server core: no Next.js, React, tRPC or UI imports.
  {
    files: [
      "server/engine/**/*.{ts,tsx}",
      "server/audit/**/*.{ts,tsx}",
      "server/planner/**/*.{ts,tsx}",
      "server/tools/**/*.{ts,tsx}",
      "server/plans/**/*.{ts,tsx}",
      "server/events/**/*.{ts,tsx}",
      "server/people/**/*.{ts,tsx}",
      "server/webhooks/**/*.{ts,tsx}",
      "server/db/**/*.{ts,tsx}",
      "server/db.ts",
    ],
    rules: {
      "@typescript-eslint/no-restricted-imports": [
        "error",
        { paths: SERVER_CORE_PATHS, patterns: SERVER_CORE_PATTERNS },
      ],
    },
  },

  // Doors: the operations layer and framework pieces only (see NO_DOMAIN_FROM_DOORS).
  {
    files: DOOR_FILES,
    ignores: [...DOOR_EXCEPTIONS, "**/*.test.ts"],
    rules: {
      "@typescript-eslint/no-restricted-imports": [
        "error",
        {
          patterns: [NO_GENERATED_PRISMA, NO_DOMAIN_FROM_DOORS],
        },
      ],
    },
  },
]);
