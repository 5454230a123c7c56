//! Recommendations through the runner over HTTP, on both storage backends:
//! doors and observations, the eleven steps with their trace, the three
//! rules at their boundaries (dedup at 47 h 59 m and 48 h, drift 0.05 and
//! 0.0501, an acute signal; a number the model invented; a missing
//! counter-thesis), the snooze lifecycle and terminal states, reconcile,
//! concurrent runs, the markdown-only and external stores, and the rec
//! store's own API and token.

use mneme_e2e::fake_model::{FakeModel, Script};
use mneme_e2e::json_server::JsonServer;
use mneme_e2e::{App, BACKENDS, BackendEnv, Resp, TEST_KEY, test_env};
use serde_json::{Value, json};

const RX_TOKEN: &str = "test-rx-ingest-token";
const STORE_TOKEN: &str = "token-for-the-external-store";
/// Found in the composing call's system prompt.
const COMPOSE: &str = mneme_e2e::fake_model::marker::RX_COMPOSE;
const HOUR: u64 = 3_600_000;
const DAY: u64 = 24 * HOUR;

fn start(b: &BackendEnv, model: Option<&FakeModel>, remote: Option<&JsonServer>, rx_token: bool) -> App {
    let mut env = test_env(b, model);
    if rx_token {
        env.push(("SPIN_VARIABLE_RX_INGEST_TOKEN".into(), RX_TOKEN.into()));
    }
    if let Some(r) = remote {
        env.push(("SPIN_VARIABLE_RX_REMOTE_HOST".into(), r.addr.clone()));
        env.push(("SPIN_VARIABLE_RX_STORE_TOKEN".into(), STORE_TOKEN.into()));
        env.push(("SPIN_VARIABLE_RX_STORE_API_KEY".into(), "external-read-key".into()));
    }
    App::start("spin.toml", &env)
}

fn now_ms() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as u64
}

fn call(app: &App, method: &str, path: &str, body: Option<Value>, at: Option<u64>) -> Resp {
    app.call_as(TEST_KEY, method, path, body.as_ref(), at)
}

fn ok(r: Resp, status: u16) -> Value {
    assert_eq!(r.status, status, "{}", r.body);
    r.json()
}

fn run(app: &App, door: &str, at: u64) -> Value {
    let r = call(app, "POST", &format!("/rx/{door}"), None, Some(at));
    assert!(r.status == 201 || r.status == 200, "run {door}: {} {}", r.status, r.body);
    r.json()
}

fn markdown(app: &App, id: &str) -> String {
    let r = call(app, "GET", &format!("/v1/rx/recs/{id}.md"), None, None);
    assert_eq!(r.status, 200, "{}", r.body);
    r.body
}

/// A frontmatter field as JSON.
fn field(md: &str, key: &str) -> Value {
    let head = md.strip_prefix("---\n").unwrap().split("\n---\n").next().unwrap();
    let line = head.lines().find(|l| l.starts_with(&format!("{key}: "))).unwrap_or_else(|| panic!("{key} in {head}"));
    serde_json::from_str(&line[key.len() + 2..]).unwrap()
}

/// A door named `coach` whose signals come from the test's JSON server.
fn coach(app: &App, server: &JsonServer, store: Value) {
    let config = json!({
        "name": "coach", "title": "Coach",
        "components": [
            {"name": "pace", "weight": 0.5, "advice": "Book the sessions.", "evidence_query": "pace"},
            {"name": "sleep", "weight": 0.5, "advice": "Sleep earlier."}
        ],
        "signals": {"kind": "http", "url": server.url("/signals")},
        "composite": {"kind": "flat"},
        "store": store
    });
    ok(call(app, "PUT", "/rx/doors/coach", Some(config), None), 200);
}

/// Signals for `coach` with these normalised values (weights 0.5 each),
/// so the drift is (pace + sleep) / 2.
fn signals(server: &JsonServer, pace: f64, sleep: f64, acute: Value) {
    let c = |name: &str, n: f64| {
        let contribution = ((n * 0.5) * 10_000.0).round() / 10_000.0;
        json!({"component": name, "raw": n * 10.0, "normalised": n, "weight": 0.5, "contribution": contribution})
    };
    server.set("GET", "/signals", 200, &json!({"components": [c("pace", pace), c("sleep", sleep)], "acute": acute}));
}

fn recs(app: &App, door: &str) -> Vec<Value> {
    ok(call(app, "GET", &format!("/v1/rx/recs?door={door}&limit=200"), None, None), 200)["recs"]
        .as_array()
        .unwrap()
        .clone()
}

fn dismiss(app: &App, id: &str) {
    ok(
        call(app, "POST", &format!("/v1/rx/recs/{id}/disposition"), Some(json!({"disposition": "dismissed"})), None),
        200,
    );
}

