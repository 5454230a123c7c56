//! `GET /status` through the runner over HTTP, on both storage backends
//! (#26 item 4): the model as configured and whether it answers, the
//! embedding model, the stores and schema, each scheduled job's last run
//! and outcome, and the queues' depths.

use mneme_e2e::fake_model::{FakeModel, Script};
use mneme_e2e::{App, BACKENDS, Backend, BackendEnv, CRON_AUTH, TEST_KEY, TICK_JOBS, test_env, without_crons};
use serde_json::{Value, json};

fn auth() -> String {
    format!("Bearer {TEST_KEY}")
}

fn status(app: &App) -> Value {
    let a = auth();
    let r = app.request("GET", "/status", &[("authorization", a.as_str())], None);
    assert_eq!(r.status, 200, "{}", r.body);
    r.json()
}

fn tick(app: &App, job: &str) -> mneme_e2e::Resp {
    app.request("POST", &format!("/tick/{job}"), &[("authorization", CRON_AUTH)], None)
}

/// A question only a model answers; the stream's body.
fn tomato_chat(app: &App) -> String {
    let a = auth();
    let r = app.request(
        "POST",
        "/chat",
        &[("authorization", a.as_str()), ("content-type", "application/json")],
        Some(br#"{"text": "How do tomatoes grow best in a cold summer?"}"#),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    r.body
}

fn job<'a>(s: &'a Value, name: &str) -> &'a Value {
    s["jobs"].as_array().unwrap().iter().find(|j| j["job"] == name).unwrap_or_else(|| panic!("no {name} in {s}"))
}

