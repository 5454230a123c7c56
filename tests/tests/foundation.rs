//! The Foundation through the runner over HTTP, on both storage backends:
//! `GET /health`, migrations, the heartbeat job, the cron trigger, the
//! tick endpoint's authentication, and stores that are down.

use std::time::{Duration, Instant};

use mneme_e2e::{App, BACKENDS, Backend, BackendEnv, edited_manifest};

const TOKEN: &str = "test-cron-token";

fn env(b: &BackendEnv) -> Vec<(String, String)> {
    let mut v = b.vars.clone();
    v.push(("SPIN_VARIABLE_CRON_TOKEN".into(), TOKEN.into()));
    v
}

fn tick(app: &App, job: &str) -> mneme_e2e::Resp {
    app.request("POST", &format!("/tick/{job}"), &[("authorization", &format!("Bearer {TOKEN}"))], None)
}

#[test]
fn health_reports_store_kinds_and_migration_level_on_both_backends() {
    for backend in BACKENDS {
        let b = BackendEnv::new(backend);
        let app = App::start("spin.toml", &env(&b));
        let r = app.get("/health");
        assert_eq!(r.status, 200, "{backend:?}: {}", r.body);
        let v = r.json();
        let (sql, kv) = match backend {
            Backend::Embedded => ("sqlite", "key-value"),
            Backend::Hosted => ("postgres", "redis"),
        };
        assert_eq!(v["store"]["sql"], sql, "{backend:?}");
        assert_eq!(v["store"]["kv"], kv, "{backend:?}");
        assert_eq!(v["status"], "ok", "startup migration must leave nothing pending: {v}");
        assert_eq!(v["migrations"]["level"], v["migrations"]["latest"]);
        assert!(v["migrations"]["level"].as_u64().unwrap() >= 1);
        let deps = &v["dependencies"];
        assert_eq!((deps["sql"]["kind"].as_str(), deps["kv"]["kind"].as_str()), (Some(sql), Some(kv)), "{v}");
        for d in ["sql", "kv"] {
            assert_eq!(deps[d]["ok"], true, "{backend:?} {d}: {v}");
            assert!(deps[d]["failure"].is_null() && deps[d]["ms"].as_f64().is_some(), "{v}");
        }
        assert_eq!(deps["model"], serde_json::json!({"configured": false}), "no model in this run: {v}");
    }
}

#[test]
fn a_fresh_database_is_migrated_by_its_first_requests_with_no_startup_job() {
    // As under plain `spin up`: no startup job, no cron token. Eight first
    // requests at once, on an empty store: each finds the schema, and each
    // migration is applied once.
    let dir = tempfile::tempdir().unwrap();
    let manifest = edited_manifest(dir.path(), "spin.toml", |m| m.replace("at_startup = true", "at_startup = false"));
    for backend in BACKENDS {
        let b = BackendEnv::new(backend);
        let mut vars = b.vars.clone();
        vars.push(("SPIN_VARIABLE_API_KEY".into(), "k".into()));
        let app = App::start(manifest.to_str().unwrap(), &vars);
        let statuses: Vec<u16> = std::thread::scope(|s| {
            let calls: Vec<_> = (0..8)
                .map(|i| {
                    let app = &app;
                    s.spawn(move || {
                        let path = if i % 2 == 0 { "/knowledge/entries" } else { "/tasks" };
                        app.request("GET", path, &[("authorization", "Bearer k")], None).status
                    })
                })
                .collect();
            calls.into_iter().map(|c| c.join().unwrap()).collect()
        });
        assert!(statuses.iter().all(|&s| s == 200), "{backend:?}: {statuses:?}\n{}", app.log());
        let v = app.get("/health").json();
        assert_eq!(v["status"], "ok", "{backend:?}: {v}");
        let latest = v["migrations"]["latest"].as_u64().unwrap();
        assert_eq!(v["migrations"]["level"].as_u64(), Some(latest));
        let log = app.log();
        for version in 1..=latest {
            let n = log.matches(&format!("schema: applied migration {version} (")).count();
            assert_eq!(n, 1, "{backend:?}: migration {version} applied {n} times:\n{log}");
        }
    }
}

