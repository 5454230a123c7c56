//! What `deploy/` relies on, end to end, on both storage backends.
//!
//! The scheduler Deployment keeps one replica, but a second one (or two
//! during a rollout) must be harmless: two `mneme cron --url` processes
//! against one app whose own schedule is off run each period's work once.
//! Both call every job every second; the task worker still runs one cycle
//! in its 30-minute period, the regulator one cycle in its day, and each
//! queued knowledge and consolidation job is claimed once, while the
//! heartbeat, which takes no lease, counts the calls of both.
//!
//! The migration Job's script (`deploy/spinkube/migrate.sh`) migrates
//! through the tick with the cron token, and fails on an app that is not
//! on PostgreSQL and Redis, or with a token the app refuses.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use mneme_e2e::{
    App, BACKENDS, Backend, BackendEnv, CRON_TOKEN, TEST_KEY, TICK_JOBS, edited_manifest, parse_sse, test_env,
    without_crons,
};
use serde_json::{Value, json};

const INGEST: &str = "deploy-ingest-token";

/// Jobs both schedulers call every second here.
const EVERY_SECOND: [&str; 5] = ["heartbeat", "tasks", "regulate", "knowledge", "consolidate"];

/// Calls of each job both schedulers must have made before the count.
const CALLS: usize = 5;

/// `mneme cron --url URL -f MANIFEST`, as the scheduler Deployment runs
/// it, with the cron token in its environment; killed on drop.
struct Scheduler {
    child: Child,
    log: PathBuf,
    _dir: tempfile::TempDir,
}

