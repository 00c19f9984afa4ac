-- CreateTable
CREATE TABLE "plan_comments" (
    "id" UUID NOT NULL,
    "plan_id" TEXT NOT NULL,
    "plan_version" INTEGER NOT NULL,
    "step_id" TEXT,
    "field" TEXT,
    "intent" TEXT NOT NULL,
    "body" TEXT NOT NULL,
    "parent_id" UUID,
    "author" TEXT NOT NULL,
    "author_kind" TEXT NOT NULL,
    "resolved_at" TIMESTAMPTZ(3),
    "resolved_by" TEXT,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "plan_comments_pkey" PRIMARY KEY ("id")
);

-- CreateIndex
CREATE INDEX "plan_comments_plan_id_created_at_idx" ON "plan_comments"("plan_id", "created_at");

-- AddForeignKey
ALTER TABLE "plan_comments" ADD CONSTRAINT "plan_comments_plan_id_fkey" FOREIGN KEY ("plan_id") REFERENCES "plans"("id") ON DELETE CASCADE ON UPDATE CASCADE;
