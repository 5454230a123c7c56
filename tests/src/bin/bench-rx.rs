//! Recommendation benchmarks (docs/BENCHMARKS.md), through the runner over
//! HTTP, on the shipped fitness door (its SQL views over a few weeks of
//! observations) with the scripted model answering instantly:
//!
//! 1. a full run (steps 0.5–11, a new rec each time: each run's clock is
//!    49 h after the last, so no prior rec absorbs it);
//! 2. the dedup short-circuit (the same state again a minute later).
//!
//! Client-side latency (HTTP included), p50 and p95, and the median of
//! each step the trace reports.
//!
//! With `--history`, instead: the Inbox's chart reads, `GET
//! /rx/fitness/history?days=28` and `?days=90`, over 120 observations (a
//! check-in and a workout a day for 60 days), 20 requests each after 5
//! warm-ups.
//!
//! Usage: bench-rx --backend embedded|hosted [--runs 200] [--history]

use std::time::Instant;

use mneme_e2e::bench::{arg, backend, percentile};
use mneme_e2e::fake_model::{FakeModel, Script};
use mneme_e2e::{App, BackendEnv};
use serde_json::{Value, json};

const COMPOSE: &str = "You write the narrative of one recommendation";

fn post(app: &App, path: &str, body: Option<&Value>, clock: u64) -> (u16, Value, f64) {
    let c = clock.to_string();
    let body = body.map(Value::to_string);
    let t = Instant::now();
    let r = app.request(
        "POST",
        path,
        &[("authorization", "Bearer bench"), ("x-mneme-clock", c.as_str())],
        body.as_deref().map(str::as_bytes),
    );
    let ms = t.elapsed().as_secs_f64() * 1_000.0;
    (r.status, serde_json::from_str(&r.body).unwrap_or(Value::Null), ms)
}

fn report(name: &str, ms: &mut [f64], traces: &[Value]) {
    mneme_e2e::bench::report(name, ms);
    let mut steps: Vec<(String, Vec<f64>)> = Vec::new();
    for t in traces {
        for s in t.as_array().into_iter().flatten() {
            let key = format!("{} {}", s["step"].as_str().unwrap_or(""), s["name"].as_str().unwrap_or(""));
            let v = s["took_ms"].as_f64().unwrap_or(0.0);
            match steps.iter_mut().find(|x| x.0 == key) {
                Some(x) => x.1.push(v),
                None => steps.push((key, vec![v])),
            }
        }
    }
    let line: Vec<String> = steps
        .iter_mut()
        .map(|(k, v)| {
            v.sort_by(f64::total_cmp);
            format!("{k}={:.2}", percentile(v, 0.5))
        })
        .collect();
    println!("  step medians (ms): {}", line.join(", "));
    let mut server: Vec<f64> =
        traces.iter().filter_map(|t| t.as_array()?.iter().find(|s| s["step"] == "11")?["took_ms"].as_f64()).collect();
    server.sort_by(f64::total_cmp);
    if !server.is_empty() {
        println!(
            "  server side (the run's own took_ms): p50={:.1} ms p95={:.1} ms",
            percentile(&server, 0.5),
            percentile(&server, 0.95)
        );
    }
}