#[test]
fn doors_observations_and_bad_input() {
    for backend in BACKENDS {
        let b = BackendEnv::new(backend);
        let app = start(&b, None, None, false);
        let doors = ok(call(&app, "GET", "/rx/doors", None, None), 200);
        let names: Vec<&str> = doors["doors"].as_array().unwrap().iter().map(|d| d["name"].as_str().unwrap()).collect();
        assert_eq!(names, vec!["finance", "fitness", "learning"]);
        // An unconfigured door and a door name with path characters are 404
        // before anything reads a store or builds a path.
        for path in ["/rx/astrology", "/rx/..%2F..%2Fetc", "/rx/Fitness", "/rx/fit.ness", "/rx/%2e%2e"] {
            call(&app, "POST", path, None, None).assert_error(404, "not-found");
        }
        call(&app, "POST", "/rx/astrology/observations", Some(json!({"kind": "x"})), None)
            .assert_error(404, "not-found");
        call(&app, "GET", "/rx/fitness", None, None).assert_error(405, "method-not-allowed");
        for body in [
            json!({"kind": "yoga", "minutes": 3}),
            json!({"kind": "workout", "type": "strength"}),
            json!({"kind": "workout", "type": "strength", "minutes": "long"}),
            json!({"kind": "workout", "type": "strength", "minutes": 30, "mood": "ok"}),
            json!({"kind": "workout", "type": "strength", "minutes": 30, "at": "last tuesday"}),
            json!({"observations": []}),
            json!({"observations": [{"kind": "checkin", "energy": 3, "sleep": 3}, {"kind": "checkin"}]}),
        ] {
            call(&app, "POST", "/rx/fitness/observations", Some(body), None).assert_error(400, "invalid");
        }
        // The failed batch wrote nothing: all or none.
        let fine = ok(
            call(
                &app,
                "POST",
                "/rx/fitness/observations",
                Some(json!({"observations": [
                    {"kind": "checkin", "energy": 4, "sleep": 4, "at": "2026-11-20T07:30:00Z"},
                    {"kind": "workout", "type": "strength", "minutes": 45, "hard_lower": true}
                ]})),
                None,
            ),
            201,
        );
        assert_eq!(fine["ids"].as_array().unwrap().len(), 2);
        // A door configuration is checked before it is stored: a view that
        // does not answer, a title that would make a path, a name with path
        // characters (each otherwise a configuration that is accepted).
        let good = json!({"name": "x", "title": "X", "components": [{"name": "a", "weight": 1.0}],
                          "signals": {"kind": "sql", "view": "v_drift_signals"}, "composite": {"kind": "flat"}, "store": {"kind": "local"}});
        let mut bad = good.clone();
        bad["signals"]["view"] = json!("v_missing");
        call(&app, "PUT", "/rx/doors/x", Some(bad), None).assert_error(400, "invalid");
        let mut titled = good.clone();
        titled["title"] = json!("../X");
        call(&app, "PUT", "/rx/doors/x", Some(titled), None).assert_error(400, "invalid");
        // `doors` is taken by the listing route `/rx/doors`.
        for name in ["fit.ness", "..%2Fx", "X", "doors"] {
            let mut named = good.clone();
            named["name"] = json!(name);
            call(&app, "PUT", &format!("/rx/doors/{name}"), Some(named), None).assert_error(400, "invalid");
        }
        call(&app, "GET", "/rx/nowhere/artifacts", None, None).assert_error(404, "not-found");
        ok(call(&app, "PUT", "/rx/doors/x", Some(good), None), 200);
        // The rec store's ingest has its own token: unset answers 503.
        app.request("POST", "/v1/rx/recs", &[("x-rx-ingest-token", "anything")], Some(b"{}"))
            .assert_error(503, "not-configured");
        call(&app, "GET", "/v1/rx/recs/nope", None, None).assert_error(404, "not-found");
        call(&app, "GET", "/v1/rx/recs?status=maybe", None, None).assert_error(400, "invalid");
    }
}

