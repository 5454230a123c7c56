//! Memory-consolidation benchmark (docs/BENCHMARKS.md): how many exchanges
//! a second the consolidation worker gets through, through the runner over
//! HTTP. Each round chats `--exchanges` messages (not timed), then ticks
//! `POST /tick/consolidate` until the queues are empty (timed): one chunker
//! job per exchange, an episode per five, and semantic consolidation when
//! an episode's salience calls for it.
//!
//! - `--model scripted` (default): the scripted model answers every call at
//!   once, so the figure is the worker's own cost plus loopback round trips.
//! - `--model rules`: no model; the labelled rules.
//!
//! Reports exchanges per second for each round, with the median, and the
//! server-side time per job.
//!
//! Usage: bench-consolidation --backend embedded|hosted [--rounds 5] [--exchanges 100] [--model scripted|rules]

use std::time::Instant;

use mneme_e2e::bench::{arg, backend, percentile};
use mneme_e2e::fake_model::{FakeModel, Script, marker, triage_answer};
use mneme_e2e::{App, BackendEnv, edited_manifest};
use serde_json::{Value, json};

fn call(app: &App, method: &str, path: &str, body: Option<&Value>, clock: u64) -> (u16, String) {
    let c = clock.to_string();
    let body = body.map(Value::to_string);
    let r = app.request(
        method,
        path,
        &[("authorization", "Bearer bench"), ("x-mneme-clock", c.as_str())],
        body.as_deref().map(str::as_bytes),
    );
    (r.status, r.body)
}

fn script(v: Value) -> Script {
    Script::json(v)
}

fn main() {
    let backend = backend();
    let rounds: usize = arg("--rounds").map_or(5, |n| n.parse().unwrap());
    let n: u64 = arg("--exchanges").map_or(100, |n| n.parse().unwrap());
    let rules = arg("--model").as_deref() == Some("rules");
    let b = BackendEnv::new(backend);
    let model = FakeModel::start(Script { reply: "Noted, that sounds like a good plan.".into(), ..Default::default() });
    model.route(marker::TRIAGE, triage_answer("RESPOND"));
    model.route(
        marker::CHUNKER,
        script(json!({"gists": [{"type": "intent", "content": "The principal wants to keep a steady training plan.", "confidence": 8}],
                      "facts": [{"key": "training_days", "value": "three a week", "confidence": 8}]})),
    );
    model.route(
        marker::EPISODE,
        script(json!({"intent": {"type": "planning", "direction": "plan training"}, "action": "planned",
                      "emotion": {"type": "neutral"}, "outcome": "a plan", "gist": "The principal planned a training week.",
                      "salience_factors": {"novelty": 1, "emotional": 1, "commitment": 2, "unresolved": false}, "open_loops": []})),
    );
    model.route(
        marker::SEMANTIC,
        script(json!({"concepts": [{"name": "training", "type": "idea", "definition": "Exercise plan.", "domain": "health", "abstraction_level": 2},
                                   {"name": "rest days", "type": "idea", "definition": "Recovery.", "domain": "health", "abstraction_level": 2}],
                      "relationships": [{"source": "rest days", "target": "training", "type": "supports", "strength": 0.7}]})),
    );
    let mut env = b.vars.clone();
    for (k, v) in [("API_KEY", "bench"), ("CRON_TOKEN", "bench"), ("TEST_CLOCK", "true")] {
        env.push((format!("SPIN_VARIABLE_{k}"), v.into()));
    }
    if !rules {
        env.push(("SPIN_VARIABLE_LLM_MODEL".into(), "bench".into()));
        env.push(("SPIN_VARIABLE_LLM_URL".into(), model.url()));
        env.push(("SPIN_VARIABLE_LLM_HOST".into(), model.addr.clone()));
    }
    // Only the benchmark's ticks consolidate.
    let dir = tempfile::tempdir().unwrap();
    let manifest = edited_manifest(dir.path(), "spin.toml", |m| {
        m.replace(
            "[[application.tool.mneme.cron]]\ncomponent = \"tick\"\ncron_expression = \"*/10 * * * * *\"\npath = \"/tick/consolidate\"",
            "",
        )
    });
    let app = App::start(&manifest.display().to_string(), &env);
    println!(
        "backend: {backend:?}; model: {}; {n} exchanges a round; machine: {} cores",
        if rules { "none (rules)" } else { "scripted (instant)" },
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );

    let mut clock = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as u64;
    let mut rates = Vec::new();
    let mut per_job = Vec::new();
    for round in 0..rounds {
        for i in 0..n {
            clock += 60_000;
            let text = format!("Round {round} note {i}: I want to train on day {i} and rest after session {i}");
            let (s, body) = call(&app, "POST", "/chat", Some(&json!({"text": text, "thread_id": "bench"})), clock);
            assert_eq!(s, 200, "{body}");
        }
        clock += 600_000;
        let started = Instant::now();
        let (mut jobs, mut server_ms, mut by_queue) = (0, 0.0, std::collections::BTreeMap::<String, usize>::new());
        loop {
            let (s, body) = call(&app, "POST", "/tick/consolidate", None, clock);
            assert_eq!(s, 200, "{body}");
            let v: Value = serde_json::from_str(&body).unwrap();
            let done = v["result"]["jobs"].as_array().cloned().unwrap_or_default();
            if done.is_empty() {
                break;
            }
            assert!(done.iter().all(|j| j["status"] == "done"), "{v}");
            for j in &done {
                *by_queue.entry(j["queue"].as_str().unwrap_or_default().to_string()).or_default() += 1;
            }
            jobs += done.len();
            server_ms += v["took_ms"].as_f64().unwrap();
        }
        let secs = started.elapsed().as_secs_f64();
        let rate = n as f64 / secs;
        println!(
            "round {round}: {jobs} jobs {by_queue:?} in {:.2} s: {rate:.1} exchanges/s; server {:.2} ms a job",
            secs,
            server_ms / jobs as f64
        );
        rates.push(rate);
        per_job.push(server_ms / jobs as f64);
    }
    rates.sort_by(f64::total_cmp);
    per_job.sort_by(f64::total_cmp);
    println!(
        "exchanges/s: median {:.1}, min {:.1}, max {:.1}; server time a job: median {:.2} ms",
        percentile(&rates, 0.5),
        rates[0],
        rates[rates.len() - 1],
        percentile(&per_job, 0.5)
    );
}
