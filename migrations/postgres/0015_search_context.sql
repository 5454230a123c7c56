-- A searchable item's context (issue #25, D-K13): text around it, such as
-- the turns before and after a transcript's turn. The item's own words are
-- weighted A and its context D, so `ts_rank_cd` can rank the context below
-- them; with no context every row ranks as before (all its words carry one
-- weight, and the rank scales with it).
ALTER TABLE search_index ADD COLUMN IF NOT EXISTS context TEXT NOT NULL DEFAULT '';
DROP INDEX IF EXISTS search_index_tsv;
ALTER TABLE search_index DROP COLUMN IF EXISTS tsv;
ALTER TABLE search_index ADD COLUMN tsv tsvector
    GENERATED ALWAYS AS (
        setweight(to_tsvector('english', title || ' ' || body), 'A') || setweight(to_tsvector('english', context), 'D')
    ) STORED;
CREATE INDEX search_index_tsv ON search_index USING GIN (tsv);
