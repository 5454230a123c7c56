//! Knowledge benchmarks (docs/BENCHMARKS.md), through the runner over HTTP.
//!
//! 1. Ingest throughput: transcripts whose extraction (by the scripted
//!    model, answering instantly) yields 50 candidates each, until `--entries`
//!    entries exist (by the jobs' outcomes; the table is counted before and
//!    after); entries per second of wall time, queue to `done`.
//! 2. `POST /retrieve` latency (client side, query embedding included) over
//!    those entries: 300 LoCoMo questions, sequential, p50 and p95.
//! 3. With `--filler N[,M…]`: N more entries written straight into the store in
//!    the app's own row format (LoCoMo turns as text, random unit vectors as
//!    embeddings; latency depends on row counts and match counts, not on
//!    what the vectors mean), then the same latency run.
//!
//!    Before that run the vector index's upkeep (`POST /tick/index`) runs
//!    until no flat block is left, as its cron would (D-K16), and says how
//!    long it took.
//! 4. After each `/retrieve` run, `GET /search` for the same questions
//!    (hybrid, every corpus, k 10), client side, p50 and p95; then
//!    `GET /knowledge/timeline?days=90` (the Knowledge screen's chart of
//!    entries per type): 30 requests after 5 warm-ups, p50 and p95; then
//!    the runner's resident memory and its peak.
//! 5. With `--filler`, ingest again once the store holds every filler row:
//!    at least 450 more entries, entries per second.
//!
//! Usage: bench-knowledge --backend embedded|hosted [--entries 2000] [--filler 8000,90000]
//!        [--mode hybrid|text|vector] [--save DIR] [--from DIR] [--profile]
//!
//! For working on ingest at a size, on the embedded backend: `--save DIR`
//! (a directory not yet there) stops the runner after the run and keeps a
//! copy of its state directory; `--from DIR` starts a runner on a fresh
//! copy of one and runs step 5 alone (`--entries`, `--filler` and `--save`
//! are not read then). `--profile` exports the runner's spans to a receiver
//! in this process and prints, for step 5, where a job's time went: each
//! stage call, host call and statement, summed per job (tracing costs time
//! of its own, so a profiled run's figures are not the benchmark's).
//! Reads LoCoMo from ../shared/data at run time; nothing of it is stored.

use std::time::{Duration, Instant};

use mneme_e2e::bench::{arg, backend, locomo, locomo_turns, percentile};
use mneme_e2e::fake_model::{FakeModel, Script};
use mneme_e2e::otlp::{self, Receiver};
use mneme_e2e::seed::{self, Rng};
use mneme_e2e::{App, Backend, BackendEnv, Started};
use serde_json::{Value, json};

const EXTRACT: &str = "You extract the principal's judgement";
const TYPES: [&str; 5] = ["framework", "decision", "standard", "philosophy", "reaction"];
const STABILITY: [&str; 3] = ["evergreen", "stable", "evolving"];
const CONFIDENCE: [&str; 3] = ["high", "medium", "low"];

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

/// `GET /search` (the vault search over every corpus, hybrid, k 10) for
/// the same questions, client side: p50 and p95.
fn search_latency(app: &App, qs: &[String]) -> (f64, f64) {
    let mut ms = Vec::new();
    for q in qs {
        let t = Instant::now();
        let r = app.request(
            "GET",
            &format!("/search?k=10&q={}", url_encode(q)),
            &[("authorization", "Bearer bench")],
            None,
        );
        assert_eq!(r.status, 200, "{}", r.body);
        ms.push(t.elapsed().as_secs_f64() * 1000.0);
    }
    ms.sort_by(f64::total_cmp);
    (percentile(&ms, 0.5), percentile(&ms, 0.95))
}

/// Percent-encodes all but RFC 3986's unreserved characters.
fn url_encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
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

