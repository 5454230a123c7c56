-- The vector index (issue #25, D-K16): a corpus's signature blocks belong
-- to an inverted list (`list` >= 0) or are flat (`list` = -1, read by every
-- query). A corpus's centroids are trained once it holds 20,000 signatures
-- (POST /tick/index); from then on a query reads the 32 lists nearest to it
-- and the flat blocks, a writer appends to its item's list.
ALTER TABLE vector_blocks ADD COLUMN list INTEGER NOT NULL DEFAULT -1;
CREATE INDEX IF NOT EXISTS vector_blocks_lists ON vector_blocks (corpus, list, block);
CREATE TABLE IF NOT EXISTS vector_centroids (
    corpus TEXT PRIMARY KEY,
    centroids BLOB NOT NULL,
    trained_on BIGINT NOT NULL,
    trained_ms BIGINT NOT NULL
);
-- Who is training a corpus's centroids, until when: a run that finds the
-- claim held leaves the training to its holder (training takes seconds of
-- CPU; two at once starve a small machine).
CREATE TABLE IF NOT EXISTS vector_training (
    corpus TEXT PRIMARY KEY,
    until_ms BIGINT NOT NULL
);
