-- Signals as of a past day (#26 item 5): the rx views read their clock
-- from `rx_now` and the observations through `rx_observations_asof`, so
-- a reader that puts an instant in `rx_clock` inside its own transaction
-- sees every door's signals as they stood then. `rx_clock` is empty
-- otherwise, and `rx_now` is the wall clock, as before. Generated from
-- 0004's views with `rx_observations` read through the as-of view and
-- today's date taken from `rx_now`.
CREATE TABLE IF NOT EXISTS rx_clock (now_ms BIGINT NOT NULL);
DROP VIEW IF EXISTS rx_now;
CREATE VIEW rx_now AS
SELECT COALESCE((SELECT MAX(now_ms) FROM rx_clock), CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER)) AS now_ms;
CREATE VIEW IF NOT EXISTS rx_observations_asof AS
SELECT * FROM rx_observations WHERE at_ms <= (SELECT now_ms FROM rx_now);
DROP VIEW IF EXISTS rx_latest;
CREATE VIEW rx_latest AS
SELECT o.* FROM rx_observations_asof o
WHERE o.key IS NOT NULL AND NOT EXISTS (
    SELECT 1 FROM rx_observations_asof n
    WHERE n.door = o.door AND n.kind = o.kind AND n.key = o.key
      AND (n.at_ms > o.at_ms OR (n.at_ms = o.at_ms AND n.seq > o.seq)));
DROP VIEW IF EXISTS v_drift_signals;
CREATE VIEW v_drift_signals AS
WITH ob AS (SELECT kind, at_ms, data FROM rx_observations_asof WHERE door = 'fitness'),
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
DROP VIEW IF EXISTS v_fitness_acute;
CREATE VIEW v_fitness_acute AS
SELECT 'injury' AS name, at_ms FROM rx_observations_asof
WHERE door = 'fitness' AND kind = 'checkin' AND json_extract(data, '$.injury') IS NOT NULL AND json_extract(data, '$.injury') <> '';
DROP VIEW IF EXISTS v_body_recomp;
CREATE VIEW v_body_recomp AS
WITH c AS (SELECT at_ms, data FROM rx_observations_asof WHERE door = 'fitness' AND kind = 'checkin' AND at_ms > (SELECT now_ms FROM rx_now) - 1209600000),
d AS (SELECT ROUND((SELECT CAST(json_extract(data, '$.waist_cm') AS REAL) FROM c WHERE CAST(json_extract(data, '$.waist_cm') AS REAL) IS NOT NULL ORDER BY at_ms DESC LIMIT 1) - (SELECT CAST(json_extract(data, '$.waist_cm') AS REAL) FROM c WHERE CAST(json_extract(data, '$.waist_cm') AS REAL) IS NOT NULL ORDER BY at_ms ASC LIMIT 1), 2) AS waist, ROUND((SELECT CAST(json_extract(data, '$.body_fat_pct') AS REAL) FROM c WHERE CAST(json_extract(data, '$.body_fat_pct') AS REAL) IS NOT NULL ORDER BY at_ms DESC LIMIT 1) - (SELECT CAST(json_extract(data, '$.body_fat_pct') AS REAL) FROM c WHERE CAST(json_extract(data, '$.body_fat_pct') AS REAL) IS NOT NULL ORDER BY at_ms ASC LIMIT 1), 2) AS fat),
s AS (SELECT waist, fat, ROUND(COALESCE(MAX(0.0, MIN(1.0, waist / 2.0)), 0.0), 3) AS waist_n, ROUND(COALESCE(MAX(0.0, MIN(1.0, fat / 1.0)), 0.0), 3) AS fat_n FROM d)
SELECT 'waist_change_cm_14d' AS name, waist AS raw, waist_n AS normalised FROM s
UNION ALL SELECT 'body_fat_change_pct_14d', fat, fat_n FROM s
UNION ALL SELECT 'body_recomp', NULL, ROUND(0.6 * waist_n + 0.4 * fat_n, 3) FROM s;
DROP VIEW IF EXISTS v_finance_signals;
CREATE VIEW v_finance_signals AS
WITH p AS (SELECT key, data FROM rx_latest WHERE door = 'finance' AND kind = 'position' AND CAST(json_extract(data, '$.value') AS REAL) > 0),
tot AS (SELECT SUM(CAST(json_extract(data, '$.value') AS REAL)) AS v, SUM(CAST(json_extract(data, '$.cost_basis') AS REAL)) AS c FROM p),
h AS (SELECT key, data FROM rx_latest WHERE door = 'finance' AND kind = 'hypothesis'),
a AS (SELECT key, data FROM rx_latest WHERE door = 'finance' AND kind = 'alert'),
raw AS (
    SELECT 1 AS ord, 'concentration' AS component, ROUND(CAST((SELECT MAX(CAST(json_extract(data, '$.value') AS REAL)) FROM p) / NULLIF((SELECT v FROM tot), 0.0) AS REAL), 2) AS r
    UNION ALL SELECT 2, 'drawdown', ROUND(CAST(((SELECT v FROM tot) - (SELECT c FROM tot)) * 100.0 / NULLIF((SELECT c FROM tot), 0.0) AS REAL), 2)
    UNION ALL SELECT 3, 'stale_hypotheses', ROUND(CAST((SELECT COUNT(*) FROM h WHERE json_extract(data, '$.status') = 'open' AND json_extract(data, '$.review_by') < date((SELECT now_ms FROM rx_now) / 1000, 'unixepoch')) AS REAL), 2)
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
DROP VIEW IF EXISTS v_finance_acute;
CREATE VIEW v_finance_acute AS
SELECT 'alert:' || key AS name, at_ms FROM rx_latest
WHERE door = 'finance' AND kind = 'alert' AND json_extract(data, '$.severity') = 'high' AND NOT (COALESCE(json_extract(data, '$.acknowledged'), 0) = 1);
DROP VIEW IF EXISTS v_finance_aux;
CREATE VIEW v_finance_aux AS
SELECT 'positions_held' AS name, CAST((SELECT COUNT(*) FROM rx_latest WHERE door = 'finance' AND kind = 'position' AND CAST(json_extract(data, '$.value') AS REAL) > 0) AS REAL) AS raw, CAST(0.0 AS REAL) AS normalised
UNION ALL SELECT 'watchlist', CAST((SELECT COUNT(*) FROM rx_latest WHERE door = 'finance' AND kind = 'watch') AS REAL), CAST(0.0 AS REAL);
DROP VIEW IF EXISTS v_learning_snapshot;
CREATE VIEW v_learning_snapshot AS
WITH s AS (SELECT at_ms, data FROM rx_observations_asof WHERE door = 'learning' AND kind = 'session'),
g AS (SELECT COALESCE((SELECT CAST(json_extract(data, '$.minutes_per_week') AS REAL) FROM rx_observations_asof WHERE door = 'learning' AND kind = 'goal' ORDER BY at_ms DESC LIMIT 1), 150.0) AS goal),
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
DROP VIEW IF EXISTS v_learning_aux;
CREATE VIEW v_learning_aux AS
SELECT 'topics_in_progress' AS name, CAST((SELECT COUNT(DISTINCT json_extract(data, '$.topic')) FROM rx_observations_asof WHERE door = 'learning' AND kind = 'session' AND at_ms > (SELECT now_ms FROM rx_now) - 2419200000) AS REAL) AS raw, CAST(0.0 AS REAL) AS normalised;
