-- The routing stability regulator and routing reflection (002 §10, §12):
-- each routing decision's reflection and whether it counts, the router
-- weights the regulator tuned (the only writer), its log of changes with
-- how each was judged, and a day's metrics.

ALTER TABLE routing_decisions ADD COLUMN reflection TEXT;
ALTER TABLE routing_decisions ADD COLUMN reflection_counted BIGINT;
ALTER TABLE routing_decisions ADD COLUMN reflection_filter TEXT;
ALTER TABLE routing_decisions ADD COLUMN reflected_ms BIGINT;
CREATE INDEX IF NOT EXISTS routing_decisions_created ON routing_decisions (created_ms);
CREATE TABLE IF NOT EXISTS router_weights (
    param TEXT PRIMARY KEY,
    value DOUBLE PRECISION NOT NULL,
    last_adjusted_ms BIGINT NOT NULL
);
CREATE TABLE IF NOT EXISTS routing_adjustments (
    id TEXT PRIMARY KEY,
    param TEXT NOT NULL,
    from_value DOUBLE PRECISION NOT NULL,
    to_value DOUBLE PRECISION NOT NULL,
    pressure TEXT NOT NULL,
    pressure_before DOUBLE PRECISION NOT NULL,
    -- applied, then confirmed, reverted or reverted_neutral.
    status TEXT NOT NULL,
    pressure_after DOUBLE PRECISION,
    created_ms BIGINT NOT NULL,
    judged_ms BIGINT
);
CREATE TABLE IF NOT EXISTS routing_metrics (
    id TEXT PRIMARY KEY,
    metrics TEXT NOT NULL,
    created_ms BIGINT NOT NULL
);
