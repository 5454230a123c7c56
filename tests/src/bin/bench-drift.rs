//! Drift benchmark (docs/BENCHMARKS.md): a drift cycle's non-model time
//! over 10,000 concepts, through the runner over HTTP, with no model (the
//! labelled rules think the thought, so all of the cycle is non-model
//! time).
//!
//! Ten exchanges are consolidated by the rules into real episodes (so the
//! idle gate opens); then `--concepts` concepts with three relationships
//! each are written straight into the database, a third of them drawn from
//! the real episodes. Each run advances the test clock 13 minutes (past
//! any jittered period) and ticks once with a fresh seed. A quarter of the
//! edges are strong, so most cycles drift; those that stop (resting seeds,
//! too little energy) are reported apart.
//!
//! Usage: bench-drift --backend embedded|hosted [--runs 200] [--concepts 10000]

use std::time::Instant;

use mneme_e2e::bench::{SplitMix, arg, backend, report};
use mneme_e2e::{App, BackendEnv, edited_manifest};
use serde_json::{Value, json};

const MIN: u64 = 60_000;

fn call(app: &App, method: &str, path: &str, body: Option<&Value>, clock: u64, seed: u64) -> (u16, Value, f64) {
    let (c, s) = (clock.to_string(), seed.to_string());
    let body = body.map(Value::to_string);
    let t = Instant::now();
    let r = app.request(
        method,
        path,
        &[("authorization", "Bearer bench"), ("x-mneme-clock", c.as_str()), ("x-mneme-seed", s.as_str())],
        body.as_deref().map(str::as_bytes),
    );
    (r.status, serde_json::from_str(&r.body).unwrap_or(Value::Null), t.elapsed().as_secs_f64() * 1_000.0)
}

struct Concept {
    id: String,
    name: String,
    strength: f64,
    episodes: String,
    embedding: Vec<u8>,
}

/// Concepts and relationships: each concept links to three others; one
/// edge in four is strong (0.6–1.0), the rest weak (0.1–0.49).
fn graph(n: usize, episodes: &[String]) -> (Vec<Concept>, Vec<(String, String, f64)>) {
    let mut rng = SplitMix(7);
    let concepts: Vec<Concept> = (0..n)
        .map(|i| {
            let mut e: Vec<f32> = (0..384).map(|_| rng.unit() as f32 - 0.5).collect();
            let norm = e.iter().map(|x| x * x).sum::<f32>().sqrt();
            e.iter_mut().for_each(|x| *x /= norm);
            let from: Vec<&String> =
                if i % 3 == 0 && !episodes.is_empty() { vec![&episodes[i % episodes.len()]] } else { vec![] };
            Concept {
                id: format!("c-bench{i:06}"),
                name: format!("concept {i}"),
                strength: 0.5 + rng.unit() * 9.0,
                episodes: serde_json::to_string(&from).unwrap(),
                embedding: e.iter().flat_map(|x| x.to_le_bytes()).collect(),
            }
        })
        .collect();
    let mut edges = Vec::new();
    for i in 0..n {
        for _ in 0..3 {
            let j = rng.next_u64() as usize % n;
            if j == i {
                continue;
            }
            let strength = if rng.unit() < 0.25 { 0.6 + rng.unit() * 0.4 } else { 0.1 + rng.unit() * 0.39 };
            edges.push((concepts[i].id.clone(), concepts[j].id.clone(), strength));
        }
    }
    edges.sort_by(|a, b| (&a.0, &a.1).cmp(&(&b.0, &b.1)));
    edges.dedup_by(|a, b| a.0 == b.0 && a.1 == b.1);
    (concepts, edges)
}

const CONCEPT_SQL: &str = "INSERT INTO semantic_concepts (id, name, concept_type, definition, domain, abstraction_level, strength, confidence, source_episodes, embedding, last_reinforced_ms, created_ms, updated_ms) VALUES ($1, $2, 'idea', $3, 'general', 2, $4, 0.7, $5, $6, $7, $7, $7)";
const EDGE_SQL: &str = "INSERT INTO semantic_relationships (source_id, target_id, relationship_type, strength, confidence, created_ms, updated_ms) VALUES ($1, $2, 'related_to', $3, 0.7, $4, $4)";

fn seed_pg(c: &mut postgres::Client, concepts: &[Concept], edges: &[(String, String, f64)], now: i64) {
    let mut tx = c.transaction().unwrap();
    let ins = tx.prepare(CONCEPT_SQL).unwrap();
    for k in concepts {
        let def = format!("{} in the benchmark graph", k.name);
        tx.execute(&ins, &[&k.id, &k.name, &def, &k.strength, &k.episodes, &k.embedding, &now]).unwrap();
    }
    let ins = tx.prepare(EDGE_SQL).unwrap();
    for (a, b, s) in edges {
        tx.execute(&ins, &[a, b, s, &now]).unwrap();
    }
    tx.commit().unwrap();
}

