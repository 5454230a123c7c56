-- Recommendations: the signal views, made cheap to call (D-R8).
--
-- Postgres re-plans its views on every call and parses JSON text on every
-- read, so its 0005 stores the parsed JSON and moves each view's query into
-- a function whose plan the session keeps. SQLite parses these views in
-- microseconds on a pooled connection and needs neither. Both get the
-- index that the newest-per-key lookup of `rx_latest` walks.

CREATE INDEX IF NOT EXISTS rx_observations_key ON rx_observations (door, kind, key, at_ms);
