-- An item's date is searchable by its day, month and year (issue #25,
-- D-K19): `dated` holds the words (`8 May 2023`), written by the indexer
-- (crates/mneme-substrate/src/search.rs) from the item's source date, else
-- the day it was indexed. Filled here for the items already indexed the
-- same way: a document's `source_date` (in its meta), an entry's, else the
-- day of `created_ms` (UTC). As in `fusion::date_words`, a date that is not
-- a real one (2023-02-30, a month 13, a day 00) gives no words.
ALTER TABLE search_index ADD COLUMN dated TEXT NOT NULL DEFAULT '';

DROP TRIGGER IF EXISTS search_index_ai;
DROP TRIGGER IF EXISTS search_index_ad;
DROP TRIGGER IF EXISTS search_index_au;
DROP TABLE IF EXISTS search_fts;

UPDATE search_index SET dated = coalesce((SELECT CASE WHEN d GLOB '[0-9][0-9][0-9][0-9]-[01][0-9]-[0-3][0-9]*' AND substr(d, 9, 2) <> '00'
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
            WHEN 'document' THEN nullif(json_extract(meta, '$.source_date'), '')
            WHEN 'knowledge' THEN (SELECT nullif(k.source_date, '') FROM knowledge_entries AS k WHERE k.id = search_index.ref_id)
        END, date(created_ms / 1000, 'unixepoch')) AS d) AS x), '');

CREATE VIRTUAL TABLE search_fts USING fts5(
    title, body, context, dated, content='search_index', content_rowid='seq', tokenize='porter unicode61'
);
INSERT INTO search_fts (search_fts) VALUES ('rebuild');
CREATE TRIGGER search_index_ai AFTER INSERT ON search_index BEGIN
    INSERT INTO search_fts (rowid, title, body, context, dated) VALUES (new.seq, new.title, new.body, new.context, new.dated);
END;
CREATE TRIGGER search_index_ad AFTER DELETE ON search_index BEGIN
    INSERT INTO search_fts (search_fts, rowid, title, body, context, dated)
    VALUES ('delete', old.seq, old.title, old.body, old.context, old.dated);
END;
CREATE TRIGGER search_index_au AFTER UPDATE OF title, body, context, dated ON search_index BEGIN
    INSERT INTO search_fts (search_fts, rowid, title, body, context, dated)
    VALUES ('delete', old.seq, old.title, old.body, old.context, old.dated);
    INSERT INTO search_fts (rowid, title, body, context, dated) VALUES (new.seq, new.title, new.body, new.context, new.dated);
END;
