-- Path B (002 §5): the external tools the principal configures, each
-- with its description's embedding (relevance when triage names none),
-- and who delivers a tool job's reply: the waiting /chat stream or
-- /events (the worker, when the stream gave up first).
CREATE TABLE IF NOT EXISTS tools (
    name TEXT PRIMARY KEY,
    config TEXT NOT NULL,
    embedding BLOB NOT NULL,
    updated_ms BIGINT NOT NULL
);
ALTER TABLE jobs ADD COLUMN delivery TEXT;
-- After this time (system clock) a finished reply nobody took goes to
-- /events: the stream that waited for it is gone.
ALTER TABLE jobs ADD COLUMN deliver_by_ms BIGINT;