#[test]
fn a_fitness_run_takes_the_eleven_steps_and_dedups_the_next() {
    for backend in BACKENDS {
        let b = BackendEnv::new(backend);
        let app = start(&b, None, None, false);
        let now = now_ms();
        ok(
            call(
                &app,
                "POST",
                "/documents",
                Some(json!({"title": "Training consistency",
                "text": "Training consistency beats intensity: missed workouts and sessions per week decide progress."})),
                None,
            ),
            201,
        );
        let obs = json!({"observations": [
            {"kind": "checkin", "energy": 2, "sleep": 2, "waist_cm": 84, "body_fat_pct": 18, "target_sessions_per_week": 4, "at": now - 3 * DAY},
            {"kind": "checkin", "energy": 3, "sleep": 2, "waist_cm": 85, "body_fat_pct": 18.5, "at": now - DAY},
            {"kind": "workout", "type": "strength", "minutes": 50, "rpe_actual": 8, "rpe_prescribed": 7,
             "load_kg": 95, "prev_load_kg": 100, "hard_lower": true, "at": now - 2 * DAY}
        ]});
        ok(call(&app, "POST", "/rx/fitness/observations", Some(obs), None), 201);

        let first = ok(call(&app, "POST", "/rx/fitness", None, Some(now)), 201);
        let date = first["path"].as_str().unwrap()["Fitness/rx/rx-".len()..][..10].to_string();
        assert_eq!(first["path"], json!(format!("Fitness/rx/rx-{date}-01.md")));
        assert_eq!(first["status"], "open");
        assert_eq!(first["composer"], "template");
        let steps: Vec<&str> = first["trace"].as_array().unwrap().iter().map(|s| s["step"].as_str().unwrap()).collect();
        assert_eq!(steps, vec!["0.5", "0.7", "1", "2", "3", "4", "5", "6", "7", "8", "9", "10", "11"]);
        assert!(first["trace"].as_array().unwrap().iter().all(|s| s["took_ms"].as_f64().is_some()));
        let id = first["rec_id"].as_str().unwrap().to_string();

        let md = markdown(&app, &id);
        assert_eq!(field(&md, "id"), json!(id));
        assert_eq!(field(&md, "status"), json!("open"));
        let mut at = 0;
        for s in ["## TL;DR", "## What I'm seeing", "## Recommendation", "## Why", "## Counter-thesis", "## Sources"] {
            at += md[at..].find(s).unwrap_or_else(|| panic!("{s} in order:\n{md}"));
        }
        assert!(md.contains("rule-based template") && md.contains("**Reject if:**") && md.contains("**Accept if:**"));
        assert!(md.contains("Training consistency"), "the vault search's top result is cited:\n{md}");
        // D-011: the drift is the two-layer composite of the view's numbers,
        // copied verbatim: 0.90 × view drift + 0.10 × body recomposition.
        let breakdown = field(&md, "drift_breakdown");
        let comps = breakdown["components"].as_array().unwrap();
        assert_eq!(comps.len(), 7);
        let weights: f64 = comps.iter().map(|c| c["weight"].as_f64().unwrap()).sum();
        let view: f64 = comps.iter().map(|c| c["contribution"].as_f64().unwrap()).sum::<f64>() / weights;
        let layer = breakdown["second_layer"]["score"].as_f64().unwrap();
        assert_eq!(breakdown["second_layer"]["weight"], json!(0.1));
        let drift = field(&md, "drift_score").as_f64().unwrap();
        assert!((drift - (0.9 * view + 0.1 * layer)).abs() < 1e-4, "{drift} vs {view} and {layer}");
        let pace = comps.iter().find(|c| c["component"] == "session_pace").unwrap();
        assert_eq!((pace["raw"].as_f64(), pace["normalised"].as_f64()), (Some(0.25), Some(0.75)));
        // Step 5: the driving signal is the largest weighted contribution.
        let top = comps
            .iter()
            .max_by(|a, b| a["contribution"].as_f64().partial_cmp(&b["contribution"].as_f64()).unwrap())
            .unwrap();
        assert_eq!(field(&md, "driving_signal"), top["component"]);

        // Same state a minute later: D-012 absorbs the run.
        let second = ok(call(&app, "POST", "/rx/fitness", None, Some(now + 60_000)), 200);
        assert_eq!((second["status"].as_str(), second["rec_id"].as_str()), (Some("no-change"), Some(id.as_str())));
        assert_eq!(second["path"], json!(format!("Fitness/rx/no-change/nc-{date}-01.md")));
        assert_eq!(recs(&app, "fitness").len(), 1);

        // Learning keeps markdown only: steps 9 and 10 skip, no store row.
        ok(
            call(
                &app,
                "POST",
                "/rx/learning/observations",
                Some(json!({"kind": "session", "topic": "rust", "minutes": 20, "at": now - 4 * DAY})),
                None,
            ),
            201,
        );
        let learning = ok(call(&app, "POST", "/rx/learning", None, Some(now)), 201);
        assert_eq!(learning["rec_id"], Value::Null);
        assert_eq!(learning["path"], json!(format!("Learning/rx/rx-{date}-01.md")));
        let t = learning["trace"].as_array().unwrap();
        assert!(
            t[10]["outcome"].as_str().unwrap().starts_with("skipped")
                && t[11]["outcome"].as_str().unwrap().starts_with("skipped")
        );
        assert!(recs(&app, "learning").is_empty());
        let arts = ok(call(&app, "GET", "/rx/learning/artifacts", None, None), 200);
        assert_eq!(arts["artifacts"][0]["status"], "open");

        // Finance: flat composite over its six queries.
        ok(
            call(
                &app,
                "POST",
                "/rx/finance/observations",
                Some(json!({"observations": [
                    {"kind": "position", "symbol": "AAPL", "value": 900, "cost_basis": 1000, "target_weight": 0.5},
                    {"kind": "position", "symbol": "MSFT", "value": 100, "cost_basis": 100, "target_weight": 0.5},
                    {"kind": "alert", "ref": "a1", "severity": "low", "message": "earnings"}
                ]})),
                None,
            ),
            201,
        );
        let fin = ok(call(&app, "POST", "/rx/finance", None, Some(now)), 201);
        let fmd = markdown(&app, fin["rec_id"].as_str().unwrap());
        // Concentration 0.9 → normalised 1 × 0.2 outweighs allocation drift (1 × 0.15).
        assert_eq!(field(&fmd, "driving_signal"), json!("concentration"));
        assert_eq!(field(&fmd, "drift_breakdown")["components"].as_array().unwrap().len(), 6);

        // The vault holds every artifact.
        let tar = call(&app, "GET", "/vault/export", None, None);
        assert_eq!(tar.status, 200);
        for p in [
            format!("Fitness/rx/rx-{date}-01.md"),
            format!("Fitness/rx/no-change/nc-{date}-01.md"),
            format!("Learning/rx/rx-{date}-01.md"),
        ] {
            assert!(tar.body.contains(&p), "{p} in the vault");
        }
    }
}

