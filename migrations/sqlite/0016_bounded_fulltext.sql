-- The full-text read is bounded by a query's rarest terms (issue #25,
-- D-K15). When every term is common it ranks only each corpus's newest
-- items, found from this index. SQLite needs no term table: FTS5 counts the
-- first entries of a term's list directly.
CREATE INDEX IF NOT EXISTS search_index_corpus_seq ON search_index (corpus, seq);
