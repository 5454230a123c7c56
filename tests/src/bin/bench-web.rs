//! Web app benchmark (docs/BENCHMARKS.md): browser timings in Chromium and
//! the cost of the session cookie against the bearer key, through the
//! runner over HTTP.
//!
//! - Chromium (`web/tests/bench.mjs`, playwright-core): per run, a fresh
//!   context: the sign-in screen, first contentful paint, sign-in to the
//!   chat screen, a social message's reply, a warm reload.
//! - Per request: `GET /session` answered from the cookie, and the same
//!   authenticated read (`GET /tasks?limit=1`) with `Authorization: Bearer`
//!   and with the cookie, interleaved so drift in the machine hits both.
//! - `GET /status`, the Status screen's read: 50 requests after 5 warm-ups.
//!
//! Usage: bench-web --backend embedded|hosted [--runs 20] [--requests 500]

use std::process::Command;
use std::time::Instant;

use mneme_e2e::bench::{arg, backend, report};
use mneme_e2e::{App, BackendEnv, repo_root};
use serde_json::Value;

const KEY: &str = "bench-key";

fn main() {
    let backend = backend();
    let runs: usize = arg("--runs").map_or(20, |n| n.parse().unwrap());
    let requests: usize = arg("--requests").map_or(500, |n| n.parse().unwrap());
    let b = BackendEnv::new(backend);
    let mut env = b.vars.clone();
    env.push(("SPIN_VARIABLE_API_KEY".into(), KEY.into()));
    env.push(("SPIN_VARIABLE_CRON_TOKEN".into(), "bench-cron".into()));
    let app = App::start("spin.toml", &env);
    println!(
        "backend: {backend:?}; model: none; machine: {} cores",
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );

    // The browser.
    let out = Command::new("node")
        .arg(repo_root().join("web/tests/bench.mjs"))
        .current_dir(repo_root().join("web"))
        .env("MNEME_URL", &app.url)
        .env("MNEME_API_KEY", KEY)
        .env("RUNS", (runs + 2).to_string())
        .output()
        .expect("node runs");
    assert!(out.status.success(), "{}\n{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    let lines: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .skip(2) // the first runs warm the component instances
        .collect();
    assert_eq!(lines.len(), runs, "one line per run");
    for (key, name) in [
        ("sign_in_screen", "chromium: navigation to the sign-in screen"),
        ("first_paint", "chromium: first contentful paint (page clock)"),
        ("signed_in_chat", "chromium: sign-in to the chat screen"),
        ("first_reply", "chromium: a social message to its reply"),
        ("warm_reload", "chromium: a signed-in reload to the chat screen"),
    ] {
        let mut ms: Vec<f64> = lines.iter().filter_map(|l| l[key].as_f64()).collect();
        report(name, &mut ms);
    }

    // Cookie against bearer.
    let body = serde_json::json!({"api_key": KEY}).to_string();
    let r = app.request("POST", "/session", &[("content-type", "application/json")], Some(body.as_bytes()));
    assert_eq!(r.status, 204, "{}", r.body);
    let cookie = r.header("set-cookie").unwrap().split(';').next().unwrap().to_string();
    let bearer = format!("Bearer {KEY}");
    let time = |headers: &[(&str, &str)], path: &str| {
        let t = Instant::now();
        let r = app.request("GET", path, headers, None);
        assert_eq!(r.status, 200, "{path}: {}", r.body);
        t.elapsed().as_secs_f64() * 1_000.0
    };
    let (mut session, mut with_bearer, mut with_cookie) = (Vec::new(), Vec::new(), Vec::new());
    for i in 0..requests + 20 {
        let s = time(&[("cookie", &cookie)], "/session");
        let a = time(&[("authorization", &bearer)], "/tasks?limit=1");
        let c = time(&[("cookie", &cookie)], "/tasks?limit=1");
        if i >= 20 {
            session.push(s);
            with_bearer.push(a);
            with_cookie.push(c);
        }
    }
    report("GET /session from the cookie", &mut session);
    report("GET /tasks?limit=1 with the bearer key", &mut with_bearer);
    report("GET /tasks?limit=1 with the cookie", &mut with_cookie);
    let median = |v: &[f64]| mneme_e2e::bench::percentile(v, 0.5);
    println!("cookie / bearer, medians: {:.3}", median(&with_cookie) / median(&with_bearer));

    // The Status screen's one read: every probe (stores, schema, embedding
    // model, jobs, queues; no model is configured, so none is asked).
    let mut status: Vec<f64> = (0..55).map(|_| time(&[("authorization", &bearer)], "/status")).skip(5).collect();
    report("GET /status", &mut status);
}
