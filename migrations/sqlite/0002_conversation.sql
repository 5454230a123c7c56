-- Conversation (design 002): threads, working memory, exchanges and the logs
-- of each pipeline step; the durable job queue and the proactive event log.
CREATE TABLE IF NOT EXISTS threads (
    id TEXT PRIMARY KEY,
    created_ms BIGINT NOT NULL,
    last_activity_ms BIGINT NOT NULL,
    exchange_count INTEGER NOT NULL DEFAULT 0,
    previous_mode TEXT,
    previous_tools TEXT NOT NULL DEFAULT '[]'
);
-- Working memory: one row per turn; the newest 8 rows (4 turns) of a thread
-- are kept, and the whole of it expires 24 h after the last append.
CREATE TABLE IF NOT EXISTS working_memory (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    thread_id TEXT NOT NULL,
    role TEXT NOT NULL,
    content TEXT NOT NULL,
    at_ms BIGINT NOT NULL
);
CREATE INDEX IF NOT EXISTS working_memory_thread ON working_memory (thread_id, id);
CREATE TABLE IF NOT EXISTS exchanges (
    id TEXT PRIMARY KEY,
    thread_id TEXT NOT NULL,
    request_id TEXT NOT NULL,
    source TEXT NOT NULL,
    prompt TEXT NOT NULL,
    response TEXT NOT NULL,
    topic TEXT NOT NULL,
    mode TEXT NOT NULL,
    confidence REAL NOT NULL,
    reply_source TEXT NOT NULL,
    created_ms BIGINT NOT NULL,
    duration_ms BIGINT NOT NULL
);
CREATE INDEX IF NOT EXISTS exchanges_thread ON exchanges (thread_id, created_ms);
CREATE INDEX IF NOT EXISTS exchanges_created ON exchanges (created_ms);
CREATE TABLE IF NOT EXISTS interaction_log (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    event_type TEXT NOT NULL,
    thread_id TEXT,
    exchange_id TEXT,
    topic TEXT,
    source TEXT,
    mode TEXT,
    confidence REAL,
    generation_ms BIGINT,
    payload TEXT NOT NULL DEFAULT '{}',
    created_ms BIGINT NOT NULL
);
CREATE INDEX IF NOT EXISTS interaction_log_exchange ON interaction_log (exchange_id);
CREATE TABLE IF NOT EXISTS topics (
    name TEXT PRIMARY KEY,
    embedding BLOB NOT NULL,
    messages INTEGER NOT NULL,
    created_ms BIGINT NOT NULL,
    last_active_ms BIGINT NOT NULL
);
CREATE TABLE IF NOT EXISTS user_traits (
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL,
    category TEXT NOT NULL,
    source TEXT NOT NULL,
    confidence REAL NOT NULL,
    speaker_confidence REAL NOT NULL,
    updated_ms BIGINT NOT NULL
);
CREATE TABLE IF NOT EXISTS triage_calibration (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    exchange_id TEXT NOT NULL,
    thread_id TEXT NOT NULL,
    topic TEXT NOT NULL,
    branch TEXT NOT NULL,
    mode TEXT NOT NULL,
    tools TEXT NOT NULL,
    skills TEXT NOT NULL,
    confidence_internal REAL NOT NULL,
    confidence_tool_need REAL NOT NULL,
    freshness_risk REAL NOT NULL,
    decision_entropy REAL NOT NULL,
    source TEXT NOT NULL,
    fallback_reason TEXT,
    overrides TEXT NOT NULL,
    took_ms BIGINT NOT NULL,
    created_ms BIGINT NOT NULL
);
CREATE INDEX IF NOT EXISTS triage_calibration_exchange ON triage_calibration (exchange_id);
CREATE TABLE IF NOT EXISTS routing_decisions (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    exchange_id TEXT NOT NULL,
    thread_id TEXT NOT NULL,
    topic TEXT NOT NULL,
    selected_mode TEXT NOT NULL,
    previous_mode TEXT,
    router_confidence REAL NOT NULL,
    scores TEXT NOT NULL,
    tiebreaker_used INTEGER NOT NULL,
    tiebreaker_candidates TEXT,
    margin REAL NOT NULL,
    effective_margin REAL NOT NULL,
    signal_snapshot TEXT NOT NULL,
    weight_snapshot TEXT NOT NULL,
    routing_time_ms BIGINT NOT NULL,
    created_ms BIGINT NOT NULL
);
CREATE INDEX IF NOT EXISTS routing_decisions_topic ON routing_decisions (topic, id);
CREATE INDEX IF NOT EXISTS routing_decisions_exchange ON routing_decisions (exchange_id);
CREATE TABLE IF NOT EXISTS cortex_iterations (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    loop_id TEXT NOT NULL,
    exchange_id TEXT NOT NULL,
    iteration_number INTEGER NOT NULL,
    actions_executed TEXT NOT NULL,
    execution_time_ms BIGINT NOT NULL,
    cost REAL NOT NULL,
    fatigue REAL NOT NULL,
    mode TEXT NOT NULL,
    termination_reason TEXT,
    created_ms BIGINT NOT NULL
);
CREATE INDEX IF NOT EXISTS cortex_iterations_exchange ON cortex_iterations (exchange_id);
-- Onboarding: one row, the principal's exchange count.
CREATE TABLE IF NOT EXISTS spark_state (
    id INTEGER PRIMARY KEY,
    exchange_count BIGINT NOT NULL,
    first_ms BIGINT NOT NULL,
    last_ms BIGINT NOT NULL
);
-- The durable job queue (memory consolidation, tool work, …): claimed with
-- a lease, so a crashed worker's job is picked up again.
CREATE TABLE IF NOT EXISTS jobs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    queue TEXT NOT NULL,
    -- What the job is about (a thread, a task…), for triggers that count.
    ref TEXT,
    payload TEXT NOT NULL,
    status TEXT NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    lease_until_ms BIGINT NOT NULL DEFAULT 0,
    result TEXT,
    created_ms BIGINT NOT NULL,
    updated_ms BIGINT NOT NULL
);
CREATE INDEX IF NOT EXISTS jobs_queue_status ON jobs (queue, status, id);
CREATE INDEX IF NOT EXISTS jobs_queue_ref ON jobs (queue, ref, created_ms);
-- Proactive events for GET /events, replayed by id.
CREATE TABLE IF NOT EXISTS events (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    type TEXT NOT NULL,
    payload TEXT NOT NULL,
    created_ms BIGINT NOT NULL
);
CREATE TABLE IF NOT EXISTS scheduled_items (
    id TEXT PRIMARY KEY,
    message TEXT NOT NULL,
    due_ms BIGINT NOT NULL,
    recurrence TEXT,
    item_type TEXT NOT NULL,
    status TEXT NOT NULL,
    created_ms BIGINT NOT NULL
);
CREATE INDEX IF NOT EXISTS scheduled_items_due ON scheduled_items (status, due_ms);
CREATE TABLE IF NOT EXISTS lists (
    name TEXT PRIMARY KEY,
    created_ms BIGINT NOT NULL
);
CREATE TABLE IF NOT EXISTS list_items (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    list_name TEXT NOT NULL,
    content TEXT NOT NULL,
    checked INTEGER NOT NULL DEFAULT 0,
    created_ms BIGINT NOT NULL
);
CREATE INDEX IF NOT EXISTS list_items_list ON list_items (list_name);
CREATE TABLE IF NOT EXISTS persistent_tasks (
    id TEXT PRIMARY KEY,
    goal TEXT NOT NULL,
    status TEXT NOT NULL,
    priority INTEGER NOT NULL,
    origin TEXT NOT NULL,
    coverage REAL NOT NULL DEFAULT 0,
    progress TEXT NOT NULL DEFAULT '{}',
    created_ms BIGINT NOT NULL,
    updated_ms BIGINT NOT NULL,
    expires_ms BIGINT NOT NULL
);
