//! The real-model tier (#49 item 1): every model-using path end to end
//! against a real small model, the one `./scripts/up.sh --local-model`
//! runs (Qwen2.5-Coder-1.5B-Instruct on the CPU), started by `mneme up
//! --mneme-local-model` as a user starts it (under another runner, by the
//! test itself, with the variables that flag sets), on both storage
//! backends.
//!
//! A real model's words cannot be asserted, so these tests assert what a
//! principal relies on whatever the model writes: each path called the
//! model, and every call ended in an answer that was used or in a fallback
//! with its reason on `/status` (never silently dropped); the JSON that came
//! back under its schema was read; what the reply claims was done was done;
//! and each path's outcome exists (the reminder, the entries, the plan, the
//! rec, the gists, the thought). Where a path falls back, the test says
//! which and why in its output, which the tier's figures in BENCHMARKS
//! count.
//!
//! The tests take turns (the model answers one request at a time on two
//! cores) and need the model installed: `scripts/test.sh` does it
//! (`scripts/install-model.sh qwen2.5-1.5b`).

use std::sync::Mutex;
use std::time::Duration;

use mneme_e2e::evals::{self, chat};
use mneme_e2e::json_server::JsonServer;
use mneme_e2e::{App, BACKENDS, Backend, BackendEnv, TEST_KEY, TICK_JOBS, test_env, without_crons};
use serde_json::{Value, json};

/// One test at a time: the model serves one request at a time, and two
/// tests' calls queued behind each other would meet deadlines that are no
/// fault of the app's.
static TURN: Mutex<()> = Mutex::new(());

/// The model every test runs on.
const MODEL: &str = "qwen2.5-1.5b";

fn model_file() -> std::path::PathBuf {
    let dir = std::env::var_os("MNEME_LLM_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| std::path::PathBuf::from(std::env::var("HOME").expect("HOME")).join(".cache/mneme/llm"));
    let file = dir.join(format!("{MODEL}.gguf"));
    assert!(
        file.is_file() && mneme_e2e::repo_root().join("local-model/node_modules/node-llama-cpp").is_dir(),
        "the real-model tier needs {} and its runtime: run scripts/install-model.sh {MODEL} (scripts/test.sh does)",
        file.display()
    );
    file
}

/// The app and, under another runner (`MNEME_E2E_RUNNER`), the local model
/// server the test started for it; the server stops when this is dropped.
struct Tier {
    app: App,
    _server: Option<LocalServer>,
}

impl std::ops::Deref for Tier {
    type Target = App;
    fn deref(&self) -> &App {
        &self.app
    }
}

/// `local-model/server.mjs` on the model, started by the test where the
/// runner has no `--mneme-local-model` of its own (Spin): what that flag
/// does, done by hand, as the README tells a user of plain Spin to ("A model
/// on this machine").
struct LocalServer {
    child: std::process::Child,
    url: String,
}

impl LocalServer {
    fn start(script: &std::path::Path) -> LocalServer {
        use std::io::BufRead;
        let mut child = std::process::Command::new(std::env::var_os("MNEME_NODE").unwrap_or_else(|| "node".into()))
            .arg(script)
            .arg("--model")
            .arg(model_file())
            .args(["--listen", "127.0.0.1:0", "--name", MODEL, "--threads", "2"])
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::inherit())
            .spawn()
            .expect("starting the local model server (node)");
        let stdout = child.stdout.take().expect("piped stdout");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stdout).lines().map_while(Result::ok) {
                // `local-model: serving NAME at URL (…)`
                if let Some(url) = line.split(" at ").nth(1).and_then(|r| r.split_whitespace().next())
                    && line.starts_with("local-model: serving ")
                {
                    let _ = tx.send(url.to_string());
                }
            }
        });
        let url = rx.recv_timeout(Duration::from_secs(180)).expect("the local model server did not serve in 180 s");
        LocalServer { child, url }
    }
}

