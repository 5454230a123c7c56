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
fn migrations_apply_once_at_startup_and_then_never_again() {
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
    let app = App::start(manifest.to_str().unwrap(), &env(&b));
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
