-- The full-text read is bounded by a query's rarest terms (issue #25,
-- D-K15). Each corpus's document frequencies, kept by the writer of
-- search_index in the same transaction (crates/mneme-substrate/src/search.rs),
-- because counting through the GIN index reads a term's whole posting list.
-- Filled here from the rows already indexed.
CREATE TABLE IF NOT EXISTS search_terms (
    corpus TEXT NOT NULL,
    lexeme TEXT NOT NULL,
    df BIGINT NOT NULL,
    PRIMARY KEY (corpus, lexeme)
);
INSERT INTO search_terms (corpus, lexeme, df)
    SELECT corpus, l, count(*) FROM search_index, unnest(tsvector_to_array(tsv)) AS l GROUP BY corpus, l
    ON CONFLICT (corpus, lexeme) DO NOTHING;
-- When every term is common, only each corpus's newest items are ranked,
-- found from this index.
CREATE INDEX IF NOT EXISTS search_index_corpus_seq ON search_index (corpus, seq);