impl Drop for LocalServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The app with no schedule of its own (the test ticks), on `b`, with the
/// local model started beside it: by `mneme up --mneme-local-model`, or by
/// the test under another runner.
fn start(b: &BackendEnv, dir: &std::path::Path, extra: &[(&str, &str)]) -> Tier {
    model_file();
    let mut env = test_env(b, None);
    // The manifest is a copy in `dir`, so the server script is named.
    let script = mneme_e2e::repo_root().join("local-model/server.mjs");
    env.push(("MNEME_LOCAL_MODEL_SERVER".into(), script.display().to_string()));
    for (k, v) in extra {
        env.push((format!("SPIN_VARIABLE_{}", k.to_ascii_uppercase()), v.to_string()));
    }
    let manifest = without_crons(dir, &TICK_JOBS.iter().copied().filter(|j| *j != "migrate").collect::<Vec<_>>());
    if mneme_e2e::foreign_runner().is_none() {
        let app = App::start_with(&manifest, &env, &["--mneme-local-model", MODEL])
            .unwrap_or_else(|log| panic!("the runner did not start with the local model:\n{log}"));
        return Tier { app, _server: None };
    }
    // The variables `--mneme-local-model` sets (D-L1), unless the test set them.
    let server = LocalServer::start(&script);
    for (k, v) in [("LLM_URL", server.url.as_str()), ("LLM_MODEL", MODEL), ("LLM_LIGHT_TIMEOUT_MS", "6000")] {
        let k = format!("SPIN_VARIABLE_{k}");
        if !env.iter().any(|(name, _)| *name == k) {
            env.push((k, v.to_string()));
        }
    }
    let app = App::start_with(&manifest, &env, &[])
        .unwrap_or_else(|log| panic!("the runner did not start beside the local model:\n{log}"));
    Tier { app, _server: Some(server) }
}

fn status(app: &App) -> Value {
    let r = app.call_as(TEST_KEY, "GET", "/status", None, None);
    assert_eq!(r.status, 200, "{}", r.body);
    r.json()
}

/// `/status`'s ledger row of `path`, asserting the model was called on it
/// and that every call ended in a used answer or a recorded fallback.
fn path_was_served(app: &App, path: &str) -> Value {
    let s = status(app);
    let row = s["model"]["usage"]["paths"][path].clone();
    let n = |k: &str| row[k].as_u64().unwrap_or(0);
    assert!(n("calls") >= 1, "no model call on `{path}`: {}", s["model"]["usage"]);
    assert!(
        n("answered") + n("fallbacks") + n("retries") >= n("calls"),
        "a call on `{path}` ended in neither an answer nor a recorded fallback: {row}"
    );
    if n("fallbacks") > 0 {
        let why: Vec<&Value> =
            s["model"]["usage"]["fallbacks"].as_array().unwrap().iter().filter(|f| f["path"] == path).collect();
        assert!(!why.is_empty(), "a fallback on `{path}` without its reason: {}", s["model"]["usage"]);
        for f in &why {
            assert!(!f["reason"].as_str().unwrap_or_default().is_empty(), "{f}");
        }
        eprintln!("`{path}` fell back: {why:?}");
    }
    row
}

fn now_ms() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as u64
}

fn export(app: &App) -> Value {
    let r = app.call_as(TEST_KEY, "GET", "/privacy/export", None, None);
    assert_eq!(r.status, 200, "{}", r.body);
    r.json()
}

