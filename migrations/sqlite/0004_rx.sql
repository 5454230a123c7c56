-- Recommendations (000 seed): doors as configuration, the observations the
-- principal records, the signal views per door, the rec store, the
-- markdown artifacts and the per-door run lock.

-- A door's configuration (mneme-rx `Door`, JSON). Adding a door is a row
-- here (PUT /rx/doors/{door}) plus its signal source: views over
-- rx_observations, or an HTTP source.
CREATE TABLE IF NOT EXISTS rx_doors (
    name TEXT PRIMARY KEY,
    config TEXT NOT NULL,
    updated_ms BIGINT NOT NULL
);

-- The configured component weights, which the views report.
CREATE TABLE IF NOT EXISTS rx_weights (
    door TEXT NOT NULL,
    component TEXT NOT NULL,
    weight DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (door, component)
);

-- What the principal records through POST /rx/{door}/observations. A `key`
-- makes an observation a snapshot: the newest per (door, kind, key) wins.
CREATE TABLE IF NOT EXISTS rx_observations (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    id TEXT NOT NULL UNIQUE,
    door TEXT NOT NULL,
    kind TEXT NOT NULL,
    key TEXT,
    at_ms BIGINT NOT NULL,
    data TEXT NOT NULL,
    created_ms BIGINT NOT NULL
);
CREATE INDEX IF NOT EXISTS rx_observations_door ON rx_observations (door, kind, at_ms);

-- The rec store (/v1/rx/recs).
CREATE TABLE IF NOT EXISTS rx_recs (
    id TEXT PRIMARY KEY,
    door TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('open', 'snoozed', 'acted', 'dismissed')),
    drift_score DOUBLE PRECISION NOT NULL CHECK (drift_score >= 0 AND drift_score <= 1),
    confidence INTEGER NOT NULL CHECK (confidence >= 0 AND confidence <= 100),
    driving_signal TEXT,
    tldr TEXT NOT NULL,
    body_md TEXT NOT NULL,
    rx_md_path TEXT,
    signals_fired TEXT NOT NULL,
    source_refs TEXT NOT NULL,
    drift_breakdown TEXT NOT NULL,
    confidence_breakdown TEXT NOT NULL,
    origin TEXT NOT NULL,
    created_ms BIGINT NOT NULL,
    updated_ms BIGINT NOT NULL,
    acted_disposition TEXT,
    acted_ms BIGINT,
    subjective_fit_1_5 INTEGER CHECK (subjective_fit_1_5 BETWEEN 1 AND 5),
    outcome_note TEXT,
    snoozed_until_ms BIGINT,
    snooze_count INTEGER NOT NULL DEFAULT 0,
    revived_ms BIGINT
);
CREATE INDEX IF NOT EXISTS rx_recs_status ON rx_recs (status, created_ms DESC);
CREATE INDEX IF NOT EXISTS rx_recs_snoozed ON rx_recs (snoozed_until_ms) WHERE status = 'snoozed';

-- The markdown artifacts (the vault's <Door>/rx/ folders): recs and
-- no-change confirmations. `status` mirrors the frontmatter (step 0.7).
CREATE TABLE IF NOT EXISTS rx_artifacts (
    path TEXT PRIMARY KEY,
    door TEXT NOT NULL,
    kind TEXT NOT NULL,
    day TEXT NOT NULL,
    nn INTEGER NOT NULL,
    rec_id TEXT,
    status TEXT NOT NULL,
    driving_signal TEXT,
    drift_score DOUBLE PRECISION,
    tldr TEXT NOT NULL,
    markdown TEXT NOT NULL,
    created_ms BIGINT NOT NULL,
    updated_ms BIGINT NOT NULL,
    UNIQUE (door, kind, day, nn)
);
CREATE INDEX IF NOT EXISTS rx_artifacts_rec ON rx_artifacts (rec_id);
CREATE INDEX IF NOT EXISTS rx_artifacts_open ON rx_artifacts (door, kind, status, created_ms);

-- One run per door at a time.
CREATE TABLE IF NOT EXISTS rx_locks (
    door TEXT PRIMARY KEY,
    claim TEXT NOT NULL,
    until_ms BIGINT NOT NULL
);

-- Wall-clock milliseconds, for the views' windows.
CREATE VIEW IF NOT EXISTS rx_now AS
SELECT CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER) AS now_ms;

