-- The Knowledge screen's timeline counts entries per type and UTC day
-- (issue #25): counting a million entries took about a second, so the
-- counts are kept, by the ingest that records an entry, in its
-- transaction (components/knowledge/src/ingest.rs). Filled here from the
-- entries already recorded.
CREATE TABLE IF NOT EXISTS knowledge_days (
    type TEXT NOT NULL,
    day BIGINT NOT NULL,
    n BIGINT NOT NULL,
    PRIMARY KEY (type, day)
);
INSERT INTO knowledge_days (type, day, n)
    SELECT type, created_ms / 86400000, count(*) FROM knowledge_entries GROUP BY type, created_ms / 86400000
    ON CONFLICT (type, day) DO NOTHING;
