-- What the language model cost and how often its answers were used, per
-- day and per path (#49 items 2 and 5): one row per (day, path), added to by
-- each request or job that called the model. A path is a model call's
-- purpose (`triage`, `reply`, `knowledge-extract`, …) or, for the cost of a
-- whole message, `message:<mode>`; `units` counts calls for a path and
-- messages for a `message:` row.
CREATE TABLE IF NOT EXISTS model_use (
    day TEXT NOT NULL,
    path TEXT NOT NULL,
    units BIGINT NOT NULL DEFAULT 0,
    calls BIGINT NOT NULL DEFAULT 0,
    answered BIGINT NOT NULL DEFAULT 0,
    retries BIGINT NOT NULL DEFAULT 0,
    fallbacks BIGINT NOT NULL DEFAULT 0,
    prompt_tokens BIGINT NOT NULL DEFAULT 0,
    cached_tokens BIGINT NOT NULL DEFAULT 0,
    completion_tokens BIGINT NOT NULL DEFAULT 0,
    wait_ms BIGINT NOT NULL DEFAULT 0,
    PRIMARY KEY (day, path)
);
-- Each time a path fell back to its labelled rules, and why; the newest 500
-- are kept.
CREATE TABLE IF NOT EXISTS model_fallbacks (
    id BIGSERIAL PRIMARY KEY,
    at_ms BIGINT NOT NULL,
    path TEXT NOT NULL,
    reason TEXT NOT NULL,
    detail TEXT NOT NULL
);
-- The modes triage settled against, which the router's decision left out
-- (D-L5), as a JSON list; null when triage left every mode open.
ALTER TABLE routing_decisions ADD COLUMN excluded_modes TEXT;
