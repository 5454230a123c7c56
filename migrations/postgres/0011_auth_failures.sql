-- Failed sign-ins per client address, counted in a fixed window so a
-- guesser is throttled (D-CL6). A row whose window has ended counts as
-- zero and is replaced by the next failure.
CREATE TABLE IF NOT EXISTS auth_failures (
    client TEXT PRIMARY KEY,
    failures BIGINT NOT NULL,
    window_end_ms BIGINT NOT NULL
);
