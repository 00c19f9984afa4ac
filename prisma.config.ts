import { defineConfig } from "prisma/config";

// The CLI is used only for `generate`; migrations go through server/db/schema-engine.ts.
export default defineConfig({
  schema: "prisma/schema.prisma",
  migrations: { path: "prisma/migrations" },
  datasource: { url: process.env.DATABASE_URL ?? "postgresql://localhost:5432/unused" },
});