-- The newest observation per (door, kind, key).
CREATE VIEW IF NOT EXISTS rx_latest AS
SELECT o.* FROM rx_observations o
WHERE o.key IS NOT NULL AND NOT EXISTS (
    SELECT 1 FROM rx_observations n
    WHERE n.door = o.door AND n.kind = o.kind AND n.key = o.key
      AND (n.at_ms > o.at_ms OR (n.at_ms = o.at_ms AND n.seq > o.seq)));

-- Fitness: seven components over workouts and check-ins (D-R2 gives each
-- normalisation).
CREATE VIEW v_drift_signals AS
WITH ob AS (SELECT kind, at_ms, data FROM rx_observations WHERE door = 'fitness'),
t AS (
    SELECT
        COALESCE((SELECT CAST(json_extract(data, '$.target_sessions_per_week') AS REAL) FROM ob WHERE kind = 'checkin' AND CAST(json_extract(data, '$.target_sessions_per_week') AS REAL) IS NOT NULL ORDER BY at_ms DESC LIMIT 1), 4.0) AS sessions,
        COALESCE((SELECT CAST(json_extract(data, '$.conditioning_target_min') AS REAL) FROM ob WHERE kind = 'checkin' AND CAST(json_extract(data, '$.conditioning_target_min') AS REAL) IS NOT NULL ORDER BY at_ms DESC LIMIT 1), 90.0) AS cond,
        (SELECT CAST(json_extract(data, '$.plan_block_week') AS REAL) FROM ob WHERE kind = 'checkin' AND CAST(json_extract(data, '$.plan_block_week') AS REAL) IS NOT NULL ORDER BY at_ms DESC LIMIT 1) AS plan_week
),
raw AS (
    SELECT 1 AS ord, 'session_pace' AS component, ROUND(CAST((SELECT COUNT(*) FROM ob WHERE kind = 'workout' AND json_extract(data, '$.type') <> 'recovery' AND at_ms > (SELECT now_ms FROM rx_now) - 604800000) / NULLIF((SELECT sessions FROM t), 0) AS REAL), 2) AS r
    UNION ALL SELECT 2, 'block_lag', ROUND(CAST((SELECT plan_week FROM t) - (SELECT MAX(CAST(json_extract(data, '$.block_week') AS REAL)) FROM ob WHERE kind = 'workout') AS REAL), 2)
    UNION ALL SELECT 3, 'load_regression', ROUND(CAST((SELECT AVG((CAST(json_extract(data, '$.prev_load_kg') AS REAL) - CAST(json_extract(data, '$.load_kg') AS REAL)) * 100.0 / CAST(json_extract(data, '$.prev_load_kg') AS REAL)) FROM ob WHERE kind = 'workout' AND at_ms > (SELECT now_ms FROM rx_now) - 604800000 AND CAST(json_extract(data, '$.prev_load_kg') AS REAL) > 0) AS REAL), 2)
    UNION ALL SELECT 4, 'rpe_drift', ROUND(CAST((SELECT AVG(CAST(json_extract(data, '$.rpe_actual') AS REAL) - CAST(json_extract(data, '$.rpe_prescribed') AS REAL)) FROM ob WHERE kind = 'workout' AND at_ms > (SELECT now_ms FROM rx_now) - 604800000) AS REAL), 2)
    UNION ALL SELECT 5, 'conditioning_shortfall', ROUND(CAST(COALESCE((SELECT SUM(CAST(json_extract(data, '$.minutes') AS REAL)) FROM ob WHERE kind = 'workout' AND json_extract(data, '$.type') = 'conditioning' AND at_ms > (SELECT now_ms FROM rx_now) - 604800000), 0.0) AS REAL), 2)
    UNION ALL SELECT 6, 'hard_lower_gap', ROUND(CAST(((SELECT now_ms FROM rx_now) - (SELECT MAX(at_ms) FROM ob WHERE kind = 'workout' AND (COALESCE(json_extract(data, '$.hard_lower'), 0) = 1))) / 3600000.0 AS REAL), 2)
    UNION ALL SELECT 7, 'recovery', ROUND(CAST((SELECT AVG((CAST(json_extract(data, '$.energy') AS REAL) + CAST(json_extract(data, '$.sleep') AS REAL)) / 2.0) FROM ob WHERE kind = 'checkin' AND at_ms > (SELECT now_ms FROM rx_now) - 1209600000) AS REAL), 2)
),
norm AS (
    SELECT ord, component, r AS raw,
        ROUND(COALESCE(MAX(0.0, MIN(1.0, CASE component
            WHEN 'session_pace' THEN 1.0 - r
            WHEN 'block_lag' THEN r / 4.0
            WHEN 'load_regression' THEN r / 10.0
            WHEN 'rpe_drift' THEN r / 2.0
            WHEN 'conditioning_shortfall' THEN 1.0 - r / NULLIF(t.cond, 0.0)
            WHEN 'hard_lower_gap' THEN (r - 72.0) / 96.0
            WHEN 'recovery' THEN (4.0 - r) / 3.0
            END)), 0.0), 3) AS normalised
    FROM raw, t
)
SELECT n.component, n.raw, n.normalised, COALESCE(w.weight, 0.0) AS weight,
    ROUND(n.normalised * COALESCE(w.weight, 0.0), 4) AS contribution
