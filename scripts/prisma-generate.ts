// Runs `prisma generate` fully offline.
//
// The Prisma CLI tries to download the native `schema-engine` binary on every command, even
// `generate`, which never uses it. Pointing PRISMA_SCHEMA_ENGINE_BINARY at any existing
// executable satisfies that check without a download. Migrations do not use the CLI at all
// (see server/db/schema-engine.ts), so the fake engine is never actually invoked.
import { spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";

const root = fileURLToPath(new URL("..", import.meta.url));
const cli = fileURLToPath(new URL("../node_modules/prisma/build/index.js", import.meta.url));

if (!existsSync(cli)) {
  console.error(`prisma CLI not found at ${cli}; run npm install first`);
  process.exit(1);
}

const result = spawnSync(process.execPath, [cli, "generate", ...process.argv.slice(2)], {
  cwd: root, // prisma.config.ts and the schema path are resolved from the project root
  stdio: "inherit",
  env: {
    ...process.env,
    // Only needs to exist; `generate` never executes it. The node binary is always there.
    PRISMA_SCHEMA_ENGINE_BINARY: process.env.PRISMA_SCHEMA_ENGINE_BINARY ?? process.execPath,
    // No checksum files can be fetched for a custom engine path; don't fail on that.
    PRISMA_ENGINES_CHECKSUM_IGNORE_MISSING: "1",
    // Skip the network calls for update notices and telemetry.
    PRISMA_HIDE_UPDATE_MESSAGE: "1",
    CHECKPOINT_DISABLE: "1",
  },
});

if (result.error) {
  console.error(`failed to run prisma generate: ${result.error.message}`);
  process.exit(1);
}
// A signal kill leaves status null; treat anything but a clean 0 as failure.
process.exit(result.status ?? 1);
