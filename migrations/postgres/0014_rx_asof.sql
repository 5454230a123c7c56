-- Signals as of a past day (#26 item 5): the rx signal functions read their
-- clock from `rx_now` and the observations through `rx_observations_asof`,
-- so a reader that puts an instant in `rx_clock` inside its own transaction
-- sees every door's signals as they stood then. `rx_clock` is empty
-- otherwise, and `rx_now` is the wall clock, as before. Generated from
-- 0005's functions with `rx_observations` read through the as-of view and
-- today's date taken from `rx_now`.
CREATE TABLE IF NOT EXISTS rx_clock (now_ms BIGINT NOT NULL);
CREATE OR REPLACE VIEW rx_now AS
SELECT COALESCE((SELECT MAX(now_ms) FROM rx_clock), (extract(epoch FROM clock_timestamp()) * 1000)::bigint) AS now_ms;
CREATE OR REPLACE VIEW rx_observations_asof AS
SELECT * FROM rx_observations WHERE at_ms <= (SELECT now_ms FROM rx_now);
CREATE OR REPLACE VIEW rx_latest AS
SELECT o.* FROM rx_observations_asof o
WHERE o.key IS NOT NULL AND NOT EXISTS (
    SELECT 1 FROM rx_observations_asof n
    WHERE n.door = o.door AND n.kind = o.kind AND n.key = o.key
      AND (n.at_ms > o.at_ms OR (n.at_ms = o.at_ms AND n.seq > o.seq)));
CREATE OR REPLACE FUNCTION v_drift_signals_rows() RETURNS TABLE (o_component text, o_raw float8, o_normalised float8, o_weight float8, o_contribution float8)
LANGUAGE plpgsql STABLE AS $fn$
BEGIN
    RETURN QUERY
    WITH ob AS (SELECT kind, at_ms, doc FROM rx_observations_asof WHERE door = 'fitness'),
    t AS (
        SELECT
            COALESCE((SELECT (doc->>'target_sessions_per_week')::float8 FROM ob WHERE kind = 'checkin' AND (doc->>'target_sessions_per_week')::float8 IS NOT NULL ORDER BY at_ms DESC LIMIT 1), 4.0) AS sessions,
            COALESCE((SELECT (doc->>'conditioning_target_min')::float8 FROM ob WHERE kind = 'checkin' AND (doc->>'conditioning_target_min')::float8 IS NOT NULL ORDER BY at_ms DESC LIMIT 1), 90.0) AS cond,
            (SELECT (doc->>'plan_block_week')::float8 FROM ob WHERE kind = 'checkin' AND (doc->>'plan_block_week')::float8 IS NOT NULL ORDER BY at_ms DESC LIMIT 1) AS plan_week
    ),
    raw AS (
        SELECT 1 AS ord, 'session_pace' AS component, round((((SELECT COUNT(*) FROM ob WHERE kind = 'workout' AND (doc->>'type') <> 'recovery' AND at_ms > (SELECT now_ms FROM rx_now) - 604800000) / NULLIF((SELECT sessions FROM t), 0))::float8)::numeric, 2)::float8 AS r
        UNION ALL SELECT 2, 'block_lag', round((((SELECT plan_week FROM t) - (SELECT MAX((doc->>'block_week')::float8) FROM ob WHERE kind = 'workout'))::float8)::numeric, 2)::float8
        UNION ALL SELECT 3, 'load_regression', round((((SELECT AVG(((doc->>'prev_load_kg')::float8 - (doc->>'load_kg')::float8) * 100.0 / (doc->>'prev_load_kg')::float8) FROM ob WHERE kind = 'workout' AND at_ms > (SELECT now_ms FROM rx_now) - 604800000 AND (doc->>'prev_load_kg')::float8 > 0))::float8)::numeric, 2)::float8
        UNION ALL SELECT 4, 'rpe_drift', round((((SELECT AVG((doc->>'rpe_actual')::float8 - (doc->>'rpe_prescribed')::float8) FROM ob WHERE kind = 'workout' AND at_ms > (SELECT now_ms FROM rx_now) - 604800000))::float8)::numeric, 2)::float8
        UNION ALL SELECT 5, 'conditioning_shortfall', round(((COALESCE((SELECT SUM((doc->>'minutes')::float8) FROM ob WHERE kind = 'workout' AND (doc->>'type') = 'conditioning' AND at_ms > (SELECT now_ms FROM rx_now) - 604800000), 0.0))::float8)::numeric, 2)::float8
        UNION ALL SELECT 6, 'hard_lower_gap', round(((((SELECT now_ms FROM rx_now) - (SELECT MAX(at_ms) FROM ob WHERE kind = 'workout' AND COALESCE((doc->>'hard_lower')::boolean, false))) / 3600000.0)::float8)::numeric, 2)::float8
        UNION ALL SELECT 7, 'recovery', round((((SELECT AVG(((doc->>'energy')::float8 + (doc->>'sleep')::float8) / 2.0) FROM ob WHERE kind = 'checkin' AND at_ms > (SELECT now_ms FROM rx_now) - 1209600000))::float8)::numeric, 2)::float8
    ),
    norm AS (
        SELECT ord, component, r AS raw,
            round((COALESCE((CASE WHEN (CASE component
                WHEN 'session_pace' THEN 1.0 - r
                WHEN 'block_lag' THEN r / 4.0
                WHEN 'load_regression' THEN r / 10.0
                WHEN 'rpe_drift' THEN r / 2.0
                WHEN 'conditioning_shortfall' THEN 1.0 - r / NULLIF(t.cond, 0.0)
                WHEN 'hard_lower_gap' THEN (r - 72.0) / 96.0
                WHEN 'recovery' THEN (4.0 - r) / 3.0
                END) IS NULL THEN NULL ELSE GREATEST(0.0::float8, LEAST(1.0::float8, CASE component
                WHEN 'session_pace' THEN 1.0 - r
                WHEN 'block_lag' THEN r / 4.0
                WHEN 'load_regression' THEN r / 10.0
                WHEN 'rpe_drift' THEN r / 2.0
                WHEN 'conditioning_shortfall' THEN 1.0 - r / NULLIF(t.cond, 0.0)
                WHEN 'hard_lower_gap' THEN (r - 72.0) / 96.0
                WHEN 'recovery' THEN (4.0 - r) / 3.0
                END)) END), 0.0))::numeric, 3)::float8 AS normalised
        FROM raw, t
    )
    SELECT n.component, n.raw, n.normalised, COALESCE(w.weight, 0.0) AS weight,
        round((n.normalised * COALESCE(w.weight, 0.0))::numeric, 4)::float8 AS contribution
    FROM norm n LEFT JOIN rx_weights w ON w.door = 'fitness' AND w.component = n.component;
END
$fn$;
CREATE OR REPLACE FUNCTION v_fitness_acute_rows() RETURNS TABLE (o_name text, o_at_ms bigint)
LANGUAGE plpgsql STABLE AS $fn$
BEGIN
    RETURN QUERY
    SELECT 'injury' AS name, at_ms FROM rx_observations_asof
    WHERE door = 'fitness' AND kind = 'checkin' AND (doc->>'injury') IS NOT NULL AND (doc->>'injury') <> '';
END
$fn$;
CREATE OR REPLACE FUNCTION v_body_recomp_rows() RETURNS TABLE (o_name text, o_raw float8, o_normalised float8)
LANGUAGE plpgsql STABLE AS $fn$
BEGIN
    RETURN QUERY
    WITH c AS (SELECT at_ms, doc FROM rx_observations_asof WHERE door = 'fitness' AND kind = 'checkin' AND at_ms > (SELECT now_ms FROM rx_now) - 1209600000),
    d AS (SELECT round(((SELECT (doc->>'waist_cm')::float8 FROM c WHERE (doc->>'waist_cm')::float8 IS NOT NULL ORDER BY at_ms DESC LIMIT 1) - (SELECT (doc->>'waist_cm')::float8 FROM c WHERE (doc->>'waist_cm')::float8 IS NOT NULL ORDER BY at_ms ASC LIMIT 1))::numeric, 2)::float8 AS waist, round(((SELECT (doc->>'body_fat_pct')::float8 FROM c WHERE (doc->>'body_fat_pct')::float8 IS NOT NULL ORDER BY at_ms DESC LIMIT 1) - (SELECT (doc->>'body_fat_pct')::float8 FROM c WHERE (doc->>'body_fat_pct')::float8 IS NOT NULL ORDER BY at_ms ASC LIMIT 1))::numeric, 2)::float8 AS fat),
    s AS (SELECT waist, fat, round((COALESCE((CASE WHEN (waist / 2.0) IS NULL THEN NULL ELSE GREATEST(0.0::float8, LEAST(1.0::float8, waist / 2.0)) END), 0.0))::numeric, 3)::float8 AS waist_n, round((COALESCE((CASE WHEN (fat / 1.0) IS NULL THEN NULL ELSE GREATEST(0.0::float8, LEAST(1.0::float8, fat / 1.0)) END), 0.0))::numeric, 3)::float8 AS fat_n FROM d)
    SELECT 'waist_change_cm_14d' AS name, waist AS raw, waist_n AS normalised FROM s
    UNION ALL SELECT 'body_fat_change_pct_14d', fat, fat_n FROM s
    UNION ALL SELECT 'body_recomp', CAST(NULL AS float8), round((0.6 * waist_n + 0.4 * fat_n)::numeric, 3)::float8 FROM s;
END
$fn$;
CREATE OR REPLACE FUNCTION v_finance_signals_rows() RETURNS TABLE (o_component text, o_raw float8, o_normalised float8, o_weight float8, o_contribution float8)
LANGUAGE plpgsql STABLE AS $fn$
BEGIN
    RETURN QUERY
    WITH p AS (SELECT key, doc FROM rx_latest WHERE door = 'finance' AND kind = 'position' AND (doc->>'value')::float8 > 0),
    tot AS (SELECT SUM((doc->>'value')::float8) AS v, SUM((doc->>'cost_basis')::float8) AS c FROM p),
    h AS (SELECT key, doc FROM rx_latest WHERE door = 'finance' AND kind = 'hypothesis'),
    a AS (SELECT key, doc FROM rx_latest WHERE door = 'finance' AND kind = 'alert'),
    raw AS (
        SELECT 1 AS ord, 'concentration' AS component, round((((SELECT MAX((doc->>'value')::float8) FROM p) / NULLIF((SELECT v FROM tot), 0.0))::float8)::numeric, 2)::float8 AS r
        UNION ALL SELECT 2, 'drawdown', round(((((SELECT v FROM tot) - (SELECT c FROM tot)) * 100.0 / NULLIF((SELECT c FROM tot), 0.0))::float8)::numeric, 2)::float8
        UNION ALL SELECT 3, 'stale_hypotheses', round((((SELECT COUNT(*) FROM h WHERE (doc->>'status') = 'open' AND (doc->>'review_by') < to_char(to_timestamp((SELECT now_ms FROM rx_now) / 1000.0) AT TIME ZONE 'UTC', 'YYYY-MM-DD')))::float8)::numeric, 2)::float8
        UNION ALL SELECT 4, 'unacknowledged_alerts', round((((SELECT COUNT(*) FROM a WHERE NOT COALESCE((doc->>'acknowledged')::boolean, false)))::float8)::numeric, 2)::float8
        UNION ALL SELECT 5, 'allocation_drift', round((((SELECT SUM(ABS((doc->>'value')::float8 / NULLIF((SELECT v FROM tot), 0.0) - (doc->>'target_weight')::float8)) / 2.0 FROM p WHERE (doc->>'target_weight')::float8 IS NOT NULL))::float8)::numeric, 2)::float8
        UNION ALL SELECT 6, 'invalidated_held', round((((SELECT COUNT(*) FROM h WHERE (doc->>'status') = 'invalidated' AND (doc->>'symbol') IN (SELECT key FROM p)))::float8)::numeric, 2)::float8
    ),
    norm AS (
        SELECT ord, component, r AS raw,
            round((COALESCE((CASE WHEN (CASE component
                WHEN 'concentration' THEN (r - 0.25) / 0.25
                WHEN 'drawdown' THEN -r / 20.0
                WHEN 'stale_hypotheses' THEN r / 3.0
                WHEN 'unacknowledged_alerts' THEN r / 3.0
                WHEN 'allocation_drift' THEN r / 0.2
                WHEN 'invalidated_held' THEN r / 2.0
                END) IS NULL THEN NULL ELSE GREATEST(0.0::float8, LEAST(1.0::float8, CASE component
                WHEN 'concentration' THEN (r - 0.25) / 0.25
                WHEN 'drawdown' THEN -r / 20.0
                WHEN 'stale_hypotheses' THEN r / 3.0
                WHEN 'unacknowledged_alerts' THEN r / 3.0
                WHEN 'allocation_drift' THEN r / 0.2
                WHEN 'invalidated_held' THEN r / 2.0
                END)) END), 0.0))::numeric, 3)::float8 AS normalised
        FROM raw
    )
    SELECT n.component, n.raw, n.normalised, COALESCE(w.weight, 0.0) AS weight,
        round((n.normalised * COALESCE(w.weight, 0.0))::numeric, 4)::float8 AS contribution
    FROM norm n LEFT JOIN rx_weights w ON w.door = 'finance' AND w.component = n.component;
END
$fn$;
CREATE OR REPLACE FUNCTION v_finance_acute_rows() RETURNS TABLE (o_name text, o_at_ms bigint)
LANGUAGE plpgsql STABLE AS $fn$
BEGIN
    RETURN QUERY
    SELECT 'alert:' || key AS name, at_ms FROM rx_latest
    WHERE door = 'finance' AND kind = 'alert' AND (doc->>'severity') = 'high' AND NOT COALESCE((doc->>'acknowledged')::boolean, false);
END
$fn$;
CREATE OR REPLACE FUNCTION v_finance_aux_rows() RETURNS TABLE (o_name text, o_raw float8, o_normalised float8)
LANGUAGE plpgsql STABLE AS $fn$
BEGIN
    RETURN QUERY
    SELECT 'positions_held' AS name, ((SELECT COUNT(*) FROM rx_latest WHERE door = 'finance' AND kind = 'position' AND (doc->>'value')::float8 > 0))::float8 AS raw, (0.0)::float8 AS normalised
    UNION ALL SELECT 'watchlist', ((SELECT COUNT(*) FROM rx_latest WHERE door = 'finance' AND kind = 'watch'))::float8, (0.0)::float8;
END
$fn$;
CREATE OR REPLACE FUNCTION v_learning_snapshot_rows() RETURNS TABLE (o_component text, o_raw float8, o_normalised float8, o_weight float8, o_contribution float8)
LANGUAGE plpgsql STABLE AS $fn$
BEGIN
    RETURN QUERY
    WITH s AS (SELECT at_ms, doc FROM rx_observations_asof WHERE door = 'learning' AND kind = 'session'),
    g AS (SELECT COALESCE((SELECT (doc->>'minutes_per_week')::float8 FROM rx_observations_asof WHERE door = 'learning' AND kind = 'goal' ORDER BY at_ms DESC LIMIT 1), 150.0) AS goal),
    raw AS (
        SELECT 1 AS ord, 'study_pace' AS component, round(((COALESCE((SELECT SUM((doc->>'minutes')::float8) FROM s WHERE at_ms > (SELECT now_ms FROM rx_now) - 604800000), 0.0))::float8)::numeric, 2)::float8 AS r
        UNION ALL SELECT 2, 'days_since_study', round(((((SELECT now_ms FROM rx_now) - (SELECT MAX(at_ms) FROM s)) / 86400000.0)::float8)::numeric, 2)::float8
        UNION ALL SELECT 3, 'recall_decline', round((((SELECT AVG((doc->>'recall')::float8) FROM s WHERE at_ms <= (SELECT now_ms FROM rx_now) - 604800000 AND at_ms > (SELECT now_ms FROM rx_now) - 2419200000) - (SELECT AVG((doc->>'recall')::float8) FROM s WHERE at_ms > (SELECT now_ms FROM rx_now) - 604800000))::float8)::numeric, 2)::float8
        UNION ALL SELECT 4, 'topic_scatter', round((((SELECT COUNT(DISTINCT (doc->>'topic')) FROM s WHERE at_ms > (SELECT now_ms FROM rx_now) - 604800000))::float8)::numeric, 2)::float8
    ),
    norm AS (
        SELECT ord, component, r AS raw,
            round((COALESCE((CASE WHEN (CASE component
                WHEN 'study_pace' THEN 1.0 - r / NULLIF(g.goal, 0.0)
                WHEN 'days_since_study' THEN (r - 2.0) / 5.0
                WHEN 'recall_decline' THEN r / 0.3
                WHEN 'topic_scatter' THEN (r - 2.0) / 4.0
                END) IS NULL THEN NULL ELSE GREATEST(0.0::float8, LEAST(1.0::float8, CASE component
                WHEN 'study_pace' THEN 1.0 - r / NULLIF(g.goal, 0.0)
                WHEN 'days_since_study' THEN (r - 2.0) / 5.0
                WHEN 'recall_decline' THEN r / 0.3
                WHEN 'topic_scatter' THEN (r - 2.0) / 4.0
                END)) END), 0.0))::numeric, 3)::float8 AS normalised
        FROM raw, g
    )
    SELECT n.component, n.raw, n.normalised, COALESCE(w.weight, 0.0) AS weight,
        round((n.normalised * COALESCE(w.weight, 0.0))::numeric, 4)::float8 AS contribution
    FROM norm n LEFT JOIN rx_weights w ON w.door = 'learning' AND w.component = n.component;
END
$fn$;
CREATE OR REPLACE FUNCTION v_learning_aux_rows() RETURNS TABLE (o_name text, o_raw float8, o_normalised float8)
LANGUAGE plpgsql STABLE AS $fn$
BEGIN
    RETURN QUERY
    SELECT 'topics_in_progress' AS name, ((SELECT COUNT(DISTINCT (doc->>'topic')) FROM rx_observations_asof WHERE door = 'learning' AND kind = 'session' AND at_ms > (SELECT now_ms FROM rx_now) - 2419200000))::float8 AS raw, (0.0)::float8 AS normalised;
END
$fn$;
