-- Knowledge entries (001 seed), their ingest jobs and reasoning patterns,
-- and the search index that /retrieve and /search share.

-- One row per entry: every field of the seed's table. `seq` is the n of
-- KE-n, taken from knowledge_counter inside the inserting transaction.
CREATE TABLE IF NOT EXISTS knowledge_entries (
    seq INTEGER PRIMARY KEY,
    id TEXT NOT NULL UNIQUE,
    type TEXT NOT NULL,
    topic TEXT NOT NULL,
    position TEXT NOT NULL,
    reasoning TEXT NOT NULL,
    reasoning_pattern TEXT,
    confidence TEXT NOT NULL,
    stability TEXT NOT NULL,
    tier TEXT NOT NULL,
    tags TEXT NOT NULL,
    source_type TEXT NOT NULL,
    source_channel TEXT,
    source_date TEXT NOT NULL,
    source_url TEXT,
    corroboration_count BIGINT NOT NULL DEFAULT 1,
    last_corroborated_at TEXT,
    superseded_by TEXT,
    created_at TEXT NOT NULL,
    extractor TEXT NOT NULL,
    job_id TEXT,
    embedding BLOB NOT NULL,
    created_ms BIGINT NOT NULL
);
CREATE INDEX IF NOT EXISTS knowledge_entries_active ON knowledge_entries (superseded_by, type);
CREATE INDEX IF NOT EXISTS knowledge_entries_superseded_by ON knowledge_entries (superseded_by);

CREATE TABLE IF NOT EXISTS knowledge_counter (
    name TEXT PRIMARY KEY,
    n BIGINT NOT NULL
);
INSERT INTO knowledge_counter (name, n) VALUES ('entry', 0) ON CONFLICT DO NOTHING;

-- Ingest jobs: one per distinct transcript (content_hash).
CREATE TABLE IF NOT EXISTS knowledge_jobs (
    id TEXT PRIMARY KEY,
    content_hash TEXT NOT NULL UNIQUE,
    status TEXT NOT NULL,
    request TEXT NOT NULL,
    outcome TEXT,
    error TEXT,
    attempts BIGINT NOT NULL DEFAULT 0,
    claim TEXT,
    lease_until_ms BIGINT NOT NULL DEFAULT 0,
    created_ms BIGINT NOT NULL,
    updated_ms BIGINT NOT NULL
);
CREATE INDEX IF NOT EXISTS knowledge_jobs_status ON knowledge_jobs (status, created_ms);

CREATE TABLE IF NOT EXISTS reasoning_patterns (
    slug TEXT PRIMARY KEY,
    description TEXT NOT NULL,
    centroid BLOB NOT NULL,
    observations BIGINT NOT NULL,
    status TEXT NOT NULL,
    created_ms BIGINT NOT NULL,
    updated_ms BIGINT NOT NULL
);

-- Everything searchable: knowledge entries (corpus `knowledge`, active ones
-- only), documents (`document`) and, once consolidation builds them,
-- episodes (`episode`).
CREATE TABLE IF NOT EXISTS search_index (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    corpus TEXT NOT NULL,
    ref_id TEXT NOT NULL,
    title TEXT NOT NULL,
    body TEXT NOT NULL,
    meta TEXT NOT NULL,
    created_ms BIGINT NOT NULL,
    UNIQUE (corpus, ref_id)
);
-- Embeddings live apart from the text, so a full-text scan over many
-- matches reads small rows (1.5 KiB of vector per row would dominate it).
CREATE TABLE IF NOT EXISTS search_vectors (
    seq BIGINT PRIMARY KEY,
    embedding BLOB NOT NULL
);
CREATE VIRTUAL TABLE IF NOT EXISTS search_fts USING fts5(
    title, body, content='search_index', content_rowid='seq', tokenize='porter unicode61'
);
CREATE TRIGGER IF NOT EXISTS search_index_ai AFTER INSERT ON search_index BEGIN
    INSERT INTO search_fts (rowid, title, body) VALUES (new.seq, new.title, new.body);
END;
CREATE TRIGGER IF NOT EXISTS search_index_ad AFTER DELETE ON search_index BEGIN
    INSERT INTO search_fts (search_fts, rowid, title, body) VALUES ('delete', old.seq, old.title, old.body);
END;
CREATE TRIGGER IF NOT EXISTS search_index_au AFTER UPDATE OF title, body ON search_index BEGIN
    INSERT INTO search_fts (search_fts, rowid, title, body) VALUES ('delete', old.seq, old.title, old.body);
    INSERT INTO search_fts (rowid, title, body) VALUES (new.seq, new.title, new.body);
END;

-- Sign-bit signatures of the search index's embeddings, packed per corpus
-- in blocks for the Hamming scan (crates/mneme-knowledge/src/fusion.rs).
CREATE TABLE IF NOT EXISTS vector_blocks (
    corpus TEXT NOT NULL,
    block BIGINT NOT NULL,
    n BIGINT NOT NULL,
    seqs BLOB NOT NULL,
    sigs BLOB NOT NULL,
    PRIMARY KEY (corpus, block)
)
