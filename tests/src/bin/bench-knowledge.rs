//! Knowledge benchmarks (docs/BENCHMARKS.md), through the runner over HTTP.
//!
//! 1. Ingest throughput: transcripts whose extraction (by the scripted
//!    model, answering instantly) yields 50 candidates each, until `--entries`
//!    entries exist; entries per second of wall time, queue to `done`.
//! 2. `POST /retrieve` latency (client side, query embedding included) over
//!    those entries: 300 LoCoMo questions, sequential, p50 and p95.
//! 3. With `--filler N[,M…]`: N more entries written straight into the store in
//!    the app's own row format (LoCoMo turns as text, random unit vectors as
//!    embeddings; latency depends on row counts and match counts, not on
//!    what the vectors mean), then the same latency run.
//!
//! 4. After each latency run, `GET /knowledge/timeline?days=90` (the
//!    Knowledge screen's chart of entries per type): 30 requests after 5
//!    warm-ups, p50 and p95.
//!
//! Usage: bench-knowledge --backend embedded|hosted [--entries 2000] [--filler 8000,90000]
//!        [--mode hybrid|text|vector]
//! Reads LoCoMo from ../shared/data at run time; nothing of it is stored.

use std::time::{Duration, Instant};

use mneme_e2e::bench::{arg, backend, locomo, percentile};
use mneme_e2e::fake_model::{FakeModel, Script};
use mneme_e2e::{App, BackendEnv};
use mneme_knowledge::fusion::{Block, signature};
use serde_json::{Value, json};

const EXTRACT: &str = "You extract the principal's judgement";
const TYPES: [&str; 5] = ["framework", "decision", "standard", "philosophy", "reaction"];
const STABILITY: [&str; 3] = ["evergreen", "stable", "evolving"];
const CONFIDENCE: [&str; 3] = ["high", "medium", "low"];

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
    fn gauss(&mut self) -> f32 {
        let (u, v) = (self.unit().max(1e-12), self.unit());
        ((-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos()) as f32
    }
    fn unit_vector(&mut self) -> Vec<f32> {
        let v: Vec<f32> = (0..384).map(|_| self.gauss()).collect();
        let n = v.iter().map(|x| x * x).sum::<f32>().sqrt();
        v.into_iter().map(|x| x / n).collect()
    }
}

fn turns(data: &Value) -> Vec<String> {
    let mut out = Vec::new();
    for conv in data.as_array().unwrap() {
        let c = &conv["conversation"];
        for n in 1.. {
            let Some(s) = c.get(format!("session_{n}")).and_then(Value::as_array) else { break };
            for t in s {
                let text = t["text"].as_str().unwrap_or_default();
                if text.split_whitespace().count() >= 8 {
                    out.push(text.to_string());
                }
            }
        }
    }
    out
}

fn questions(data: &Value) -> Vec<String> {
    data.as_array()
        .unwrap()
        .iter()
        .flat_map(|c| c["qa"].as_array().unwrap().iter())
        .filter_map(|q| q["question"].as_str().map(String::from))
        .take(300)
        .collect()
}

/// Client-side p50 and p95, and the median of each step the app reports.
/// `--mode text|vector|hybrid` (default hybrid) times one candidate
/// generator alone.
fn retrieve_latency(app: &App, qs: &[String]) -> (f64, f64, String) {
    let mode = arg("--mode").unwrap_or_else(|| "hybrid".into());
    const STEPS: [&str; 5] = ["embed", "text", "blocks", "vector", "rank"];
    let mut ms = Vec::new();
    let mut steps: [Vec<f64>; 5] = Default::default();
    for q in qs {
        let t = Instant::now();
        let body = json!({"query": q, "k": 10, "mode": mode}).to_string();
        let r = app.request("POST", "/retrieve", &[("authorization", "Bearer bench")], Some(body.as_bytes()));
        assert_eq!(r.status, 200, "{}", r.body);
        ms.push(t.elapsed().as_secs_f64() * 1000.0);
        let took = &r.json()["took_ms"];
        for (i, k) in STEPS.iter().enumerate() {
            steps[i].push(took[k].as_f64().unwrap_or(0.0));
        }
    }
    ms.sort_by(f64::total_cmp);
    let medians: Vec<String> = STEPS
        .iter()
        .zip(steps.iter_mut())
        .map(|(k, v)| {
            v.sort_by(f64::total_cmp);
            format!("{k} {}", percentile(v, 0.5))
        })
        .collect();
    (percentile(&ms, 0.5), percentile(&ms, 0.95), medians.join(", "))
}