/// Ingests transcripts of 50 candidates each, one job at a time, until
/// `done` says so of the entry count; prints the jobs, the candidates and
/// the candidates and entries added per second of wall time.
fn ingest(app: &App, model: &FakeModel, texts: &[String], next: &mut usize, done: impl Fn(usize) -> bool) -> usize {
    let started = Instant::now();
    let before = count(app);
    let mut jobs = 0;
    // Active entries made so far, from each job's outcome: counting the
    // table between jobs would put a scan of a million rows into every job's
    // time.
    let mut made = 0;
    while !done(before as usize + made) {
        let batch: Vec<Value> = (0..50)
            .map(|i| {
                let k = *next + i;
                let t = &if k < texts.len() {
                    texts[k].clone()
                } else {
                    format!("{} {}", texts[k % texts.len()], texts[(k * 7 + 3) % texts.len()])
                };
                json!({"type": TYPES[k % 5], "topic": t.split_whitespace().take(6).collect::<Vec<_>>().join(" "),
                       "position": t, "reasoning": format!("it came up in conversation {k}"),
                       "confidence": CONFIDENCE[k % 3], "stability": STABILITY[k % 3],
                       "tags": [format!("t{}", k % 97)]})
            })
            .collect();
        *next += 50;
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
                // Active entries: each kept one adds one, and takes away
                // each it supersedes (one kept as history adds none).
                let kept = j["kept"].as_u64().unwrap_or_else(|| panic!("no outcome in {j}")) as usize;
                made = (made + kept).saturating_sub(j["superseded"].as_array().map_or(0, Vec::len));
                break;
            }
            assert_ne!(j["status"], "failed", "{j}");
            std::thread::sleep(Duration::from_millis(20));
        }
        jobs += 1;
        model.requests.lock().unwrap().clear();
    }
    let n = count(app);
    let secs = started.elapsed().as_secs_f64();
    println!(
        "ingest: {jobs} jobs, {} candidates, {} new entries ({n} in all) in {secs:.1} s: {:.1} candidates/s, {:.1} entries/s",
        jobs * 50,
        n - before,
        (jobs * 50) as f64 / secs,
        (n - before) as f64 / secs
    );
    jobs
}

/// The runner's resident memory now and at its peak (`VmRSS`, `VmHWM`).
fn memory(app: &App) -> String {
    let status = std::fs::read_to_string(format!("/proc/{}/status", app.pid())).unwrap_or_default();
    let field =
        |k: &str| status.lines().find(|l| l.starts_with(k)).map_or("?".into(), |l| l[k.len()..].trim().to_string());
    format!("runner resident {} (peak {})", field("VmRSS:"), field("VmHWM:"))
}