/// Triage (by the model, on a statement the rules leave to it), the reply
/// streamed token by token, and a plain question answered right.
#[test]
fn triage_and_a_streamed_reply_from_the_model() {
    let _turn = TURN.lock().unwrap_or_else(|e| e.into_inner());
    for backend in BACKENDS {
        let b = BackendEnv::new(backend);
        let dir = tempfile::tempdir().unwrap();
        let app = start(&b, dir.path(), &[]);
        let c = chat(&app, "What is the capital of Portugal?", "t-capital");
        assert_eq!((c.source.as_str(), c.mode.as_str()), ("model", "RESPOND"), "{backend:?}: {c:?}");
        assert!(evals::matches("lisbon|lisboa", &c.text), "{backend:?}: {}", c.text);
        assert!(c.events.iter().filter(|(n, _)| n == "token").count() >= 3, "streamed in pieces: {c:?}");
        assert!(c.first_token_ms.is_some() && c.calls >= 1 && c.prompt_tokens > 0, "{c:?}");
        // A statement the rules leave to the model's triage.
        let c = chat(&app, "I have been thinking about learning Portuguese before the move.", "t-statement");
        assert!(!c.text.trim().is_empty(), "{c:?}");
        path_was_served(&app, "triage");
        let reply = path_was_served(&app, "reply");
        assert!(reply["answered"].as_u64().unwrap() >= 1, "{reply}");
        // The same question again reuses the prompt's stable prefix.
        let again = chat(&app, "What is the capital of Spain?", "t-capital-2");
        assert!(again.cached_tokens > 0, "{backend:?}: no prompt token came from the cache: {again:?}");
    }
}

/// ACT with its skills: a reminder read off the message exists, at the
/// time the principal asked for, whatever the model planned; a deed no
/// skill can do is never claimed as done.
#[test]
fn act_sets_the_reminder_it_says_and_claims_no_deed_it_cannot_do() {
    let _turn = TURN.lock().unwrap_or_else(|e| e.into_inner());
    for backend in BACKENDS {
        let b = BackendEnv::new(backend);
        let dir = tempfile::tempdir().unwrap();
        let app = start(&b, dir.path(), &[]);
        let c = chat(&app, "Remind me tomorrow at 9 to call the dentist", "t-remind");
        let items = export(&app)["tables"]["scheduled_items"].as_array().cloned().unwrap_or_default();
        assert!(
            items.iter().any(|i| i["message"].as_str().is_some_and(|m| m.contains("dentist"))),
            "{backend:?}: no reminder: {items:?}; reply: {}",
            c.text
        );
        let claims = mneme_conversation::honesty::claims(&c.text);
        assert!(claims.iter().all(|(k, _)| *k == mneme_conversation::honesty::Claim::Reminder), "{c:?}");
        // No skill books a table. The model may answer that it cannot, or
        // offer or create something it can (a reminder, a background
        // task); what the reply claims must then exist in the export.
        let c = chat(&app, "Can you book me a table at Noma for Friday?", "t-book");
        let after = export(&app);
        let rows = |table: &str| after["tables"][table].as_array().cloned().unwrap_or_default();
        for (claim, sentence) in mneme_conversation::honesty::claims(&c.text) {
            use mneme_conversation::honesty::Claim;
            let backed = match claim {
                Claim::Reminder => rows("scheduled_items").len() > items.len(),
                Claim::Task => rows("persistent_tasks").iter().any(|t| t.to_string().to_lowercase().contains("noma")),
                Claim::List | Claim::Focus | Claim::External => false,
            };
            assert!(backed, "{backend:?}: {claim:?} claimed with no record: {sentence:?} in {}", c.text);
        }
    }
}