/// `GET /knowledge/timeline?days=90`, client side: p50 and p95 of 30
/// requests after 5 warm-ups.
fn timeline_latency(app: &App) -> (f64, f64) {
    let mut ms = Vec::new();
    for i in 0..35 {
        let t = Instant::now();
        let r = app.request("GET", "/knowledge/timeline?days=90", &[("authorization", "Bearer bench")], None);
        assert_eq!(r.status, 200, "{}", r.body);
        if i >= 5 {
            ms.push(t.elapsed().as_secs_f64() * 1000.0);
        }
    }
    ms.sort_by(f64::total_cmp);
    (percentile(&ms, 0.5), percentile(&ms, 0.95))
}

fn count(app: &App) -> i64 {
    app.request("GET", "/knowledge/entries?limit=1", &[("authorization", "Bearer bench")], None).json()["total"]
        .as_i64()
        .unwrap()
}

fn main() {
    let backend = backend();
    let target: usize = arg("--entries").map_or(10_000, |n| n.parse().unwrap());
    // `--filler 8000,90000`: seed 8,000, measure, seed 90,000 more, measure.
    let filler: Vec<usize> =
        arg("--filler").map_or_else(Vec::new, |n| n.split(',').map(|x| x.parse().unwrap()).collect());
    let data = locomo();
    let texts = turns(&data);
    let qs = questions(&data);

    let b = BackendEnv::new(backend);
    let model = FakeModel::start(Script::default());
    let mut env = b.vars.clone();
    for (k, v) in [("API_KEY", "bench"), ("CRON_TOKEN", "bench"), ("INGEST_TOKEN", "bench"), ("LLM_MODEL", "bench")] {
        env.push((format!("SPIN_VARIABLE_{k}"), v.into()));
    }
    env.push(("SPIN_VARIABLE_LLM_URL".into(), model.url()));
    env.push(("SPIN_VARIABLE_LLM_HOST".into(), model.addr.clone()));
    let app = App::start("spin.toml", &env);
    println!("backend: {backend:?}; machine: {} cores", std::thread::available_parallelism().map_or(0, |n| n.get()));

    // 1. Ingest.
    let started = Instant::now();
    let mut next = 0usize;
    let mut jobs = 0;
    while (count(&app) as usize) < target {
        let batch: Vec<Value> = (0..50)
            .map(|i| {
                let k = next + i;
                let t = &if k < texts.len() {
                    texts[k].clone()
                } else {
                    format!("{} {}", texts[k % texts.len()], texts[(k * 7 + 3) % texts.len()])
                };
                json!({"type": TYPES[(next + i) % 5], "topic": t.split_whitespace().take(6).collect::<Vec<_>>().join(" "),
                       "position": t, "reasoning": format!("it came up in conversation {}", next + i),
                       "confidence": CONFIDENCE[(next + i) % 3], "stability": STABILITY[(next + i) % 3],
                       "tags": [format!("t{}", (next + i) % 97)]})
            })
            .collect();
        next += 50;
        model.route(EXTRACT, Script { reply: json!({"candidates": batch}).to_string(), ..Default::default() });
        let r = app.request(
            "POST",
            "/knowledge/ingest",
            &[("x-ingest-token", "bench")],
            Some(
                json!({"source_type": "chat", "source_date": "2026-11-01", "text": format!("bench transcript {next}")})
                    .to_string()
                    .as_bytes(),
            ),
        );
        let job = r.json()["job_id"].as_str().unwrap().to_string();
        loop {
            app.request("POST", "/tick/knowledge", &[("authorization", "Bearer bench")], None);
            let j = app
                .request("GET", &format!("/knowledge/jobs/{job}"), &[("authorization", "Bearer bench")], None)
                .json();
            if j["status"] == "done" {
                break;
            }
            assert_ne!(j["status"], "failed", "{j}");
            std::thread::sleep(Duration::from_millis(20));
        }
        jobs += 1;
        model.requests.lock().unwrap().clear();
    }
    let n = count(&app);
    let secs = started.elapsed().as_secs_f64();
    println!(
        "ingest: {jobs} jobs, {} candidates, {n} entries in {secs:.1} s: {:.1} candidates/s",
        jobs * 50,
        (jobs * 50) as f64 / secs
    );
    let (p50, p95, steps) = retrieve_latency(&app, &qs);
    println!("retrieve over {n} entries: p50 {p50:.1} ms, p95 {p95:.1} ms (step medians, ms: {steps})");
    let (p50, p95) = timeline_latency(&app);
    println!("timeline (90 days) over {n} entries: p50 {p50:.1} ms, p95 {p95:.1} ms");

    // 3. Filler rows, written in the app's format.
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    for filler in filler {
        let t = Instant::now();
        match &b.pg {
            Some(db) => seed_pg(&mut db.client(), filler, &texts, &mut rng),
            None => seed_sqlite(&app.state.path().join("sqlite_db.db"), filler, &texts, &mut rng),
        }
        let n = count(&app);
        println!("seeded {filler} filler entries in {:.1} s", t.elapsed().as_secs_f64());
        let (p50, p95, steps) = retrieve_latency(&app, &qs);
        println!("retrieve over {n} entries: p50 {p50:.1} ms, p95 {p95:.1} ms (step medians, ms: {steps})");
        let (p50, p95) = timeline_latency(&app);
        println!("timeline (90 days) over {n} entries: p50 {p50:.1} ms, p95 {p95:.1} ms");
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

fn fillers(start: i64, n: usize, texts: &[String], rng: &mut Rng) -> Vec<Filler> {
    (0..n)
        .map(|i| {
            let seq = start + i as i64;
            let text = &texts[rng.next() as usize % texts.len()];
            let e = rng.unit_vector();
            Filler {
                seq,
                id: format!("KE-{seq:04}"),
                kind: TYPES[i % 5],
                topic: text.split_whitespace().take(6).collect::<Vec<_>>().join(" "),
                body: format!("{text} (filler {seq})"),
                embedding: e.iter().flat_map(|x| x.to_le_bytes()).collect(),
                sig: signature(&e),
            }
        })
        .collect()
}

fn seed_pg(c: &mut postgres::Client, n: usize, texts: &[String], rng: &mut Rng) {
    let start: i64 = c.query_one("SELECT n FROM knowledge_counter WHERE name = 'entry'", &[]).unwrap().get(0);
    let rows = fillers(start + 1, n, texts, rng);
    let mut tx = c.transaction().unwrap();
    let entry = tx.prepare(
        "INSERT INTO knowledge_entries (seq, id, type, topic, position, reasoning, confidence, stability, tier, tags, source_type, source_date, corroboration_count, created_at, extractor, embedding, created_ms)
         VALUES ($1, $2, $3, $4, $5, 'filler', 'medium', 'stable', 'public', '[]', 'chat', '2026-11-01', 1, '2026-11-01T00:00:00Z', 'bench-filler', $6, 0)").unwrap();
    let index = tx.prepare("INSERT INTO search_index (corpus, ref_id, title, body, meta, created_ms) VALUES ('knowledge', $1, $2, $3, '{}', 0) RETURNING seq").unwrap();
    let vector = tx.prepare("INSERT INTO search_vectors (seq, embedding) VALUES ($1, $2)").unwrap();
    let mut block = Block::default();
    let mut blocks: Vec<Block> = Vec::new();
    let mut first_seq = None;
    for r in &rows {
        tx.execute(&entry, &[&r.seq, &r.id, &r.kind, &r.topic, &r.body, &r.embedding]).unwrap();
        let seq: i64 = tx.query_one(&index, &[&r.id, &r.topic, &r.body]).unwrap().get(0);
        first_seq.get_or_insert(seq);
        tx.execute(&vector, &[&seq, &r.embedding]).unwrap();
        block.push(seq, r.sig.clone());
        if block.seqs.len() == mneme_knowledge::fusion::BLOCK_SIZE {
            blocks.push(std::mem::take(&mut block));
        }
    }
    if !block.seqs.is_empty() {
        blocks.push(block);
    }
    let first: i64 = tx
        .query_one("SELECT COALESCE(MAX(block), -1) + 1 FROM vector_blocks WHERE corpus = 'knowledge'", &[])
        .unwrap()
        .get(0);
    for (i, b) in blocks.iter().enumerate() {
        let (seqs, sigs) = b.encode();
        tx.execute(
            "INSERT INTO vector_blocks (corpus, block, n, seqs, sigs, lo, hi) VALUES ('knowledge', $1, $2, $3, $4, $5, $6)",
            &[&(first + i as i64), &(b.seqs.len() as i64), &seqs, &sigs, &b.seqs.iter().min(), &b.seqs.iter().max()],
        )
        .unwrap();
    }
    // The document frequencies the store keeps as it indexes (D-K15), when
    // the build under test keeps them (an A/B may run an older one).
    let terms: bool = tx.query_one("SELECT to_regclass('search_terms') IS NOT NULL", &[]).unwrap().get(0);
    if terms {
        tx.execute(
            "INSERT INTO search_terms (corpus, lexeme, df)
             SELECT 'knowledge', l, count(*) FROM search_index, unnest(tsvector_to_array(tsv)) AS l
             WHERE corpus = 'knowledge' AND seq >= $1 GROUP BY l
             ON CONFLICT (corpus, lexeme) DO UPDATE SET df = search_terms.df + excluded.df",
            &[&first_seq.unwrap_or(i64::MAX)],
        )
        .unwrap();
    }
    tx.execute("UPDATE knowledge_counter SET n = $1 WHERE name = 'entry'", &[&(start + n as i64)]).unwrap();
    tx.commit().unwrap();
    // What autovacuum does within a minute of a bulk load: planner
    // statistics, and the GIN index's pending list merged. Without it the
    // first minutes measure the load, not the store.
    c.batch_execute("VACUUM ANALYZE knowledge_entries, search_index, search_vectors, vector_blocks").unwrap();
    if terms {
        c.batch_execute("VACUUM ANALYZE search_terms").unwrap();
    }
}

fn seed_sqlite(path: &std::path::Path, n: usize, texts: &[String], rng: &mut Rng) {
    let mut c = rusqlite::Connection::open(path).unwrap();
    c.busy_timeout(Duration::from_secs(30)).unwrap();
    let start: i64 = c.query_row("SELECT n FROM knowledge_counter WHERE name = 'entry'", [], |r| r.get(0)).unwrap();
    let rows = fillers(start + 1, n, texts, rng);
    let tx = c.transaction().unwrap();
    let mut blocks: Vec<Block> = Vec::new();
    {
        let mut entry = tx.prepare(
            "INSERT INTO knowledge_entries (seq, id, type, topic, position, reasoning, confidence, stability, tier, tags, source_type, source_date, corroboration_count, created_at, extractor, embedding, created_ms)
             VALUES (?1, ?2, ?3, ?4, ?5, 'filler', 'medium', 'stable', 'public', '[]', 'chat', '2026-11-01', 1, '2026-11-01T00:00:00Z', 'bench-filler', ?6, 0)").unwrap();
        let mut index = tx.prepare("INSERT INTO search_index (corpus, ref_id, title, body, meta, created_ms) VALUES ('knowledge', ?1, ?2, ?3, '{}', 0) RETURNING seq").unwrap();
        let mut vector = tx.prepare("INSERT INTO search_vectors (seq, embedding) VALUES (?1, ?2)").unwrap();
        let mut block = Block::default();
        for r in &rows {
            entry.execute(rusqlite::params![r.seq, r.id, r.kind, r.topic, r.body, r.embedding]).unwrap();
            let seq: i64 = index.query_row(rusqlite::params![r.id, r.topic, r.body], |x| x.get(0)).unwrap();
            vector.execute(rusqlite::params![seq, r.embedding]).unwrap();
            block.push(seq, r.sig.clone());
            if block.seqs.len() == mneme_knowledge::fusion::BLOCK_SIZE {
                blocks.push(std::mem::take(&mut block));
            }
        }
        if !block.seqs.is_empty() {
            blocks.push(block);
        }
    }
    let first: i64 = tx
        .query_row("SELECT COALESCE(MAX(block), -1) + 1 FROM vector_blocks WHERE corpus = 'knowledge'", [], |r| {
            r.get(0)
        })
        .unwrap();
    for (i, b) in blocks.iter().enumerate() {
        let (seqs, sigs) = b.encode();
        tx.execute(
            "INSERT INTO vector_blocks (corpus, block, n, seqs, sigs, lo, hi) VALUES ('knowledge', ?1, ?2, ?3, ?4, ?5, ?6)",
            rusqlite::params![first + i as i64, b.seqs.len() as i64, seqs, sigs, b.seqs.iter().min(), b.seqs.iter().max()],
        )
        .unwrap();
    }
    tx.execute("UPDATE knowledge_counter SET n = ?1 WHERE name = 'entry'", [start + n as i64]).unwrap();
    tx.commit().unwrap();
    // The planner statistics Postgres would have by now (see `seed_pg`).
    c.execute_batch("ANALYZE").unwrap();
}