/// Runs the vector index's upkeep (D-K16) until the knowledge corpus has
/// no flat block left (or too few signatures to be trained), as its cron would within minutes of a bulk load
/// (the cron runs too, so a run may find the training claimed and wait);
/// prints how long it took. A build without the job (an A/B's older side)
/// answers 404 and keeps its flat scan.
fn index(app: &App) {
    let t = Instant::now();
    let (mut runs, mut moved, mut slowest) = (0, 0, 0.0f64);
    loop {
        let r0 = Instant::now();
        let r = app.request("POST", "/tick/index", &[("authorization", "Bearer bench")], None);
        if r.status == 404 {
            println!("index: this build has no vector index");
            return;
        }
        // A store that did not answer in time (a database still writing
        // out a bulk load): the run failed whole, and the cron runs again.
        if r.status == 503 {
            println!("index: run {} answered 503, as the cron's would: {}", runs + 1, r.body);
            let log = app.log();
            let tail: Vec<&str> = log.lines().rev().take(30).collect();
            println!("index: the runner's last log lines:\n{}", tail.into_iter().rev().collect::<Vec<_>>().join("\n"));
            assert!(t.elapsed() < Duration::from_secs(600), "the upkeep did not finish in 10 minutes");
            std::thread::sleep(Duration::from_secs(1));
            continue;
        }
        assert_eq!(r.status, 200, "{}", r.body);
        slowest = slowest.max(r0.elapsed().as_secs_f64());
        runs += 1;
        let corpora = r.json()["result"]["corpora"].clone();
        let knowledge = corpora.as_array().unwrap().iter().find(|c| c["corpus"] == "knowledge").unwrap().clone();
        moved += knowledge["moved"].as_u64().unwrap();
        // Done: nothing flat, or too few signatures to train (20,000).
        let flat = knowledge["flat"].as_u64().unwrap();
        if flat == 0 || (knowledge["lists"] == 0 && flat < mneme_knowledge::ivf::TRAIN_AT) {
            println!(
                "index: {runs} runs moved {moved} signatures into lists in {:.1} s (slowest run {:.2} s; the cron moved the rest): {corpora}",
                t.elapsed().as_secs_f64(),
                slowest
            );
            return;
        }
        assert!(t.elapsed() < Duration::from_secs(600), "the upkeep did not finish in 10 minutes: {corpora}");
        if knowledge["moved"] == 0 {
            std::thread::sleep(Duration::from_millis(500));
        }
    }
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
    let texts = locomo_turns(&data);
    let qs = questions(&data);

    let b = BackendEnv::new(backend);
    let model = FakeModel::start(Script::default());
    let mut env = b.vars.clone();
    for (k, v) in [("API_KEY", "bench"), ("CRON_TOKEN", "bench"), ("INGEST_TOKEN", "bench"), ("LLM_MODEL", "bench")] {
        env.push((format!("SPIN_VARIABLE_{k}"), v.into()));
    }
    env.push(("SPIN_VARIABLE_LLM_URL".into(), model.url()));
    env.push(("SPIN_VARIABLE_LLM_HOST".into(), model.addr.clone()));
    let profile = std::env::args().any(|a| a == "--profile").then(Receiver::start);
    if let Some(r) = &profile {
        env.push(("OTEL_EXPORTER_OTLP_ENDPOINT".into(), r.endpoint()));
        // Batches every 100 ms and a queue that holds a job's spans, so
        // none is dropped and the last ones arrive soon.
        env.push(("OTEL_BSP_SCHEDULE_DELAY".into(), "100".into()));
        env.push(("OTEL_BSP_MAX_QUEUE_SIZE".into(), "65536".into()));
    }
    let (save, from) = (arg("--save"), arg("--from"));
    assert!(
        backend == Backend::Embedded || (save.is_none() && from.is_none()),
        "--save and --from keep the embedded backend's state directory; a hosted store is not saved"
    );
    if let Some(dir) = &save {
        // A database's files beside an older one's `-wal` would be a broken store.
        assert!(!std::path::Path::new(dir).exists(), "--save {dir}: the directory exists already");
    }
    println!("backend: {backend:?}; machine: {} cores", std::thread::available_parallelism().map_or(0, |n| n.get()));
    if let Some(from) = from {
        // Step 5 alone, on a copy of a saved store: the ingest's texts go on
        // from where the saved run's stopped (`bench-next` beside it).
        let state = tempfile::tempdir().unwrap();
        copy_dir(std::path::Path::new(&from), state.path());
        let mut next: usize =
            std::fs::read_to_string(state.path().join("bench-next")).map_or(0, |n| n.trim().parse().unwrap());
        let app = match App::launch_in(state, "spin.toml", &env, &[]) {
            Started::Serving(app) => app,
            Started::Exited { log, .. } => panic!("the runner did not start:\n{log}"),
        };
        ingest_more(&app, &model, &texts, &mut next, profile.as_ref());
        return;
    }
    let app = App::start("spin.toml", &env);

    // 1. Ingest.
    let mut next = 0usize;
    ingest(&app, &model, &texts, &mut next, |n| n >= target);
    let n = count(&app);
    let (p50, p95, steps) = retrieve_latency(&app, &qs);
    println!("retrieve over {n} entries: p50 {p50:.1} ms, p95 {p95:.1} ms (step medians, ms: {steps})");
    let (p50, p95) = search_latency(&app, &qs);
    println!("search over {n} entries: p50 {p50:.1} ms, p95 {p95:.1} ms");
    let (p50, p95) = timeline_latency(&app);
    println!("timeline (90 days) over {n} entries: p50 {p50:.1} ms, p95 {p95:.1} ms");

    // 3. Filler rows, written in the app's format.
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let fillers = filler;
    for &filler in &fillers {
        let t = Instant::now();
        seed::filler(&b, app.state.path(), "knowledge", filler, &texts, &mut rng);
        let n = count(&app);
        println!("seeded {filler} filler entries in {:.1} s", t.elapsed().as_secs_f64());
        index(&app);
        let (p50, p95, steps) = retrieve_latency(&app, &qs);
        println!("retrieve over {n} entries: p50 {p50:.1} ms, p95 {p95:.1} ms (step medians, ms: {steps})");
        let (p50, p95) = search_latency(&app, &qs);
        println!("search over {n} entries: p50 {p50:.1} ms, p95 {p95:.1} ms");
        let (p50, p95) = timeline_latency(&app);
        println!("timeline (90 days) over {n} entries: p50 {p50:.1} ms, p95 {p95:.1} ms");
        println!("{}", memory(&app));
    }
    // 5. Ingest again, now that the store holds every filler row: ten jobs.
    if !fillers.is_empty() {
        ingest_more(&app, &model, &texts, &mut next, profile.as_ref());
    }
    if let Some(save) = save {
        // Stopped first, so the copy is of a closed database.
        let state = app.stop();
        std::fs::write(state.path().join("bench-next"), next.to_string()).unwrap();
        copy_dir(state.path(), std::path::Path::new(&save));
        println!("saved the state directory in {save}");
    }
}

