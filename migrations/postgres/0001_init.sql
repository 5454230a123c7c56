-- Foundation: scheduled-job heartbeats (one row per tick of a cron job).
CREATE TABLE IF NOT EXISTS job_heartbeats (
    id BIGSERIAL PRIMARY KEY,
    job TEXT NOT NULL,
    at_ms BIGINT NOT NULL
);
CREATE INDEX IF NOT EXISTS job_heartbeats_job_at ON job_heartbeats (job, at_ms);
