-- AlterTable
ALTER TABLE "workspaces" ADD COLUMN     "approval_policy" JSONB;

-- CreateTable
CREATE TABLE "principals" (
    "id" UUID NOT NULL,
    "kind" TEXT NOT NULL,
    "name" TEXT NOT NULL,
    "role" TEXT,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "created_by" TEXT,

    CONSTRAINT "principals_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "principal_credentials" (
    "id" UUID NOT NULL,
    "principal_id" UUID NOT NULL,
    "token_hash" TEXT NOT NULL,
    "session_hash" TEXT NOT NULL,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "last_used_at" TIMESTAMPTZ(3),
    "revoked_at" TIMESTAMPTZ(3),

    CONSTRAINT "principal_credentials_pkey" PRIMARY KEY ("id")
);

-- CreateIndex
CREATE UNIQUE INDEX "principals_name_key" ON "principals"("name");

-- CreateIndex
CREATE UNIQUE INDEX "principal_credentials_token_hash_key" ON "principal_credentials"("token_hash");

-- CreateIndex
CREATE UNIQUE INDEX "principal_credentials_session_hash_key" ON "principal_credentials"("session_hash");

-- CreateIndex
CREATE INDEX "principal_credentials_principal_id_idx" ON "principal_credentials"("principal_id");

-- AddForeignKey
ALTER TABLE "principal_credentials" ADD CONSTRAINT "principal_credentials_principal_id_fkey" FOREIGN KEY ("principal_id") REFERENCES "principals"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- The holder of the access token is the bootstrap admin: existing approvals and audit entries
-- already carry its name, "user".
INSERT INTO "principals" ("id", "kind", "name", "role", "created_by")
VALUES ('00000000-0000-4000-8000-000000000001', 'person', 'user', 'admin', 'system')
ON CONFLICT ("name") DO NOTHING;
