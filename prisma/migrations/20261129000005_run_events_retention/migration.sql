-- Retention (STEPWISE_RETENTION_DAYS) removes the events and step logs of runs finished long ago
-- and notes here when it did, so the run page can say so instead of showing an empty timeline.
ALTER TABLE "runs" ADD COLUMN "events_removed_at" TIMESTAMPTZ(3);