fn main() {
    let backend = backend();
    let runs: usize = arg("--runs").map_or(200, |n| n.parse().unwrap());
    let b = BackendEnv::new(backend);
    let model = FakeModel::start(Script::default());
    model.route(
        COMPOSE,
        Script {
            reply: json!({"tldr": "Session pace drives the drift.", "seeing": "Session pace is the largest contribution.",
                "recommendation": "Book the missing sessions.", "why": "It is the largest weighted contribution.",
                "counter_thesis": {"argument": "Recovery looks fine.", "reject_if": "pace recovers alone", "accept_if": "pace stays low"}})
            .to_string(),
            ..Default::default()
        },
    );
    let mut env = b.vars.clone();
    for (k, v) in [("API_KEY", "bench"), ("CRON_TOKEN", "bench"), ("LLM_MODEL", "bench"), ("TEST_CLOCK", "true")] {
        env.push((format!("SPIN_VARIABLE_{k}"), v.into()));
    }
    env.push(("SPIN_VARIABLE_LLM_URL".into(), model.url()));
    env.push(("SPIN_VARIABLE_LLM_HOST".into(), model.addr.clone()));
    let app = App::start("spin.toml", &env);
    println!("backend: {backend:?}; machine: {} cores", std::thread::available_parallelism().map_or(0, |n| n.get()));

    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as u64;
    let day = 86_400_000u64;
    if std::env::args().any(|a| a == "--history") {
        return history(&app, now);
    }
    let mut obs = Vec::new();
    for d in 0..28u64 {
        obs.push(json!({"kind": "checkin", "energy": 2 + d % 3, "sleep": 3, "waist_cm": 84.0 + d as f64 * 0.05,
                        "body_fat_pct": 18.0, "target_sessions_per_week": 5, "plan_block_week": 6, "at": now - d * day}));
        if d % 3 == 0 {
            obs.push(
                json!({"kind": "workout", "type": if d % 2 == 0 { "strength" } else { "conditioning" }, "minutes": 45,
                            "rpe_actual": 8, "rpe_prescribed": 7, "load_kg": 95, "prev_load_kg": 100,
                            "hard_lower": d % 6 == 0, "block_week": 4, "at": now - d * day}),
            );
        }
    }
    let (s, v, _) = post(&app, "/rx/fitness/observations", Some(&json!({"observations": obs})), now);
    assert_eq!(s, 201, "{v}");
    for i in 0..20 {
        let (s, v, _) = post(
            &app,
            "/documents",
            Some(&json!({"title": format!("Training note {i}"),
            "text": format!("Training consistency note {i}: sessions per week and missed workouts decide progress.")})),
            now,
        );
        assert_eq!(s, 201, "document {i}: {v}");
    }

    let (mut full, mut dedup) = (Vec::new(), Vec::new());
    let (mut full_traces, mut dedup_traces) = (Vec::new(), Vec::new());
    for i in 0..runs as u64 {
        let clock = now + i * 49 * 3_600_000;
        let (s, v, ms) = post(&app, "/rx/fitness", None, clock);
        assert_eq!(s, 201, "{v}");
        assert_ne!(v["composer"], "template", "the scripted model composes");
        full.push(ms);
        full_traces.push(v["trace"].clone());
        let (s, v, ms) = post(&app, "/rx/fitness", None, clock + 60_000);
        assert_eq!((s, v["status"].as_str()), (200, Some("no-change")), "{v}");
        dedup.push(ms);
        dedup_traces.push(v["trace"].clone());
    }
    report("full run", &mut full, &full_traces);
    report("dedup short-circuit", &mut dedup, &dedup_traces);
}

/// The Inbox's chart reads over 60 days of a check-in and a workout a day.
fn history(app: &App, now: u64) {
    let day = 86_400_000u64;
    let obs: Vec<Value> = (0..60u64)
        .flat_map(|d| {
            [
                json!({"kind": "checkin", "energy": 2 + d % 3, "sleep": 3, "waist_cm": 84.0 + d as f64 * 0.05,
                       "body_fat_pct": 18.0, "target_sessions_per_week": 5, "at": now - d * day}),
                json!({"kind": "workout", "type": "strength", "minutes": 45, "rpe_actual": 8, "rpe_prescribed": 7,
                       "load_kg": 95, "prev_load_kg": 100, "hard_lower": d % 6 == 0, "at": now - d * day + 3_600_000}),
            ]
        })
        .collect();
    let (s, v, _) = post(app, "/rx/fitness/observations", Some(&json!({"observations": obs})), now);
    assert_eq!(s, 201, "{v}");
    for days in [28, 90] {
        let path = format!("/rx/fitness/history?days={days}");
        let mut ms = Vec::new();
        for i in 0..25 {
            let t = Instant::now();
            let r = app.request("GET", &path, &[("authorization", "Bearer bench")], None);
            assert_eq!(r.status, 200, "{}", r.body);
            if i >= 5 {
                ms.push(t.elapsed().as_secs_f64() * 1_000.0);
            }
        }
        mneme_e2e::bench::report(&format!("GET {path} over 120 observations"), &mut ms);
    }
}
