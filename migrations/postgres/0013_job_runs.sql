-- The last run of each scheduled job and how it ended, for GET /status
-- (#26 item 4): one row per job, replaced by every tick of it.
CREATE TABLE IF NOT EXISTS job_runs (
    job TEXT PRIMARY KEY,
    at_ms BIGINT NOT NULL,
    took_ms BIGINT NOT NULL,
    ok BIGINT NOT NULL,
    outcome TEXT NOT NULL,
    last_ok_ms BIGINT
);
-- When a model last wrote a reply, read by GET /status without a scan.
CREATE INDEX IF NOT EXISTS exchanges_reply_source ON exchanges (reply_source, created_ms);