fn seed_sqlite(path: &std::path::Path, concepts: &[Concept], edges: &[(String, String, f64)], now: i64) {
    let mut c = rusqlite::Connection::open(path).unwrap();
    c.busy_timeout(std::time::Duration::from_secs(30)).unwrap();
    let tx = c.transaction().unwrap();
    {
        let mut ins = tx.prepare(&CONCEPT_SQL.replace('$', "?")).unwrap();
        for k in concepts {
            let def = format!("{} in the benchmark graph", k.name);
            ins.execute(rusqlite::params![k.id, k.name, def, k.strength, k.episodes, k.embedding, now]).unwrap();
        }
        let mut ins = tx.prepare(&EDGE_SQL.replace('$', "?")).unwrap();
        for (a, b, s) in edges {
            ins.execute(rusqlite::params![a, b, s, now]).unwrap();
        }
    }
    tx.commit().unwrap();
}

fn main() {
    let backend = backend();
    let runs: usize = arg("--runs").map_or(200, |n| n.parse().unwrap());
    let n: usize = arg("--concepts").map_or(10_000, |n| n.parse().unwrap());
    let b = BackendEnv::new(backend);
    let mut env = b.vars.clone();
    for (k, v) in [("API_KEY", "bench"), ("CRON_TOKEN", "bench"), ("TEST_CLOCK", "true")] {
        env.push((format!("SPIN_VARIABLE_{k}"), v.into()));
    }
    // Only the benchmark's ticks run the engines.
    let dir = tempfile::tempdir().unwrap();
    let manifest = edited_manifest(dir.path(), "spin.toml", |m| {
        m.replace(
            "[[application.tool.mneme.cron]]\ncomponent = \"tick\"\ncron_expression = \"*/30 * * * * *\"\npath = \"/tick/drift\"",
            "",
        )
        .replace(
            "[[application.tool.mneme.cron]]\ncomponent = \"tick\"\ncron_expression = \"*/10 * * * * *\"\npath = \"/tick/consolidate\"",
            "",
        )
    });
    let app = App::start(&manifest.display().to_string(), &env);
    println!(
        "backend: {backend:?}; model: none (rules); concepts: {n}; machine: {} cores",
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );

    // 2027-01-15 09:00 UTC: outside quiet hours.
    let mut clock: u64 = 1_800_003_600_000;
    let texts = [
        "I decided to learn the cello and I am so excited",
        "I will practise the cello every morning before work",
        "I am a bit worried about my cello posture",
        "My cello teacher is Ana Moreira",
        "Which cello bow should I buy first?",
    ];
    for (i, t) in texts.iter().cycle().take(10).enumerate() {
        let (s, v, _) =
            call(&app, "POST", "/chat", Some(&json!({"text": t, "thread_id": "b"})), clock + i as u64 * MIN, 1);
        assert_eq!(s, 200, "{v}");
    }
    clock += 11 * MIN;
    let (s, v, _) = call(&app, "POST", "/tick/consolidate", None, clock, 1);
    assert_eq!(s, 200, "{v}");
    let (_, export, _) = call(&app, "GET", "/privacy/export", None, clock, 1);
    let episodes: Vec<String> = export["tables"]["episodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["id"].as_str().unwrap().to_string())
        .collect();
    assert!(!episodes.is_empty(), "the rules built episodes");
    let (concepts, edges) = graph(n, &episodes);
    let t = Instant::now();
    match &b.pg {
        Some(db) => seed_pg(&mut db.client(), &concepts, &edges, clock as i64),
        None => seed_sqlite(&app.state.path().join("sqlite_db.db"), &concepts, &edges, clock as i64),
    }
    println!(
        "seeded {} concepts and {} relationships in {:.1} s",
        concepts.len(),
        edges.len(),
        t.elapsed().as_secs_f64()
    );
    // Past the inferred focus session (2 h).
    clock += 3 * 60 * MIN;

    let (mut drifted, mut stopped, mut client) = (Vec::new(), Vec::new(), Vec::new());
    let mut reasons: std::collections::BTreeMap<String, usize> = std::collections::BTreeMap::new();
    let mut actions: std::collections::BTreeMap<String, usize> = std::collections::BTreeMap::new();
    for i in 0..runs + 5 {
        clock += 13 * MIN;
        let (s, v, ms) = call(&app, "POST", "/tick/drift", None, clock, 1_000 + i as u64);
        assert_eq!(s, 200, "{v}");
        let r = &v["result"];
        assert_eq!(r["due"], true, "{v}");
        // The first cycles warm the component instances.
        if i < 5 {
            continue;
        }
        let took = v["took_ms"].as_f64().unwrap();
        client.push(ms);
        if r["ran"] == true {
            drifted.push(took);
            *actions.entry(r["drift"]["action"].as_str().unwrap_or("?").to_string()).or_default() += 1;
        } else {
            stopped.push(took);
            *reasons.entry(r["skip"].as_str().unwrap_or("?").to_string()).or_default() += 1;
        }
    }
    println!("drifted: {} {actions:?}; stopped: {} {reasons:?}", drifted.len(), stopped.len());
    report("cycle that drifted, server side (took_ms)", &mut drifted);
    report("cycle that stopped before the thought, server side (took_ms)", &mut stopped);
    report("every cycle, client side", &mut client);
}
