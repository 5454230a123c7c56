//! Knowledge entries through the runner over HTTP, on both storage
//! backends: ingest and its token, the queue drained by the tick, extraction
//! by the scripted model and by the rules, validation at its boundaries, the
//! patterns engine, merge and promotion, supersede, sequential ids under
//! concurrency, ranked retrieval, the vault search and the markdown mirror.

use std::time::{Duration, Instant};

use mneme_e2e::fake_model::{FakeModel, Script};
use mneme_e2e::{App, BACKENDS, BackendEnv, TEST_KEY, test_env};
use serde_json::{Value, json};

const INGEST: &str = "test-ingest-token";
/// Found in the extraction and stance requests' system prompts.
const EXTRACT: &str = "You extract the principal's judgement";
const STANCE: &str = "You compare a new statement";

fn start(b: &BackendEnv, model: Option<&FakeModel>, ingest_token: bool) -> App {
    let mut env = test_env(b, model);
    if ingest_token {
        env.push(("SPIN_VARIABLE_INGEST_TOKEN".into(), INGEST.into()));
    }
    App::start("spin.toml", &env)
}

/// The app of an edited `manifest` (some crons left out), taking ingests.
fn start_served(manifest: &str, b: &BackendEnv, model: Option<&FakeModel>) -> App {
    let mut env = test_env(b, model);
    env.push(("SPIN_VARIABLE_INGEST_TOKEN".into(), INGEST.into()));
    App::start(manifest, &env)
}

fn bearer() -> String {
    format!("Bearer {TEST_KEY}")
}

fn get(app: &App, path: &str) -> Value {
    let a = bearer();
    let r = app.request("GET", path, &[("authorization", a.as_str())], None);
    assert_eq!(r.status, 200, "GET {path}: {}", r.body);
    r.json()
}

fn post(app: &App, path: &str, body: Value) -> mneme_e2e::Resp {
    let a = bearer();
    app.request("POST", path, &[("authorization", a.as_str())], Some(body.to_string().as_bytes()))
}

fn ingest_raw(app: &App, body: &[u8]) -> mneme_e2e::Resp {
    app.request("POST", "/knowledge/ingest", &[("x-ingest-token", INGEST)], Some(body))
}

/// Ingests a transcript; returns the job id.
fn ingest(app: &App, text: &str, date: &str) -> String {
    let r =
        ingest_raw(app, json!({"source_type": "meeting", "source_date": date, "text": text}).to_string().as_bytes());
    assert!(r.status == 202 || r.status == 200, "ingest: {} {}", r.status, r.body);
    r.json()["job_id"].as_str().unwrap().to_string()
}

/// Runs the knowledge tick (the cron may have taken the job already).
fn tick(app: &App) -> Value {
    let r = app.request("POST", "/tick/knowledge", &[("authorization", mneme_e2e::CRON_AUTH)], None);
    assert_eq!(r.status, 200, "tick: {}", r.body);
    r.json()
}

/// Drains until the job has finished; returns its report.
fn finish(app: &App, job: &str) -> Value {
    app.knowledge_job(job)
}

fn candidates(list: Value) -> Script {
    Script { reply: json!({"candidates": list}).to_string(), ..Default::default() }
}

fn outcome(job: &Value, index: usize) -> &Value {
    job["outcomes"].as_array().unwrap().iter().find(|o| o["index"] == index).unwrap()
}

fn entry(app: &App, id: &str) -> Value {
    get(app, &format!("/knowledge/entries/{id}"))
}

/// The ids of a `/retrieve` or `/search` answer, in order.
fn result_ids(found: &Value) -> Vec<&str> {
    found["results"].as_array().unwrap().iter().map(|r| r["id"].as_str().unwrap()).collect()
}

/// The ids `GET /search` finds among the documents for `params` (the
/// query string, without `corpus`), in order.
fn document_ids(app: &App, params: &str) -> Vec<String> {
    result_ids(&get(app, &format!("/search?corpus=document&{params}"))).into_iter().map(String::from).collect()
}

#[test]
fn ingest_has_its_own_token_and_rejects_bad_input() {
    for backend in BACKENDS {
        let b = BackendEnv::new(backend);
        let closed = start(&b, None, false);
        ingest_raw(&closed, b"{}").assert_error(503, "not-configured");
        drop(closed);

        let app = start(&b, None, true);
        let good = json!({"source_type": "chat", "source_date": "2026-11-20", "text": "We decided to ship weekly because it keeps risk small."});
        let body = good.to_string();
        app.request("POST", "/knowledge/ingest", &[], Some(body.as_bytes())).assert_error(401, "unauthorized");
        app.request("POST", "/knowledge/ingest", &[("x-ingest-token", "nope")], Some(body.as_bytes()))
            .assert_error(401, "unauthorized");
        // A request that names the ingest token is judged by it alone.
        let a = bearer();
        app.request(
            "POST",
            "/knowledge/ingest",
            &[("authorization", a.as_str()), ("x-ingest-token", "nope")],
            Some(body.as_bytes()),
        )
        .assert_error(401, "unauthorized");
        assert!(!app.log().contains(INGEST), "the ingest token must never be logged");

        let with = |k: &str, v: Value| {
            let mut x = good.clone();
            x[k] = v;
            x.to_string()
        };
        for (body, code) in [
            (with("source_type", json!("email")), "invalid"),
            (with("source_date", json!("2026-02-30")), "invalid"),
            (with("source_date", json!(null)), "invalid"),
            (with("text", json!("   ")), "invalid"),
            (with("text", json!(7)), "invalid"),
            (with("source_url", json!("ftp://x")), "invalid"),
            (with("colour", json!("red")), "invalid"),
            (with("principal", json!(7)), "invalid"),
            (with("principal", json!("A".repeat(81))), "invalid"),
            ("{not json".to_string(), "invalid-json"),
            ("[]".to_string(), "invalid"),
        ] {
            ingest_raw(&app, body.as_bytes()).assert_error(400, code);
        }
        let first = ingest_raw(&app, body.as_bytes());
        assert_eq!(first.status, 202, "{}", first.body);
        let job = first.json()["job_id"].as_str().unwrap().to_string();
        // The same transcript (even re-wrapped) creates nothing new.
        let again = with("text", json!("We decided to ship weekly\n  because it keeps risk small."));
        let dup = ingest_raw(&app, again.as_bytes());
        assert_eq!(dup.status, 200);
        assert_eq!(
            (dup.json()["job_id"].as_str(), dup.json()["duplicate"].as_bool()),
            (Some(job.as_str()), Some(true))
        );
        let done = finish(&app, &job);
        assert_eq!(done["kept"], 1);
        ingest_raw(&app, again.as_bytes());
        finish(&app, &job);
        assert_eq!(get(&app, "/knowledge/entries")["total"], 1, "a duplicate ingest made a second entry");
        let missing = app.request("GET", "/knowledge/jobs/kj-nope", &[("authorization", a.as_str())], None);
        missing.assert_error(404, "not-found");
    }
}

/// The principal ingests with their own key, or their session and its
/// CSRF header, as the web app does (#26 item 7); bots keep the token.
#[test]
fn the_principal_ingests_with_their_key_or_session() {
    for backend in BACKENDS {
        let b = BackendEnv::new(backend);
        let app = start(&b, None, true);
        let a = bearer();
        let body = json!({"source_type": "chat", "source_date": "2026-11-20", "text": "We decided to ship weekly because it keeps risk small."}).to_string();
        let signed = app.request(
            "POST",
            "/session",
            &[("content-type", "application/json")],
            Some(json!({"api_key": TEST_KEY}).to_string().as_bytes()),
        );
        let cookie = signed.header("set-cookie").unwrap().split(';').next().unwrap().to_string();
        let by_session = json!({"source_type": "chat", "source_date": "2026-11-21", "text": "We decided to hire a contractor because the launch is close."}).to_string();
        app.request("POST", "/knowledge/ingest", &[("cookie", cookie.as_str())], Some(by_session.as_bytes()))
            .assert_error(403, "csrf");
        let r = app.request(
            "POST",
            "/knowledge/ingest",
            &[("cookie", cookie.as_str()), ("x-mneme-csrf", "1")],
            Some(by_session.as_bytes()),
        );
        assert_eq!(r.status, 202, "{backend:?}: {}", r.body);
        let by_cookie = r.json()["job_id"].as_str().unwrap().to_string();
        let r = app.request("POST", "/knowledge/ingest", &[("authorization", a.as_str())], Some(body.as_bytes()));
        assert_eq!(r.status, 202, "{backend:?}: {}", r.body);
        let by_key = r.json()["job_id"].as_str().unwrap().to_string();
        for job in [by_cookie, by_key] {
            assert_eq!(finish(&app, &job)["status"], "done", "{backend:?}: {job}");
        }
        assert_eq!(get(&app, "/knowledge/entries")["total"], 2, "{backend:?}: each transcript became an entry");
    }
}