FROM norm n LEFT JOIN rx_weights w ON w.door = 'fitness' AND w.component = n.component;

CREATE VIEW v_fitness_acute AS
SELECT 'injury' AS name, at_ms FROM rx_observations
WHERE door = 'fitness' AND kind = 'checkin' AND json_extract(data, '$.injury') IS NOT NULL AND json_extract(data, '$.injury') <> '';

-- The body-recomposition sub-score (the fitness composite's second layer):
-- waist and body-fat change over 14 days.
CREATE VIEW v_body_recomp AS
WITH c AS (SELECT at_ms, data FROM rx_observations WHERE door = 'fitness' AND kind = 'checkin' AND at_ms > (SELECT now_ms FROM rx_now) - 1209600000),
d AS (SELECT ROUND((SELECT CAST(json_extract(data, '$.waist_cm') AS REAL) FROM c WHERE CAST(json_extract(data, '$.waist_cm') AS REAL) IS NOT NULL ORDER BY at_ms DESC LIMIT 1) - (SELECT CAST(json_extract(data, '$.waist_cm') AS REAL) FROM c WHERE CAST(json_extract(data, '$.waist_cm') AS REAL) IS NOT NULL ORDER BY at_ms ASC LIMIT 1), 2) AS waist, ROUND((SELECT CAST(json_extract(data, '$.body_fat_pct') AS REAL) FROM c WHERE CAST(json_extract(data, '$.body_fat_pct') AS REAL) IS NOT NULL ORDER BY at_ms DESC LIMIT 1) - (SELECT CAST(json_extract(data, '$.body_fat_pct') AS REAL) FROM c WHERE CAST(json_extract(data, '$.body_fat_pct') AS REAL) IS NOT NULL ORDER BY at_ms ASC LIMIT 1), 2) AS fat),
s AS (SELECT waist, fat, ROUND(COALESCE(MAX(0.0, MIN(1.0, waist / 2.0)), 0.0), 3) AS waist_n, ROUND(COALESCE(MAX(0.0, MIN(1.0, fat / 1.0)), 0.0), 3) AS fat_n FROM d)
SELECT 'waist_change_cm_14d' AS name, waist AS raw, waist_n AS normalised FROM s
UNION ALL SELECT 'body_fat_change_pct_14d', fat, fat_n FROM s
UNION ALL SELECT 'body_recomp', NULL, ROUND(0.6 * waist_n + 0.4 * fat_n, 3) FROM s;

-- Finance: six queries over positions, hypotheses and alerts (the newest
-- observation per key).
CREATE VIEW v_finance_signals AS
WITH p AS (SELECT key, data FROM rx_latest WHERE door = 'finance' AND kind = 'position' AND CAST(json_extract(data, '$.value') AS REAL) > 0),
tot AS (SELECT SUM(CAST(json_extract(data, '$.value') AS REAL)) AS v, SUM(CAST(json_extract(data, '$.cost_basis') AS REAL)) AS c FROM p),
h AS (SELECT key, data FROM rx_latest WHERE door = 'finance' AND kind = 'hypothesis'),
a AS (SELECT key, data FROM rx_latest WHERE door = 'finance' AND kind = 'alert'),
raw AS (
    SELECT 1 AS ord, 'concentration' AS component, ROUND(CAST((SELECT MAX(CAST(json_extract(data, '$.value') AS REAL)) FROM p) / NULLIF((SELECT v FROM tot), 0.0) AS REAL), 2) AS r
    UNION ALL SELECT 2, 'drawdown', ROUND(CAST(((SELECT v FROM tot) - (SELECT c FROM tot)) * 100.0 / NULLIF((SELECT c FROM tot), 0.0) AS REAL), 2)
    UNION ALL SELECT 3, 'stale_hypotheses', ROUND(CAST((SELECT COUNT(*) FROM h WHERE json_extract(data, '$.status') = 'open' AND json_extract(data, '$.review_by') < date('now')) AS REAL), 2)
    UNION ALL SELECT 4, 'unacknowledged_alerts', ROUND(CAST((SELECT COUNT(*) FROM a WHERE NOT (COALESCE(json_extract(data, '$.acknowledged'), 0) = 1)) AS REAL), 2)
    UNION ALL SELECT 5, 'allocation_drift', ROUND(CAST((SELECT SUM(ABS(CAST(json_extract(data, '$.value') AS REAL) / NULLIF((SELECT v FROM tot), 0.0) - CAST(json_extract(data, '$.target_weight') AS REAL))) / 2.0 FROM p WHERE CAST(json_extract(data, '$.target_weight') AS REAL) IS NOT NULL) AS REAL), 2)
    UNION ALL SELECT 6, 'invalidated_held', ROUND(CAST((SELECT COUNT(*) FROM h WHERE json_extract(data, '$.status') = 'invalidated' AND json_extract(data, '$.symbol') IN (SELECT key FROM p)) AS REAL), 2)
),
norm AS (
    SELECT ord, component, r AS raw,
        ROUND(COALESCE(MAX(0.0, MIN(1.0, CASE component
            WHEN 'concentration' THEN (r - 0.25) / 0.25
            WHEN 'drawdown' THEN -r / 20.0
            WHEN 'stale_hypotheses' THEN r / 3.0
            WHEN 'unacknowledged_alerts' THEN r / 3.0
            WHEN 'allocation_drift' THEN r / 0.2
            WHEN 'invalidated_held' THEN r / 2.0
            END)), 0.0), 3) AS normalised
    FROM raw
)
SELECT n.component, n.raw, n.normalised, COALESCE(w.weight, 0.0) AS weight,
    ROUND(n.normalised * COALESCE(w.weight, 0.0), 4) AS contribution
FROM norm n LEFT JOIN rx_weights w ON w.door = 'finance' AND w.component = n.component;

CREATE VIEW v_finance_acute AS
SELECT 'alert:' || key AS name, at_ms FROM rx_latest
WHERE door = 'finance' AND kind = 'alert' AND json_extract(data, '$.severity') = 'high' AND NOT (COALESCE(json_extract(data, '$.acknowledged'), 0) = 1);

CREATE VIEW v_finance_aux AS
SELECT 'positions_held' AS name, CAST((SELECT COUNT(*) FROM rx_latest WHERE door = 'finance' AND kind = 'position' AND CAST(json_extract(data, '$.value') AS REAL) > 0) AS REAL) AS raw, CAST(0.0 AS REAL) AS normalised
UNION ALL SELECT 'watchlist', CAST((SELECT COUNT(*) FROM rx_latest WHERE door = 'finance' AND kind = 'watch') AS REAL), CAST(0.0 AS REAL);

-- Learning: the state snapshot over study sessions and the weekly goal.
CREATE VIEW v_learning_snapshot AS
WITH s AS (SELECT at_ms, data FROM rx_observations WHERE door = 'learning' AND kind = 'session'),
g AS (SELECT COALESCE((SELECT CAST(json_extract(data, '$.minutes_per_week') AS REAL) FROM rx_observations WHERE door = 'learning' AND kind = 'goal' ORDER BY at_ms DESC LIMIT 1), 150.0) AS goal),
raw AS (
    SELECT 1 AS ord, 'study_pace' AS component, ROUND(CAST(COALESCE((SELECT SUM(CAST(json_extract(data, '$.minutes') AS REAL)) FROM s WHERE at_ms > (SELECT now_ms FROM rx_now) - 604800000), 0.0) AS REAL), 2) AS r
    UNION ALL SELECT 2, 'days_since_study', ROUND(CAST(((SELECT now_ms FROM rx_now) - (SELECT MAX(at_ms) FROM s)) / 86400000.0 AS REAL), 2)
    UNION ALL SELECT 3, 'recall_decline', ROUND(CAST((SELECT AVG(CAST(json_extract(data, '$.recall') AS REAL)) FROM s WHERE at_ms <= (SELECT now_ms FROM rx_now) - 604800000 AND at_ms > (SELECT now_ms FROM rx_now) - 2419200000) - (SELECT AVG(CAST(json_extract(data, '$.recall') AS REAL)) FROM s WHERE at_ms > (SELECT now_ms FROM rx_now) - 604800000) AS REAL), 2)
    UNION ALL SELECT 4, 'topic_scatter', ROUND(CAST((SELECT COUNT(DISTINCT json_extract(data, '$.topic')) FROM s WHERE at_ms > (SELECT now_ms FROM rx_now) - 604800000) AS REAL), 2)
),
norm AS (
    SELECT ord, component, r AS raw,
        ROUND(COALESCE(MAX(0.0, MIN(1.0, CASE component
            WHEN 'study_pace' THEN 1.0 - r / NULLIF(g.goal, 0.0)
            WHEN 'days_since_study' THEN (r - 2.0) / 5.0
            WHEN 'recall_decline' THEN r / 0.3
            WHEN 'topic_scatter' THEN (r - 2.0) / 4.0
            END)), 0.0), 3) AS normalised
    FROM raw, g
)
SELECT n.component, n.raw, n.normalised, COALESCE(w.weight, 0.0) AS weight,
    ROUND(n.normalised * COALESCE(w.weight, 0.0), 4) AS contribution
FROM norm n LEFT JOIN rx_weights w ON w.door = 'learning' AND w.component = n.component;

CREATE VIEW v_learning_aux AS
SELECT 'topics_in_progress' AS name, CAST((SELECT COUNT(DISTINCT json_extract(data, '$.topic')) FROM rx_observations WHERE door = 'learning' AND kind = 'session' AND at_ms > (SELECT now_ms FROM rx_now) - 2419200000) AS REAL) AS raw, CAST(0.0 AS REAL) AS normalised;

-- The three doors that ship.
INSERT INTO rx_doors (name, config, updated_ms) VALUES ('fitness', '{"name":"fitness","title":"Fitness","components":[{"name":"session_pace","weight":0.25,"label":"session pace","advice":"Book the missing sessions into the calendar now, shortest first, so the week''s count recovers before the plan moves on.","evidence_query":"training consistency sessions per week missed workouts"},{"name":"block_lag","weight":0.1,"label":"plan block lag","advice":"Repeat the current block week instead of skipping ahead, and move the block''s end date rather than compressing it.","evidence_query":"training plan block progression behind schedule"},{"name":"load_regression","weight":0.15,"label":"load regression","advice":"Hold the working loads for the next sessions and check sleep and food before pushing again; do not chase the old numbers.","evidence_query":"strength loss load regression deload"},{"name":"rpe_drift","weight":0.1,"label":"RPE drift","advice":"Sessions feel harder than prescribed: take the planned deload now and cap effort at the prescribed RPE.","evidence_query":"perceived exertion fatigue overreaching deload"},{"name":"conditioning_shortfall","weight":0.15,"label":"conditioning shortfall","advice":"Add easy conditioning on rest days, in short blocks that fit around strength work.","evidence_query":"conditioning cardio minutes zone 2"},{"name":"hard_lower_gap","weight":0.1,"label":"hard lower-body gap","advice":"Put a hard lower-body session first in the next training day, before anything optional.","evidence_query":"lower body squat deadlift frequency"},{"name":"recovery","weight":0.15,"label":"recovery","advice":"Protect sleep this week: fixed bedtime, no late hard sessions, and swap one hard day for an easy one.","evidence_query":"sleep energy recovery readiness"}],"signals":{"kind":"sql","view":"v_drift_signals","acute_view":"v_fitness_acute"},"auxiliary":[{"name":"body_recomp","view":"v_body_recomp"}],"composite":{"kind":"layered","view_weight":0.9,"aux":"body_recomp","aux_weight":0.1},"store":{"kind":"local"},"observations":{"workout":{"type":"string","minutes":"number","rpe_actual":"number?","rpe_prescribed":"number?","load_kg":"number?","prev_load_kg":"number?","hard_lower":"boolean?","block_week":"integer?"},"checkin":{"energy":"number","sleep":"number","weight_kg":"number?","waist_cm":"number?","body_fat_pct":"number?","target_sessions_per_week":"number?","conditioning_target_min":"number?","plan_block_week":"integer?","injury":"string?"}},"fire_threshold":0.5}', 0);
INSERT INTO rx_weights (door, component, weight) VALUES ('fitness', 'session_pace', 0.25);
INSERT INTO rx_weights (door, component, weight) VALUES ('fitness', 'block_lag', 0.1);
INSERT INTO rx_weights (door, component, weight) VALUES ('fitness', 'load_regression', 0.15);
INSERT INTO rx_weights (door, component, weight) VALUES ('fitness', 'rpe_drift', 0.1);
INSERT INTO rx_weights (door, component, weight) VALUES ('fitness', 'conditioning_shortfall', 0.15);
INSERT INTO rx_weights (door, component, weight) VALUES ('fitness', 'hard_lower_gap', 0.1);
INSERT INTO rx_weights (door, component, weight) VALUES ('fitness', 'recovery', 0.15);
INSERT INTO rx_doors (name, config, updated_ms) VALUES ('finance', '{"name":"finance","title":"Finance","components":[{"name":"concentration","weight":0.2,"label":"position concentration","advice":"Trim the largest position back toward its target weight, or write down why the concentration is deliberate.","evidence_query":"position sizing concentration risk diversification"},{"name":"drawdown","weight":0.2,"label":"portfolio drawdown","advice":"Review each losing position against its original thesis before adding to any of them.","evidence_query":"drawdown losses thesis review"},{"name":"stale_hypotheses","weight":0.15,"label":"stale hypotheses","advice":"Close or re-date every hypothesis past its review date: confirm it, invalidate it, or set a new date with a reason.","evidence_query":"investment hypothesis review thesis"},{"name":"unacknowledged_alerts","weight":0.15,"label":"unacknowledged alerts","advice":"Go through the open alerts and acknowledge or act on each one.","evidence_query":"market alert risk event"},{"name":"allocation_drift","weight":0.15,"label":"allocation drift","advice":"Rebalance toward the target allocation, starting with the position furthest from its target.","evidence_query":"rebalancing target allocation"},{"name":"invalidated_held","weight":0.15,"label":"invalidated theses still held","advice":"Exit or re-justify every position whose hypothesis was invalidated; holding on without a thesis is the drift.","evidence_query":"invalidated thesis sell discipline"}],"signals":{"kind":"sql","view":"v_finance_signals","acute_view":"v_finance_acute"},"auxiliary":[{"name":"finance_context","view":"v_finance_aux"}],"composite":{"kind":"flat"},"store":{"kind":"local"},"observations":{"position":{"symbol":"key","value":"number","cost_basis":"number","target_weight":"number?"},"hypothesis":{"ref":"key","title":"string","status":"string","symbol":"string?","review_by":"string?"},"alert":{"ref":"key","severity":"string","message":"string","symbol":"string?","acknowledged":"boolean?"},"watch":{"symbol":"key","note":"string?"}},"fire_threshold":0.5}', 0);
INSERT INTO rx_weights (door, component, weight) VALUES ('finance', 'concentration', 0.2);
INSERT INTO rx_weights (door, component, weight) VALUES ('finance', 'drawdown', 0.2);
INSERT INTO rx_weights (door, component, weight) VALUES ('finance', 'stale_hypotheses', 0.15);
INSERT INTO rx_weights (door, component, weight) VALUES ('finance', 'unacknowledged_alerts', 0.15);
INSERT INTO rx_weights (door, component, weight) VALUES ('finance', 'allocation_drift', 0.15);
INSERT INTO rx_weights (door, component, weight) VALUES ('finance', 'invalidated_held', 0.15);
INSERT INTO rx_doors (name, config, updated_ms) VALUES ('learning', '{"name":"learning","title":"Learning","components":[{"name":"study_pace","weight":0.4,"label":"study pace","advice":"Schedule short study blocks on the next three days, at a fixed time, before adding any new material.","evidence_query":"study habit consistency practice time"},{"name":"days_since_study","weight":0.25,"label":"days since the last session","advice":"Do one short session today on the topic already in progress, to restart the streak.","evidence_query":"restarting learning habit streak"},{"name":"recall_decline","weight":0.2,"label":"recall decline","advice":"Switch the next sessions to retrieval practice and spaced review of what was covered, not new material.","evidence_query":"spaced repetition retrieval practice forgetting"},{"name":"topic_scatter","weight":0.15,"label":"topic scatter","advice":"Pick one topic for the coming week and park the others in a list.","evidence_query":"focus one topic deep work"}],"signals":{"kind":"sql","view":"v_learning_snapshot"},"auxiliary":[{"name":"learning_context","view":"v_learning_aux"}],"composite":{"kind":"flat"},"store":{"kind":"markdown"},"observations":{"session":{"topic":"string","minutes":"number","recall":"number?"},"goal":{"minutes_per_week":"number"}},"fire_threshold":0.5}', 0);
INSERT INTO rx_weights (door, component, weight) VALUES ('learning', 'study_pace', 0.4);
INSERT INTO rx_weights (door, component, weight) VALUES ('learning', 'days_since_study', 0.25);
INSERT INTO rx_weights (door, component, weight) VALUES ('learning', 'recall_decline', 0.2);
INSERT INTO rx_weights (door, component, weight) VALUES ('learning', 'topic_scatter', 0.15);
