-- Memory consolidation (002 §6): episodes with their embeddings, the
-- concepts and relationships semantic consolidation extracts from them,
-- and a claim token on queue jobs so a worker that lost its lease writes
-- nothing.

ALTER TABLE jobs ADD COLUMN claim TEXT;
CREATE TABLE IF NOT EXISTS episodes (
    id TEXT PRIMARY KEY,
    -- One episode per job: a job run twice finds its episode.
    job_id BIGINT NOT NULL UNIQUE,
    thread_id TEXT NOT NULL,
    topic TEXT NOT NULL,
    exchange_ids TEXT NOT NULL,
    intent TEXT NOT NULL,
    context TEXT NOT NULL,
    action TEXT NOT NULL,
    emotion TEXT NOT NULL,
    outcome TEXT NOT NULL,
    gist TEXT NOT NULL,
    salience INTEGER NOT NULL,
    salience_factors TEXT NOT NULL,
    open_loops TEXT NOT NULL,
    embedding BLOB NOT NULL,
    source TEXT NOT NULL,
    activation_score REAL NOT NULL DEFAULT 1.0,
    access_count INTEGER NOT NULL DEFAULT 0,
    last_accessed_ms BIGINT,
    semantic_status TEXT NOT NULL DEFAULT 'pending',
    created_ms BIGINT NOT NULL
);
CREATE INDEX IF NOT EXISTS episodes_created ON episodes (created_ms);
CREATE INDEX IF NOT EXISTS episodes_semantic ON episodes (semantic_status, created_ms);
CREATE TABLE IF NOT EXISTS semantic_concepts (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    concept_type TEXT NOT NULL,
    definition TEXT NOT NULL,
    domain TEXT NOT NULL,
    abstraction_level INTEGER NOT NULL,
    -- 1–10.
    strength REAL NOT NULL,
    confidence REAL NOT NULL,
    activation_score REAL NOT NULL DEFAULT 1.0,
    access_count INTEGER NOT NULL DEFAULT 0,
    consolidation_count INTEGER NOT NULL DEFAULT 1,
    source_episodes TEXT NOT NULL,
    decay_resistance REAL NOT NULL DEFAULT 0.5,
    embedding BLOB NOT NULL,
    last_reinforced_ms BIGINT NOT NULL,
    created_ms BIGINT NOT NULL,
    updated_ms BIGINT NOT NULL
);
CREATE INDEX IF NOT EXISTS semantic_concepts_strength ON semantic_concepts (strength);
CREATE TABLE IF NOT EXISTS semantic_relationships (
    source_id TEXT NOT NULL,
    target_id TEXT NOT NULL,
    relationship_type TEXT NOT NULL,
    -- 0–1.
    strength REAL NOT NULL,
    bidirectional INTEGER NOT NULL DEFAULT 1,
    confidence REAL NOT NULL,
    created_ms BIGINT NOT NULL,
    updated_ms BIGINT NOT NULL,
    PRIMARY KEY (source_id, target_id, relationship_type)
);
CREATE INDEX IF NOT EXISTS semantic_relationships_target ON semantic_relationships (target_id);