impl Scheduler {
    fn start(url: &str, manifest: &Path) -> Scheduler {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("cron.log");
        let child = Command::new(mneme_e2e::mneme_bin())
            .args(["cron", "--url", url, "-f"])
            .arg(manifest)
            .arg("--log-ticks")
            .current_dir(dir.path())
            .env("SPIN_VARIABLE_CRON_TOKEN", CRON_TOKEN)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .expect("spawning mneme cron");
        Scheduler { child, log, _dir: dir }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// How many calls of `/tick/{job}` the app answered with 200.
    fn answered(&self, job: &str) -> usize {
        self.log().matches(&format!("cron tick /tick/{job} 200")).count()
    }
}

impl Drop for Scheduler {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// spin.toml with the named jobs scheduled every second; every other
/// entry as shipped.
fn every_second(dir: &Path, jobs: &[&str]) -> PathBuf {
    edited_manifest(dir, "spin.toml", |mut m| {
        for job in jobs {
            let at =
                m.find(&format!("path = \"/tick/{job}\"")).unwrap_or_else(|| panic!("no cron entry for /tick/{job}"));
            let start = m[..at].rfind("[[application.tool.mneme.cron]]").expect("a cron table");
            let expr = start + m[start..at].find("cron_expression = ").expect("its cron_expression, before its path");
            let end = expr + m[expr..].find('\n').unwrap();
            m.replace_range(expr..end, "cron_expression = \"* * * * * *\"");
        }
        m
    })
}

/// A request as the principal, on the system clock (as the schedulers'
/// ticks are); its JSON body after checking its status.
fn call(app: &App, method: &str, path: &str, body: Option<Value>, status: u16) -> Value {
    let r = app.call_as(TEST_KEY, method, path, body.as_ref(), None);
    assert_eq!(r.status, status, "{method} {path}: {}", r.body);
    if r.body.starts_with('{') || r.body.starts_with('[') { r.json() } else { Value::Null }
}

fn task_events(app: &App) -> Vec<Value> {
    let a = format!("Bearer {TEST_KEY}");
    let r = app.request("GET", "/events?wait=0", &[("authorization", &a)], None);
    assert_eq!(r.status, 200, "{}", r.body);
    parse_sse(&r.body).into_iter().filter(|(n, _)| n == "task").map(|(_, v)| v["payload"].clone()).collect()
}

#[test]
fn two_schedulers_at_once_run_each_periods_work_once() {
    for backend in BACKENDS {
        let b = BackendEnv::new(backend);
        let dir = tempfile::tempdir().unwrap();
        // The app runs no schedule of its own, as under `spin up`.
        let served = without_crons(dir.path(), &TICK_JOBS);
        let mut env = test_env(&b, None);
        env.push(("SPIN_VARIABLE_INGEST_TOKEN".into(), INGEST.into()));
        let app = App::start(&served, &env);

        // The work the schedulers will find: two tasks (the worker runs
        // one cycle in a period), three transcripts, two exchanges.
        let tasks: Vec<String> = ["Find a quiet laptop for travel", "Plan the garden beds for spring planting"]
            .iter()
            .map(|goal| {
                let t = call(&app, "POST", "/tasks", Some(json!({"goal": goal})), 201);
                t["id"].as_str().unwrap().to_string()
            })
            .collect();
        let transcripts = [
            "Ana: We decided to keep the monolith because the team is small.",
            "Ben: We chose Postgres over MongoDB because our data is relational.",
            "Cleo: We will ship weekly, since smaller releases break less.",
        ];
        let knowledge_jobs: Vec<String> = transcripts
            .iter()
            .map(|text| {
                let body = json!({"source_type": "meeting", "source_date": "2026-11-20", "text": text}).to_string();
                let r = app.request("POST", "/knowledge/ingest", &[("x-ingest-token", INGEST)], Some(body.as_bytes()));
                assert_eq!(r.status, 202, "{}", r.body);
                r.json()["job_id"].as_str().unwrap().to_string()
            })
            .collect();
        for text in ["I decided to learn the cello this winter.", "My cello teacher is Ana Moreira."] {
            let r = app.call_as(TEST_KEY, "POST", "/chat", Some(&json!({"text": text, "thread_id": "t1"})), None);
            assert_eq!(r.status, 200, "{}", r.body);
        }

        // Two schedulers, as two replicas of the Deployment would be.
        let manifest = every_second(dir.path(), &EVERY_SECOND);
        let schedulers = [Scheduler::start(&app.url, &manifest), Scheduler::start(&app.url, &manifest)];
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            let called = schedulers.iter().all(|s| EVERY_SECOND.iter().all(|job| s.answered(job) >= CALLS));
            let chunked = call(&app, "GET", "/jobs?queue=memory-chunker-queue", None, 200);
            let chunked = chunked.as_array().unwrap().iter().all(|j| j["status"] == "done");
            let ingested = knowledge_jobs.iter().all(|id| {
                let j = call(&app, "GET", &format!("/knowledge/jobs/{id}"), None, 200);
                j["status"] == "done" || j["status"] == "failed"
            });
            if called && chunked && ingested {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "{backend:?}: the schedulers did not get through in 120 s\n--- first:\n{}\n--- second:\n{}\n--- app:\n{}",
                schedulers[0].log(),
                schedulers[1].log(),
                app.log()
            );
            std::thread::sleep(Duration::from_millis(250));
        }
        for (i, s) in schedulers.iter().enumerate() {
            assert!(
                s.log().contains("startup job /tick/migrate:"),
                "{backend:?}: scheduler {i} migrated:\n{}",
                s.log()
            );
        }

        // The heartbeat takes no lease: every call of both schedulers wrote
        // a beat, so both were calling all along.
        let logged: usize = schedulers.iter().map(|s| s.answered("heartbeat")).sum();
        let beats = app.tick("heartbeat", 0, 0)["beats"].as_u64().unwrap() as usize;
        assert!(beats > logged, "{backend:?}: {beats} beats for {logged} logged calls of two schedulers");
        for (i, s) in schedulers.iter().enumerate() {
            let calls: Vec<String> = EVERY_SECOND.iter().map(|job| format!("{job} {}", s.answered(job))).collect();
            eprintln!("{backend:?}: scheduler {i} was answered 200 for {}", calls.join(", "));
        }

        // The task worker: one cycle in its period, on the older task; the
        // other waits for the next period, untouched.
        let got: Vec<Value> = tasks.iter().map(|id| call(&app, "GET", &format!("/tasks/{id}"), None, 200)).collect();
        let cycles: Vec<u64> = got.iter().map(|t| t["cycles"].as_u64().unwrap()).collect();
        assert_eq!(cycles, [1, 0], "{backend:?}: one cycle in the worker's period: {got:?}");
        assert_eq!(got[1]["status"], "accepted", "{backend:?}: {}", got[1]);
        let events = task_events(&app);
        assert_eq!(events.len(), 1, "{backend:?}: one cycle, one task event: {events:?}");
        assert_eq!(events[0]["task_id"].as_str(), Some(tasks[0].as_str()), "{backend:?}: {events:?}");

        // The regulator: one cycle in its day.
        let export = call(&app, "GET", "/privacy/export", None, 200);
        let days = export["tables"]["routing_metrics"].as_array().unwrap();
        assert_eq!(days.len(), 1, "{backend:?}: one regulator cycle in its day: {days:?}");

        // Each queued job was claimed once: done on its first attempt.
        for id in &knowledge_jobs {
            let j = call(&app, "GET", &format!("/knowledge/jobs/{id}"), None, 200);
            assert_eq!((j["status"].as_str(), j["attempts"].as_u64()), (Some("done"), Some(1)), "{backend:?}: {j}");
        }
        let chunker = call(&app, "GET", "/jobs?queue=memory-chunker-queue", None, 200);
        let chunker = chunker.as_array().unwrap();
        assert_eq!(chunker.len(), 2, "{backend:?}: one chunker job per exchange: {chunker:?}");
        for j in chunker {
            assert_eq!((j["status"].as_str(), j["attempts"].as_u64()), (Some("done"), Some(1)), "{backend:?}: {j}");
        }

        // The schema: each migration applied once, though both schedulers
        // asked for it at startup.
        let latest = app.get("/health").json()["migrations"]["latest"].as_u64().unwrap();
        let log = app.log();
        for version in 1..=latest {
            let n = log.matches(&format!("schema: applied migration {version} (")).count();
            assert_eq!(n, 1, "{backend:?}: migration {version} applied {n} times:\n{log}");
        }
    }
}

/// Runs `deploy/spinkube/migrate.sh` against `url` with `token`; its exit
/// code and what it wrote.
fn migrate_script(url: &str, token: &str) -> (Option<i32>, String) {
    let out = Command::new("sh")
        .arg(mneme_e2e::repo_root().join("deploy/spinkube/migrate.sh"))
        .env("MNEME_URL", url)
        .env("SPIN_VARIABLE_CRON_TOKEN", token)
        .env("MNEME_MIGRATE_TRIES", "3")
        .env("MNEME_MIGRATE_WAIT", "1")
        .output()
        .expect("sh runs");
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    (out.status.code(), text)
}

#[test]
fn the_migration_jobs_script_migrates_and_refuses_embedded_stores() {
    for backend in BACKENDS {
        let b = BackendEnv::new(backend);
        let dir = tempfile::tempdir().unwrap();
        let app = App::start(&without_crons(dir.path(), &TICK_JOBS), &test_env(&b, None));
        let (code, out) = migrate_script(&app.url, CRON_TOKEN);
        assert!(out.contains("mneme-migrate: migrated: {\"job\":\"migrate\""), "{backend:?}: {out}");
        match backend {
            Backend::Hosted => {
                assert_eq!(code, Some(0), "{out}");
                assert!(out.contains("the schema is current, on PostgreSQL and Redis"), "{out}");
            }
            Backend::Embedded => {
                assert_eq!(code, Some(1), "{out}");
                assert!(out.contains("the app is not on PostgreSQL: set pg_url"), "{out}");
            }
        }
        // A token the app refuses ends the Job at once; none at all, before
        // it calls.
        let (code, out) = migrate_script(&app.url, "not-the-token");
        assert_eq!(code, Some(1), "{out}");
        assert!(out.contains("refused the cron token (401)") && !out.contains("try 1 of"), "{out}");
        let (code, out) = migrate_script(&app.url, "");
        assert_eq!(code, Some(2), "{out}");
        assert!(out.contains("SPIN_VARIABLE_CRON_TOKEN is empty"), "{out}");
    }
    // An app that is not up yet is retried, then given up on.
    let (code, out) = migrate_script("http://127.0.0.1:1", CRON_TOKEN);
    assert_eq!(code, Some(1), "{out}");
    assert!(out.contains("try 2 of 3") && out.contains("failed 3 times"), "{out}");
}