#[test]
fn dedup_at_its_boundaries() {
    for backend in BACKENDS {
        let b = BackendEnv::new(backend);
        let server = JsonServer::start();
        let app = start(&b, None, Some(&server), false);
        coach(&app, &server, json!({"kind": "local"}));
        let t0 = now_ms();
        let new = |r: &Value| assert_eq!(r["status"], "open", "expected a new rec: {r}");
        let same = |r: &Value| assert_eq!(r["status"], "no-change", "expected no change: {r}");

        // Age: 47 h 59 m is absorbed, 48 h is not. Drift 0.05 away is absorbed.
        signals(&server, 0.8, 0.2, json!([]));
        let a = run(&app, "coach", t0);
        new(&a);
        signals(&server, 0.9, 0.2, json!([]));
        let r = run(&app, "coach", t0 + 47 * HOUR + 59 * 60_000);
        same(&r);
        assert_eq!(r["rec_id"], a["rec_id"]);
        signals(&server, 0.8, 0.2, json!([]));
        let b2 = run(&app, "coach", t0 + 48 * HOUR);
        new(&b2);
        dismiss(&app, a["rec_id"].as_str().unwrap());
        dismiss(&app, b2["rec_id"].as_str().unwrap());
        // Dismissed is terminal too: no snooze, no second disposition.
        let gone = format!("/v1/rx/recs/{}", a["rec_id"].as_str().unwrap());
        call(&app, "POST", &format!("{gone}/snooze"), Some(json!({"days": 1})), None).assert_error(409, "terminal");
        call(&app, "POST", &format!("{gone}/disposition"), Some(json!({"disposition": "skipped"})), None)
            .assert_error(409, "terminal");

        // Drift: 0.0501 away (0.5 → 0.5501, pace still driving) is a new rec.
        let t1 = t0 + 3 * DAY;
        signals(&server, 0.8, 0.2, json!([]));
        let c = run(&app, "coach", t1);
        new(&c);
        signals(&server, 0.8, 0.3002, json!([]));
        let d = run(&app, "coach", t1 + HOUR);
        new(&d);
        assert!(d["trace"][5]["outcome"].as_str().unwrap().contains("differs by more than 0.05"), "{d}");
        dismiss(&app, c["rec_id"].as_str().unwrap());
        dismiss(&app, d["rec_id"].as_str().unwrap());

        // An acute signal after the prior rec forces a new one; one from
        // before does not; a different driving signal does.
        let t2 = t0 + 6 * DAY;
        signals(&server, 0.8, 0.2, json!([{"name": "injury", "at_ms": t2 - HOUR}]));
        let e = run(&app, "coach", t2);
        new(&e);
        same(&run(&app, "coach", t2 + 60_000));
        signals(&server, 0.8, 0.2, json!([{"name": "injury", "at_ms": t2 + 120_000}]));
        let f = run(&app, "coach", t2 + 180_000);
        new(&f);
        assert!(f["trace"][5]["outcome"].as_str().unwrap().contains("acute"), "{f}");
        signals(&server, 0.2, 0.8, json!([]));
        new(&run(&app, "coach", t2 + 240_000));
        // A broken signal source fails the run clearly and frees the door.
        server.set("GET", "/signals", 500, &json!({}));
        call(&app, "POST", "/rx/coach", None, Some(t2 + 300_000)).assert_error(502, "upstream");
        server.set("GET", "/signals", 200, &json!({"components": [{"component": "pace"}]}));
        call(&app, "POST", "/rx/coach", None, Some(t2 + 300_000)).assert_error(502, "upstream");
        signals(&server, 0.2, 0.8, json!([]));
        same(&run(&app, "coach", t2 + 360_000));
    }
}

