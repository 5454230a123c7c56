-- PostgreSQL's full text ranks by how rare the matched terms are (issue #25,
-- D-K14). A term's rarity needs the number of items beside its document
-- frequency (search_terms), so each corpus's item count is kept with them,
-- by the same writer in the same statement (crates/mneme-substrate/src/search.rs).
-- Filled here from the rows already indexed.
CREATE TABLE IF NOT EXISTS search_corpora (
    corpus TEXT PRIMARY KEY,
    items BIGINT NOT NULL
);
INSERT INTO search_corpora (corpus, items)
    SELECT corpus, count(*) FROM search_index GROUP BY corpus
    ON CONFLICT (corpus) DO NOTHING;
