//! Filler rows written straight into a store in the app's own row format:
//! knowledge entries with their search rows, embeddings and signature
//! blocks, as a bulk load or a store grown over years would hold them. The
//! text is real (LoCoMo turns); the embeddings are random unit vectors. The
//! blocks are flat: the vector index's upkeep (`POST /tick/index`) moves
//! them into lists. Used by `bench-knowledge` and by the tests that need a
//! store larger than HTTP can fill in a test's time.

use std::time::Duration;

use mneme_knowledge::fusion::{Block, signature};

use crate::BackendEnv;

const TYPES: [&str; 5] = ["framework", "decision", "standard", "philosophy", "reaction"];

/// A xorshift generator: the same seed gives the same rows.
pub struct Rng(pub u64);
impl Rng {
    pub fn draw(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    pub fn unit(&mut self) -> f64 {
        (self.draw() >> 11) as f64 / (1u64 << 53) as f64
    }
    pub fn gauss(&mut self) -> f32 {
        let (u, v) = (self.unit().max(1e-12), self.unit());
        ((-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos()) as f32
    }
    pub fn unit_vector(&mut self) -> Vec<f32> {
        let v: Vec<f32> = (0..384).map(|_| self.gauss()).collect();
        let n = v.iter().map(|x| x * x).sum::<f32>().sqrt();
        v.into_iter().map(|x| x / n).collect()
    }
}

/// Writes `n` filler items of `corpus` into the backend's store (the app's
/// SQLite file under `state`, or the PostgreSQL database), each with a text
/// drawn from `texts`. A `knowledge` item is an entry with its search row;
/// a `document` is its search row alone, as the vault keeps it.
pub fn filler(b: &BackendEnv, state: &std::path::Path, corpus: &str, n: usize, texts: &[String], rng: &mut Rng) {
    match &b.pg {
        Some(db) => seed_pg(&mut db.client(), corpus, n, texts, rng),
        None => seed_sqlite(&state.join("sqlite_db.db"), corpus, n, texts, rng),
    }
}

struct Filler {
    seq: i64,
    id: String,
    kind: &'static str,
    topic: String,
    body: String,
    embedding: Vec<u8>,
    sig: Vec<u64>,
}

/// `n` rows; a knowledge entry's id follows the entry counter from `start`,
/// a document's is drawn.
fn fillers(corpus: &str, start: i64, n: usize, texts: &[String], rng: &mut Rng) -> Vec<Filler> {
    (0..n)
        .map(|i| {
            let seq = start + i as i64;
            let text = &texts[rng.draw() as usize % texts.len()];
            let e = rng.unit_vector();
            Filler {
                seq,
                id: match corpus {
                    "knowledge" => format!("KE-{seq:04}"),
                    _ => format!("filler-{:016x}", rng.draw()),
                },
                kind: TYPES[i % 5],
                topic: text.split_whitespace().take(6).collect::<Vec<_>>().join(" "),
                body: format!("{text} (filler {seq})"),
                embedding: e.iter().flat_map(|x| x.to_le_bytes()).collect(),
                sig: signature(&e),
            }
        })
        .collect()
}

/// Packs signatures in order into full blocks.
fn pack(signatures: impl Iterator<Item = (i64, Vec<u64>)>) -> Vec<Block> {
    let mut blocks: Vec<Block> = Vec::new();
    for (seq, sig) in signatures {
        match blocks.last_mut() {
            Some(b) if b.seqs.len() < mneme_knowledge::fusion::BLOCK_SIZE => b.push(seq, sig),
            _ => {
                let mut b = Block::default();
                b.push(seq, sig);
                blocks.push(b);
            }
        }
    }
    blocks
}

const ENTRY: &str = "INSERT INTO knowledge_entries (seq, id, type, topic, position, reasoning, confidence, stability, tier, tags, source_type, source_date, corroboration_count, created_at, extractor, embedding, created_ms)
     VALUES ($1, $2, $3, $4, $5, 'filler', 'medium', 'stable', 'public', '[]', 'chat', '2026-11-01', 1, '2026-11-01T00:00:00Z', 'bench-filler', $6, 0)";
const INDEX: &str = "INSERT INTO search_index (corpus, ref_id, title, body, meta, created_ms) VALUES ($1, $2, $3, $4, '{}', 0) RETURNING seq";
/// [`INDEX`], with the words of a filler's date when the build indexes
/// dates (migration 0020, D-K19), as the indexer would write them: an
/// entry's `source_date` (`ENTRY`'s), else the day of `created_ms` 0.
fn index_statement(corpus: &str, dated: bool) -> String {
    if !dated {
        return INDEX.to_string();
    }
    let words = if corpus == "knowledge" { "1 November 2026" } else { "1 January 1970" };
    format!(
        "INSERT INTO search_index (corpus, ref_id, title, body, dated, meta, created_ms)
         VALUES ($1, $2, $3, $4, '{words}', '{{}}', 0) RETURNING seq"
    )
}
const VECTOR: &str = "INSERT INTO search_vectors (seq, embedding) VALUES ($1, $2)";
const BLOCK: &str =
    "INSERT INTO vector_blocks (corpus, block, n, seqs, sigs, lo, hi) VALUES ($1, $2, $3, $4, $5, $6, $7)";
/// The timeline's count of a type on day 0, when fillers of that type were
/// written (their `created_ms` is 0).
const DAYS: &str = "INSERT INTO knowledge_days (type, day, n) VALUES ($1, 0, $2)
     ON CONFLICT (type, day) DO UPDATE SET n = knowledge_days.n + excluded.n";
const NEXT_BLOCK: &str = "SELECT COALESCE(MAX(block), -1) + 1 FROM vector_blocks WHERE corpus = $1";

/// How many of `rows` are of each type.
fn kinds(rows: &[Filler]) -> std::collections::BTreeMap<&'static str, i64> {
    let mut n = std::collections::BTreeMap::new();
    for r in rows {
        *n.entry(r.kind).or_insert(0) += 1;
    }
    n
}

fn seed_pg(c: &mut postgres::Client, corpus: &str, n: usize, texts: &[String], rng: &mut Rng) {
    let knowledge = corpus == "knowledge";
    let start: i64 = c.query_one("SELECT n FROM knowledge_counter WHERE name = 'entry'", &[]).unwrap().get(0);
    let rows = fillers(corpus, start + 1, n, texts, rng);
    let dated: bool = c
        .query_one(
            "SELECT EXISTS (SELECT 1 FROM information_schema.columns WHERE table_name = 'search_index' AND column_name = 'dated')",
            &[],
        )
        .unwrap()
        .get(0);
    let mut tx = c.transaction().unwrap();
    let index = index_statement(corpus, dated);
    let (entry, index, vector) = (tx.prepare(ENTRY).unwrap(), tx.prepare(&index).unwrap(), tx.prepare(VECTOR).unwrap());
    let mut signatures = Vec::new();
    for r in &rows {
        if knowledge {
            tx.execute(&entry, &[&r.seq, &r.id, &r.kind, &r.topic, &r.body, &r.embedding]).unwrap();
        }
        let seq: i64 = tx.query_one(&index, &[&corpus, &r.id, &r.topic, &r.body]).unwrap().get(0);
        tx.execute(&vector, &[&seq, &r.embedding]).unwrap();
        signatures.push((seq, r.sig.clone()));
    }
    let first_seq = signatures.first().map_or(i64::MAX, |s| s.0);
    let first: i64 = tx.query_one(NEXT_BLOCK, &[&corpus]).unwrap().get(0);
    for (i, b) in pack(signatures.into_iter()).iter().enumerate() {
        let (seqs, sigs) = b.encode();
        let (lo, hi) = (b.seqs.iter().min(), b.seqs.iter().max());
        tx.execute(BLOCK, &[&corpus, &(first + i as i64), &(b.seqs.len() as i64), &seqs, &sigs, &lo, &hi]).unwrap();
    }
    // The document frequencies the store keeps as it indexes (D-K15), when
    // the build under test keeps them (an A/B may run an older one).
    let terms: bool = tx.query_one("SELECT to_regclass('search_terms') IS NOT NULL", &[]).unwrap().get(0);
    if terms {
        tx.execute(
            "INSERT INTO search_terms (corpus, lexeme, df)
             SELECT $1, l, count(*) FROM search_index, unnest(tsvector_to_array(tsv)) AS l
             WHERE corpus = $1 AND seq >= $2 GROUP BY l
             ON CONFLICT (corpus, lexeme) DO UPDATE SET df = search_terms.df + excluded.df",
            &[&corpus, &first_seq],
        )
        .unwrap();
    }
    // And each corpus's item count, which ranks by rarity (D-K14).
    let corpora: bool = tx.query_one("SELECT to_regclass('search_corpora') IS NOT NULL", &[]).unwrap().get(0);
    if corpora {
        tx.execute(
            "INSERT INTO search_corpora (corpus, items) VALUES ($1, $2)
             ON CONFLICT (corpus) DO UPDATE SET items = search_corpora.items + excluded.items",
            &[&corpus, &(rows.len() as i64)],
        )
        .unwrap();
    }
    if knowledge {
        tx.execute("UPDATE knowledge_counter SET n = $1 WHERE name = 'entry'", &[&(start + n as i64)]).unwrap();
        // The timeline's counts (migration 0019), when the build keeps them.
        if tx.query_one("SELECT to_regclass('knowledge_days') IS NOT NULL", &[]).unwrap().get(0) {
            for (kind, count) in kinds(&rows) {
                tx.execute(DAYS, &[&kind, &count]).unwrap();
            }
        }
    }
    tx.commit().unwrap();
    // What autovacuum does within a minute of a bulk load: planner
    // statistics, and the GIN index's pending list merged. Without it the
    // first minutes measure the load, not the store.
    c.batch_execute("VACUUM ANALYZE knowledge_entries, search_index, search_vectors, vector_blocks").unwrap();
    if terms {
        c.batch_execute("VACUUM ANALYZE search_terms").unwrap();
    }
}

fn seed_sqlite(path: &std::path::Path, corpus: &str, n: usize, texts: &[String], rng: &mut Rng) {
    let knowledge = corpus == "knowledge";
    let mut c = rusqlite::Connection::open(path).unwrap();
    c.busy_timeout(Duration::from_secs(30)).unwrap();
    let start: i64 = c.query_row("SELECT n FROM knowledge_counter WHERE name = 'entry'", [], |r| r.get(0)).unwrap();
    let rows = fillers(corpus, start + 1, n, texts, rng);
    let dated: bool = c
        .query_row("SELECT count(*) > 0 FROM pragma_table_info('search_index') WHERE name = 'dated'", [], |r| r.get(0))
        .unwrap();
    let tx = c.transaction().unwrap();
    let mut signatures = Vec::new();
    {
        // rusqlite numbers `?N` parameters; the statements are written once, with `$N`.
        let q = |s: &str| s.replace('$', "?");
        let (mut entry, mut index, mut vector) = (
            tx.prepare(&q(ENTRY)).unwrap(),
            tx.prepare(&q(&index_statement(corpus, dated))).unwrap(),
            tx.prepare(&q(VECTOR)).unwrap(),
        );
        for r in &rows {
            if knowledge {
                entry.execute(rusqlite::params![r.seq, r.id, r.kind, r.topic, r.body, r.embedding]).unwrap();
            }
            let seq: i64 = index.query_row(rusqlite::params![corpus, r.id, r.topic, r.body], |x| x.get(0)).unwrap();
            vector.execute(rusqlite::params![seq, r.embedding]).unwrap();
            signatures.push((seq, r.sig.clone()));
        }
        let first: i64 = tx.query_row(&q(NEXT_BLOCK), [corpus], |r| r.get(0)).unwrap();
        for (i, b) in pack(signatures.into_iter()).iter().enumerate() {
            let (seqs, sigs) = b.encode();
            let (lo, hi) = (b.seqs.iter().min(), b.seqs.iter().max());
            tx.execute(&q(BLOCK), rusqlite::params![corpus, first + i as i64, b.seqs.len() as i64, seqs, sigs, lo, hi])
                .unwrap();
        }
    }
    if knowledge {
        tx.execute("UPDATE knowledge_counter SET n = ?1 WHERE name = 'entry'", [start + n as i64]).unwrap();
        let days: i64 =
            tx.query_row("SELECT count(*) FROM sqlite_master WHERE name = 'knowledge_days'", [], |r| r.get(0)).unwrap();
        if days > 0 {
            for (kind, count) in kinds(&rows) {
                tx.execute(&DAYS.replace('$', "?"), rusqlite::params![kind, count]).unwrap();
            }
        }
    }
    tx.commit().unwrap();
    // The planner statistics Postgres would have by now (see `seed_pg`).
    c.execute_batch("ANALYZE").unwrap();
}