#[test]
fn the_snooze_lifecycle_terminal_states_and_reconcile() {
    for backend in BACKENDS {
        let b = BackendEnv::new(backend);
        let server = JsonServer::start();
        let app = start(&b, None, Some(&server), true);
        coach(&app, &server, json!({"kind": "local"}));
        let t0 = now_ms();
        signals(&server, 0.8, 0.2, json!([]));
        let id = run(&app, "coach", t0)["rec_id"].as_str().unwrap().to_string();
        let snooze = |days: Value, at: u64| {
            call(&app, "POST", &format!("/v1/rx/recs/{id}/snooze"), Some(json!({"days": days})), Some(at))
        };
        snooze(json!(0), t0).assert_error(400, "invalid");
        snooze(json!(8), t0).assert_error(400, "invalid");
        snooze(json!("two"), t0).assert_error(400, "invalid");
        let s1 = ok(snooze(json!(1), t0), 200);
        assert_eq!((s1["status"].as_str(), s1["snooze_count"].as_i64()), (Some("snoozed"), Some(1)));
        assert_eq!(s1["flags"]["forced_decision"], false);
        // Lazy auto-revive: past its time it only reads as revived…
        let later = t0 + DAY + 1;
        let seen = ok(call(&app, "GET", &format!("/v1/rx/recs/{id}"), None, Some(later)), 200);
        assert_eq!((seen["status"].as_str(), seen["flags"]["auto_revived"].as_bool()), (Some("snoozed"), Some(true)));
        // …until a run of the door reopens it (step 0.5), and absorbs the
        // run: the rec is open again with the same state.
        let r = run(&app, "coach", later);
        assert!(r["trace"][0]["outcome"].as_str().unwrap().starts_with("1 revived"), "{r}");
        let seen = ok(call(&app, "GET", &format!("/v1/rx/recs/{id}"), None, Some(later)), 200);
        assert_eq!((seen["status"].as_str(), seen["flags"]["auto_revived"].as_bool()), (Some("open"), Some(true)));
        // The second snooze makes it a forced decision; a third is refused.
        let s2 = ok(snooze(json!(7), later), 200);
        assert_eq!((s2["snooze_count"].as_i64(), s2["flags"]["forced_decision"].as_bool()), (Some(2), Some(true)));
        snooze(json!(1), later).assert_error(409, "forced-decision");
        // Acting needs a fit score 1–5.
        let dispose =
            |body: Value| call(&app, "POST", &format!("/v1/rx/recs/{id}/disposition"), Some(body), Some(later));
        dispose(json!({"disposition": "acted_modified"})).assert_error(400, "invalid");
        dispose(json!({"disposition": "acted_modified", "subjective_fit_1_5": 6})).assert_error(400, "invalid");
        dispose(json!({"disposition": "maybe"})).assert_error(400, "invalid");
        let acted = ok(
            dispose(json!({"disposition": "acted_modified", "subjective_fit_1_5": 4, "outcome_note": "did half"})),
            200,
        );
        assert_eq!(
            (acted["status"].as_str(), acted["acted_disposition"].as_str()),
            (Some("acted"), Some("acted_modified"))
        );
        // Terminal: nothing changes it any more.
        dispose(json!({"disposition": "dismissed"})).assert_error(409, "terminal");
        snooze(json!(1), later).assert_error(409, "terminal");
        // Reconcile (step 0.7): the artifact says open until the next run.
        assert_eq!(field(&markdown(&app, &id), "status"), json!("open"));
        signals(&server, 0.8, 0.2, json!([]));
        let r = run(&app, "coach", later + 1_000);
        assert!(r["trace"][1]["outcome"].as_str().unwrap().starts_with("artifacts patched: 1"), "{r}");
        assert_eq!(field(&markdown(&app, &id), "status"), json!("acted"));
        let again = run(&app, "coach", later + 2_000);
        assert!(
            again["trace"][1]["outcome"].as_str().unwrap().starts_with("artifacts patched: 0"),
            "idempotent: {again}"
        );
        // Aging after 14 days; the list order is open, snoozed, acted, dismissed.
        let aged = ok(call(&app, "GET", &format!("/v1/rx/recs/{id}"), None, Some(t0 + 14 * DAY + 1)), 200);
        assert_eq!(aged["flags"]["aging"], true);
        let newest = r["rec_id"].as_str().unwrap().to_string();
        assert_eq!((again["status"].as_str(), again["rec_id"].as_str()), (Some("no-change"), Some(newest.as_str())));
        ok(call(&app, "POST", &format!("/v1/rx/recs/{newest}/snooze"), Some(json!({"days": 2})), Some(later)), 200);
        // A rec pushed by an external generator: D-008 at the store's door.
        let push = |body: Value, token: &str| {
            app.request("POST", "/v1/rx/recs", &[("x-rx-ingest-token", token)], Some(body.to_string().as_bytes()))
        };
        let body = json!({"door": "coach", "drift_score": 0.4, "confidence": 70, "tldr": "Sleep more",
                          "body_md": "## TL;DR\nSleep more.\n## Counter-thesis\nIt may pass.\n"});
        push(body.clone(), "wrong").assert_error(401, "unauthorized");
        push(body.clone(), RX_TOKEN).assert_error(422, "malformed-artifact");
        let mut good = body.clone();
        good["body_md"] = json!(
            "## TL;DR\nSleep more.\n## Counter-thesis\nIt may pass.\n- Reject if: energy recovers alone.\n- Accept if: energy stays low.\n"
        );
        let pushed = ok(push(good, RX_TOKEN), 201)["id"].as_str().unwrap().to_string();
        assert!(markdown(&app, &pushed).contains("Accept if"));
        let order: Vec<(String, String)> = recs(&app, "coach")
            .iter()
            .map(|r| (r["status"].as_str().unwrap().into(), r["id"].as_str().unwrap().into()))
            .collect();
        let statuses: Vec<&str> = order.iter().map(|o| o.0.as_str()).collect();
        assert_eq!(statuses, vec!["open", "snoozed", "acted"]);
        assert_eq!(order[0].1, pushed);
        assert!(!app.log().contains(RX_TOKEN), "tokens are never logged");
    }
}