/// Step 5: at least 450 more entries (ten jobs), the runner's memory, and
/// with `--profile` where the jobs' time went.
fn ingest_more(app: &App, model: &FakeModel, texts: &[String], next: &mut usize, profile: Option<&Receiver>) {
    let until = count(app) as usize + 450;
    let seen = profile.map_or(0, settled);
    let jobs = ingest(app, model, texts, next, |n| n >= until);
    println!("{}", memory(app));
    if let Some(r) = profile {
        print_profile(r, seen, jobs);
    }
}

/// Copies a state directory (and the directories in it), leaving out the
/// runner's logs.
fn copy_dir(from: &std::path::Path, to: &std::path::Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap_or_else(|e| panic!("reading {}: {e}", from.display())) {
        let e = e.unwrap();
        let name = e.file_name();
        if name.to_string_lossy().ends_with(".log") {
            continue;
        }
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &to.join(&name));
        } else {
            std::fs::copy(e.path(), to.join(&name)).unwrap();
        }
    }
}

/// How many spans have arrived once they stop coming (the runner exports
/// every 100 ms here): a second with none new.
fn settled(r: &Receiver) -> usize {
    let mut last = usize::MAX;
    while r.spans().len() != last {
        last = r.spans().len();
        std::thread::sleep(Duration::from_secs(1));
    }
    last
}

/// Where step 5's jobs spent their time: the spans that arrived after the
/// first `seen`, summed by name (a statement's by its first words), per job.
/// The runner's own cron ticks in the same time are in the sums too.
fn print_profile(r: &Receiver, seen: usize, jobs: usize) {
    settled(r);
    let spans = r.spans();
    let spans = &spans[seen.min(spans.len())..];
    let mut sums: std::collections::BTreeMap<String, (f64, usize)> = Default::default();
    for s in spans {
        let key = match otlp::attr(&s.attributes, "db.query.text") {
            Some(q) => format!("{} | {}", s.name, q.split_whitespace().take(14).collect::<Vec<_>>().join(" ")),
            None => s.name.clone(),
        };
        let e = sums.entry(key).or_default();
        e.0 += s.end_time_unix_nano.saturating_sub(s.start_time_unix_nano) as f64 / 1e6;
        e.1 += 1;
    }
    // `MNEME_PROFILE_TIMELINE=1`: the last job's `prepare`, span by span.
    if std::env::var_os("MNEME_PROFILE_TIMELINE").is_some()
        && let Some(p) = spans.iter().rev().find(|s| s.name.ends_with("knowledge.prepare"))
    {
        let mut inside: Vec<_> = spans
            .iter()
            .filter(|s| {
                s.trace_id == p.trace_id
                    && s.start_time_unix_nano >= p.start_time_unix_nano
                    && s.end_time_unix_nano <= p.end_time_unix_nano
            })
            .collect();
        inside.sort_by_key(|s| s.start_time_unix_nano);
        for s in inside {
            let q = otlp::attr(&s.attributes, "db.query.text").unwrap_or_default();
            println!(
                "{:>8.1} {:>7.2}  {} {}",
                (s.start_time_unix_nano - p.start_time_unix_nano) as f64 / 1e6,
                (s.end_time_unix_nano - s.start_time_unix_nano) as f64 / 1e6,
                s.name,
                q.split_whitespace().take(8).collect::<Vec<_>>().join(" ")
            );
        }
    }
    let mut rows: Vec<_> = sums.into_iter().collect();
    rows.sort_by(|a, b| b.1.0.total_cmp(&a.1.0));
    println!("profile of step 5, per job ({jobs} jobs; concurrent spans overlap): ms, calls");
    for (name, (ms, n)) in rows.iter().take(40) {
        println!("{:>9.1} {:>7.1}  {name}", ms / jobs.max(1) as f64, *n as f64 / jobs.max(1) as f64);
    }
}
