-- AlterTable (seq filled below, then made NOT NULL: existing entries have none yet)
ALTER TABLE "audit_entries" ADD COLUMN     "prev_hash" TEXT,
ADD COLUMN     "row_hash" TEXT,
ADD COLUMN     "seq" BIGINT;

-- Entries from before the chain take their place in id order (the order they were listed in).
-- Their hashes are computed by the app (`sealAuditChain`, run after migrations): canonical JSON
-- is defined once, in TypeScript, not a second time in SQL.
UPDATE "audit_entries" AS a SET "seq" = o.n
FROM (SELECT "id", row_number() OVER (ORDER BY "id") AS n FROM "audit_entries") AS o
WHERE o."id" = a."id";

ALTER TABLE "audit_entries" ALTER COLUMN "seq" SET NOT NULL;

-- CreateTable
CREATE TABLE "audit_chain_head" (
    "id" INTEGER NOT NULL,
    "seq" BIGINT NOT NULL,
    "prev_hash" TEXT,
    "row_hash" TEXT,
    "created_at" TIMESTAMPTZ(3) NOT NULL,

    CONSTRAINT "audit_chain_head_pkey" PRIMARY KEY ("id")
);

-- CreateIndex
CREATE UNIQUE INDEX "audit_entries_seq_key" ON "audit_entries"("seq");

-- The head. An empty log is sealed already (the genesis hash), one with entries waits for
-- `sealAuditChain`, and entries appended before that are sealed with them.
INSERT INTO "audit_chain_head" ("id", "seq", "prev_hash", "row_hash", "created_at")
SELECT 1, coalesce(max("seq"), 0), NULL,
       CASE WHEN count(*) = 0 THEN repeat('0', 64) END,
       coalesce(max("created_at"), 'epoch'::timestamptz)
FROM "audit_entries";