#[test]
fn the_model_writes_narrative_only() {
    for backend in BACKENDS {
        let b = BackendEnv::new(backend);
        let server = JsonServer::start();
        let model = FakeModel::start(Script::default());
        let app = start(&b, Some(&model), Some(&server), false);
        coach(&app, &server, json!({"kind": "local"}));
        let t0 = now_ms();
        signals(&server, 0.8, 0.2, json!([]));
        let draft = |why: &str, accept: &str| {
            Script {
            reply: json!({"tldr": "Pace drives the drift of 0.5.", "seeing": "Pace is at 0.8 normalised.",
                "recommendation": "Book the sessions.", "why": why,
                "counter_thesis": {"argument": "Sleep is fine at 0.2.", "reject_if": "pace recovers alone", "accept_if": accept}})
            .to_string(),
            ..Default::default()
        }
        };
        // A number the model invented rejects the draft; asked again once,
        // then the labelled template writes the rec and the trace says why
        // (D-R5 as amended by D-L2): nothing the model wrote is stored.
        let templated = |rule: &str| {
            let r = ok(call(&app, "POST", "/rx/coach", None, Some(t0)), 201);
            assert_eq!(r["composer"], "template", "{r}");
            let outcome = r["trace"][8]["outcome"].as_str().unwrap().to_string();
            assert!(outcome.contains("broke the artifact rules twice") && outcome.contains(rule), "{outcome}");
            let md = markdown(&app, r["rec_id"].as_str().unwrap());
            assert!(md.contains("rule-based template") && !md.contains("Pace fell by 12"), "{md}");
            dismiss(&app, r["rec_id"].as_str().unwrap());
        };
        model.route(COMPOSE, draft("Pace fell by 12 sessions.", "pace stays low"));
        templated("D-011");
        assert_eq!(model.requests_with(COMPOSE).len(), 2);
        assert!(model.requests_with(COMPOSE)[1].contains("D-011"), "the retry says why");
        // A missing accept condition (D-008) is rejected the same way, and so
        // is a draft with no counter-thesis at all: each asked again once.
        model.route(COMPOSE, draft("Pace contributes 0.4.", ""));
        templated("D-008");
        assert_eq!(model.requests_with(COMPOSE).len(), 4);
        assert!(model.requests_with(COMPOSE)[3].contains("D-008"), "the retry says why");
        let bare = json!({"tldr": "Pace drives the drift.", "seeing": "Pace is high.", "recommendation": "Book the sessions.",
                          "why": "Pace leads."});
        model.route(COMPOSE, Script { reply: bare.to_string(), ..Default::default() });
        templated("D-008");
        assert_eq!(model.requests_with(COMPOSE).len(), 6);
        // Each ask went out under the draft's JSON Schema.
        let asked: Value = serde_json::from_str(&model.requests_with(COMPOSE)[0]).unwrap();
        assert_eq!(asked["response_format"]["type"], "json_schema");
        // A good draft: the model's narrative with the code's numbers.
        model.route(COMPOSE, draft("Pace contributes 0.4, the largest share.", "pace stays at 0.8"));
        let r = ok(call(&app, "POST", "/rx/coach", None, Some(t0)), 201);
        assert_eq!(r["composer"], "scripted-model", "the composer is the model that answered");
        let md = markdown(&app, r["rec_id"].as_str().unwrap());
        assert!(
            md.contains("Pace contributes 0.4, the largest share.") && md.contains("**Accept if:** pace stays at 0.8")
        );
        assert!(!md.contains("rule-based template"));
        assert!(model.requests_with(COMPOSE).last().unwrap().contains("\\\"driving_signal\\\""));
        // A model that cannot answer falls back to the labelled template.
        dismiss(&app, r["rec_id"].as_str().unwrap());
        model.route(COMPOSE, Script { status: 500, ..Default::default() });
        let t = ok(call(&app, "POST", "/rx/coach", None, Some(t0 + 1_000)), 201);
        assert_eq!(t["composer"], "template");
        assert!(t["trace"][8]["outcome"].as_str().unwrap().contains("the model failed"));
    }
}

