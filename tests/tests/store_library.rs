//! `mneme-store` through a component: the same scripted calls must give the
//! same answers on Postgres/Redis and on Spin SQLite/key-value, including
//! TTL expiry, Redis list and sorted-set semantics, rollbacks and error codes.

use std::time::Duration;

use mneme_e2e::{App, BACKENDS, Backend, BackendEnv};

fn run(backend: Backend) -> (serde_json::Value, serde_json::Value) {
    let b = BackendEnv::new(backend);
    let app = App::start("tests/fixtures/probe.toml", &b.vars);
    let r = app.get("/store/script");
    assert_eq!(r.status, 200, "{backend:?}: {}", r.body);
    std::thread::sleep(Duration::from_millis(600));
    let ttl = app.get("/store/ttl-read");
    assert_eq!(ttl.status, 200, "{backend:?}: {}", ttl.body);
    (r.json(), ttl.json())
}

#[test]
fn both_backends_answer_the_script_identically() {
    let (embedded, embedded_ttl) = run(Backend::Embedded);
    let (hosted, hosted_ttl) = run(Backend::Hosted);
    assert_eq!(embedded, hosted, "the two backends disagree");
    assert_eq!(embedded_ttl, hosted_ttl, "TTL behaviour differs between backends");
}

#[test]
fn the_script_follows_redis_and_sql_semantics() {
    for backend in BACKENDS {
        let (v, ttl) = run(backend);
        let expect = serde_json::json!({
            "get": "v1",
            "get_after_delete": null,
            "incr": [1, 2],
            "expire_missing": false,
            "rpush": 5,
            "lrange_after_ltrim": ["t2", "t3", "t4", "t5"],
            "lrange_tail": ["t4", "t5"],
            "zadd": [true, true, false],
            "zrange": [["a", 1.0], ["b", 3.0]],
            "zrem": [true, false],
            "zrange_after_zrem": [["b", 3.0]],
            "rollback_error": "invalid",
            "duplicate_key": "conflict",
            "rows": [[1, "one", 0.5], [2, "two", null], [4, "four", null]],
            "bad_sql": "bad-sql",
        });
        assert_eq!(v, expect, "{backend:?}");
        assert_eq!(
            ttl,
            serde_json::json!({"short": null, "long": "y"}),
            "{backend:?}: a 300 ms TTL must have expired after 600 ms"
        );
    }
}

#[test]
fn postgres_sessions_start_with_the_apps_bounds_and_the_address_can_change_them() {
    // The key/value address the tests use, as deployments do (D-F19).
    let b = BackendEnv::new(Backend::Hosted);
    let app = App::start("tests/fixtures/probe.toml", &b.vars);
    let r = app.get("/store/settings");
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(
        r.json(),
        serde_json::json!({"statement_timeout": "3900ms", "lock_timeout": "3800ms", "idle_in_transaction_session_timeout": "10s"})
    );
    drop(app);
    // An address's own `-c` comes after the app's, and wins.
    let mut vars = b.vars.clone();
    let pg = vars.iter_mut().find(|(k, _)| k == "SPIN_VARIABLE_PG_URL").expect("a pg_url");
    pg.1 = format!("{} options='-c statement_timeout=1000'", pg.1);
    let app = App::start("tests/fixtures/probe.toml", &vars);
    let r = app.get("/store/settings");
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json()["statement_timeout"], "1s");
    assert_eq!(r.json()["lock_timeout"], "3800ms");
}