/// Nobody ticks here: the runner's cron (`*/5 * * * * *` on
/// `/tick/knowledge`) starts a queued job within 10 s, and the job reports
/// `queued`, then `running` while the model extracts, then `done`.
#[test]
fn the_cron_starts_a_queued_job_within_10_seconds() {
    for backend in BACKENDS {
        let b = BackendEnv::new(backend);
        let model = FakeModel::start(Script::default());
        let mut slow = candidates(json!([{"type": "standard", "topic": "Weekly releases",
            "position": "Ship every week", "reasoning": "small releases keep the risk small"}]));
        slow.delay = Duration::from_millis(2_500);
        model.route(EXTRACT, slow);
        let app = start(&b, Some(&model), true);
        let queued_at = Instant::now();
        let job =
            ingest(&app, "We decided to ship every week because small releases keep the risk small.", "2026-11-20");
        let mut seen: Vec<String> = Vec::new();
        let mut started = None;
        loop {
            let status = get(&app, &format!("/knowledge/jobs/{job}"))["status"].as_str().unwrap().to_string();
            if status != "queued" && started.is_none() {
                started = Some(queued_at.elapsed());
            }
            if seen.last() != Some(&status) {
                seen.push(status.clone());
            }
            if status == "done" || status == "failed" || queued_at.elapsed() > Duration::from_secs(30) {
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let started = started.expect("the job never left the queue");
        assert!(started <= Duration::from_secs(10), "{backend:?}: the job waited {started:?}");
        assert_eq!(seen, ["queued", "running", "done"], "{backend:?}");
    }
}

#[test]
fn without_a_model_the_rules_extract_through_the_same_validation() {
    for backend in BACKENDS {
        let b = BackendEnv::new(backend);
        let app = start(&b, None, true);
        let job = ingest(
            &app,
            "Alice: I believe small teams ship faster because coordination costs grow quadratically.\n\
             Bob: Sounds right. How was the trip?\n\
             Alice: We decided to move billing to Postgres because we need real transactions.\n\
             Alice: Never deploy on a Friday, since nobody is around to fix it.\n\
             Alice: I believe tabs are better than spaces.",
            "2026-11-20",
        );
        let j = finish(&app, &job);
        assert_eq!(j["status"], "done", "{backend:?}: {j}");
        assert_eq!(
            (j["extractor"].as_str(), j["kept"].as_i64(), j["dropped"].as_i64()),
            (Some("rules"), Some(3), Some(1))
        );
        assert!(j["extractor_note"].as_str().unwrap().contains("no model"));
        assert_eq!(outcome(&j, 3)["reason"], "no-reasoning");
        let list = get(&app, "/knowledge/entries")["entries"].as_array().unwrap().clone();
        let types: Vec<&str> = list.iter().rev().map(|e| e["type"].as_str().unwrap()).collect();
        assert_eq!(types, ["philosophy", "decision", "standard"], "{backend:?}");
        let e = entry(&app, "KE-0003");
        assert_eq!(e["position"], "Never deploy on a Friday");
        assert_eq!(e["reasoning"], "Nobody is around to fix it");
        assert_eq!((e["confidence"].as_str(), e["stability"].as_str()), (Some("medium"), Some("stable")));
        assert_eq!((e["extractor"].as_str(), e["tier"].as_str()), (Some("rules"), Some("public")));
        assert_eq!((e["corroboration_count"].as_i64(), e["source_type"].as_str()), (Some(1), Some("meeting")));
        assert!(e["superseded_by"].is_null() && e["reasoning_pattern"].is_null());
        // The mirror carries every field.
        let a = bearer();
        let md = app.request("GET", "/knowledge/entries/KE-0003.md", &[("authorization", a.as_str())], None);
        assert_eq!(md.header("content-type"), Some("text/markdown; charset=utf-8"));
        for line in [
            "id: \"KE-0003\"",
            "type: standard",
            "corroboration_count: 1",
            "superseded_by: null",
            "source_date: \"2026-11-20\"",
        ] {
            assert!(md.body.contains(line), "{line} missing from:\n{}", md.body);
        }
        // The vault is a tar of every entry's mirror.
        let tar = app.request("GET", "/vault/export", &[("authorization", a.as_str())], None);
        assert_eq!(tar.header("content-type"), Some("application/x-tar"));
        assert_eq!(&tar.body.as_bytes()[..20], b"Knowledge/KE-0001.md");
        assert!(
            tar.body.contains("Knowledge/KE-0003.md") && tar.body.contains("position: \"Never deploy on a Friday\"")
        );
    }
}

/// With the principal named, only their lines (and unlabelled ones) are
/// read for positions; the job shows whom it read for.
#[test]
fn a_named_principal_keeps_the_others_positions_out() {
    for backend in BACKENDS {
        let b = BackendEnv::new(backend);
        let app = start(&b, None, true);
        let text = "Bob: We decided to move billing to Postgres because we need real transactions.\n\
                    Alice Moreau: Never deploy on a Friday, since nobody is around to fix it.\n\
                    Bob: I believe small teams ship faster because coordination costs grow quadratically.";
        let body = json!({"source_type": "meeting", "source_date": "2026-11-20", "text": text, "principal": " Alice "});
        let r = ingest_raw(&app, body.to_string().as_bytes());
        assert_eq!(r.status, 202, "{}", r.body);
        let j = finish(&app, r.json()["job_id"].as_str().unwrap());
        assert_eq!((j["status"].as_str(), j["kept"].as_i64()), (Some("done"), Some(1)), "{backend:?}: {j}");
        assert_eq!(j["source"]["principal"], "Alice", "{j}");
        let list = get(&app, "/knowledge/entries")["entries"].as_array().unwrap().clone();
        let positions: Vec<&str> = list.iter().map(|e| e["position"].as_str().unwrap()).collect();
        assert_eq!(positions, ["Never deploy on a Friday"], "{backend:?}");
    }
}

#[test]
fn validation_drops_off_list_types_missing_reasoning_and_self_contradicting_topics() {
    for backend in BACKENDS {
        let b = BackendEnv::new(backend);
        let model = FakeModel::start(Script::default());
        model.route(
            EXTRACT,
            candidates(json!([
                {"type": "framework", "topic": "Inversion", "position": "Solve a problem by asking how to guarantee failure",
                 "reasoning": "avoiding stupidity is easier than seeking brilliance", "confidence": "high", "stability": "evergreen",
                 "tags": ["Thinking", "thinking", "#risk"]},
                {"type": "belief", "topic": "Remote work", "position": "Remote work beats offices", "reasoning": "focus"},
                {"type": "Decisions", "topic": "Vendors", "position": "Use two vendors", "reasoning": "resilience"},
                {"type": "decision", "topic": "Kafka", "position": "We adopt Kafka for events"},
                {"type": "standard", "topic": "Always write design docs", "position": "Never write design docs for small changes",
                 "reasoning": "they slow small changes down"},
                {"type": "reaction", "topic": "The launch post", "position": "The launch post was excellent",
                 "reasoning": "it led with the customer problem"}
            ])),
        );
        let app = start(&b, Some(&model), true);
        let j = finish(&app, &ingest(&app, "a meeting transcript", "2026-11-01"));
        assert_eq!(j["extractor"], "scripted-model", "{backend:?}: the model's own name: {j}");
        assert_eq!((j["kept"].as_i64(), j["dropped"].as_i64()), (Some(2), Some(4)));
        let reasons: Vec<&str> = (1..=4).map(|i| outcome(&j, i)["reason"].as_str().unwrap()).collect();
        assert_eq!(reasons, ["off-list-type", "off-list-type", "no-reasoning", "topic-contradicts-position"]);
        let framework = entry(&app, outcome(&j, 0)["entry_id"].as_str().unwrap());
        assert_eq!(
            (framework["confidence"].as_str(), framework["stability"].as_str()),
            (Some("high"), Some("evergreen"))
        );
        assert_eq!(framework["tags"], json!(["thinking", "risk"]));
        let reaction = entry(&app, outcome(&j, 5)["entry_id"].as_str().unwrap());
        assert_eq!((reaction["confidence"].as_str(), reaction["stability"].as_str()), (Some("medium"), Some("stable")));
        assert_eq!(model.requests_with(EXTRACT).len(), 1);
    }
}

#[test]
fn a_third_corroboration_promotes_to_high_and_merges_union_tags_and_bump_the_date() {
    for backend in BACKENDS {
        let b = BackendEnv::new(backend);
        let model = FakeModel::start(Script::default());
        let app = start(&b, Some(&model), true);
        let say = |tags: Value, date: &str, text: &str| {
            model.route(
                EXTRACT,
                candidates(json!([{"type": "standard", "topic": "Small pull requests",
                    "position": "Keep pull requests under 400 lines", "reasoning": "reviewers miss bugs in big diffs",
                    "confidence": "low", "tags": tags}])),
            );
            finish(&app, &ingest(&app, text, date))
        };
        let first = say(json!(["review"]), "2026-03-01", "transcript one");
        let id = outcome(&first, 0)["entry_id"].as_str().unwrap().to_string();
        let second = say(json!(["pull-requests"]), "2026-01-15", "transcript two");
        assert_eq!(outcome(&second, 0)["outcome"], "merged");
        assert_eq!(outcome(&second, 0)["into"], id.as_str());
        let e = entry(&app, &id);
        assert_eq!(
            (e["corroboration_count"].as_i64(), e["confidence"].as_str()),
            (Some(2), Some("low")),
            "{backend:?}"
        );
        assert_eq!(e["source_date"], "2026-03-01", "an older date does not move source_date back");
        assert!(e["last_corroborated_at"].is_string());
        say(json!(["review", "quality"]), "2026-06-10", "transcript three");
        let e = entry(&app, &id);
        assert_eq!(
            (e["corroboration_count"].as_i64(), e["confidence"].as_str()),
            (Some(3), Some("high")),
            "{backend:?}"
        );
        assert_eq!(e["tags"], json!(["review", "pull-requests", "quality"]));
        assert_eq!(e["source_date"], "2026-06-10");
        // The search finds it by its newest source's date (D-K19), no
        // longer by the one it was first recorded under.
        let by = |q: &str| get(&app, &format!("/search?q={q}&corpus=knowledge&mode=text"))["results"].clone();
        assert_eq!(by("June%202026")[0]["id"], id.as_str(), "{backend:?}");
        assert_eq!(by("March"), json!([]), "{backend:?}");
        assert_eq!(get(&app, "/knowledge/entries")["total"], 1);
        assert_terms_recount(&b, "after two merges rewrote the entry's text");
    }
}

/// Without a model, the stance comes from the rules (D-K5): a later
/// "never" against an earlier "always" on the same words is a
/// contradiction, and the older entry is superseded.
#[test]
fn without_a_model_the_rules_judge_a_contradiction_and_supersede() {
    for backend in BACKENDS {
        let b = BackendEnv::new(backend);
        let app = start(&b, None, true);
        let first = finish(
            &app,
            &ingest(&app, "We decided to always deploy on Fridays because the whole team is around.", "2026-05-01"),
        );
        let old = outcome(&first, 0)["entry_id"].as_str().unwrap_or_else(|| panic!("{backend:?}: {first}")).to_string();
        let j = finish(
            &app,
            &ingest(&app, "We decided to never deploy on Fridays because weekend incidents hurt.", "2026-10-01"),
        );
        let o = outcome(&j, 0);
        assert_eq!((o["outcome"].as_str(), o["stance_by"].as_str()), (Some("kept"), Some("rules")), "{backend:?}: {j}");
        assert_eq!(o["supersedes"], json!([old]), "{backend:?}: {j}");
        let new = o["entry_id"].as_str().unwrap();
        assert_eq!(entry(&app, &old)["superseded_by"].as_str(), Some(new));
        let found = post(&app, "/retrieve", json!({"query": "do we deploy on Fridays?", "k": 10})).json();
        let ids = result_ids(&found);
        assert_eq!(ids, [new], "{backend:?}");
    }
}

#[test]
fn a_contradiction_supersedes_the_older_entry_which_leaves_retrieval_but_is_kept() {
    for backend in BACKENDS {
        let b = BackendEnv::new(backend);
        let model = FakeModel::start(Script::default());
        let app = start(&b, Some(&model), true);
        let state = |position: &str| {
            candidates(json!([{"type": "decision", "topic": "Friday deploys", "position": position,
                "reasoning": "weekend coverage decides it", "confidence": "high"}]))
        };
        model.route(EXTRACT, state("We deploy on Fridays like any other day"));
        let old = outcome(&finish(&app, &ingest(&app, "first meeting", "2026-05-01")), 0)["entry_id"]
            .as_str()
            .unwrap()
            .to_string();
        model.route(EXTRACT, state("We no longer deploy on Fridays"));
        model.route(
            STANCE,
            Script {
                reply: json!({"stances": [{"id": old, "stance": "contradict"}]}).to_string(),
                ..Default::default()
            },
        );
        let j = finish(&app, &ingest(&app, "second meeting", "2026-10-01"));
        let o = outcome(&j, 0);
        assert_eq!((o["outcome"].as_str(), o["stance_by"].as_str()), (Some("kept"), Some("model")), "{backend:?}: {j}");
        assert_eq!(o["supersedes"], json!([old]));
        assert_eq!(j["superseded"], json!([old]));
        let new = o["entry_id"].as_str().unwrap().to_string();
        assert!(model.requests_with(STANCE)[0].contains("We deploy on Fridays like any other day"));
        let before = entry(&app, &old);
        assert_eq!((before["superseded_by"].as_str(), before["active"].as_bool()), (Some(new.as_str()), Some(false)));
        assert_eq!(entry(&app, &new)["supersedes"], json!([old]));
        assert_eq!(get(&app, "/knowledge/entries")["total"], 1);
        assert_eq!(get(&app, "/knowledge/entries?include_superseded=true")["total"], 2);
        let found = post(&app, "/retrieve", json!({"query": "do we deploy on Fridays?", "k": 10})).json();
        let ids = result_ids(&found);
        assert_eq!(ids, [new.as_str()], "{backend:?}: superseded entries drop out of retrieval");
        let searched = get(&app, "/search?q=deploy%20fridays");
        assert!(searched["results"].as_array().unwrap().iter().all(|r| r["id"] != old.as_str()));

        // An older transcript saying the opposite is kept as history.
        model.route(EXTRACT, state("We deploy on Fridays without any restriction"));
        model.route(
            STANCE,
            Script {
                reply: json!({"stances": [{"id": new, "stance": "contradict"}]}).to_string(),
                ..Default::default()
            },
        );
        let j = finish(&app, &ingest(&app, "an old meeting found later", "2026-01-01"));
        assert_eq!(outcome(&j, 0)["outcome"], "kept-as-history", "{j}");
        assert_eq!(outcome(&j, 0)["superseded_by"], new.as_str());
        assert_eq!(get(&app, "/knowledge/entries")["total"], 1);
    }
}

#[test]
fn patterns_are_trusted_matched_at_0_72_minted_or_null() {
    for backend in BACKENDS {
        let b = BackendEnv::new(backend);
        let model = FakeModel::start(Script::default());
        let app = start(&b, Some(&model), true);
        let with = |pattern: Value, style: bool, position: &str| {
            candidates(json!([{"type": "framework", "topic": position, "position": position,
                "reasoning": "it generalises", "reasoning_pattern": pattern, "communication_style_only": style}]))
        };
        let run = |script: Script, text: &str| {
            model.route(EXTRACT, script);
            let j = finish(&app, &ingest(&app, text, "2026-11-01"));
            outcome(&j, 0)["pattern"].clone()
        };
        let p = run(with(json!("invert-the-problem"), false, "Ask what would guarantee failure first"), "t1");
        assert_eq!(
            (p["resolution"].as_str(), p["slug"].as_str()),
            (Some("minted"), Some("invert-the-problem")),
            "{backend:?}"
        );
        let p = run(with(json!("invert-the-problem"), false, "Plan backwards from the worst outcome"), "t2");
        assert_eq!(p["resolution"], "known");
        let p = run(with(json!("invert the problem"), false, "List the ways a launch could fail"), "t3");
        assert_eq!(p["resolution"], "matched", "{p}");
        assert!(p["cosine"].as_f64().unwrap() >= 0.72);
        let p =
            run(with(json!("compounding small advantages over decades"), false, "Favour habits that compound"), "t4");
        assert_eq!(p["resolution"], "minted", "an unrelated hint mints a new pattern: {p}");
        let p = run(with(json!("terse bullet formatting"), false, "Write replies as bullets"), "t5");
        assert_eq!(p["resolution"], "null");
        let p = run(with(json!("invert-the-problem"), true, "Keep messages short"), "t6");
        assert_eq!(p["resolution"], "null");
        let p = run(with(Value::Null, false, "Price by value delivered"), "t7");
        assert_eq!(p["resolution"], "null");
        let patterns = get(&app, "/knowledge/patterns")["patterns"].as_array().unwrap().clone();
        let invert = patterns.iter().find(|p| p["slug"] == "invert-the-problem").unwrap();
        assert_eq!((invert["observations"].as_i64(), invert["status"].as_str()), (Some(3), Some("established")));
        assert_eq!(patterns.len(), 2);
        let tagged = get(&app, "/knowledge/entries?pattern=invert-the-problem");
        assert_eq!(tagged["total"], 3);
    }
}

#[test]
fn ids_are_sequential_and_unique_under_concurrent_ingests() {
    for backend in BACKENDS {
        let b = BackendEnv::new(backend);
        let app = start(&b, None, true);
        const SUBJECTS: [(&str, &str); 6] = [
            ("move payroll to a new provider", "the old one failed an audit"),
            ("hire a second designer", "the backlog of product research keeps growing"),
            ("sunset the mobile beta", "fewer than ten people opened it last month"),
            ("rent a bigger warehouse", "orders doubled since spring"),
            ("translate the docs into Spanish", "a third of our signups are from Latin America"),
            ("freeze the pricing page", "every change confused existing customers"),
        ];
        let jobs: Vec<String> = std::thread::scope(|s| {
            let hs: Vec<_> = SUBJECTS
                .iter()
                .map(|(what, why)| {
                    let app = &app;
                    s.spawn(move || ingest(app, &format!("We decided to {what} because {why}."), "2026-11-01"))
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).collect()
        });
        std::thread::scope(|s| {
            for _ in 0..3 {
                s.spawn(|| tick(&app));
            }
        });
        for j in &jobs {
            assert_eq!(finish(&app, j)["status"], "done");
        }
        let list = get(&app, "/knowledge/entries?limit=100&include_superseded=true");
        let mut ids: Vec<String> =
            list["entries"].as_array().unwrap().iter().map(|e| e["id"].as_str().unwrap().to_string()).collect();
        ids.sort();
        let n = ids.len();
        assert_eq!(n, 6, "{backend:?}: {ids:?}");
        let expected: Vec<String> = (1..=n).map(|i| format!("KE-{i:04}")).collect();
        assert_eq!(ids, expected, "{backend:?}: ids must be KE-0001… with no gap or duplicate");
    }
}

#[test]
fn retrieve_ranks_by_the_seed_formula_computed_at_read_time() {
    for backend in BACKENDS {
        let b = BackendEnv::new(backend);
        let model = FakeModel::start(Script::default());
        let app = start(&b, Some(&model), true);
        model.route(
            EXTRACT,
            candidates(json!([
                {"type": "framework", "topic": "Database choice", "position": "Pick boring databases like Postgres for core data",
                 "reasoning": "operational maturity beats novelty", "confidence": "high", "stability": "evergreen"},
                {"type": "reaction", "topic": "Database migration review", "position": "The database migration plan was sloppy",
                 "reasoning": "it had no rollback step", "confidence": "low", "stability": "evolving"},
                {"type": "decision", "topic": "Office snacks", "position": "We stock fruit instead of candy",
                 "reasoning": "people asked for healthier food", "stability": "evolving"}
            ])),
        );
        finish(&app, &ingest(&app, "ranking transcript", "2026-10-01"));
        model.route(
            EXTRACT,
            candidates(json!([{"type": "standard", "topic": "Database backups", "position": "Test database restores every month",
                "reasoning": "an untested backup is not a backup", "stability": "evolving"}])),
        );
        finish(&app, &ingest(&app, "a transcript dated in the future", "2027-06-01"));
        let now = 1_793_145_600_000u64; // 2026-10-28T00:00:00Z: 27 days after 2026-10-01
        let clock = now.to_string();
        let a = bearer();
        let ask = |body: Value| {
            app.request(
                "POST",
                "/retrieve",
                &[("authorization", a.as_str()), ("x-mneme-clock", clock.as_str())],
                Some(body.to_string().as_bytes()),
            )
        };
        let r = ask(json!({"query": "which database should we use?"}));
        assert_eq!(r.status, 200, "{}", r.body);
        let results = r.json()["results"].as_array().unwrap().clone();
        assert_eq!(results.len(), 4);
        let took = r.json()["took_ms"].clone();
        for step in ["embed", "text", "blocks", "vector", "rank"] {
            assert!(took[step].is_u64(), "{backend:?}: took_ms.{step} is reported: {took}");
        }
        let mut last = f64::INFINITY;
        for e in &results {
            let rel = e["relevance_score"].as_f64().unwrap();
            assert!((0.0..=1.0).contains(&rel));
            // The seed's closed lists and their weights, each listed: a
            // type or confidence off them is a failure, not a default.
            let tw = match e["type"].as_str().unwrap() {
                "framework" => 1.0,
                "philosophy" => 0.9,
                "standard" => 0.8,
                "decision" => 0.7,
                "reaction" => 0.5,
                other => panic!("{backend:?} {}: type {other:?} is not on the seed's list", e["id"]),
            };
            let cw = match e["confidence"].as_str().unwrap() {
                "high" => 1.0,
                "medium" => 0.7,
                "low" => 0.4,
                other => panic!("{backend:?} {}: confidence {other:?} is not on the seed's list", e["id"]),
            };
            let fresh = match (e["stability"].as_str().unwrap(), e["source_date"].as_str().unwrap()) {
                ("evergreen", _) | (_, "2027-06-01") => 1.0,
                ("evolving", "2026-10-01") => (-27.0f64 / 21.0).exp(),
                other => panic!("unexpected {other:?}"),
            };
            let expected = 0.6 * rel + 0.15 * tw + 0.15 * cw + 0.10 * fresh;
            let got = e["final_score"].as_f64().unwrap();
            assert!((got - expected).abs() < 1e-9, "{backend:?} {}: {got} vs {expected}", e["id"]);
            assert!(got <= last, "results must be ordered by final_score");
            last = got;
            for field in ["id", "topic", "position", "reasoning", "tags", "corroboration_count", "created_at", "tier"] {
                assert!(!e[field].is_null(), "{field} missing");
            }
        }
        assert_eq!(results[0]["topic"], "Database choice", "{backend:?}");
        assert_eq!(ask(json!({"query": "database", "k": 1})).json()["results"].as_array().unwrap().len(), 1);
        for mode in ["text", "vector"] {
            let r = ask(json!({"query": "database restores", "mode": mode})).json();
            assert_eq!(r["results"][0]["topic"], "Database backups", "{backend:?} {mode}");
        }
        for bad in [
            json!({}),
            json!({"query": ""}),
            json!({"query": "x", "k": 0}),
            json!({"query": "x", "k": 51}),
            json!({"query": "x", "mode": "magic"}),
            json!({"query": "x", "colour": 1}),
        ] {
            ask(bad).assert_error(400, "invalid");
        }
    }
}

#[test]
fn the_vault_search_covers_documents_and_entries() {
    for backend in BACKENDS {
        let b = BackendEnv::new(backend);
        let app = start(&b, None, true);
        finish(&app, &ingest(&app, "We decided to hedge currency risk because revenue is in euros.", "2026-11-01"));
        let r = post(
            &app,
            "/documents",
            json!({"documents": [
                {"id": "note-1", "title": "Kettlebell programme", "text": "Three sessions a week of swings and presses.", "source_url": "https://example.com/kb"},
                {"title": "Reading list", "text": "Books on monetary policy and currency markets."}
            ]}),
        );
        assert_eq!(r.status, 201, "{}", r.body);
        let hit = get(&app, "/search?q=kettlebell%20swings&k=3");
        assert_eq!(hit["results"][0]["id"], "note-1", "{backend:?}: {hit}");
        assert_eq!(hit["results"][0]["source_url"], "https://example.com/kb");
        let both = get(&app, "/search?q=currency%20risk&k=5");
        let corpora: Vec<&str> =
            both["results"].as_array().unwrap().iter().map(|r| r["corpus"].as_str().unwrap()).collect();
        assert!(corpora.contains(&"knowledge") && corpora.contains(&"document"), "{both}");
        let only = get(&app, "/search?q=currency%20risk&corpus=document");
        assert!(only["results"].as_array().unwrap().iter().all(|r| r["corpus"] == "document"));
        let a = bearer();
        assert_eq!(app.request("DELETE", "/documents/note-1", &[("authorization", a.as_str())], None).status, 200);
        let gone = get(&app, "/search?q=kettlebell%20swings&k=3");
        assert!(gone["results"].as_array().unwrap().iter().all(|r| r["id"] != "note-1"));
        app.request("DELETE", "/documents/note-1", &[("authorization", a.as_str())], None)
            .assert_error(404, "not-found");
        for (path, code) in [
            ("/search", "invalid"),
            ("/search?q=x&k=0", "invalid"),
            ("/search?q=x&corpus=mail", "invalid"),
            ("/search?q=x&mode=fuzzy", "invalid"),
        ] {
            app.request("GET", path, &[("authorization", a.as_str())], None).assert_error(400, code);
        }
        post(&app, "/documents", json!({"documents": []})).assert_error(400, "invalid");
        post(&app, "/documents", json!({"title": "no text"})).assert_error(400, "invalid");
    }
}

/// A document's context (D-K13) is found by full text, ranks below a
/// document whose own words match, is read by the embedding, and is never
/// shown as the document's text.
#[test]
fn a_documents_context_is_searchable_below_its_own_words() {
    for backend in BACKENDS {
        let b = BackendEnv::new(backend);
        let app = start(&b, None, false);
        let turn = "Mel: Yes, I signed up for it yesterday after work.";
        let around = "Caroline: Did you join the pottery class at the community centre?";
        let r = post(
            &app,
            "/documents",
            json!({"documents": [
                {"id": "t-2", "title": "Mel", "text": turn, "context": around},
                {"id": "t-2-bare", "title": "Mel", "text": turn},
                {"id": "t-9", "title": "Caroline", "text": "The pottery class at the centre starts on Monday."},
                {"id": "t-5", "title": "Mel", "text": "We went hiking by the lake on Sunday."}
            ]}),
        );
        assert_eq!(r.status, 201, "{}", r.body);
        let ids = |mode: &str| document_ids(&app, &format!("q=pottery%20class&k=4&mode={mode}"));
        let text = ids("text");
        assert_eq!(text, ["t-9", "t-2"], "{backend:?}: own words first, then the context; nothing else matches");
        let vector = ids("vector");
        let at = |id: &str| vector.iter().position(|v| v == id).unwrap();
        assert!(at("t-2") < at("t-2-bare"), "{backend:?}: the embedding reads the context: {vector:?}");
        let hit = get(&app, "/search?q=pottery%20class&k=4&corpus=document&mode=text");
        let snippet = hit["results"][1]["snippet"].as_str().unwrap();
        assert!(snippet.contains("signed up") && !snippet.contains("Caroline"), "{snippet}");
        // Replacing the document replaces its context.
        let r = post(&app, "/documents", json!({"id": "t-2", "title": "Mel", "text": turn}));
        assert_eq!(r.status, 201, "{}", r.body);
        assert_eq!(ids("text"), ["t-9"], "{backend:?}");
        let long = "x ".repeat(10_001);
        post(&app, "/documents", json!({"text": "a", "context": long})).assert_error(400, "invalid");
        post(&app, "/documents", json!({"text": "a", "context": 7})).assert_error(400, "invalid");
    }
}

/// D-K29: a document sent with no context borrows its neighbours' words in
/// the batch, two on each side that name the same source or day; an empty
/// context keeps a document to its own words, and documents that name
/// neither lend nothing.
#[test]
fn a_batch_lends_each_document_its_neighbours_words() {
    for backend in BACKENDS {
        let b = BackendEnv::new(backend);
        let app = start(&b, None, false);
        let r = post(
            &app,
            "/documents",
            json!({"documents": [
                {"id": "c-1", "title": "Caroline", "text": "Caroline: Did you join the pottery class at the community centre?", "source_date": "2023-05-08"},
                {"id": "m-1", "title": "Mel", "text": "Mel: Yes, I signed up for it yesterday after work.", "source_date": "2023-05-08"},
                {"id": "m-2", "title": "Mel", "text": "Mel: Yes, same here.", "source_date": "2023-05-08", "context": ""},
                {"id": "h-1", "title": "Mel", "text": "Mel: We went hiking by the lake on Sunday.", "source_date": "2023-06-01"},
                {"id": "w-1", "title": "Web", "text": "A clipping on glazes.", "source_date": "2023-05-08", "source_url": "https://example.org/glaze"},
                {"id": "u-1", "title": "Note", "text": "An undated note on kilns."},
                {"id": "u-2", "title": "Note", "text": "An undated note on clay wheels."}
            ]}),
        );
        assert_eq!(r.status, 201, "{}", r.body);
        let ids = |q: &str| document_ids(&app, &format!("q={q}&k=7&mode=text"));
        assert_eq!(
            ids("pottery%20class"),
            ["c-1", "m-1"],
            "{backend:?}: its own words first, then the turn after it; the one sent with an empty context, \
             the next day's and another source's borrow nothing"
        );
        assert_eq!(ids("hiking"), ["h-1"], "{backend:?}: another day lends nothing back");
        assert_eq!(ids("glazes"), ["w-1"], "{backend:?}: another source lends nothing back");
        assert_eq!(ids("kilns"), ["u-1"], "{backend:?}: documents naming no source or day lend nothing");
        let hit = get(&app, "/search?q=pottery%20class&k=2&corpus=document&mode=text");
        let snippet = hit["results"][1]["snippet"].as_str().unwrap();
        assert!(snippet.contains("signed up") && !snippet.contains("pottery"), "{backend:?}: its own text: {snippet}");
        // Sent again alone, the turn keeps its place in its run and its
        // neighbours' words.
        let r = post(
            &app,
            "/documents",
            json!({"id": "m-1", "title": "Mel", "text": "Mel: Yes, I signed up for it yesterday after work.", "source_date": "2023-05-08"}),
        );
        assert_eq!(r.status, 201, "{}", r.body);
        assert_eq!(ids("pottery%20class"), ["c-1", "m-1"], "{backend:?}");

        // A document with a context of its own still lends its text (not
        // that context); null builds one and blank keeps none; an id sent
        // twice lends only its later version.
        let day = "2023-07-01";
        let r = post(
            &app,
            "/documents",
            json!({"documents": [
                {"id": "k-1", "text": "Kim: I bought a new telescope.", "context": "stargazing club notes", "source_date": day},
                {"id": "k-2", "text": "Lee: Nice, when?", "context": null, "source_date": day},
                {"id": "k-3", "text": "Kim: Last week.", "context": "   ", "source_date": day},
                {"id": "d-1", "text": "We went sailing.", "source_date": day},
                {"id": "k-5", "text": "Lee: Sounds fun.", "source_date": day},
                {"id": "d-1", "text": "We went rowing.", "source_date": day}
            ]}),
        );
        assert_eq!(r.status, 201, "{}", r.body);
        assert_eq!(ids("telescope"), ["k-1", "k-2"], "{backend:?}: null borrows, blank does not");
        assert_eq!(ids("stargazing"), ["k-1"], "{backend:?}: a context is not lent on");
        assert_eq!(ids("rowing"), ["d-1", "k-5"], "{backend:?}");
        assert!(ids("sailing").is_empty(), "{backend:?}: the replaced version lends nothing");
    }
}

/// D-K29 across requests: turns sent one per request, as a chat or a
/// meeting's transcript arrives, borrow their run's words as a batch's do;
/// the turns before a new one are embedded again with it, a replaced turn
/// keeps its place and lends its new words only, a deleted one lends none,
/// and an export restored elsewhere keeps the runs going.
#[test]
fn turns_sent_one_by_one_lend_each_other_their_words_across_requests() {
    let turns = [
        ("a-1", "Ana: Should we book the cabin in the Gerês mountains for August?"),
        ("b-1", "Bruno: Yes, book it."),
        ("a-2", "Ana: Done, and I paid the deposit."),
        ("b-2", "Bruno: Great, thanks."),
        ("a-3", "Ana: I also found a kayak rental nearby."),
    ];
    for backend in BACKENDS {
        let b = BackendEnv::new(backend);
        let app = start(&b, None, false);
        let day = "2024-03-02";
        for (id, text) in turns {
            let r = post(&app, "/documents", json!({"id": id, "title": "chat", "text": text, "source_date": day}));
            assert_eq!(r.status, 201, "{}", r.body);
        }
        // Another day's and an unsourced note, sent between, lend nothing.
        post(
            &app,
            "/documents",
            json!({"id": "x-1", "text": "A note on a cabin in Gerês.", "source_date": "2024-03-03"}),
        );
        post(&app, "/documents", json!({"id": "x-2", "text": "An undated kayak note."}));
        let ids = |q: &str| {
            let mut got = document_ids(&app, &format!("q={}&k=10&mode=text", q.replace(' ', "%20")));
            got.retain(|id| !id.starts_with('x'));
            got.sort();
            got
        };
        assert_eq!(
            ids("Gerês cabin"),
            ["a-1", "a-2", "b-1"],
            "{backend:?}: the two turns after it, sent in later requests, read its words"
        );
        assert_eq!(ids("deposit"), ["a-1", "a-2", "a-3", "b-1", "b-2"], "{backend:?}: two on each side");
        assert_eq!(ids("kayak"), ["a-2", "a-3", "b-2"], "{backend:?}: the turns before the last were built again");
        // Replaced in place: its new words reach its neighbours, its old
        // ones leave them.
        let r = post(
            &app,
            "/documents",
            json!({"id": "a-2", "title": "chat", "text": "Ana: Done, the booking is confirmed.", "source_date": day}),
        );
        assert_eq!(r.status, 201, "{}", r.body);
        assert!(ids("deposit").is_empty(), "{backend:?}: {:?}", ids("deposit"));
        assert_eq!(ids("confirmed"), ["a-1", "a-2", "a-3", "b-1", "b-2"], "{backend:?}");
        // Deleted: no neighbour keeps its words, and the run closes over
        // the gap.
        let auth = bearer();
        let r = app.request("DELETE", "/documents/a-2", &[("authorization", auth.as_str())], None);
        assert_eq!(r.status, 200, "{}", r.body);
        assert!(ids("confirmed").is_empty(), "{backend:?}: {:?}", ids("confirmed"));
        assert_eq!(ids("kayak"), ["a-3", "b-1", "b-2"], "{backend:?}: b-1 now reads a-3");
        // Exported and restored into a fresh store, the run goes on: a turn
        // sent after the restore borrows the restored ones' words and
        // lends them its own.
        let export = app.request("GET", "/privacy/export", &[("authorization", auth.as_str())], None);
        assert_eq!(export.status, 200, "{}", export.body);
        drop(app);
        let b2 = BackendEnv::new(backend);
        let app2 = start(&b2, None, false);
        let headers = [("authorization", auth.as_str()), ("content-type", "application/json")];
        let r = app2.request("POST", "/privacy/import", &headers, Some(export.body.as_bytes()));
        assert_eq!(r.status, 200, "{}", r.body);
        let r = post(
            &app2,
            "/documents",
            json!({"id": "b-3", "title": "chat", "text": "Bruno: I'll bring the paddles.", "source_date": day}),
        );
        assert_eq!(r.status, 201, "{}", r.body);
        let mut found = document_ids(&app2, "q=paddles&k=10&mode=text");
        found.sort();
        assert_eq!(found, ["a-3", "b-2", "b-3"], "{backend:?}: the restored run's last two read the new turn");
        let found = document_ids(&app2, "q=kayak&k=10&mode=text");
        assert!(found.contains(&"b-3".to_string()), "{backend:?}: the new turn reads the restored ones: {found:?}");
    }
}

/// D-K19: an item is found by its date's day, month and year: a
/// document by its `source_date`, else by the day it was added, and an
/// entry by its source's date; the words are an index, never shown.
#[test]
fn an_items_date_is_searchable_by_its_day_month_and_year() {
    // The day the undated document is added, on the app's test clock: a
    // real day could be in October, or a 29th, and match what the dated
    // ones are asked by.
    let added = mneme_time::calendar::days_from_date(2026, 11, 28).unwrap() as u64 * 86_400_000 + 43_200_000;
    for backend in BACKENDS {
        let b = BackendEnv::new(backend);
        let app = start(&b, None, true);
        let documents = json!({"documents": [
            {"id": "fence", "title": "Garden", "text": "We repainted the fence green.", "source_date": "2023-05-08"},
            {"id": "shed", "title": "Garden", "text": "We repainted the shed blue.", "source_date": "2023-10-13"},
            {"id": "gate", "title": "Garden", "text": "We repainted the gate red."}
        ]});
        let r = app.call_as(TEST_KEY, "POST", "/documents", Some(&documents), Some(added));
        assert_eq!(r.status, 201, "{}", r.body);
        let ids = |q: &str| document_ids(&app, &format!("q={}&k=3&mode=text", q.replace(' ', "%20")));
        assert_eq!(ids("What did we repaint in May 2023?")[0], "fence", "{backend:?}");
        assert_eq!(ids("What was repainted on 13 October, 2023?")[0], "shed", "{backend:?}");
        assert_eq!(ids("October"), ["shed"], "{backend:?}: only the dated words match");
        assert_eq!(ids("November 2026"), ["gate"], "{backend:?}: undated is the day it was added");
        let hit = get(&app, "/search?q=October&k=3&corpus=document&mode=text");
        let snippet = hit["results"][0]["snippet"].as_str().unwrap();
        assert!(!snippet.contains("October"), "{backend:?}: the date's words are not the text: {snippet}");
        // A replaced document is found by its new date only.
        let r = post(
            &app,
            "/documents",
            json!({"id": "shed", "title": "Garden", "text": "We repainted the shed blue.", "source_date": "2024-02-29"}),
        );
        assert_eq!(r.status, 201, "{}", r.body);
        assert!(ids("October").is_empty(), "{backend:?}");
        assert_eq!(ids("29 February 2024"), ["shed"], "{backend:?}");
        // An entry is found by its source's date.
        let job = ingest(&app, "Alice: Never deploy on a Friday, since nobody is around to fix it.", "2022-07-04");
        assert_eq!(finish(&app, &job)["status"], "done");
        let found = get(&app, "/search?q=July%202022&k=5&corpus=knowledge&mode=text");
        let ids: Vec<&str> = found["results"].as_array().unwrap().iter().map(|h| h["id"].as_str().unwrap()).collect();
        assert_eq!(ids, ["KE-0001"], "{backend:?}: {found}");
        assert_terms_recount(&b, "after dated writes");
    }
}

/// D-K15: once a query's words are common, the full-text read ranks only
/// the rows holding its rare words; a query of common words only, or with
/// a word no row holds, still answers. PostgreSQL's term counts stay equal
/// to a recount through additions, replacements and deletions.
#[test]
fn the_full_text_read_narrows_to_the_rare_terms_once_the_common_ones_are_many() {
    let filler = |from: usize, n: usize| -> Vec<Value> {
        (from..from + n)
            .map(|i| {
                json!({"id": format!("f-{i}"), "title": "Review",
                "text": format!("Roadmap review {i}: the roadmap, the roadmap budget and the standup.")})
            })
            .collect()
    };
    for backend in BACKENDS {
        let b = BackendEnv::new(backend);
        let app = start(&b, None, true);
        // A word only a knowledge entry holds.
        let job = ingest(&app, "We decided to hold the offsite in Timbuktu because flights are cheap.", "2026-11-01");
        assert_eq!(finish(&app, &job)["status"], "done", "{backend:?}");
        let rare: Vec<Value> = (0..3)
            .map(|i| {
                json!({"id": format!("z-{i}"), "title": "Offsite",
                "text": format!("Offsite plan {i}: the team offsite moves to Zanzibar in May, after the roadmap.")})
            })
            .collect();
        let r = post(&app, "/documents", json!({"documents": rare}));
        assert_eq!(r.status, 201, "{}", r.body);
        let r = post(&app, "/documents", json!({"documents": filler(0, 100)}));
        assert_eq!(r.status, 201, "{}", r.body);
        let ids = |q: &str, mode: &str| document_ids(&app, &format!("q={q}&k=50&mode={mode}"));
        let zanzibar = |v: &[String]| v.iter().filter(|i| i.starts_with("z-")).count();
        // Below the budget every row holding any word is ranked.
        let few = ids("roadmap%20zanzibar", "text");
        assert_eq!(few.len(), 50, "{backend:?}: {few:?}");
        assert_eq!(zanzibar(&few[..3]), 3, "{backend:?}: the rare word ranks first: {few:?}");
        assert_terms_recount(&b, "after the first documents");

        for from in (100..2_100).step_by(250) {
            let r = post(&app, "/documents", json!({"documents": filler(from, 250)}));
            assert_eq!(r.status, 201, "{}", r.body);
        }
        // "roadmap" is now in 2,103 rows: only those holding "zanzibar" are ranked.
        assert_eq!(ids("roadmap%20zanzibar", "text").len(), 3, "{backend:?}");
        let hybrid = ids("roadmap%20zanzibar", "hybrid");
        assert_eq!(zanzibar(&hybrid[..3]), 3, "{backend:?}: {hybrid:?}");
        // Every word common: the newest items are ranked, and found.
        let common = ids("roadmap%20standup%20budget", "text");
        assert_eq!(common.len(), 50, "{backend:?}");
        assert!(common.iter().all(|i| i.starts_with("f-")), "{backend:?}: {common:?}");
        // A word no row holds does not empty the answer, nor one that only
        // another corpus holds (SQLite counts a word over every corpus).
        assert_eq!(ids("roadmap%20zanzibra", "text").len(), 50, "{backend:?}");
        assert_eq!(ids("roadmap%20timbuktu", "text").len(), 50, "{backend:?}");
        let entries = get(&app, "/search?q=roadmap%20timbuktu&k=5&corpus=knowledge&mode=text");
        assert_eq!(entries["results"].as_array().unwrap().len(), 1, "{backend:?}: {entries}");

        // Replacing and deleting keep the counts true.
        let r = post(&app, "/documents", json!({"id": "z-1", "title": "Offsite", "text": "The offsite is cancelled."}));
        assert_eq!(r.status, 201, "{}", r.body);
        let a = bearer();
        let r = app.request("DELETE", "/documents/z-2", &[("authorization", a.as_str())], None);
        assert_eq!(r.status, 200, "{}", r.body);
        assert_eq!(ids("roadmap%20zanzibar", "text"), ["z-0"], "{backend:?}");
        assert_terms_recount(&b, "after a replacement and a deletion");
    }
}

/// D-K14: full text ranks by how rare the matched words are on both
/// backends (SQLite's bm25, PostgreSQL's sum of the kept frequencies'
/// weights): a row holding the one rare word comes before rows that repeat
/// a word nearly every row holds, and a rare word in a document's own text
/// counts more than the same word in its context.
#[test]
fn full_text_ranks_a_rare_word_above_a_common_word_repeated() {
    for backend in BACKENDS {
        let b = BackendEnv::new(backend);
        let app = start(&b, None, true);
        let mut docs: Vec<Value> = (0..20)
            .map(|i| {
                json!({"id": format!("s-{i}"), "title": "Standup",
                "text": format!("Standup {i}: the standup ran long, standup after standup, and the next standup too.")})
            })
            .collect();
        docs.push(json!({"id": "own", "title": "Weekend", "text": "We rented a kayak on Saturday morning."}));
        docs.push(json!({"id": "context", "title": "Weekend", "text": "Plans for Saturday morning.",
                         "context": "the kayak rental shop by the river"}));
        let r = post(&app, "/documents", json!({"documents": docs}));
        assert_eq!(r.status, 201, "{}", r.body);
        let hits = get(&app, "/search?q=standup%20kayak&k=5&corpus=document&mode=text");
        let ids = result_ids(&hits);
        assert_eq!(ids.len(), 5, "{backend:?}: {hits}");
        assert_eq!(ids[..2], ["own", "context"], "{backend:?}: {ids:?}");
        assert_terms_recount(&b, "after the documents");
    }
}

/// Rows that tie on rarity are ordered by how well they match, also past
/// the fiftieth row: PostgreSQL computes that order only for the rows tied
/// with its cut-off (D-K14), so the oldest row, which holds the common word
/// four times, must still come straight after the rare word's rows.
#[test]
fn rows_tied_on_rarity_are_ordered_by_their_match_past_the_cut_off() {
    for backend in BACKENDS {
        let b = BackendEnv::new(backend);
        let app = start(&b, None, true);
        let mut docs = vec![
            json!({"id": "walls", "title": "Harbour", "text": "Harbour walls, harbour lights, a harbour at dusk."}),
        ];
        docs.extend((0..60).map(|i| json!({"id": format!("n-{i}"), "title": "Note", "text": format!("Note {i}: we walked along the harbour.")})));
        docs.extend((0..3).map(|i| json!({"id": format!("l-{i}"), "title": "Coast", "text": format!("Trip {i}: the lighthouse was closed.")})));
        let r = post(&app, "/documents", json!({"documents": docs}));
        assert_eq!(r.status, 201, "{}", r.body);
        let hits = get(&app, "/search?q=harbour%20lighthouse&k=5&corpus=document&mode=text");
        let ids = result_ids(&hits);
        assert_eq!(ids.len(), 5, "{backend:?}: {hits}");
        let mut rare = ids[..3].to_vec();
        rare.sort();
        assert_eq!(rare, ["l-0", "l-1", "l-2"], "{backend:?}: {ids:?}");
        assert_eq!(ids[3], "walls", "{backend:?}: {ids:?}");
    }
}

/// On PostgreSQL, the document frequencies and item counts the store keeps
/// (D-K15, D-K14) equal a recount of the indexed rows, and there are some.
fn assert_terms_recount(b: &BackendEnv, when: &str) {
    let Some(db) = &b.pg else { return };
    let mut c = db.client();
    // Rows in one query and not the other, either way.
    let mut differ = |kept: &str, recount: &str| -> i64 {
        c.query_one(
            &format!("SELECT count(*) FROM (({kept} EXCEPT {recount}) UNION ALL ({recount} EXCEPT {kept})) AS x"),
            &[],
        )
        .unwrap()
        .get(0)
    };
    let terms = differ(
        "SELECT corpus, lexeme, df FROM search_terms",
        "SELECT corpus, l, count(*) FROM search_index, unnest(tsvector_to_array(tsv)) AS l GROUP BY corpus, l",
    );
    assert_eq!(terms, 0, "{when}: the kept term counts differ from a recount in {terms} rows");
    // A corpus emptied may keep its item count at 0.
    let items = differ(
        "SELECT corpus, items FROM search_corpora WHERE items <> 0",
        "SELECT corpus, count(*) FROM search_index GROUP BY corpus",
    );
    assert_eq!(items, 0, "{when}: the kept item counts differ from a recount in {items} corpora");
    let n: i64 = c.query_one("SELECT count(*) FROM search_terms", &[]).unwrap().get(0);
    assert!(n > 0, "{when}: no term counts kept");
}

#[test]
fn a_failing_model_retries_the_job_then_fails_it_and_a_reingest_requeues_it() {
    for backend in BACKENDS {
        let b = BackendEnv::new(backend);
        let model = FakeModel::start(Script::default());
        model.route(EXTRACT, Script { status: 500, reply: "boom".into(), ..Default::default() });
        let app = start(&b, Some(&model), true);
        let text = "We decided to keep the monolith because the team is small.";
        let job = ingest(&app, text, "2026-11-01");
        let j = finish(&app, &job);
        assert_eq!(j["status"], "failed", "{j}");
        assert_eq!(j["attempts"], 3);
        assert!(j["error"].as_str().unwrap().contains("extraction"), "{j}");
        assert_eq!(get(&app, "/knowledge/entries")["total"], 0, "a failed job writes nothing");
        model.route(
            EXTRACT,
            candidates(json!([{"type": "decision", "topic": "Monolith", "position": "Keep the monolith",
        "reasoning": "the team is small"}])),
        );
        let again = ingest_raw(
            &app,
            json!({"source_type": "meeting", "source_date": "2026-11-01", "text": text}).to_string().as_bytes(),
        );
        assert_eq!((again.status, again.json()["requeued"].as_bool()), (200, Some(true)));
        assert_eq!(finish(&app, &job)["status"], "done");
        assert_eq!(get(&app, "/knowledge/entries")["total"], 1);
    }
}

/// The search index's sequence numbers and the signature blocks' of one
/// corpus, read from the database itself, each sorted (duplicates kept).
fn index_and_blocks(app: &App, b: &BackendEnv, corpus: &str) -> (Vec<i64>, Vec<i64>) {
    let seqs_of = |blob: &[u8]| -> Vec<i64> {
        blob.chunks_exact(8).map(|c| i64::from_le_bytes(c.try_into().unwrap())).collect::<Vec<_>>()
    };
    let (mut index, mut blocks) = match &b.pg {
        Some(db) => {
            let mut c = db.client();
            let index: Vec<i64> = c
                .query("SELECT seq FROM search_index WHERE corpus = $1", &[&corpus])
                .unwrap()
                .iter()
                .map(|r| r.get(0))
                .collect();
            let blocks: Vec<i64> = c
                .query("SELECT n, seqs FROM vector_blocks WHERE corpus = $1", &[&corpus])
                .unwrap()
                .iter()
                .flat_map(|r| {
                    let s = seqs_of(r.get(1));
                    assert_eq!(s.len() as i64, r.get::<_, i64>(0), "a block's n counts its signatures");
                    s
                })
                .collect();
            (index, blocks)
        }
        None => {
            let c = rusqlite::Connection::open(app.state.path().join("sqlite_db.db")).unwrap();
            let mut q = c.prepare("SELECT seq FROM search_index WHERE corpus = ?1").unwrap();
            let index: Vec<i64> = q.query_map([corpus], |r| r.get(0)).unwrap().map(Result::unwrap).collect();
            let mut q = c.prepare("SELECT n, seqs FROM vector_blocks WHERE corpus = ?1").unwrap();
            let blocks: Vec<(i64, Vec<u8>)> =
                q.query_map([corpus], |r| Ok((r.get(0)?, r.get(1)?))).unwrap().map(Result::unwrap).collect();
            let blocks: Vec<i64> = blocks
                .iter()
                .flat_map(|(n, blob)| {
                    let s = seqs_of(blob);
                    assert_eq!(s.len() as i64, *n, "a block's n counts its signatures");
                    s
                })
                .collect();
            (index, blocks)
        }
    };
    index.sort_unstable();
    blocks.sort_unstable();
    (index, blocks)
}

/// A batch is written in a few statements (#50), and what it means is
/// unchanged: an id given twice keeps the later document, a batch posted
/// again replaces every document whole, rows and signatures stay one per
/// document, and term counts stay true.
#[test]
fn a_batch_posted_again_replaces_its_documents_whole_on_both_backends() {
    for backend in BACKENDS {
        let b = BackendEnv::new(backend);
        let app = start(&b, None, false);
        let batch = |word: &str| {
            let mut docs: Vec<Value> = (0..60)
                .map(|i| json!({"id": format!("b-{i}"), "text": format!("Batch note {i} about the {word} orchard.")}))
                .collect();
            docs.push(json!({"id": "b-7", "text": format!("The later b-7: the {word} greenhouse.")}));
            json!({"documents": docs})
        };
        let r = post(&app, "/documents", batch("walnut"));
        assert_eq!(r.status, 201, "{backend:?}: {}", r.body);
        assert_eq!(r.json()["ids"].as_array().unwrap().len(), 61, "every document given gets its id back");
        let (index, blocks) = index_and_blocks(&app, &b, "document");
        assert_eq!(index.len(), 60, "{backend:?}: one row per id");
        assert_eq!(blocks, index, "{backend:?}: one signature per row");
        let hit = get(&app, "/search?q=walnut%20greenhouse&corpus=document&mode=text");
        assert_eq!(hit["results"][0]["id"], "b-7", "{backend:?}: the later b-7 is kept: {hit}");
        let r = post(&app, "/documents", batch("quince"));
        assert_eq!(r.status, 201, "{backend:?}: {}", r.body);
        let (again, blocks) = index_and_blocks(&app, &b, "document");
        assert_eq!(again.len(), 60, "{backend:?}: replaced, not added");
        assert_eq!(blocks, again, "{backend:?}: the old signatures went with their rows");
        let old = get(&app, "/search?q=walnut&corpus=document&mode=text");
        assert_eq!(old["results"].as_array().unwrap().len(), 0, "{backend:?}: the old text is gone: {old}");
        let new = get(&app, "/search?q=quince%20orchard&corpus=document&k=5");
        assert_eq!(new["results"].as_array().unwrap().len(), 5, "{backend:?}: {new}");
        assert_terms_recount(&b, "after a batch replaced itself");
    }
}

/// Issue #25 item 4: twenty writers at once (sixteen posting documents,
/// four running the knowledge tick that writes entries) lose no row and
/// no signature, and no signature is written twice; deleting half the
/// documents takes their signatures out of the blocks, so a search never
/// returns a deleted id and the vector scan shrinks with the store.
#[test]
fn concurrent_writers_lose_no_signature_and_deletes_compact_the_scan() {
    const WRITERS: usize = 16;
    const EACH: usize = 5;
    let doc = |t: usize, i: usize| format!("doc-w{t}-{i}");
    for backend in BACKENDS {
        let b = BackendEnv::new(backend);
        let app = start(&b, None, true);
        let jobs: Vec<String> = [
            "move payroll to a new provider because the old one failed an audit",
            "hire a second designer because the research backlog keeps growing",
            "sunset the mobile beta because fewer than ten people opened it",
            "rent a bigger warehouse because orders doubled since spring",
            "translate the docs into Spanish because a third of signups are from Latin America",
            "freeze the pricing page because every change confused customers",
        ]
        .iter()
        .map(|d| ingest(&app, &format!("We decided to {d}."), "2026-11-01"))
        .collect();
        std::thread::scope(|s| {
            for t in 0..WRITERS {
                let app = &app;
                s.spawn(move || {
                    for i in 0..EACH {
                        let body = json!({"id": doc(t, i), "title": format!("Field note {t}.{i}"),
                            "text": format!("Field note about topic quill{t}x{i}: sessions, budgets and the plan number {i}.")});
                        let r = post(app, "/documents", body);
                        assert_eq!(r.status, 201, "writer {t}, document {i}: {}", r.body);
                    }
                });
            }
            for _ in 0..4 {
                s.spawn(|| {
                    for _ in 0..3 {
                        tick(&app);
                    }
                });
            }
        });
        for j in &jobs {
            assert_eq!(finish(&app, j)["status"], "done", "{backend:?}");
        }
        let (index, blocks) = index_and_blocks(&app, &b, "document");
        assert_eq!(index.len(), WRITERS * EACH, "{backend:?}: every document has its row");
        assert_eq!(blocks, index, "{backend:?}: every document has exactly one signature");
        let (entries, entry_sigs) = index_and_blocks(&app, &b, "knowledge");
        assert!(entries.len() >= 6, "{backend:?}: the ingests wrote entries: {entries:?}");
        assert_eq!(entry_sigs, entries, "{backend:?}: every entry has exactly one signature");
        assert_terms_recount(&b, "after twenty concurrent writers");

        // Blocks written before migration 0012 have no bounds; the first
        // removal must read them whole and give them their bounds.
        let unbound = "UPDATE vector_blocks SET lo = NULL, hi = NULL WHERE corpus = 'document'";
        match &b.pg {
            Some(db) => assert!(db.client().execute(unbound, &[]).unwrap() > 0),
            None => assert!(
                rusqlite::Connection::open(app.state.path().join("sqlite_db.db"))
                    .unwrap()
                    .execute(unbound, [])
                    .unwrap()
                    > 0
            ),
        }

        // Delete every other document, from eight threads at once.
        let deleted: Vec<String> = (0..WRITERS)
            .flat_map(|t| (0..EACH).map(move |i| (t, i)))
            .filter(|(t, i)| (t + i) % 2 == 0)
            .map(|(t, i)| doc(t, i))
            .collect();
        std::thread::scope(|s| {
            for part in deleted.chunks(deleted.len().div_ceil(8)) {
                let app = &app;
                s.spawn(move || {
                    let a = bearer();
                    for id in part {
                        let r =
                            app.request("DELETE", &format!("/documents/{id}"), &[("authorization", a.as_str())], None);
                        assert_eq!(r.status, 200, "DELETE {id}: {}", r.body);
                    }
                });
            }
        });
        let (index, blocks) = index_and_blocks(&app, &b, "document");
        assert_eq!(index.len(), WRITERS * EACH - deleted.len(), "{backend:?}");
        assert_eq!(
            blocks, index,
            "{backend:?}: the blocks hold exactly the documents left, so the scan shrank by half"
        );
        assert_eq!(index_and_blocks(&app, &b, "knowledge").1, entries, "{backend:?}: other corpora untouched");
        assert_terms_recount(&b, "after concurrent deletions");

        for mode in ["vector", "hybrid", "text"] {
            for (t, i) in [(0, 0), (3, 1), (2, 1), (4, 3), (15, 4)] {
                let hits = get(&app, &format!("/search?q=topic%20quill{t}x{i}&k=50&corpus=document&mode={mode}"));
                let ids = result_ids(&hits);
                assert!(
                    ids.iter().all(|id| !deleted.iter().any(|d| d == id)),
                    "{backend:?} {mode}: a deleted id came back: {ids:?}"
                );
                let kept = (t + i) % 2 == 1;
                if kept && mode != "vector" {
                    assert_eq!(ids.first().copied(), Some(doc(t, i).as_str()), "{backend:?} {mode}: {hits}");
                }
            }
        }
    }
}

/// A statement on the backend's own database, for what HTTP does not show.
fn db_exec(app: &App, b: &BackendEnv, statement: &str) -> u64 {
    match &b.pg {
        Some(db) => db.client().execute(statement, &[]).unwrap(),
        None => {
            rusqlite::Connection::open(app.state.path().join("sqlite_db.db")).unwrap().execute(statement, []).unwrap()
                as u64
        }
    }
}

/// A count on the backend's own database.
fn db_count(app: &App, b: &BackendEnv, statement: &str) -> i64 {
    match &b.pg {
        Some(db) => db.client().query_one(statement, &[]).unwrap().get(0),
        None => rusqlite::Connection::open(app.state.path().join("sqlite_db.db"))
            .unwrap()
            .query_row(statement, [], |r| r.get(0))
            .unwrap(),
    }
}

/// Filler text that matches no query of the tests: the rows that bring a
/// corpus to the vector index's threshold.
fn routine_lines() -> Vec<String> {
    (0..50).map(|i| format!("routine log line {i} about nothing in particular")).collect()
}

/// The vector index's upkeep, as the cron runs it; `corpus`'s report.
fn index_run(app: &App, corpus: &str) -> Value {
    let r = app.request("POST", "/tick/index", &[("authorization", mneme_e2e::CRON_AUTH)], None);
    assert_eq!(r.status, 200, "tick: {}", r.body);
    let corpora = r.json()["result"]["corpora"].clone();
    assert_eq!(corpora.as_array().unwrap().len(), 3, "{corpora}");
    corpora.as_array().unwrap().iter().find(|c| c["corpus"] == corpus).unwrap().clone()
}

fn index_tick(app: &App) -> Value {
    index_run(app, "document")
}

/// D-K16: the upkeep runs each corpus on its own. A corpus whose upkeep
/// fails (here its centroids row is corrupt) fails the run, naming it,
/// while the corpora after it still have theirs: the documents' flat
/// block moves into its lists. Once the row is mended the run succeeds.
#[test]
fn a_corpus_whose_index_upkeep_fails_does_not_stop_the_others() {
    let dir = tempfile::tempdir().unwrap();
    let served = mneme_e2e::without_crons(dir.path(), &["index"]);
    for backend in BACKENDS {
        let b = BackendEnv::new(backend);
        let app = start_served(&served, &b, None);
        let docs: Vec<Value> = (0..3)
            .map(|i| json!({"id": format!("memo-{i}"), "text": format!("Memo {i} about the quarry's new fence.")}))
            .collect();
        let r = post(&app, "/documents", json!({"documents": docs}));
        assert_eq!(r.status, 201, "{}", r.body);
        mneme_e2e::seed::filler(&b, app.state.path(), "knowledge", 10, &routine_lines(), &mut mneme_e2e::seed::Rng(3));
        // Knowledge comes first in the upkeep's order: three bytes are no
        // centroids. The documents get 256 valid (if useless) ones.
        let (corrupt, zeros) = match b.pg {
            Some(_) => ("'\\x010203'::bytea", "decode(repeat('00', 196608), 'hex')"),
            None => ("X'010203'", "zeroblob(196608)"),
        };
        let row = |corpus: &str, blob: &str| {
            format!(
                "INSERT INTO vector_centroids (corpus, centroids, trained_on, trained_ms) VALUES ('{corpus}', {blob}, 1, 1)"
            )
        };
        assert_eq!(db_exec(&app, &b, &row("knowledge", corrupt)), 1);
        assert_eq!(db_exec(&app, &b, &row("document", zeros)), 1);
        let flat = |corpus: &str| {
            db_count(&app, &b, &format!("SELECT count(*) FROM vector_blocks WHERE corpus = '{corpus}' AND list < 0"))
        };
        assert_eq!((flat("knowledge"), flat("document")), (1, 1), "{backend:?}");

        let r = app.request("POST", "/tick/index", &[("authorization", mneme_e2e::CRON_AUTH)], None);
        assert_eq!(r.status, 500, "{backend:?}: {}", r.body);
        let e = &r.json()["error"];
        assert_eq!(e["code"], "internal", "{backend:?}: {e}");
        let message = e["message"].as_str().unwrap();
        assert!(
            message.starts_with(
                "the vector index's upkeep failed for knowledge: internal: a corpus's centroids are corrupt"
            ),
            "{backend:?}: {message}"
        );
        let every: Value = serde_json::from_str(message.split_once("every corpus: ").unwrap().1).unwrap();
        assert_eq!(
            every["corpora"][1],
            json!({"corpus": "document", "trained": false, "lists": 256, "moved": 3, "flat": 0}),
            "{backend:?}: {message}"
        );
        assert_eq!(every["corpora"][0]["error"]["code"], "internal", "{message}");
        assert_eq!((flat("knowledge"), flat("document")), (1, 0), "{backend:?}: the documents' block moved");
        let hits = get(&app, "/search?q=quarry%20fence&k=5&corpus=document&mode=hybrid");
        assert_eq!(hits["results"].as_array().map(Vec::len), Some(3), "{backend:?}: {hits}");
        let status = get(&app, "/status");
        let run = status["jobs"].as_array().unwrap().iter().find(|j| j["job"] == "index").unwrap();
        assert_eq!(run["ok"], false, "{backend:?}: {run}");

        assert_eq!(db_exec(&app, &b, "DELETE FROM vector_centroids WHERE corpus = 'knowledge'"), 1);
        let k = index_run(&app, "knowledge");
        assert_eq!((k["lists"].as_u64(), k["flat"].as_u64()), (Some(0), Some(10)), "{backend:?}: {k}");
    }
}

/// D-K16: a corpus's signatures stay flat until it holds 20,000; the
/// upkeep then trains its 256 centroids and moves every flat block into
/// lists. A search reads only the lists nearest its query and still finds
/// each document by its own words, before, during and after the move; a new
/// document lands in its list, a deleted one leaves it, and delete-all
/// takes the centroids with the data they were drawn from. `/retrieve`
/// shows the scan reading every signature before the lists, and under a
/// fifth of them after.
#[test]
fn the_vector_index_trains_at_20000_signatures_and_every_document_is_still_found() {
    let texts: Vec<String> = (0..30)
        .map(|i| {
            format!(
                "Field note {i}: the {} met about the {} and chose the {} option.",
                ["board", "crew", "council", "guild", "panel"][i % 5],
                ["harbour", "orchard", "library", "bridge", "market", "observatory"][i % 6],
                ["cheaper", "slower", "bolder"][i % 3]
            )
        })
        .collect();
    let filler_texts = routine_lines();
    // The test runs the upkeep itself, one run at a time.
    let dir = tempfile::tempdir().unwrap();
    let served = mneme_e2e::without_crons(dir.path(), &["index"]);
    for backend in BACKENDS {
        let b = BackendEnv::new(backend);
        let app = start_served(&served, &b, None);
        let docs: Vec<Value> =
            texts.iter().enumerate().map(|(i, t)| json!({"id": format!("note-{i}"), "text": t})).collect();
        let r = post(&app, "/documents", json!({"documents": docs}));
        assert_eq!(r.status, 201, "{}", r.body);
        // Below the threshold the upkeep does nothing.
        let d = index_tick(&app);
        assert_eq!(
            (d["trained"].as_bool(), d["lists"].as_u64(), d["moved"].as_u64(), d["flat"].as_u64()),
            (Some(false), Some(0), Some(0), Some(30)),
            "{backend:?}: {d}"
        );
        // Each document is the first vector hit for its own words.
        let first_hit = |i: usize, mode: &str| -> String {
            let q = texts[i].replace(' ', "%20").replace(':', "%3A");
            let hits = get(&app, &format!("/search?q={q}&k=10&corpus=document&mode={mode}"));
            hits["results"][0]["id"].as_str().unwrap_or_default().to_string()
        };
        let all_found = |when: &str, gone: &[usize]| {
            for i in (0..texts.len()).filter(|i| !gone.contains(i)) {
                for mode in ["vector", "hybrid"] {
                    assert_eq!(first_hit(i, mode), format!("note-{i}"), "{backend:?} {mode} {when}");
                }
            }
        };
        all_found("with a flat scan", &[]);

        mneme_e2e::seed::filler(&b, app.state.path(), "document", 19_970, &filler_texts, &mut mneme_e2e::seed::Rng(7));
        all_found("over 20,000 flat signatures", &[]);
        // Training is seconds of CPU; between its steps the tick's
        // instance serves the other requests it was given (D-F17), so a
        // tick sent while it trains answers first.
        let (d, answered_first) = std::thread::scope(|s| {
            let training = s.spawn(|| index_tick(&app));
            // The run claims the training, reads its sample (a fraction of
            // a second), then trains for seconds: the tick goes in then.
            let claimed = || db_count(&app, &b, "SELECT count(*) FROM vector_training WHERE corpus = 'document'") > 0;
            while !claimed() && !training.is_finished() {
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            std::thread::sleep(std::time::Duration::from_millis(700));
            let r = app.request("POST", "/tick/tools", &[("authorization", mneme_e2e::CRON_AUTH)], None);
            assert_eq!(r.status, 200, "{backend:?}: {}", r.body);
            let first = !training.is_finished();
            (training.join().unwrap(), first)
        });
        assert!(answered_first, "{backend:?}: a tick waited for the training to end");
        assert_eq!(
            (d["trained"].as_bool(), d["lists"].as_u64(), d["moved"].as_u64(), d["flat"].as_u64()),
            (Some(true), Some(256), Some(20_000), Some(0)),
            "{backend:?}: {d}"
        );
        let d = index_tick(&app);
        assert_eq!((d["trained"].as_bool(), d["moved"].as_u64()), (Some(false), Some(0)), "{backend:?}: {d}");
        assert_eq!(db_count(&app, &b, "SELECT count(*) FROM vector_blocks WHERE corpus = 'document' AND list < 0"), 0);
        let lists = db_count(&app, &b, "SELECT count(DISTINCT list) FROM vector_blocks WHERE corpus = 'document'");
        assert!(lists > 200, "{backend:?}: the signatures spread over {lists} lists");
        let (index, blocks) = index_and_blocks(&app, &b, "document");
        assert_eq!(blocks, index, "{backend:?}: each document has exactly one signature after the move");
        all_found("reading 32 of 256 lists", &[]);

        // New documents go to their lists; deleted ones leave them.
        let r =
            post(&app, "/documents", json!({"id": "note-new", "text": "A late note: the lighthouse keeper retired."}));
        assert_eq!(r.status, 201, "{}", r.body);
        assert_eq!(db_count(&app, &b, "SELECT count(*) FROM vector_blocks WHERE corpus = 'document' AND list < 0"), 0);
        let hits = get(
            &app,
            "/search?q=A%20late%20note%3A%20the%20lighthouse%20keeper%20retired.&k=5&corpus=document&mode=vector",
        );
        assert_eq!(hits["results"][0]["id"], "note-new", "{backend:?}: {hits}");
        let a = bearer();
        let gone: Vec<usize> = (0..texts.len()).step_by(3).collect();
        for i in &gone {
            let r = app.request("DELETE", &format!("/documents/note-{i}"), &[("authorization", a.as_str())], None);
            assert_eq!(r.status, 200, "{}", r.body);
        }
        let (index, blocks) = index_and_blocks(&app, &b, "document");
        assert_eq!(blocks, index, "{backend:?}: a deletion takes the signature out of its list");
        for i in &gone {
            assert_ne!(first_hit(*i, "vector"), format!("note-{i}"), "{backend:?}: a deleted document came back");
        }
        all_found("after deletions", &gone);

        // Half the blocks flat again, as in the middle of a move: every
        // document is still found, and the next run moves them back.
        assert!(
            db_exec(&app, &b, "UPDATE vector_blocks SET list = -1 WHERE corpus = 'document' AND block % 2 = 0") > 0
        );
        all_found("with half the blocks flat", &gone);
        // At most 32 blocks move a run; each run moves some, and leaves
        // fewer flat, until none is.
        let mut flat = u64::MAX;
        for run in 0.. {
            let d = index_tick(&app);
            assert_eq!(d["trained"], false, "{backend:?}: {d}");
            assert!(d["flat"].as_u64().unwrap() < flat, "{backend:?}: run {run} moved nothing: {d}");
            flat = d["flat"].as_u64().unwrap();
            if flat == 0 {
                break;
            }
            assert!(run < 20, "{backend:?}: still flat after 20 runs: {d}");
        }
        let (index, blocks) = index_and_blocks(&app, &b, "document");
        assert_eq!(blocks, index, "{backend:?}: nothing lost or doubled by the second move");
        all_found("after the second move", &gone);

        // The scan reads what the index says: on /retrieve (knowledge
        // entries) every signature until the lists are trained, then only
        // the probed lists'.
        let job = ingest(&app, "We decided to move the archive to cold storage because reads are rare.", "2026-11-01");
        assert_eq!(finish(&app, &job)["status"], "done", "{backend:?}");
        let read_for = |query: &str, when: &str| -> u64 {
            let r = post(&app, "/retrieve", json!({"query": query, "k": 5, "mode": "vector"}));
            assert_eq!(r.status, 200, "{when}: {}", r.body);
            r.json()["signatures_read"].as_u64().unwrap_or_else(|| panic!("{when}: {}", r.body))
        };
        let read = |when: &str| read_for("where does the archive live", when);
        let entries = get(&app, "/knowledge/entries")["total"].as_u64().unwrap();
        assert!(entries >= 1, "{backend:?}");
        assert_eq!(read("a few entries"), entries, "{backend:?}");
        mneme_e2e::seed::filler(&b, app.state.path(), "knowledge", 20_000, &filler_texts, &mut mneme_e2e::seed::Rng(9));
        assert_eq!(read("20,000 flat entries"), entries + 20_000, "{backend:?}");
        let k = index_run(&app, "knowledge");
        assert_eq!((k["trained"].as_bool(), k["flat"].as_u64()), (Some(true), Some(0)), "{backend:?}: {k}");
        let probed = read("lists trained");
        assert!(probed > 0 && probed * 5 < entries + 20_000, "{backend:?}: read {probed} of {}", entries + 20_000);
        // Which lists are read depends on the query: lists differ in size,
        // so different queries read different counts.
        let counts: std::collections::BTreeSet<u64> =
            ["a harbour at dawn", "quarterly tax forms", "the drummer's new band", "where does the archive live"]
                .iter()
                .map(|q| read_for(q, q))
                .collect();
        assert!(counts.len() > 1, "{backend:?}: every query read {counts:?}");
        let r = post(&app, "/retrieve", json!({"query": "archive cold storage", "k": 5, "mode": "text"}));
        assert_eq!(r.json()["signatures_read"], 0, "{backend:?}: text mode reads no signature");

        let r = app.request("DELETE", "/privacy/delete-all?confirm=true", &[("authorization", a.as_str())], None);
        assert_eq!(r.status, 200, "{}", r.body);
        assert_eq!(db_count(&app, &b, "SELECT count(*) FROM vector_centroids"), 0, "{backend:?}");
        let d = index_tick(&app);
        assert_eq!((d["lists"].as_u64(), d["flat"].as_u64()), (Some(0), Some(0)), "{backend:?}: {d}");
        // The instance that wrote into lists before (instances serve many
        // requests) writes flat now: the centroids it kept are gone.
        let r = post(&app, "/documents", json!({"id": "note-after", "text": texts[4]}));
        assert_eq!(r.status, 201, "{}", r.body);
        assert_eq!(db_count(&app, &b, "SELECT count(*) FROM vector_blocks WHERE list >= 0"), 0, "{backend:?}");
        assert_eq!(first_hit(4, "vector"), "note-after", "{backend:?}");
    }
}

/// The Knowledge screen's chart: entries per type, counted per day up to
/// each day's end, from the entries the ticks recorded on two days.
#[test]
fn the_timeline_counts_entries_per_type_by_the_day_they_were_recorded() {
    const DAY: u64 = 86_400_000;
    let t0: u64 = 1_800_000_000_000; // 2027-01-15T08:00Z
    for backend in BACKENDS {
        let b = BackendEnv::new(backend);
        let dir = tempfile::tempdir().unwrap();
        // No cron tick may record an entry on the wall clock's day.
        let manifest = mneme_e2e::without_crons(dir.path(), &mneme_e2e::TICK_JOBS);
        let app = start_served(&manifest, &b, None);
        let drain_at = |at: u64| {
            let clock = at.to_string();
            let headers = [("authorization", mneme_e2e::CRON_AUTH), ("x-mneme-clock", clock.as_str())];
            let r = app.request("POST", "/tick/knowledge", &headers, None);
            assert_eq!(r.status, 200, "{}", r.body);
        };
        let first = ingest(
            &app,
            "Alice: I believe small teams ship faster because coordination costs grow quadratically.\n\
             Alice: We decided to move billing to Postgres because we need real transactions.\n\
             Alice: Never deploy on a Friday, since nobody is around to fix it.",
            "2027-01-04",
        );
        drain_at(t0 - 10 * DAY);
        assert_eq!(get(&app, &format!("/knowledge/jobs/{first}"))["status"], "done");
        let second = ingest(
            &app,
            "Alice: We decided to hire two designers next quarter because the design backlog keeps growing.",
            "2027-01-14",
        );
        drain_at(t0);
        assert_eq!(get(&app, &format!("/knowledge/jobs/{second}"))["status"], "done");

        let r = app.call("GET", "/knowledge/timeline?days=30", None, t0);
        assert_eq!(r.status, 200, "{}", r.body);
        let t = r.json();
        let dates = t["dates"].as_array().unwrap();
        assert_eq!((dates.len(), dates[29].as_str()), (30, Some("2027-01-15")), "{backend:?}: {t}");
        assert_eq!(dates[19], "2027-01-05");
        let at = |kind: &str, i: usize| t["series"][kind][i].as_u64().unwrap();
        assert_eq!([at("decision", 18), at("philosophy", 18), at("standard", 18)], [0, 0, 0], "before: {t}");
        assert_eq!([at("decision", 19), at("philosophy", 19), at("standard", 19)], [1, 1, 1], "{backend:?}: {t}");
        assert_eq!([at("decision", 28), at("decision", 29)], [1, 2], "the second decision on its day: {t}");
        assert_eq!((at("framework", 29), at("reaction", 29), t["total"].as_u64()), (0, 0, Some(4)));
        // A window that starts after the first day counts those entries as before it.
        let short = app.call("GET", "/knowledge/timeline?days=3", None, t0).json();
        assert_eq!(short["series"]["decision"], json!([1, 1, 2]), "{backend:?}: {short}");
        for bad in ["0", "731", "x"] {
            app.call("GET", &format!("/knowledge/timeline?days={bad}"), None, t0).assert_error(400, "invalid");
        }
        // The counts are kept (migration 0019) and go with the entries.
        let a = bearer();
        let r = app.request("DELETE", "/privacy/delete-all?confirm=true", &[("authorization", a.as_str())], None);
        assert_eq!(r.status, 200, "{}", r.body);
        assert_eq!(db_count(&app, &b, "SELECT count(*) FROM knowledge_days"), 0, "{backend:?}");
        let empty = app.call("GET", "/knowledge/timeline?days=30", None, t0).json();
        assert_eq!((empty["total"].as_u64(), &empty["series"]["decision"][29]), (Some(0), &json!(0)), "{empty}");
    }
}

/// D-K17: once the knowledge corpus's lists are trained, an ingest's search
/// for a claim's neighbours reads only the few lists nearest to it, beside
/// the full-text read. Among 20,000 other entries a restatement with other
/// reasoning still merges into the entry it restates, and its opposite
/// (other reasoning again) still supersedes it.
#[test]
fn a_trained_knowledge_corpus_still_merges_restatements_and_supersedes_contradictions() {
    let filler_texts = routine_lines();
    let dir = tempfile::tempdir().unwrap();
    let served = mneme_e2e::without_crons(dir.path(), &["index"]);
    for backend in BACKENDS {
        let b = BackendEnv::new(backend);
        let model = FakeModel::start(Script::default());
        let app = start_served(&served, &b, Some(&model));
        let say_of = |topic: &str, position: &str, reasoning: &str, text: &str, date: &str| {
            model.route(
                EXTRACT,
                candidates(json!([{"type": "standard", "topic": topic, "position": position,
                    "reasoning": reasoning, "confidence": "medium", "tags": ["review"]}])),
            );
            finish(&app, &ingest(&app, text, date))
        };
        let say = |position: &str, reasoning: &str, text: &str, date: &str| {
            say_of("Small pull requests", position, reasoning, text, date)
        };
        let first = say(
            "Always keep pull requests under 400 lines",
            "reviewers miss bugs in big diffs",
            "transcript one",
            "2026-11-01",
        );
        let id = outcome(&first, 0)["entry_id"].as_str().unwrap().to_string();
        // Every word of this one will be common: the fillers hold them all.
        let routine = |reasoning: &str, text: &str| {
            say_of("Routine log lines", "Routine log lines about nothing in particular", reasoning, text, "2026-11-01")
        };
        let logs = routine("they show the system is alive", "transcript on logs");
        let logs_id = outcome(&logs, 0)["entry_id"].as_str().unwrap().to_string();
        mneme_e2e::seed::filler(
            &b,
            app.state.path(),
            "knowledge",
            20_000,
            &filler_texts,
            &mut mneme_e2e::seed::Rng(11),
        );
        let mut runs = 0;
        while index_run(&app, "knowledge")["flat"] != 0 {
            runs += 1;
            assert!(runs < 60, "{backend:?}: the upkeep did not finish");
        }
        let flat = "SELECT count(*) FROM vector_blocks WHERE corpus = 'knowledge' AND list < 0";
        assert_eq!(db_count(&app, &b, flat), 0, "{backend:?}: every knowledge signature is in a list");

        let again = say(
            "Always keep pull requests under 400 lines",
            "small changes ship sooner and roll back cleanly",
            "transcript two",
            "2026-11-01",
        );
        assert_eq!(
            (outcome(&again, 0)["outcome"].as_str(), outcome(&again, 0)["into"].as_str()),
            (Some("merged"), Some(id.as_str())),
            "{backend:?}: {again}"
        );
        assert_eq!(entry(&app, &id)["corroboration_count"], 2, "{backend:?}");
        // Every word common: a claim's search then reads no full text
        // (D-K26), and the vector side finds the restatement. (The entry is
        // older than the 20,000 fillers, outside the newest items the old
        // read ranked too: this guards the behaviour, not the change.)
        let logs_again = routine("they are the first place to look", "transcript on logs again");
        assert_eq!(
            (outcome(&logs_again, 0)["outcome"].as_str(), outcome(&logs_again, 0)["into"].as_str()),
            (Some("merged"), Some(logs_id.as_str())),
            "{backend:?}: {logs_again}"
        );
        let opposite = say(
            "Never keep pull requests under 400 lines",
            "splitting work hides the design from the reviewer",
            "transcript three",
            "2026-11-20",
        );
        assert_eq!(outcome(&opposite, 0)["supersedes"], json!([id]), "{backend:?}: {opposite}");
        assert_eq!(entry(&app, &id)["superseded_by"], outcome(&opposite, 0)["entry_id"], "{backend:?}");
    }
}
