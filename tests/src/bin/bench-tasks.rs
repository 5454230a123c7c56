//! Persistent-task benchmark (docs/BENCHMARKS.md): a worker cycle's
//! non-model time, through the runner over HTTP. Each run advances the test
//! clock past the worker's period and ticks once; a new task is created
//! whenever none is open.
//!
//! - `--model rules` (default): no model, the labelled rules run three
//!   steps a cycle. All of the cycle is non-model time.
//! - `--model scripted`: the scripted model answers at once with an
//!   eight-step plan; each step is one skill call, then done. The model's
//!   share is the loopback round trips, reported as the count of calls.
//!
//! Reports the cycle's server-side time (`took_ms` of the tick) and the
//! client-side time, p50 and p95.
//!
//! Usage: bench-tasks --backend embedded|hosted [--runs 200] [--model rules|scripted]

use std::time::Instant;

use mneme_e2e::bench::{arg, backend, report};
use mneme_e2e::fake_model::{FakeModel, Script};
use mneme_e2e::{App, BackendEnv, edited_manifest};
use serde_json::{Value, json};

const PLAN: &str = "You break one of the principal's long-running goals";
const PERIOD_MAX_MS: u64 = 2_340_001;

fn call(app: &App, method: &str, path: &str, body: Option<&Value>, clock: u64) -> (u16, Value, f64) {
    let c = clock.to_string();
    let body = body.map(Value::to_string);
    let t = Instant::now();
    let r = app.request(
        method,
        path,
        &[("authorization", "Bearer bench"), ("x-mneme-clock", c.as_str())],
        body.as_deref().map(str::as_bytes),
    );
    (r.status, serde_json::from_str(&r.body).unwrap_or(Value::Null), t.elapsed().as_secs_f64() * 1_000.0)
}

fn main() {
    let backend = backend();
    let runs: usize = arg("--runs").map_or(200, |n| n.parse().unwrap());
    let scripted = arg("--model").as_deref() == Some("scripted");
    let b = BackendEnv::new(backend);
    let model = FakeModel::start(Script {
        reply: json!({"actions": [], "done": true, "result": "a finding"}).to_string(),
        ..Default::default()
    });
    let steps: Vec<Value> = (1..=8)
        .map(|i| {
            json!({"id": format!("s{i}"), "description": format!("Work through research stage number {i} of topic{i}"),
                        "depends_on": if i == 1 { vec![] } else { vec![format!("s{}", i - 1)] }})
        })
        .collect();
    model.route(PLAN, Script { reply: json!({"steps": steps, "confidence": 0.8}).to_string(), ..Default::default() });
    model.route(
        "this_step_so_far\\\":[]",
        Script {
            reply: json!({"actions": [{"type": "recall", "params": {"query": "laptops"}}], "done": false}).to_string(),
            ..Default::default()
        },
    );
    let mut env = b.vars.clone();
    for (k, v) in [("API_KEY", "bench"), ("CRON_TOKEN", "bench"), ("TEST_CLOCK", "true")] {
        env.push((format!("SPIN_VARIABLE_{k}"), v.into()));
    }
    if scripted {
        env.push(("SPIN_VARIABLE_LLM_MODEL".into(), "bench".into()));
        env.push(("SPIN_VARIABLE_LLM_URL".into(), model.url()));
        env.push(("SPIN_VARIABLE_LLM_HOST".into(), model.addr.clone()));
    }
    // Only the benchmark's ticks run cycles.
    let dir = tempfile::tempdir().unwrap();
    let manifest = edited_manifest(dir.path(), "spin.toml", |m| {
        m.replace(
            "[[application.tool.mneme.cron]]\ncomponent = \"tick\"\ncron_expression = \"0 * * * * *\"\npath = \"/tick/tasks\"",
            "",
        )
    });
    let app = App::start(&manifest.display().to_string(), &env);
    println!(
        "backend: {backend:?}; model: {}; machine: {} cores",
        if scripted { "scripted (instant)" } else { "none (rules)" },
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );

    let mut clock = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as u64;
    let (mut server, mut client, mut created) = (Vec::new(), Vec::new(), 0);
    let calls_before = model.requests().len();
    for i in 0..runs + 5 {
        let (_, open, _) = call(&app, "GET", "/tasks?status=in_progress", None, clock);
        let (_, accepted, _) = call(&app, "GET", "/tasks?status=accepted", None, clock);
        if open["tasks"].as_array().is_none_or(Vec::is_empty) && accepted["tasks"].as_array().is_none_or(Vec::is_empty)
        {
            let goal = format!("Benchmark goal number {i} about subject{i} and detail{i}");
            let (s, v, _) = call(&app, "POST", "/tasks", Some(&json!({"goal": goal})), clock);
            assert_eq!(s, 201, "{v}");
            created += 1;
        }
        clock += PERIOD_MAX_MS;
        let (s, v, ms) = call(&app, "POST", "/tick/tasks", None, clock);
        assert_eq!(s, 200, "{v}");
        assert!(v["result"]["task_id"].is_string(), "a cycle ran: {v}");
        // The first cycles warm the component instances and the caches.
        if i >= 5 {
            server.push(v["took_ms"].as_f64().unwrap());
            client.push(ms);
        }
    }
    println!("tasks created: {created}; model calls: {}", model.requests().len() - calls_before);
    report("cycle, server side (took_ms)", &mut server);
    report("cycle, client side", &mut client);
}
