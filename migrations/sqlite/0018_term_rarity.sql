-- PostgreSQL's full text ranks by term rarity and keeps each corpus's item
-- count for it (issue #25, D-K14). SQLite needs nothing: FTS5's bm25 reads
-- its own statistics. This file keeps the two histories numbered alike, and
-- holds one statement that changes nothing, as every migration holds one.
SELECT 1;
