-- A searchable item's context (issue #25, D-K13): text around it, such as
-- the turns before and after a transcript's turn, indexed as a full-text
-- column of its own so it can be ranked below the item's own words.
ALTER TABLE search_index ADD COLUMN context TEXT NOT NULL DEFAULT '';

DROP TRIGGER IF EXISTS search_index_ai;
DROP TRIGGER IF EXISTS search_index_ad;
DROP TRIGGER IF EXISTS search_index_au;
DROP TABLE IF EXISTS search_fts;
CREATE VIRTUAL TABLE search_fts USING fts5(
    title, body, context, content='search_index', content_rowid='seq', tokenize='porter unicode61'
);
INSERT INTO search_fts (search_fts) VALUES ('rebuild');
CREATE TRIGGER search_index_ai AFTER INSERT ON search_index BEGIN
    INSERT INTO search_fts (rowid, title, body, context) VALUES (new.seq, new.title, new.body, new.context);
END;
CREATE TRIGGER search_index_ad AFTER DELETE ON search_index BEGIN
    INSERT INTO search_fts (search_fts, rowid, title, body, context)
    VALUES ('delete', old.seq, old.title, old.body, old.context);
END;
CREATE TRIGGER search_index_au AFTER UPDATE OF title, body, context ON search_index BEGIN
    INSERT INTO search_fts (search_fts, rowid, title, body, context)
    VALUES ('delete', old.seq, old.title, old.body, old.context);
    INSERT INTO search_fts (rowid, title, body, context) VALUES (new.seq, new.title, new.body, new.context);
END;