#[test]
fn concurrent_runs_never_share_an_nn_or_duplicate_a_state() {
    for backend in BACKENDS {
        let b = BackendEnv::new(backend);
        let server = JsonServer::start();
        let app = std::sync::Arc::new(start(&b, None, Some(&server), false));
        coach(&app, &server, json!({"kind": "local"}));
        signals(&server, 0.8, 0.2, json!([]));
        let t0 = now_ms();
        let runs: Vec<_> = (0..4)
            .map(|_| {
                let app = app.clone();
                std::thread::spawn(move || run(&app, "coach", t0))
            })
            .collect();
        let results: Vec<Value> = runs.into_iter().map(|h| h.join().unwrap()).collect();
        let new: Vec<&Value> = results.iter().filter(|r| r["status"] == "open").collect();
        assert_eq!(new.len(), 1, "one rec for one state: {results:?}");
        let mut paths: Vec<&str> = results.iter().map(|r| r["path"].as_str().unwrap()).collect();
        paths.sort();
        paths.dedup();
        assert_eq!(paths.len(), 4, "every artifact has its own NN");
        assert_eq!(recs(&app, "coach").len(), 1);
        // Different states, one after another: NN counts up per door and date.
        dismiss(&app, new[0]["rec_id"].as_str().unwrap());
        signals(&server, 0.1, 0.9, json!([]));
        let next = run(&app, "coach", t0 + 1_000);
        assert!(next["path"].as_str().unwrap().ends_with("-02.md"), "{next}");
    }
}

#[test]
fn an_external_store_takes_the_rec_and_reconcile_reads_it_back() {
    for backend in BACKENDS {
        let b = BackendEnv::new(backend);
        let server = JsonServer::start();
        let app = start(&b, None, Some(&server), false);
        coach(&app, &server, json!({"kind": "http", "url": server.url("")}));
        signals(&server, 0.8, 0.2, json!([]));
        let t0 = now_ms();
        let r = ok(call(&app, "POST", "/rx/coach", None, Some(t0)), 201);
        assert_eq!(r["rec_id"], "ext-1");
        let posted = server.requests("POST", "/v1/rx/recs");
        assert_eq!(posted.len(), 1);
        assert_eq!(posted[0].headers.get("x-rx-ingest-token").map(String::as_str), Some(STORE_TOKEN));
        let body: Value = serde_json::from_str(&posted[0].body).unwrap();
        assert!(body["body_md"].as_str().unwrap().contains("## Counter-thesis"));
        let arts = ok(call(&app, "GET", "/rx/coach/artifacts", None, None), 200)["artifacts"].clone();
        assert_eq!((arts[0]["rec_id"].as_str(), arts[0]["status"].as_str()), (Some("ext-1"), Some("open")));
        // The external store says it was acted on: the next run patches the file.
        server.set("GET", "/v1/rx/recs/ext-1", 200, &json!({"id": "ext-1", "status": "acted"}));
        let next = run(&app, "coach", t0 + 1_000);
        assert!(next["trace"][1]["outcome"].as_str().unwrap().starts_with("artifacts patched: 1 of 1"), "{next}");
        assert_eq!(server.requests("GET", "/v1/rx/recs/ext-1")[0].headers["authorization"], "Bearer external-read-key");
        let arts = ok(call(&app, "GET", "/rx/coach/artifacts", None, None), 200)["artifacts"].clone();
        let first = arts.as_array().unwrap().iter().find(|a| a["rec_id"] == "ext-1").unwrap();
        assert_eq!(first["status"], "acted");
        // A store that refuses: the artifact stays without a store id, the
        // run says so, and the door is free for the next run, which the
        // refused rec (in no store) does not absorb.
        server.set("POST", "/v1/rx/recs", 401, &json!({"error": {"code": "unauthorized", "message": "no"}}));
        signals(&server, 0.1, 0.9, json!([]));
        call(&app, "POST", "/rx/coach", None, Some(t0 + 2_000)).assert_error(502, "upstream");
        let arts = ok(call(&app, "GET", "/rx/coach/artifacts", None, None), 200)["artifacts"].clone();
        let kept: Vec<&Value> =
            arts.as_array().unwrap().iter().filter(|a| a["kind"] == "rec" && a["rec_id"].is_null()).collect();
        assert_eq!(kept.len(), 1, "{arts}");
        assert!(kept[0]["path"].as_str().unwrap().starts_with("Coach/rx/rx-"), "{arts}");
        server.set("POST", "/v1/rx/recs", 201, &json!({"id": "ext-9"}));
        let retried = run(&app, "coach", t0 + 3_000);
        assert_eq!(
            (retried["rec_id"].as_str(), retried["status"].as_str()),
            (Some("ext-9"), Some("open")),
            "{retried}"
        );
    }
}