#[test]
fn migrations_apply_once_at_startup_and_then_never_again() {
    mneme_e2e::runner_only!("its startup job");
    for backend in BACKENDS {
        let b = BackendEnv::new(backend);
        let app = App::start("spin.toml", &env(&b));
        assert!(
            app.log().contains("startup job /tick/migrate"),
            "{backend:?}: startup migration did not run:\n{}",
            app.log()
        );
        let again = tick(&app, "migrate");
        assert_eq!(again.status, 200, "{}", again.body);
        assert_eq!(
            again.json()["result"]["applied"],
            serde_json::json!([]),
            "{backend:?}: re-running applied something"
        );
        if let Some(pg) = &b.pg {
            let rows = pg.client().query("SELECT version FROM schema_migrations", &[]).unwrap();
            assert_eq!(rows.len() as u64, app.get("/health").json()["migrations"]["latest"].as_u64().unwrap());
        }
    }
}

#[test]
fn concurrent_migrators_apply_each_migration_exactly_once() {
    let b = BackendEnv::new(Backend::Hosted);
    let pg = b.pg.as_ref().unwrap();
    // Two runners start against the same fresh database at the same time.
    let e = env(&b);
    let (a, c) = std::thread::scope(|s| {
        let h1 = s.spawn(|| App::start("spin.toml", &e));
        let h2 = s.spawn(|| App::start("spin.toml", &e));
        (h1.join().unwrap(), h2.join().unwrap())
    });
    let rows = pg.client().query("SELECT version, COUNT(*) FROM schema_migrations GROUP BY version", &[]).unwrap();
    for r in &rows {
        assert_eq!(r.get::<_, i64>(1), 1, "migration {} recorded twice", r.get::<_, i64>(0));
    }
    assert_eq!(a.get("/health").json()["status"], "ok");
    assert_eq!(c.get("/health").json()["status"], "ok");
}

#[test]
fn heartbeat_job_counts_each_tick_on_both_backends() {
    for backend in BACKENDS {
        let b = BackendEnv::new(backend);
        let app = App::start("spin.toml", &env(&b));
        for expected in 1..=3 {
            let r = tick(&app, "heartbeat");
            assert_eq!(r.status, 200, "{backend:?}: {}", r.body);
            assert_eq!(r.json()["result"]["beats"], expected, "{backend:?}");
        }
        if backend == Backend::Hosted {
            let last = mneme_e2e::redis_cmd(&["GET", &format!("{}:heartbeat:last", b.namespace)]);
            assert!(last.starts_with('$'), "the heartbeat did not reach Redis: {last}");
        }
    }
}

#[test]
fn cron_trigger_runs_the_heartbeat_on_schedule() {
    let dir = tempfile::tempdir().unwrap();
    let manifest = edited_manifest(dir.path(), "spin.toml", |m| {
        m.replace("cron_expression = \"0 * * * * *\"", "cron_expression = \"* * * * * *\"")
    });
    let b = BackendEnv::new(Backend::Embedded);
    let mut env = env(&b);
    env.push(("MNEME_LOG_TICKS".into(), "1".into()));
    let app = App::start(manifest.to_str().unwrap(), &env);
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline && app.log().matches("cron tick /tick/heartbeat 200").count() < 2 {
        std::thread::sleep(Duration::from_millis(200));
    }
    let fired = app.log().matches("cron tick /tick/heartbeat 200").count();
    assert!(fired >= 2, "the every-second heartbeat fired {fired} times in 10 s:\n{}", app.log());
    let beats = tick(&app, "heartbeat").json()["result"]["beats"].as_u64().unwrap();
    assert!(beats > fired as u64, "scheduled ticks must write heartbeat rows ({beats} rows after {fired} ticks)");
}

