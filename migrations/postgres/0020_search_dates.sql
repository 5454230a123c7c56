-- An item's date is searchable by its day, month and year (issue #25,
-- D-K19): `dated` holds the words (`8 May 2023`), written by the indexer
-- (crates/mneme-substrate/src/search.rs) from the item's source date, else
-- the day it was indexed. Filled here for the items already indexed the
-- same way: a document's `source_date` (in its meta), an entry's, else the
-- day of `created_ms` (UTC). As in `fusion::date_words`, a date that is not
-- a real one (2023-02-30, a month 13, a day 00) gives no words.
-- The words carry weight class B (A is the item's own words, D its context).
-- The per-corpus document frequencies are counted again, as the date's
-- words are new lexemes of every row.
ALTER TABLE search_index ADD COLUMN IF NOT EXISTS dated TEXT NOT NULL DEFAULT '';
DROP INDEX IF EXISTS search_index_tsv;
ALTER TABLE search_index DROP COLUMN IF EXISTS tsv;

UPDATE search_index SET dated = coalesce((SELECT CASE WHEN d ~ '^[0-9]{4}-[01][0-9]-[0-3][0-9]' AND substr(d, 9, 2) <> '00'
        AND CAST(substr(d, 9, 2) AS INTEGER) <= CASE substr(d, 6, 2)
            WHEN '02' THEN CASE WHEN CAST(substr(d, 1, 4) AS INTEGER) % 400 = 0
                                  OR (CAST(substr(d, 1, 4) AS INTEGER) % 4 = 0 AND CAST(substr(d, 1, 4) AS INTEGER) % 100 <> 0)
                                THEN 29 ELSE 28 END
            WHEN '04' THEN 30 WHEN '06' THEN 30 WHEN '09' THEN 30 WHEN '11' THEN 30 ELSE 31 END THEN
        CAST(CAST(substr(d, 9, 2) AS INTEGER) AS TEXT) || ' ' || CASE substr(d, 6, 2)
            WHEN '01' THEN 'January'
            WHEN '02' THEN 'February'
            WHEN '03' THEN 'March'
            WHEN '04' THEN 'April'
            WHEN '05' THEN 'May'
            WHEN '06' THEN 'June'
            WHEN '07' THEN 'July'
            WHEN '08' THEN 'August'
            WHEN '09' THEN 'September'
            WHEN '10' THEN 'October'
            WHEN '11' THEN 'November'
            WHEN '12' THEN 'December'
        END || ' ' || substr(d, 1, 4) END
    FROM (SELECT coalesce(CASE corpus
            WHEN 'document' THEN nullif(CAST(meta AS jsonb) ->> 'source_date', '')
            WHEN 'knowledge' THEN (SELECT nullif(k.source_date, '') FROM knowledge_entries AS k WHERE k.id = search_index.ref_id)
        END, to_char(to_timestamp(created_ms / 1000) AT TIME ZONE 'UTC', 'YYYY-MM-DD')) AS d) AS x), '');

ALTER TABLE search_index ADD COLUMN tsv tsvector
    GENERATED ALWAYS AS (
        setweight(to_tsvector('english', title || ' ' || body), 'A') || setweight(to_tsvector('english', dated), 'B')
            || setweight(to_tsvector('english', context), 'D')
    ) STORED;
CREATE INDEX search_index_tsv ON search_index USING GIN (tsv);

DELETE FROM search_terms;
INSERT INTO search_terms (corpus, lexeme, df)
    SELECT corpus, l, count(*) FROM search_index, unnest(tsvector_to_array(tsv)) AS l GROUP BY corpus, l;
