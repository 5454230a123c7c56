-- Persistent tasks (002 §7): the worker's claim on a task and its own
-- schedule, both with leases, so two ticks never run one cycle twice and a
-- crashed cycle is taken over when its lease ends.

ALTER TABLE persistent_tasks ADD COLUMN claim TEXT;
ALTER TABLE persistent_tasks ADD COLUMN lease_until_ms BIGINT NOT NULL DEFAULT 0;
ALTER TABLE persistent_tasks ADD COLUMN cycles BIGINT NOT NULL DEFAULT 0;
CREATE INDEX IF NOT EXISTS persistent_tasks_pick ON persistent_tasks (status, priority, created_ms);
-- One row per background engine: when it may run next (the jittered
-- period) and who holds it now.
CREATE TABLE IF NOT EXISTS engine_schedule (
    engine TEXT PRIMARY KEY,
    next_ms BIGINT NOT NULL,
    claim TEXT,
    lease_until_ms BIGINT NOT NULL DEFAULT 0,
    last_ms BIGINT,
    last_outcome TEXT
);