/// Knowledge: a meeting's transcript extracted by the model under its
/// schema (or by the rules with the reason in the job), validated and
/// kept; a restatement judged against it by the stance model.
#[test]
fn a_transcript_becomes_entries_and_a_restatement_is_judged() {
    let _turn = TURN.lock().unwrap_or_else(|e| e.into_inner());
    let transcript = evals::load("extraction").into_iter().find(|x| x["id"] == "x01").unwrap();
    for backend in BACKENDS {
        let b = BackendEnv::new(backend);
        let dir = tempfile::tempdir().unwrap();
        let app = start(&b, dir.path(), &[]);
        let ingest = |text: &str, date: &str| {
            let body = json!({"source_type": "meeting", "source_date": date, "text": text,
                              "principal": transcript["principal"]});
            let r = app.call_as(TEST_KEY, "POST", "/knowledge/ingest", Some(&body), None);
            assert_eq!(r.status, 202, "{}", r.body);
            let job = knowledge_job(&app, r.json()["job_id"].as_str().unwrap());
            assert_eq!(job["status"], "done", "{backend:?}: {job}");
            job
        };
        let text = transcript["text"].as_str().unwrap();
        let job = ingest(text, "2026-10-14");
        let entries = app.call_as(TEST_KEY, "GET", "/knowledge/entries", None, None).json();
        let list = entries["entries"].as_array().cloned().unwrap_or_default();
        // Every candidate became an entry, a merge or history, or was
        // dropped with its reason: none is lost without a word. (Which
        // candidates a small model writes, and whether they pass the
        // validators, is what the tier's figures count, not an assertion.)
        let outcomes = job["outcomes"].as_array().cloned().unwrap_or_default();
        assert!(!outcomes.is_empty(), "{backend:?}: the meeting gave no candidate at all: {job}");
        for o in &outcomes {
            let said = match o["outcome"].as_str() {
                Some("dropped") => o["reason"].as_str().is_some_and(|r| !r.is_empty()),
                Some("merged") => o["into"].is_string(),
                Some(_) => o["entry_id"].is_string(),
                None => false,
            };
            assert!(said, "{backend:?}: a candidate's outcome without its entry or reason: {o}");
        }
        if list.is_empty() {
            eprintln!("{backend:?}: every candidate of the meeting was dropped: {}", job["outcomes"]);
        }
        assert_eq!(job["source"]["principal"], transcript["principal"], "{job}");
        if job["extractor"] == "rules" || job["extractor_note"].is_string() {
            eprintln!("{backend:?}: extraction by the rules: {}", job["extractor_note"]);
        }
        eprintln!("{backend:?}: the meeting gave {}", Value::Array(list.clone()));
        path_was_served(&app, "knowledge-extract");
        // A standard stated in one short meeting and restated in a later
        // one: the restatement's candidate has the first as a neighbour,
        // whose stance is judged. (Short texts holding one position each,
        // so that what is asserted is the stance path, not which of a
        // meeting's positions a small model happens to pick.)
        ingest(
            "Ana: Every bug fix ships with a test that reproduces the bug, because otherwise the same bug \
             comes back in three months.\nCarla: Works for me.",
            "2026-10-21",
        );
        let again = ingest(
            "Ana: Let me say it again: every bug fix ships with a test that reproduces the bug, because \
             otherwise it comes back.\nBruno: Understood.",
            "2026-11-14",
        );
        eprintln!("{backend:?}: the restatement: {again}");
        eprintln!("{backend:?}: entries now {}", app.call_as(TEST_KEY, "GET", "/knowledge/entries", None, None).body);
        let judged = again["outcomes"].as_array().into_iter().flatten().any(|o| o["stance_by"].is_string());
        assert!(judged, "{backend:?}: no candidate of the restatement was judged against the first: {again}");
        path_was_served(&app, "knowledge-stance");
    }
}

