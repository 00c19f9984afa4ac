-- CreateTable
CREATE TABLE "planning_sessions" (
    "id" UUID NOT NULL,
    "kind" TEXT NOT NULL,
    "mode" TEXT NOT NULL,
    "status" TEXT NOT NULL,
    "goal" TEXT NOT NULL,
    "model" TEXT NOT NULL,
    "workspace_id" UUID,
    "workspace_root" TEXT NOT NULL,
    "use_judge" BOOLEAN NOT NULL DEFAULT false,
    "max_refinements" INTEGER NOT NULL DEFAULT 2,
    "plan_id" TEXT,
    "base_version" INTEGER,
    "result_version" INTEGER,
    "feedback" TEXT,
    "draft" JSONB,
    "failure" JSONB,
    "trace_id" TEXT NOT NULL,
    "actor" TEXT NOT NULL,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "finished_at" TIMESTAMPTZ(3),

    CONSTRAINT "planning_sessions_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "planning_questions" (
    "id" UUID NOT NULL,
    "session_id" UUID NOT NULL,
    "question" TEXT NOT NULL,
    "answer" TEXT,
    "answered_by" TEXT,
    "asked_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "answered_at" TIMESTAMPTZ(3),

    CONSTRAINT "planning_questions_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "llm_calls" (
    "id" UUID NOT NULL,
    "session_id" UUID,
    "plan_id" TEXT,
    "run_id" UUID,
    "purpose" TEXT NOT NULL,
    "model" TEXT NOT NULL,
    "input_tokens" INTEGER NOT NULL DEFAULT 0,
    "output_tokens" INTEGER NOT NULL DEFAULT 0,
    "cost_usd" DOUBLE PRECISION,
    "duration_ms" INTEGER NOT NULL,
    "ok" BOOLEAN NOT NULL,
    "error" TEXT,
    "trace_id" TEXT NOT NULL,
    "span_id" TEXT NOT NULL,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "llm_calls_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "recovery_proposals" (
    "id" UUID NOT NULL,
    "run_id" UUID NOT NULL,
    "step_id" TEXT NOT NULL,
    "attempt" INTEGER NOT NULL,
    "status" TEXT NOT NULL,
    "action" JSONB NOT NULL,
    "reasoning" TEXT NOT NULL,
    "model" TEXT NOT NULL,
    "decided_by" TEXT,
    "decided_at" TIMESTAMPTZ(3),
    "error" TEXT,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "recovery_proposals_pkey" PRIMARY KEY ("id")
);

-- CreateIndex
CREATE INDEX "planning_sessions_created_at_idx" ON "planning_sessions"("created_at");

-- CreateIndex
CREATE INDEX "planning_questions_session_id_idx" ON "planning_questions"("session_id");

-- CreateIndex
CREATE INDEX "llm_calls_session_id_idx" ON "llm_calls"("session_id");

-- CreateIndex
CREATE INDEX "llm_calls_plan_id_idx" ON "llm_calls"("plan_id");

-- CreateIndex
CREATE INDEX "llm_calls_run_id_idx" ON "llm_calls"("run_id");

-- CreateIndex
CREATE INDEX "recovery_proposals_run_id_step_id_idx" ON "recovery_proposals"("run_id", "step_id");

-- AddForeignKey
ALTER TABLE "planning_questions" ADD CONSTRAINT "planning_questions_session_id_fkey" FOREIGN KEY ("session_id") REFERENCES "planning_sessions"("id") ON DELETE CASCADE ON UPDATE CASCADE;
