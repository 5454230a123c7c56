-- A document's run (issue #50 item 4, D-K29): the documents that name the
-- same source URL and source date, in the order they arrived, lend each
-- other their words across requests. `run` is the key
-- (`mneme_knowledge::neighbours::run_key`: the URL, U+001F, the date; empty
-- for an item in no run), `run_pos` the document's place in its run (kept
-- when it is replaced), `lent` 1 when the app built its context from its
-- neighbours (and so rebuilds it when they change), 0 when the client sent
-- one. The documents already indexed join their runs in the order they were
-- indexed; their contexts count as the client's, since nothing says which
-- were built.
ALTER TABLE search_index ADD COLUMN IF NOT EXISTS run TEXT NOT NULL DEFAULT '';
ALTER TABLE search_index ADD COLUMN IF NOT EXISTS run_pos BIGINT NOT NULL DEFAULT 0;
ALTER TABLE search_index ADD COLUMN IF NOT EXISTS lent BIGINT NOT NULL DEFAULT 0;
UPDATE search_index SET run_pos = seq, run = CASE
        WHEN nullif(meta::jsonb ->> 'source_url', '') IS NULL
         AND nullif(meta::jsonb ->> 'source_date', '') IS NULL THEN ''
        ELSE coalesce(nullif(meta::jsonb ->> 'source_url', ''), '') || chr(31)
             || coalesce(nullif(meta::jsonb ->> 'source_date', ''), '')
    END
    WHERE corpus = 'document';
CREATE INDEX IF NOT EXISTS search_index_run ON search_index (corpus, run, run_pos) WHERE run <> '';
