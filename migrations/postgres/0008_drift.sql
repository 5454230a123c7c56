-- The cognitive drift engine (002 §8): every drift with its thought and
-- what it led to (COMMUNICATE thoughts held for quiet hours wait here as
-- `deferred`), the concepts resting after a drift, and the curiosity
-- threads SEED_THREAD opens.

CREATE TABLE IF NOT EXISTS drift_log (
    id TEXT PRIMARY KEY,
    seed_id TEXT NOT NULL,
    seed_name TEXT NOT NULL,
    seed_kind TEXT NOT NULL,
    topic TEXT NOT NULL,
    -- JSON: the activated concepts with their activations.
    concepts TEXT NOT NULL,
    -- The episode the thought recalled, if any.
    grounding_id TEXT,
    thought_type TEXT NOT NULL,
    content TEXT NOT NULL,
    source TEXT NOT NULL,
    activation DOUBLE PRECISION NOT NULL,
    action TEXT NOT NULL,
    -- JSON: every action's verdict.
    verdicts TEXT NOT NULL,
    embedding BYTEA NOT NULL,
    -- Messages to the principal (COMMUNICATE, NURTURE): sent, deferred,
    -- expired or dropped; empty for the other actions.
    delivery TEXT NOT NULL DEFAULT '',
    delivered_ms BIGINT,
    created_ms BIGINT NOT NULL
);
CREATE INDEX IF NOT EXISTS drift_log_created ON drift_log (created_ms);
CREATE INDEX IF NOT EXISTS drift_log_action ON drift_log (action, created_ms);
CREATE INDEX IF NOT EXISTS drift_log_delivery ON drift_log (delivery, created_ms);
CREATE TABLE IF NOT EXISTS drift_cooldowns (
    concept_id TEXT PRIMARY KEY,
    until_ms BIGINT NOT NULL
);
CREATE TABLE IF NOT EXISTS curiosity_threads (
    id TEXT PRIMARY KEY,
    topic TEXT NOT NULL,
    seed_id TEXT NOT NULL,
    question TEXT NOT NULL,
    status TEXT NOT NULL,
    drift_id TEXT NOT NULL,
    created_ms BIGINT NOT NULL
);
CREATE INDEX IF NOT EXISTS curiosity_threads_status ON curiosity_threads (status, created_ms);