/// A job's report, draining the knowledge queue until it ends.
fn knowledge_job(app: &App, id: &str) -> Value {
    let deadline = std::time::Instant::now() + Duration::from_secs(600);
    loop {
        let r = app.request("POST", "/tick/knowledge", &[("authorization", mneme_e2e::CRON_AUTH)], None);
        assert_eq!(r.status, 200, "{}", r.body);
        let j = app.call_as(TEST_KEY, "GET", &format!("/knowledge/jobs/{id}"), None, None).json();
        if j["status"] == "done" || j["status"] == "failed" {
            return j;
        }
        assert!(std::time::Instant::now() < deadline, "job {id} did not finish: {j}");
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// A persistent task's plan by the model (or, rejected by the design's
/// gates, the reason on the ledger), and one worker cycle.
#[test]
fn a_goal_is_planned_and_worked_on() {
    let _turn = TURN.lock().unwrap_or_else(|e| e.into_inner());
    for backend in BACKENDS {
        let b = BackendEnv::new(backend);
        let dir = tempfile::tempdir().unwrap();
        let app = start(&b, dir.path(), &[]);
        let body = json!({"goal": "Find a quiet, light laptop for travel under 1500 euros"});
        let r = app.call_as(TEST_KEY, "POST", "/tasks", Some(&body), None);
        assert_eq!(r.status, 201, "{}", r.body);
        let task = r.json();
        // A plan by its author, or none (the task runs flat, 002 §7) with
        // the gate that rejected it said on the task and on the ledger.
        if task["plan"].is_null() {
            let why = task["plan_note"].as_str().unwrap_or_default();
            assert!(!why.is_empty(), "{backend:?}: no plan and no reason: {task}");
            eprintln!("{backend:?}: no plan: {why}");
        } else {
            assert!(!task["plan_source"].as_str().unwrap_or_default().is_empty(), "{task}");
        }
        path_was_served(&app, "task-plan");
        // A cycle starts iterations for 90 s and lets the last run its 30.
        let cycle = app.tick_within("tasks", now_ms() + 1_000, 1, Duration::from_secs(180));
        assert_eq!(cycle["due"], true, "{cycle}");
        path_was_served(&app, "task-act");
    }
}

/// A door's recommendation: the model composes under the draft's schema
/// and the content rules, or the labelled template writes it with why.
#[test]
fn a_door_run_composes_its_narrative_or_says_why_not() {
    let _turn = TURN.lock().unwrap_or_else(|e| e.into_inner());
    let scenario = evals::load("rx").into_iter().find(|x| x["door"] == "fitness").unwrap();
    for backend in BACKENDS {
        let b = BackendEnv::new(backend);
        let dir = tempfile::tempdir().unwrap();
        let app = start(&b, dir.path(), &[]);
        let now = now_ms();
        let obs: Vec<Value> = scenario["observations"]
            .as_array()
            .unwrap()
            .iter()
            .map(|o| {
                let mut body = o["body"].clone();
                body["at"] = json!(now - (o["days_ago"].as_f64().unwrap() * 86_400_000.0) as u64);
                body
            })
            .collect();
        let r = app.call_as(TEST_KEY, "POST", "/rx/fitness/observations", Some(&json!({"observations": obs})), None);
        assert!(r.status < 300, "{}", r.body);
        let r = app.call_as(TEST_KEY, "POST", "/rx/fitness", None, None);
        assert_eq!(r.status, 201, "{backend:?}: {}", r.body);
        let v = r.json();
        let outcome = v["trace"][8]["outcome"].as_str().unwrap_or_default().to_string();
        assert!(
            outcome.starts_with("drafted by") || outcome.starts_with("template"),
            "{backend:?}: step 7 says neither: {}",
            v["trace"]
        );
        if outcome.starts_with("template") {
            eprintln!("{backend:?}: the template composed: {outcome}");
        }
        path_was_served(&app, "rx-compose");
    }
}

/// Consolidation's chunker on an exchange, by the light model under its
/// schema, or by the rules with the reason in the job's source.
#[test]
fn an_exchange_is_consolidated_into_gists_and_facts() {
    let _turn = TURN.lock().unwrap_or_else(|e| e.into_inner());
    for backend in BACKENDS {
        let b = BackendEnv::new(backend);
        let dir = tempfile::tempdir().unwrap();
        let app = start(&b, dir.path(), &[]);
        chat(&app, "Hi, I'm Ana. I live in Lisbon and I work as a nurse on night shifts.", "t-ana");
        let r = app.tick("consolidate", now_ms(), 0);
        let jobs = r["jobs"].as_array().cloned().unwrap_or_default();
        assert!(jobs.iter().any(|j| j["status"] == "done"), "{backend:?}: {r}");
        path_was_served(&app, "consolidate-chunk");
        let memory = &export(&app)["memory"];
        assert!(memory["gists"].is_object() || memory["facts"].is_object(), "{backend:?}: nothing kept: {memory}");
    }
}

/// Path B: a tool's answer checked by the critic (the light model) and the
/// reply written over it by the model.
#[test]
fn a_tool_answer_is_criticised_and_replied_over() {
    let _turn = TURN.lock().unwrap_or_else(|e| e.into_inner());
    for backend in BACKENDS {
        let b = BackendEnv::new(backend);
        let server = JsonServer::start();
        server.set("POST", "/weather", 200, &json!({"result": "Lisbon: 18 C and sunny, light wind from the north."}));
        let dir = tempfile::tempdir().unwrap();
        let app = start(&b, dir.path(), &[("tool_host", server.addr.as_str())]);
        let tool = json!({"description": "Current weather for a city", "url": server.url("/weather")});
        let r = app.call_as(TEST_KEY, "PUT", "/tools/weather", Some(&tool), None);
        assert!(r.status < 300, "{}", r.body);
        let c = chat(&app, "What's the weather in Lisbon right now?", "t-weather");
        // The worker answers on the stream or on /events; tick it until the job is done.
        let mut done = false;
        for _ in 0..60 {
            let r = app.request("POST", "/tick/tools", &[("authorization", mneme_e2e::CRON_AUTH)], None);
            let jobs = r.json()["result"]["jobs"].as_array().cloned().unwrap_or_default();
            if jobs.iter().any(|j| j["status"] == "done") {
                done = true;
                break;
            }
            if jobs.is_empty() && !c.text.is_empty() {
                break;
            }
            std::thread::sleep(Duration::from_millis(500));
        }
        let s = status(&app);
        let usage = &s["model"]["usage"]["paths"];
        if usage["tool-reply"].is_object() || done {
            path_was_served(&app, "tool-reply");
        } else {
            // Triage sent the message to Path C instead: say so, the tier counts it.
            eprintln!("{backend:?}: the weather question did not go to the tool: {c:?}");
        }
        if usage["act-critic"].is_object() {
            path_was_served(&app, "act-critic");
        }
    }
}

/// Every JSON Schema the app sends (D-L2) compiles into the local
/// runtime's grammar, so the local model is constrained on every path.
#[test]
fn every_schema_the_app_sends_constrains_the_local_model() {
    model_file();
    let parse = |s: String| serde_json::from_str::<Value>(&s).unwrap();
    let schemas = json!({
        "triage": parse(mneme_conversation::triage::schema()),
        "tiebreak": parse(mneme_conversation::router::tiebreak_schema()),
        "act-plan": parse(mneme_conversation::act::schema()),
        "act-critic": parse(mneme_conversation::tools::critic_schema()),
        "knowledge-extract": parse(mneme_knowledge::extract::schema()),
        "knowledge-stance": parse(mneme_knowledge::governor::stance_schema()),
        "consolidate-chunk": parse(mneme_background::consolidate::chunk_schema()),
        "consolidate-episode": parse(mneme_background::consolidate::episode_schema()),
        "consolidate-semantic": parse(mneme_background::consolidate::semantic_schema()),
        "drift-thought": parse(mneme_background::drift::schema()),
        "task-plan": parse(mneme_background::tasks::plan_schema()),
        "task-act": parse(mneme_background::tasks::act_schema()),
        "reflection": parse(mneme_background::regulator::reflection_schema()),
        "rx-compose": parse(mneme_rx::artifact::schema()),
    });
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("schemas.json");
    std::fs::write(&file, schemas.to_string()).unwrap();
    let out = std::process::Command::new("node")
        .arg(mneme_e2e::repo_root().join("local-model/check-schemas.mjs"))
        .arg(&file)
        .output()
        .expect("node runs");
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{said}{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(said.lines().filter(|l| l.starts_with("ok ")).count(), 14, "{said}");
}

/// Whether the tests ran on both backends (they do: the loop above each).
#[test]
fn the_tier_covers_both_backends() {
    assert_eq!(BACKENDS, [Backend::Embedded, Backend::Hosted]);
}