#[test]
fn status_reports_model_embeddings_stores_jobs_and_queues_on_both_backends() {
    for backend in BACKENDS {
        let b = BackendEnv::new(backend);
        let dir = tempfile::tempdir().unwrap();
        // No schedule runs by itself: every run and queue below is the test's.
        let manifest = without_crons(dir.path(), &TICK_JOBS);
        let app = App::start(&manifest, &test_env(&b, None));
        app.request("GET", "/status", &[], None).assert_error(401, "unauthorized");
        app.request("POST", "/status", &[("authorization", auth().as_str())], None)
            .assert_error(405, "method-not-allowed");

        let s = status(&app);
        assert_eq!(s["model"]["configured"], false, "{backend:?}: {s}");
        assert_eq!(s["model"]["reachable"], Value::Null);
        assert_eq!(s["model"]["error"]["code"], "model-unavailable");
        assert!(s["model"]["error"]["message"].as_str().unwrap().contains("llm_url"), "{s}");
        assert_eq!(s["embeddings"]["loaded"], true, "{backend:?}: {s}");
        assert_eq!(s["embeddings"]["model"], "all-minilm-l6-v2");
        assert_eq!(s["embeddings"]["dimension"], 384);
        let (sql, kv) = match backend {
            Backend::Embedded => ("sqlite", "key-value"),
            Backend::Hosted => ("postgres", "redis"),
        };
        assert_eq!((s["storage"]["sql"]["kind"].as_str(), s["storage"]["kv"]["kind"].as_str()), (Some(sql), Some(kv)));
        assert_eq!((s["storage"]["sql"]["ok"].as_bool(), s["storage"]["kv"]["ok"].as_bool()), (Some(true), Some(true)));
        assert_eq!(s["schema"]["version"], s["schema"]["latest"], "{s}");
        assert_eq!(s["schema"]["pending"], false);
        assert!(s["version"].as_str().is_some_and(|v| !v.is_empty()));
        let names: Vec<&str> = s["jobs"].as_array().unwrap().iter().map(|j| j["job"].as_str().unwrap()).collect();
        let mut sorted = names.clone();
        sorted.sort();
        let mut all = TICK_JOBS.to_vec();
        all.sort();
        assert_eq!(sorted, all, "every job is listed");
        assert_eq!(job(&s, "heartbeat")["outcome"], "never run", "{s}");
        assert_eq!(s["queues"], json!({"ingest": 0, "consolidation": 0, "tools": 0}), "{s}");

        // A run, then work that waits for the ticks that are not running.
        assert_eq!(tick(&app, "heartbeat").status, 200);
        let a = auth();
        let ingest = app.request(
            "POST",
            "/knowledge/ingest",
            &[("authorization", a.as_str()), ("content-type", "application/json")],
            Some(json!({"source_type": "meeting", "source_date": "2026-11-20", "text": "We decided to keep the ledger in Postgres because it gives us transactions."}).to_string().as_bytes()),
        );
        assert_eq!(ingest.status, 202, "{}", ingest.body);
        let chat = app.request(
            "POST",
            "/chat",
            &[("authorization", a.as_str()), ("content-type", "application/json")],
            Some(br#"{"text": "I planted tomatoes in the garden today"}"#),
        );
        assert_eq!(chat.status, 200);
        let s = status(&app);
        let hb = job(&s, "heartbeat");
        assert_eq!((hb["ok"].as_bool(), hb["last_run_ms"].is_u64()), (Some(true), true), "{backend:?}: {hb}");
        assert_eq!(hb["last_ok_ms"], hb["last_run_ms"]);
        assert!(hb["outcome"].as_str().unwrap().contains("beats"), "{hb}");
        assert_eq!(s["queues"]["ingest"], 1, "{backend:?}: {s}");
        assert!(s["queues"]["consolidation"].as_u64().unwrap() >= 1, "the exchange waits to be condensed: {s}");
        assert_eq!(s["model"]["last_reply_ms"], Value::Null, "no model has replied");

        // Draining both queues shows in the counts and in the runs.
        assert_eq!(tick(&app, "knowledge").status, 200);
        assert_eq!(tick(&app, "consolidate").status, 200);
        let s = status(&app);
        assert_eq!(s["queues"]["ingest"], 0, "{backend:?}: {s}");
        assert_eq!(job(&s, "knowledge")["ok"], true, "{s}");
        assert_eq!(job(&s, "consolidate")["ok"], true, "{s}");
    }
}

/// A job that fails says why, and keeps its last success.
#[test]
fn a_failing_job_shows_its_error_and_its_last_success() {
    for backend in BACKENDS {
        let b = BackendEnv::new(backend);
        let dir = tempfile::tempdir().unwrap();
        let manifest = without_crons(dir.path(), &TICK_JOBS);
        let app = App::start(&manifest, &test_env(&b, None));
        assert_eq!(tick(&app, "reminders").status, 200);
        let first = job(&status(&app), "reminders").clone();
        assert_eq!(first["ok"], true, "{first}");
        // The same stores, now with a time zone that names no zone.
        let mut env = test_env(&b, None);
        env.push(("SPIN_VARIABLE_TIME_ZONE".into(), "Europe/Atlantis".into()));
        let app = app.crash_and_restart(&manifest, &env);
        tick(&app, "reminders").assert_error(503, "misconfigured");
        let r = job(&status(&app), "reminders").clone();
        assert_eq!(r["ok"], false, "{backend:?}: {r}");
        assert!(r["outcome"].as_str().unwrap().starts_with("misconfigured: "), "{r}");
        assert!(r["outcome"].as_str().unwrap().contains("Europe/Atlantis"), "{r}");
        assert_eq!(r["last_ok_ms"], first["last_run_ms"], "the last success is kept: {r}");
    }
}

/// A configured model: whether it answers now, and when it last replied;
/// an endpoint that is down is named with its error.
#[test]
fn status_says_whether_the_model_answers() {
    for backend in BACKENDS {
        let b = BackendEnv::new(backend);
        let model = FakeModel::start(Script { reply: "Tomatoes like sun.".into(), ..Default::default() });
        let app = App::start("spin.toml", &test_env(&b, Some(&model)));
        let s = status(&app);
        let m = &s["model"];
        assert_eq!((m["configured"].as_bool(), m["reachable"].as_bool()), (Some(true), Some(true)), "{backend:?}: {s}");
        assert_eq!(m["endpoint"], model.addr.as_str());
        assert_eq!(m["primary"], "big-model");
        assert_eq!(m["error"], Value::Null);
        let chat = tomato_chat(&app);
        assert!(chat.contains("\"source\":\"model\""), "{chat}");
        assert!(status(&app)["model"]["last_reply_ms"].is_u64(), "the model's reply is seen");
        drop(app);

        // The same configuration with nothing listening at the endpoint.
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let mut env = test_env(&b, None);
        env.push(("SPIN_VARIABLE_LLM_URL".into(), format!("http://127.0.0.1:{port}/v1")));
        env.push(("SPIN_VARIABLE_LLM_HOST".into(), format!("127.0.0.1:{port}")));
        env.push(("SPIN_VARIABLE_LLM_MODEL".into(), "big-model".into()));
        let app = App::start("spin.toml", &env);
        let m = status(&app)["model"].clone();
        assert_eq!(
            (m["configured"].as_bool(), m["reachable"].as_bool()),
            (Some(true), Some(false)),
            "{backend:?}: {m}"
        );
        assert!(m["error"]["code"].as_str().unwrap().starts_with("model-"), "{m}");
        assert!(!m["error"]["message"].as_str().unwrap().is_empty());
    }
}

/// `llm_url` alone connects a model on this machine: the endpoint's first
/// listed model is used (D-C33); an endpoint that lists none is named as
/// such, and a clear question gets an honest labelled reply (D-C34).
#[test]
fn llm_url_alone_is_enough_the_endpoint_names_its_model() {
    for backend in BACKENDS {
        let b = BackendEnv::new(backend);
        let model = FakeModel::start(Script { reply: "Tomatoes like sun.".into(), ..Default::default() });
        // No llm_host: a server on this machine is allowed at any port,
        // under either name (D-C33).
        let only_url = |url: String| {
            let mut env = test_env(&b, None);
            env.push(("SPIN_VARIABLE_LLM_URL".into(), url));
            env
        };
        let port = model.addr.rsplit(':').next().unwrap().to_string();
        model.set_models(&["llama3.2:latest", "qwen2.5:7b"]);
        let app = App::start("spin.toml", &only_url(format!("http://localhost:{port}/v1")));
        let m = status(&app)["model"].clone();
        assert_eq!((m["configured"].as_bool(), m["reachable"].as_bool()), (Some(true), Some(true)), "{backend:?}: {m}");
        assert_eq!((m["primary"].as_str(), m["light"].as_str()), (Some("llama3.2:latest"), Some("llama3.2:latest")));
        assert_eq!(m["error"], Value::Null, "{m}");
        let body = tomato_chat(&app);
        assert!(body.contains("\"source\":\"model\""), "{backend:?}: {body}");
        let asked: Vec<String> = model.requests().into_iter().filter(|r| r.contains("\"messages\"")).collect();
        assert!(!asked.is_empty() && asked.iter().all(|r| r.contains("\"model\":\"llama3.2:latest\"")), "{asked:?}");
        drop(app);

        model.set_models(&[]);
        let app = App::start("spin.toml", &only_url(format!("http://127.0.0.1:{port}/v1")));
        let m = status(&app)["model"].clone();
        assert_eq!((m["configured"].as_bool(), m["reachable"].as_bool()), (Some(true), Some(true)), "{backend:?}: {m}");
        assert_eq!(m["primary"], "");
        assert_eq!(m["error"]["code"], "model-error");
        assert!(m["error"]["message"].as_str().unwrap().contains("lists no model"), "{m}");
        let before = model.requests().iter().filter(|r| r.contains("\"messages\"")).count();
        let body = tomato_chat(&app);
        assert!(
            body.contains("[rule-based reply: the model failed (model-error)] The language model did not answer"),
            "{backend:?}: {body}"
        );
        assert!(!body.contains("Could you say more"), "a clear question gets no question back: {body}");
        assert!(body.contains("event: done"), "{body}");
        let after = model.requests().iter().filter(|r| r.contains("\"messages\"")).count();
        assert_eq!(before, after, "no completion is sent without a model's name");
    }
}
