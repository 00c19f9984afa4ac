import path from "node:path";
import { defineConfig } from "vitest/config";

const alias = { "@": path.resolve(import.meta.dirname) };

export default defineConfig({
  resolve: { alias },
  test: {
    projects: [
      {
        resolve: { alias },
        test: {
          name: "unit",
          include: ["server/**/*.test.ts", "components/**/*.test.ts", "tests/**/*.test.ts"],
          exclude: ["**/*.int.test.ts", "node_modules/**"],
          environment: "node",
          // One process runs the unit files one after another and keeps its module cache between
          // them: each file re-importing the server cost about as much CPU as all the unit tests
          // together (docs/benchmarks.md, "The test suite's time"). A unit file that changes
          // process-wide state (environment variables, signal handlers) restores it when it ends.
          isolate: false,
          // Many unit tests spawn git, bash or worker threads a fixed number of times; on a busy
          // machine (load 20+ on 2 cores) that alone can take longer than vitest's 5 s default.
          // A backstop against hangs, not a speed check: speed belongs to the benchmarks.
          testTimeout: 60_000,
          hookTimeout: 60_000,
          // expect.poll waits for its condition; vitest's 1 s default ran out at load 30.
          expect: { poll: { timeout: 30_000 } },
        },
      },
      {
        resolve: { alias },
        test: {
          name: "integration",
          include: ["server/**/*.int.test.ts", "tests/**/*.int.test.ts"],
          environment: "node",
          globalSetup: ["tests/global-setup.ts"],
          // Backstops against hangs, not speed checks: a test that starts a worker process waits
          // for tsx to compile the server, which took 2.5 min at load 40 on 2 cores.
          testTimeout: 600_000,
          hookTimeout: 600_000,
          // expect.poll waits for its condition; vitest's 1 s default ran out at load 30.
          expect: { poll: { timeout: 60_000 } },
          // Each file gets its own database; two at a time keeps a 2-core machine responsive.
          maxWorkers: 2,
          // Each of the two processes runs its files one after another and keeps its module cache
          // between them, as the unit files do: importing the server again for every file cost
          // about 1.5 s of CPU a file (docs/benchmarks.md, "npm test stages"). A file that changes
          // process-wide state (environment variables, the tracer provider) restores it when it ends.
          isolate: false,
        },
      },
    ],
  },
});