#[test]
fn tick_endpoint_requires_the_cron_token() {
    let b = BackendEnv::new(Backend::Embedded);
    let app = App::start("spin.toml", &env(&b));
    app.request("POST", "/tick/heartbeat", &[], None).assert_error(401, "unauthorized");
    app.request("POST", "/tick/heartbeat", &[("authorization", "Bearer wrong")], None)
        .assert_error(401, "unauthorized");
    app.request("GET", "/tick/heartbeat", &[("authorization", &format!("Bearer {TOKEN}"))], None)
        .assert_error(405, "method-not-allowed");
    tick(&app, "nonsense").assert_error(404, "not-found");
}

/// `mneme cron` against `url` with `manifest`'s schedules and `token`;
/// killed on drop.
struct Cron(std::process::Child, tempfile::TempDir);

impl Cron {
    /// `mneme cron --log-ticks`: a line per run, which these tests count.
    fn start(url: &str, manifest: &std::path::Path, token: &str) -> Cron {
        Self::start_with(url, manifest, token, &["--log-ticks"], &[])
    }

    fn start_with(url: &str, manifest: &std::path::Path, token: &str, args: &[&str], env: &[(&str, &str)]) -> Cron {
        let dir = tempfile::tempdir().unwrap();
        let child = std::process::Command::new(mneme_e2e::mneme_bin())
            .args(["cron", "--url", url, "-f"])
            .arg(manifest)
            .args(args)
            .envs(env.iter().copied())
            .current_dir(dir.path())
            .env("SPIN_VARIABLE_CRON_TOKEN", token)
            .stderr(std::fs::File::create(dir.path().join("cron.log")).unwrap())
            .spawn()
            .unwrap();
        Cron(child, dir)
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.1.path().join("cron.log")).unwrap_or_default()
    }

    /// Waits for a log line that holds every one of `parts`.
    fn wait_for(&self, parts: &[&str], limit: Duration) -> bool {
        let deadline = Instant::now() + limit;
        while Instant::now() < deadline {
            if self.log().lines().any(|l| parts.iter().all(|p| l.contains(p))) {
                return true;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        false
    }
}

impl Drop for Cron {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn mneme_cron_runs_the_schedules_against_a_deployment_and_backs_off() {
    // The app runs no schedules itself, as under `spin up`; `mneme cron`
    // reads them from the manifest and calls the tick endpoints over HTTP.
    let dir = tempfile::tempdir().unwrap();
    let served = mneme_e2e::without_crons(dir.path(), &mneme_e2e::TICK_JOBS);
    let b = BackendEnv::new(Backend::Embedded);
    let app = App::start(&served, &env(&b));
    let every_second = edited_manifest(dir.path(), "spin.toml", |m| {
        m.replace("cron_expression = \"0 * * * * *\"", "cron_expression = \"* * * * * *\"")
    });
    let cron = Cron::start(&app.url, &every_second, TOKEN);
    assert!(cron.wait_for(&["startup job /tick/migrate:"], Duration::from_secs(20)), "{}", cron.log());
    let deadline = Instant::now() + Duration::from_secs(15);
    while Instant::now() < deadline && cron.log().matches("cron tick /tick/heartbeat 200").count() < 2 {
        std::thread::sleep(Duration::from_millis(200));
    }
    assert!(cron.log().matches("cron tick /tick/heartbeat 200").count() >= 2, "{}", cron.log());
    // The served manifest has no schedules, so only `mneme cron`'s calls
    // over HTTP can have recorded these beats, under any runner.
    let beats = tick(&app, "heartbeat").json()["result"]["beats"].as_u64().unwrap();
    assert!(beats >= 3, "the scheduled heartbeats were recorded: {beats}");
    drop(cron);

    // A wrong token: each failure is logged, and the job backs off, its
    // wait doubling from its interval.
    let no_startup = edited_manifest(dir.path(), &every_second.display().to_string(), |m| {
        m.replace("at_startup = true", "at_startup = false")
    });
    let cron = Cron::start(&app.url, &no_startup, "wrong");
    for n in [1, 2, 3] {
        let line = "cron tick /tick/heartbeat answered 401";
        let want = format!("{n} in a row, next try in {} s", 1u64 << (n - 1));
        assert!(
            cron.wait_for(&[line, &want], Duration::from_secs(20)),
            "expected `{line}` … `{want}`:\n{}",
            cron.log()
        );
    }
}

#[test]
fn mneme_up_sums_up_its_ticks_instead_of_telling_each() {
    mneme_e2e::runner_only!("its in-process scheduler's console");
    let dir = tempfile::tempdir().unwrap();
    let manifest = edited_manifest(dir.path(), "spin.toml", |m| {
        m.replace("cron_expression = \"0 * * * * *\"", "cron_expression = \"* * * * * *\"")
    });
    let b = BackendEnv::new(Backend::Embedded);
    let mut env = env(&b);
    env.push(("MNEME_TICK_SUMMARY_SECS".into(), "2".into()));
    let app = App::start(manifest.to_str().unwrap(), &env);
    assert!(app.wait_log("cron summary, last 2 s: ", Duration::from_secs(10)), "{}", app.log());
    let log = app.log();
    let summary = log.lines().find(|l| l.starts_with("cron summary")).unwrap();
    assert!(summary.contains("heartbeat ") && summary.contains(" ok"), "{summary}");
    assert!(!log.contains("cron tick /tick/heartbeat 200"), "a run that went well was told:\n{log}");
    assert!(!log.contains("cron tick /tick/tools 200"), "{log}");
}

#[test]
fn the_console_shows_failures_recoveries_and_a_summary_not_every_tick() {
    // `mneme cron` through a proxy that can cut the deployment off.
    let dir = tempfile::tempdir().unwrap();
    let served = mneme_e2e::without_crons(dir.path(), &mneme_e2e::TICK_JOBS);
    let b = BackendEnv::new(Backend::Embedded);
    let app = App::start(&served, &env(&b));
    let proxy = mneme_e2e::fault::FaultProxy::start(app.url.trim_start_matches("http://"));
    let every_second = edited_manifest(dir.path(), "spin.toml", |m| {
        m.replace("cron_expression = \"0 * * * * *\"", "cron_expression = \"* * * * * *\"")
    });
    let cron = Cron::start_with(
        &format!("http://{}", proxy.addr),
        &every_second,
        TOKEN,
        &[],
        &[("MNEME_TICK_SUMMARY_SECS", "3"), ("MNEME_LOG_TICKS", "")],
    );
    assert!(cron.wait_for(&["startup job /tick/migrate:"], Duration::from_secs(20)), "{}", cron.log());
    // Runs that go well are counted, not told one by one.
    assert!(
        cron.wait_for(&["cron summary, last 3 s:", "heartbeat ", " ok"], Duration::from_secs(10)),
        "no summary:\n{}",
        cron.log()
    );
    assert!(!cron.log().contains("cron tick /tick/heartbeat 200"), "a run that went well was told:\n{}", cron.log());
    // A failure is told at once, with its backoff…
    proxy.set(mneme_e2e::fault::Mode::Refuse);
    assert!(
        cron.wait_for(&["cron tick /tick/heartbeat failed", "1 in a row"], Duration::from_secs(10)),
        "no failure line:\n{}",
        cron.log()
    );
    // …and so is the first success after it.
    proxy.set(mneme_e2e::fault::Mode::Pass);
    assert!(
        cron.wait_for(&["cron tick /tick/heartbeat recovered: 200 after "], Duration::from_secs(20)),
        "no recovery line:\n{}",
        cron.log()
    );
    // The summary of that window counts the failures too.
    assert!(cron.wait_for(&["cron summary", " failed"], Duration::from_secs(10)), "{}", cron.log());
}

#[test]
fn tick_endpoint_is_closed_when_no_token_is_configured() {
    let b = BackendEnv::new(Backend::Embedded);
    let dir = tempfile::tempdir().unwrap();
    // Without a token the startup migration cannot run through the tick, so
    // this manifest drops it; the endpoint must still refuse with 503.
    let manifest = edited_manifest(dir.path(), "spin.toml", |m| m.replace("at_startup = true", "at_startup = false"));
    let app = App::start(manifest.to_str().unwrap(), &b.vars);
    app.request("POST", "/tick/heartbeat", &[("authorization", "Bearer anything")], None)
        .assert_error(503, "not-configured");
}

#[test]
fn unknown_paths_get_a_json_404() {
    let b = BackendEnv::new(Backend::Embedded);
    let mut vars = env(&b);
    vars.push(("SPIN_VARIABLE_API_KEY".into(), "k".into()));
    let app = App::start("spin.toml", &vars);
    // Behind the API key, so the route map is not probed anonymously.
    app.get("/no/such/thing").assert_error(401, "unauthorized");
    app.request("GET", "/no/such/thing", &[("authorization", "Bearer k")], None).assert_error(404, "not-found");
    app.request("POST", "/health", &[], None).assert_error(405, "method-not-allowed");
}

#[test]
fn unreachable_postgres_is_reported_not_hidden() {
    let dir = tempfile::tempdir().unwrap();
    let manifest = edited_manifest(dir.path(), "spin.toml", |m| m.replace("at_startup = true", "at_startup = false"));
    let vars = vec![
        (
            "SPIN_VARIABLE_PG_URL".to_string(),
            "host=127.0.0.1 port=1 user=postgres dbname=x sslmode=disable".to_string(),
        ),
        ("SPIN_VARIABLE_PG_HOST".to_string(), "127.0.0.1:1".to_string()),
        ("SPIN_VARIABLE_CRON_TOKEN".to_string(), TOKEN.to_string()),
    ];
    let app = App::start(manifest.to_str().unwrap(), &vars);
    app.get("/health").assert_error(503, "store-unavailable");
    tick(&app, "heartbeat").assert_error(503, "store-unavailable");
}

#[test]
fn unreachable_redis_is_reported_not_hidden() {
    let dir = tempfile::tempdir().unwrap();
    let manifest = edited_manifest(dir.path(), "spin.toml", |m| m.replace("at_startup = true", "at_startup = false"));
    let vars = vec![
        ("SPIN_VARIABLE_REDIS_URL".to_string(), "redis://127.0.0.1:1".to_string()),
        ("SPIN_VARIABLE_REDIS_HOST".to_string(), "127.0.0.1:1".to_string()),
    ];
    let app = App::start(manifest.to_str().unwrap(), &vars);
    let r = app.get("/health");
    r.assert_error(503, "store-unavailable");
    let v = r.json();
    assert_eq!(v["status"], "unavailable", "{v}");
    assert_eq!(v["dependencies"]["kv"]["kind"], "redis", "{v}");
    assert_eq!(v["dependencies"]["kv"]["ok"], false, "the key-value store is named as the one down: {v}");
    assert_eq!(v["dependencies"]["sql"]["ok"], true, "SQLite still answers: {v}");
}

#[test]
fn startup_fails_when_the_startup_migration_cannot_run() {
    mneme_e2e::runner_only!("its startup job");
    let vars = vec![
        (
            "SPIN_VARIABLE_PG_URL".to_string(),
            "host=127.0.0.1 port=1 user=postgres dbname=x sslmode=disable".to_string(),
        ),
        ("SPIN_VARIABLE_PG_HOST".to_string(), "127.0.0.1:1".to_string()),
        ("SPIN_VARIABLE_CRON_TOKEN".to_string(), TOKEN.to_string()),
    ];
    let log =
        App::start_with("spin.toml", &vars, &[]).err().expect("the runner must refuse to serve without its schema");
    assert!(log.contains("startup job /tick/migrate answered 503"), "{log}");
}
