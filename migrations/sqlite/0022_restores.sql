-- Restores of a privacy export (#51): one row per export restored here,
-- so a repeated or interrupted restore of the same export carries on where
-- it is instead of being refused as a non-empty store, and its parts are
-- taken in order (`next_part`). `mode` is `fresh` (the export's rows win
-- where keys meet) or `merge` (the store's rows win).
CREATE TABLE IF NOT EXISTS restores (
    export_id TEXT PRIMARY KEY,
    mode TEXT NOT NULL,
    version BIGINT NOT NULL,
    next_part BIGINT NOT NULL DEFAULT 0,
    items BIGINT NOT NULL DEFAULT 0,
    started_ms BIGINT NOT NULL,
    finished_ms BIGINT
);