/// A door whose signals are views runs steps 0.5–4 in one transaction
/// (D-R8): concurrent runs stay sequential, and a view that breaks after the
/// door was configured fails the run with a clear error and leaves the door
/// free.
#[test]
fn view_doors_run_in_one_transaction() {
    for backend in BACKENDS {
        let b = BackendEnv::new(backend);
        let app = std::sync::Arc::new(start(&b, None, None, false));
        let t0 = now_ms();
        let obs = json!({"observations": [
            {"kind": "checkin", "energy": 2, "sleep": 2},
            {"kind": "workout", "type": "strength", "minutes": 40, "hard_lower": true}
        ]});
        ok(call(&app, "POST", "/rx/fitness/observations", Some(obs), Some(t0)), 201);
        let runs: Vec<_> = (0..4)
            .map(|_| {
                let app = app.clone();
                std::thread::spawn(move || run(&app, "fitness", t0))
            })
            .collect();
        let results: Vec<Value> = runs.into_iter().map(|h| h.join().unwrap()).collect();
        assert_eq!(results.iter().filter(|r| r["status"] == "open").count(), 1, "one rec for one state: {results:?}");
        let mut paths: Vec<&str> = results.iter().map(|r| r["path"].as_str().unwrap()).collect();
        paths.sort();
        paths.dedup();
        assert_eq!(paths.len(), 4, "every artifact has its own NN: {results:?}");

        let sql = |stmt: &str| match &b.pg {
            Some(db) => db.client().batch_execute(stmt).unwrap(),
            None => {
                rusqlite::Connection::open(app.state.path().join("sqlite_db.db")).unwrap().execute_batch(stmt).unwrap()
            }
        };
        let view = "CREATE VIEW v_fragile AS
                    SELECT 'a' AS component, x AS raw, x AS normalised, 1.0 AS weight, x AS contribution FROM fragile_src";
        sql("CREATE TABLE fragile_src (x DOUBLE PRECISION); INSERT INTO fragile_src VALUES (0.8);");
        sql(view);
        let config = json!({"name": "fragile", "title": "Fragile", "components": [{"name": "a", "weight": 1.0}],
                            "signals": {"kind": "sql", "view": "v_fragile"}, "composite": {"kind": "flat"},
                            "store": {"kind": "local"}});
        ok(call(&app, "PUT", "/rx/doors/fragile", Some(config), None), 200);
        sql("DROP VIEW v_fragile");
        let r = call(&app, "POST", "/rx/fragile", None, Some(t0));
        r.assert_error(502, "upstream");
        assert!(r.body.contains("v_fragile"), "{}", r.body);
        sql(view);
        let again = run(&app, "fragile", t0 + 1_000);
        assert_eq!(again["status"], "open", "the door was left free: {again}");
    }
}

/// The Inbox's charts: a door's components and composite day by day, read
/// through its views as of each day (migration 0014), leaving nothing
/// behind; a run afterwards sees today as the last point does.
#[test]
fn a_door_history_reads_each_day_as_it_stood() {
    for backend in BACKENDS {
        let b = BackendEnv::new(backend);
        let app = start(&b, None, None, false);
        let now = now_ms();
        // Three sessions 10, 9 and 8 days ago against a target of three a week.
        let obs = json!({"observations": [
            {"kind": "checkin", "energy": 4, "sleep": 4, "target_sessions_per_week": 3, "at": now - 14 * DAY},
            {"kind": "workout", "type": "strength", "minutes": 45, "at": now - 10 * DAY},
            {"kind": "workout", "type": "strength", "minutes": 45, "at": now - 9 * DAY},
            {"kind": "workout", "type": "strength", "minutes": 45, "at": now - 8 * DAY}
        ]});
        ok(call(&app, "POST", "/rx/fitness/observations", Some(obs), None), 201);

        let h = ok(call(&app, "GET", "/rx/fitness/history?days=28", None, Some(now)), 200);
        let pace: Vec<Option<f64>> =
            h["components"]["session_pace"].as_array().unwrap().iter().map(Value::as_f64).collect();
        assert_eq!((h["dates"].as_array().unwrap().len(), pace.len()), (28, 28), "{backend:?}: {h}");
        assert_eq!(h["fire_threshold"], 0.5);
        // Index 27 is today; index 27 − k is k days ago.
        assert_eq!(pace[27 - 15], Some(1.0), "{backend:?}: no session yet 15 days ago: {pace:?}");
        assert_eq!(pace[27 - 8], Some(0.0), "{backend:?}: three of three in the week 8 days ago: {pace:?}");
        assert_eq!(pace[27], Some(1.0), "{backend:?}: none in the last week: {pace:?}");
        let composite: Vec<f64> = h["composite"].as_array().unwrap().iter().map(|v| v.as_f64().unwrap()).collect();
        assert!(composite[27 - 8] < composite[27], "the composite falls with the sessions: {composite:?}");
        // Nothing is left in the clock table: today's run reads the wall
        // clock and finds today's point (step 3's trace says "drift X").
        let r = run(&app, "fitness", now);
        let step3 = r["trace"].as_array().unwrap().iter().find(|s| s["step"] == "3").expect("step 3").clone();
        let drift: f64 = step3["outcome"].as_str().unwrap().trim_start_matches("drift ").parse().unwrap();
        assert!(
            (drift - composite[27]).abs() < 1e-9,
            "{backend:?}: the run ({drift}) and today's point ({})",
            composite[27]
        );
        let today = ok(call(&app, "GET", "/rx/fitness/history?days=1", None, Some(now)), 200);
        assert_eq!((today["composite"][0].as_f64(), &today["dates"][0]), (Some(composite[27]), &h["dates"][27]));
        for bad in ["0", "91", "x"] {
            call(&app, "GET", &format!("/rx/fitness/history?days={bad}"), None, None).assert_error(400, "invalid");
        }
        call(&app, "POST", "/rx/fitness/history", None, None).assert_error(405, "method-not-allowed");
    }
}
