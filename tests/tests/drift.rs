//! The cognitive drift engine (002 §8) through the runner over HTTP, on
//! both storage backends: the idle gate (queues, the 168 h lookback, deep
//! focus), the jittered schedule, seeded seed choices, spreading
//! activation with cooldowns, the thought from the scripted model or the
//! labelled rules, and each routed action's effects: REFLECT, PLAN (a
//! persistent task), COMMUNICATE (a `drift` event), COMMUNICATE in
//! quiet hours (deferred, then delivered when the principal is back),
//! SEED_THREAD (a curiosity thread), and quiet hours in the principal's own
//! zone (`utc_offset_minutes`).

use mneme_background::Draws;
use mneme_background::consolidate::concept_name;
use mneme_background::cycle::RULES_LABEL;
use mneme_background::drift::{SeedKind, next_run, pick, seed_kind, weighted};
use mneme_e2e::cello::{self, PERSONAL, PLAIN};
use mneme_e2e::fake_model::marker::{CHUNKER, EPISODE, SEMANTIC};
use mneme_e2e::fake_model::{FakeModel, Script, marker, triage_answer};
use mneme_e2e::{App, BACKENDS, BackendEnv, CRON_AUTH, test_env, without_crons};
use serde_json::{Value, json};
use std::time::{Duration, Instant};

/// 2027-01-15 08:00 UTC.
const T0: u64 = 1_800_000_000_000;
const MIN: u64 = 60_000;
const H: u64 = 60 * MIN;
const THOUGHT: &str = "You are between conversations";
/// The drift engine's claim lease of `components/tick/src/drift.rs`.
const LEASE_MS: u64 = 120_000;

/// A table's exported rows by id.
fn table(app: &App, name: &str, at: u64) -> Vec<Value> {
    let mut rows = app.table(name, at);
    rows.sort_by(|a, b| a["id"].as_str().cmp(&b["id"].as_str()));
    rows
}

fn chat(app: &App, text: &str, at: u64) {
    let r = app.call("POST", "/chat", Some(json!({"text": text, "thread_id": "t1"})), at);
    assert_eq!(r.status, 200, "{}", r.body);
}

fn script(reply: Value) -> Script {
    Script::json(reply)
}

fn episode_answer(novelty: u8, emotional: u8) -> Script {
    cello::episode_answer(novelty, emotional, &[])
}

fn thought(kind: &str, content: &str) -> Script {
    script(json!({"type": kind, "content": content}))
}

/// Three pairs of concepts: one pair joined at 0.8 (its drift reaches
/// 0.7 × 0.8 = 0.56), two at 1.0 (0.7).
fn semantic_answer() -> Script {
    let c = |name: &str| {
        json!({"name": name, "type": "idea", "definition": format!("{name}, as the principal sees it."),
               "domain": "leisure", "abstraction_level": 2})
    };
    let r = |a: &str, b: &str, s: f64| json!({"source": a, "target": b, "type": "related_to", "strength": s});
    script(json!({
        "concepts": [c("cello"), c("morning practice"), c("bow"), c("rosin"), c("posture"), c("endpin")],
        "relationships": [r("cello", "morning practice", 0.8), r("bow", "rosin", 1.0), r("posture", "endpin", 1.0)],
    }))
}

/// The app with the scripted model (the light model `small-model` for
/// consolidation and drift) answering triage with RESPOND, the chunker
/// with nothing, episodes with `salience` for novelty and emotion, and
/// semantic consolidation with the three pairs; no crons of the engines.
fn model_app(b: &BackendEnv, dir: &std::path::Path, salience: u8) -> (FakeModel, App, String, Vec<(String, String)>) {
    model_app_with(b, dir, salience, &[])
}

/// [`model_app`] with more Spin variables (`SPIN_VARIABLE_…`, value).
fn model_app_with(
    b: &BackendEnv,
    dir: &std::path::Path,
    salience: u8,
    vars: &[(&str, &str)],
) -> (FakeModel, App, String, Vec<(String, String)>) {
    let model = FakeModel::start(Script { reply: "Sounds good.".into(), ..Default::default() });
    model.route(marker::TRIAGE, triage_answer("RESPOND"));
    model.route(CHUNKER, script(json!({"gists": [], "facts": []})));
    model.route(EPISODE, episode_answer(salience, salience));
    model.route(SEMANTIC, semantic_answer());
    let mut env = test_env(b, Some(&model));
    env.push(("SPIN_VARIABLE_LLM_LIGHT_MODEL".into(), "small-model".into()));
    env.extend(vars.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    let manifest = without_crons(dir, &["consolidate", "tasks", "drift"]);
    let app = App::start(&manifest, &env);
    (model, app, manifest, env)
}

/// A seed whose next run comes within 300 s and whose first `attempts`
/// seed attempts each draw the random category and pick one of `indices`
/// of `n` concepts (the stage's draw order: two draws for the next run,
/// then per attempt one for the category and one for the pick).
fn seed_for(indices: &[usize], n: usize, attempts: usize) -> u64 {
    (1..5_000_000u64)
        .find(|s| {
            let mut d = Draws::new(*s);
            if next_run(0, d.draw(), d.draw()) > 300_000 {
                return false;
            }
            (0..attempts).all(|_| seed_kind(d.draw(), true) == SeedKind::Random && indices.contains(&pick(n, d.draw())))
        })
        .expect("some seed picks them")
}

/// The test's concepts by id order (the random category's order).
fn concept_index(concepts: &[Value], name: &str) -> usize {
    let mut ids: Vec<(&str, &str)> =
        concepts.iter().map(|c| (c["id"].as_str().unwrap(), c["name"].as_str().unwrap())).collect();
    ids.sort();
    ids.iter().position(|(_, n)| *n == name).unwrap()
}

/// A plain episode, then a salient one, which queues semantic
/// consolidation; the seed that draws the `cello` concept.
/// A drift cycle at `at` with `seed`, the model thinking `content`: it ran.
fn drift_on(model: &FakeModel, app: &App, at: u64, seed: u64, content: &str) -> Value {
    model.route(THOUGHT, thought("insight", content));
    let r = app.tick("drift", at, seed);
    assert_eq!(r["ran"], true, "{r}");
    r
}

fn cello_concepts(model: &FakeModel, app: &App) -> u64 {
    cello_concepts_at(model, app, T0)
}

/// The cello conversations from `t0`, consolidated by `t0` + 13 min.
fn cello_concepts_at(model: &FakeModel, app: &App, t0: u64) -> u64 {
    for (i, t) in PLAIN.iter().enumerate() {
        chat(app, t, t0 + i as u64 * MIN);
    }
    app.tick("consolidate", t0 + 6 * MIN, 1);
    model.route(EPISODE, episode_answer(3, 3));
    for (i, t) in PERSONAL.iter().enumerate() {
        chat(app, t, t0 + (7 + i as u64) * MIN);
    }
    app.tick("consolidate", t0 + 13 * MIN, 1);
    let concepts = table(app, "semantic_concepts", t0 + 13 * MIN);
    seed_for(&[concept_index(&concepts, "cello")], concepts.len(), 1)
}

#[test]
fn drift_waits_for_idle_and_routes_each_thought_to_its_action() {
    for backend in BACKENDS {
        let b = BackendEnv::new(backend);
        let dir = tempfile::tempdir().unwrap();
        let (model, app, ..) = model_app(&b, dir.path(), 0);
        let r = app.request("POST", "/tick/drift", &[], None);
        r.assert_error(401, "unauthorized");

        // Nothing remembered yet: no episode within 168 h. The skip sets
        // the next time, 300 s with jitter (or a long gap) away.
        let r = app.tick("drift", T0, 1);
        assert_eq!(
            (r["due"].as_bool(), r["ran"].as_bool(), r["skip"].as_str()),
            (Some(true), Some(false), Some("no_recent_episodes")),
            "{r}"
        );
        let next = r["next_ms"].as_u64().unwrap();
        assert!((T0 + 210_000..=T0 + 750_000).contains(&next), "{r}");
        let r = app.tick("drift", next - 1, 1);
        assert_eq!((r["due"].as_bool(), r["next_ms"].as_u64()), (Some(false), Some(next)), "{r}");

        // Conversation queues consolidation: drift waits for the queues.
        for (i, t) in PLAIN.iter().enumerate() {
            chat(&app, t, T0 + 20 * MIN + i as u64 * MIN);
        }
        let r = app.tick("drift", T0 + 30 * MIN, 2);
        assert_eq!(r["skip"], "queues_busy", "{r}");
        app.tick("consolidate", T0 + 31 * MIN, 1);
        model.route(EPISODE, episode_answer(3, 3));
        for (i, t) in PERSONAL.iter().enumerate() {
            chat(&app, t, T0 + 32 * MIN + i as u64 * MIN);
        }
        let last_chat = T0 + 36 * MIN;
        let built = T0 + 40 * MIN;
        let r = app.tick("consolidate", built, 1);
        assert!(r["jobs"].as_array().unwrap().iter().any(|j| j["queue"] == "semantic_consolidation_queue"), "{r}");
        let concepts = table(&app, "semantic_concepts", built);
        assert_eq!(concepts.len(), 6, "{concepts:?}");

        // Ten messages on one topic inferred a focus session (2 h): deep
        // focus holds drift back.
        let r = app.tick("drift", built + 13 * MIN, 3);
        assert_eq!(r["skip"], "deep_focus", "{r}");

        // D1, well after the focus ended: a seed the test chose through its
        // draws, the 0.8 pair. 0.56 clears the 0.4 energy bar but no
        // message bar, so REFLECT is the one eligible action.
        model.route(THOUGHT, thought("insight", "The principal practises the cello every morning before work"));
        let d1 = last_chat + 3 * H;
        let n = concepts.len();
        let r = app.tick("drift", d1, seed_for(&[concept_index(&concepts, "cello")], n, 1));
        assert_eq!(r["ran"], true, "{r}");
        assert_eq!((r["seed"]["name"].as_str(), r["seed"]["kind"].as_str()), (Some("cello"), Some("random")), "{r}");
        assert_eq!(r["concepts"][0]["name"], "morning practice");
        assert!((r["energy"].as_f64().unwrap() - 0.56).abs() < 1e-9, "{r}");
        assert_eq!(r["source"], "scripted-model");
        assert_eq!(r["drift"]["action"], "REFLECT", "{r}");
        let verdicts = r["drift"]["verdicts"].as_array().unwrap();
        let why = |a: &str| verdicts.iter().find(|v| v["action"] == a).unwrap()["why"].as_str().unwrap().to_string();
        assert_eq!(why("COMMUNICATE"), "activation under the quality bar");
        assert_eq!(why("PLAN"), "activation under 0.7");
        assert_eq!(why("SUGGEST"), "no installable skill to suggest");
        let sent = model.requests_with(THOUGHT);
        let body: Value = serde_json::from_str(&sent[0]).unwrap();
        assert_eq!((body["model"].as_str(), body["temperature"].as_f64()), (Some("small-model"), Some(0.8)));
        assert!(
            body["messages"][0]["content"].as_str().unwrap().starts_with("You are Mneme"),
            "soul is the system prompt"
        );
        assert!(body["messages"][1]["content"].as_str().unwrap().contains("\"morning practice\""));
        let after = table(&app, "semantic_concepts", d1);
        let strength = |name: &str| after.iter().find(|c| c["name"] == name).unwrap()["strength"].as_f64().unwrap();
        let before = |name: &str| concepts.iter().find(|c| c["name"] == name).unwrap()["strength"].as_f64().unwrap();
        assert!((strength("morning practice") - before("morning practice") - 0.1).abs() < 1e-9, "REFLECT strengthens");
        let export = app.call("GET", "/privacy/export", None, d1).json();
        let gists = export["memory"]["gists"].to_string();
        assert!(gists.contains("[insight] The principal practises the cello every morning before work"), "{gists}");
        assert!(gists.contains("\"reflection\""), "{gists}");

        // The pair rests for 60 min: a cycle whose three draws land on it
        // finds no seed.
        let next = r["next_ms"].as_u64().unwrap();
        let resting = [concept_index(&concepts, "cello"), concept_index(&concepts, "morning practice")];
        let r = app.tick("drift", next, seed_for(&resting, n, 3));
        assert_eq!(r["skip"], "no_seed", "{r}");
        let tried = r["tried"].as_array().unwrap();
        assert_eq!(tried.len(), 3);
        assert!(tried.iter().all(|t| t["resting"] == true && t["kind"] == "random"), "{r}");

        // D2: the 1.0 pair with an actionable question far from every
        // topic: PLAN creates a persistent task and says so on /events.
        model.route(THOUGHT, thought("question", "Should I research quarterly tax filing deadlines and receipts?"));
        let d2 = r["next_ms"].as_u64().unwrap();
        let r = app.tick("drift", d2, seed_for(&[concept_index(&concepts, "bow")], n, 1));
        assert_eq!((r["seed"]["name"].as_str(), r["drift"]["action"].as_str()), (Some("bow"), Some("PLAN")), "{r}");
        let task = r["drift"]["applied"]["task_id"].as_str().unwrap().to_string();
        let tasks = table(&app, "persistent_tasks", d2);
        let t = tasks.iter().find(|t| t["id"] == task.as_str()).unwrap();
        assert_eq!((t["origin"].as_str(), t["status"].as_str()), (Some("drift"), Some("accepted")));
        let events = table(&app, "events", d2);
        assert!(events.iter().any(|e| e["type"] == "task" && e["payload"].as_str().unwrap().contains(&task)));

        // D3: the other 1.0 pair and an insight close to the principal's
        // topics, 30 min after they last wrote: COMMUNICATE. Two drifts in
        // the last 30 min (1.26) put REFLECT over its fatigue share.
        let y = "Morning cello practice with Ana keeps the principal excited and steady";
        model.route(THOUGHT, thought("insight", y));
        let d3 = r["next_ms"].as_u64().unwrap();
        assert!(d3 - d1 < 30 * MIN, "inside D1's fatigue window");
        let r = app.tick("drift", d3, seed_for(&[concept_index(&concepts, "posture")], n, 1));
        assert_eq!(r["drift"]["action"], "COMMUNICATE", "{r}");
        assert_eq!(r["drift"]["delivery"], "sent");
        let events = table(&app, "events", d3);
        let drift_events: Vec<&Value> = events.iter().filter(|e| e["type"] == "drift").collect();
        assert_eq!(drift_events.len(), 1);
        assert!(drift_events[0]["payload"].as_str().unwrap().contains(y));

        // D4 at 23:30 UTC, quiet hours: the message waits (the principal
        // ignored D3, so the backoff is 2: idle 1 h is needed, 15 h is
        // there). REFLECT is out: the thought is D1's reflection again.
        model.route(THOUGHT, thought("insight", "The principal practises the cello every morning before work"));
        let d4 = T0 + 15 * H + 30 * MIN;
        let r = app.tick("drift", d4, seed_for(&[concept_index(&concepts, "endpin")], n, 1));
        assert_eq!(
            (r["drift"]["action"].as_str(), r["drift"]["delivery"].as_str()),
            (Some("COMMUNICATE"), Some("deferred")),
            "{r}"
        );
        assert_eq!(r["drift"]["situation"]["backoff"], 2.0, "{r}");
        let deferred = r["drift"]["drift_id"].as_str().unwrap().to_string();
        let delivered = |at: u64| {
            table(&app, "events", at)
                .iter()
                .filter(|e| e["type"] == "drift" && e["payload"].as_str().unwrap().contains(&deferred))
                .count()
        };
        // Still quiet, or not yet back: nothing is delivered.
        let quiet = app.tick("drift", d4 + MIN, 5);
        assert_eq!((quiet["due"].as_bool(), &quiet["flushed"]), (Some(false), &json!([])), "{quiet}");
        let morning = T0 + 24 * H + 30 * MIN;
        let r = app.tick("drift", morning, 5);
        assert_eq!(r["flushed"], json!([]), "the principal has not written since quiet hours ended: {r}");
        assert_eq!(delivered(morning), 0);
        chat(&app, "Good morning, back at the cello today", morning + MIN);
        let r = app.tick("drift", morning + 2 * MIN, 5);
        assert_eq!(r["flushed"], json!([{"drift_id": deferred, "older_dropped": 0}]), "{r}");
        let r = app.tick("drift", morning + 3 * MIN, 5);
        assert_eq!(r["flushed"], json!([]));
        assert_eq!(delivered(morning + 3 * MIN), 1, "delivered once");
        app.tick("consolidate", morning + 4 * MIN, 1);

        // A week and a day after the last episode: nothing recent to drift on.
        let episodes = table(&app, "episodes", morning);
        let newest = episodes.iter().map(|e| e["created_ms"].as_u64().unwrap()).max().unwrap();
        let late = newest + 168 * H + 1;
        let r = app.tick("drift", late, 6);
        assert_eq!(r["skip"], "no_recent_episodes", "{r}");

        // The drift log holds each drift with its thought, action and delivery.
        let log = table(&app, "drift_log", late);
        let row = |id: &str| log.iter().find(|d| d["id"] == id).unwrap().clone();
        let d4_row = row(&deferred);
        assert_eq!((d4_row["action"].as_str(), d4_row["delivery"].as_str()), (Some("COMMUNICATE"), Some("sent")));
        assert!(log.iter().any(|d| d["action"] == "PLAN" && d["seed_name"] == "bow"), "{log:?}");
        assert!(log.iter().any(|d| d["action"] == "REFLECT" && d["seed_name"] == "cello"), "{log:?}");
    }
}

/// Without a model the labelled rules think the thought, and two ticks at
/// once run one cycle.
#[test]
fn without_a_model_the_rules_think_and_one_cycle_runs_at_a_time() {
    for backend in BACKENDS {
        let b = BackendEnv::new(backend);
        let dir = tempfile::tempdir().unwrap();
        let app = App::start(&without_crons(dir.path(), &["consolidate", "tasks", "drift"]), &test_env(&b, None));
        for (i, t) in PLAIN.iter().chain(PERSONAL.iter()).enumerate() {
            chat(&app, t, T0 + i as u64 * MIN);
        }
        app.tick("consolidate", T0 + 11 * MIN, 1);
        let concepts = table(&app, "semantic_concepts", T0 + 11 * MIN);
        assert!(!concepts.is_empty());
        let at = T0 + 4 * H;
        // Rules edges are weak (0.3): followed one time in seven. Find a
        // seed from a concept with an edge whose walk follows it.
        let (a, b2) = std::thread::scope(|s| {
            let one = s.spawn(|| app.tick("drift", at, 11));
            let two = s.spawn(|| app.tick("drift", at, 12));
            (one.join().unwrap(), two.join().unwrap())
        });
        let ran: Vec<&Value> = [&a, &b2].into_iter().filter(|r| r["due"] == true).collect();
        assert_eq!(ran.len(), 1, "one claim: {a} {b2}");
        let r = ran[0];
        let other = if r == &a { &b2 } else { &a };
        assert!(
            other["reason"].as_str().unwrap().contains("another cycle") || other["reason"] == "not due yet",
            "{other}"
        );
        if r["ran"] == true {
            assert_eq!(r["source"], RULES_LABEL, "{r}");
            assert_eq!(r["thought"]["type"], "question");
            let log = table(&app, "drift_log", at);
            assert_eq!(log.len(), 1, "{r}");
            assert_eq!(log[0]["source"], RULES_LABEL);
        } else {
            // The walk drew no weak edge: too little energy, nothing written.
            assert!(["low_energy", "no_seed"].contains(&r["skip"].as_str().unwrap()), "{r}");
            assert!(table(&app, "drift_log", at).is_empty());
        }
        // Over many seeded cycles the rules drift at least once and every
        // drift is labelled.
        let mut t = at;
        let mut drifted = 0;
        for seed in 20..60u64 {
            t += 13 * MIN;
            let r = app.tick("drift", t, seed);
            if r["ran"] == true {
                drifted += 1;
                assert_eq!(r["source"], RULES_LABEL);
                let content = r["thought"]["content"].as_str().unwrap();
                assert!(content.contains(r["seed"]["name"].as_str().unwrap()), "{r}");
            }
        }
        assert!(drifted > 0, "no drift in 40 cycles");
        assert_eq!(table(&app, "drift_log", t).len(), drifted + usize::from(r["ran"] == true));
    }
}

/// A crash mid-cycle writes nothing of the drift, and once its lease
/// ends one later cycle drifts; the drift gist is then in the context of
/// the principal's next message on the seed's topic while it lives (30
/// minutes from its last read), and not after.
#[test]
fn a_crashed_cycle_drifts_once_and_its_gist_reaches_the_next_conversation() {
    for backend in BACKENDS {
        let b = BackendEnv::new(backend);
        let dir = tempfile::tempdir().unwrap();
        let (model, app, manifest, env) = model_app(&b, dir.path(), 0);
        let cello = cello_concepts(&model, &app);
        let content = "Ana could watch a video of the morning cello practice";

        // The thought's model call hangs and the runner is killed.
        model.route(THOUGHT, Script { delay: Duration::from_secs(60), ..thought("hypothesis", content) });
        let crashed = T0 + 4 * H;
        let app = std::thread::scope(|s| {
            let url = app.url.clone();
            s.spawn(move || {
                let _ = ureq::post(&format!("{url}/tick/drift"))
                    .header("authorization", CRON_AUTH)
                    .header("x-mneme-clock", &crashed.to_string())
                    .header("x-mneme-seed", &cello.to_string())
                    .send_empty();
            });
            let deadline = Instant::now() + Duration::from_secs(60);
            while model.requests_with(THOUGHT).is_empty() {
                assert!(Instant::now() < deadline, "the cycle never asked for its thought");
                std::thread::sleep(Duration::from_millis(50));
            }
            app.crash_and_restart(&manifest, &env)
        });
        model.route(THOUGHT, thought("hypothesis", content));
        for t in ["drift_log", "drift_cooldowns", "curiosity_threads"] {
            assert!(table(&app, t, crashed).is_empty(), "nothing of the crashed drift in {t}");
        }
        let held = app.tick("drift", crashed + 1_000, cello);
        assert!(held["reason"].as_str().unwrap().contains("another cycle"), "{held}");
        let d = crashed + LEASE_MS + 1;
        let r = app.tick("drift", d, cello);
        assert_eq!(r["ran"], true, "{r}");
        assert_eq!(table(&app, "drift_log", d).len(), 1, "one drift");
        assert_eq!(model.requests_with(THOUGHT).len(), 2, "one thought before the crash, one after");
        let gist = format!("[hypothesis] {content}");
        // The answer's prompt: the one streamed model request with the
        // message.
        let generation = |text: &str| {
            let found: Vec<String> =
                model.requests_with(text).into_iter().filter(|body| body.contains("\"stream\":true")).collect();
            assert_eq!(found.len(), 1, "one answer for {text:?}: {found:?}");
            found[0].clone()
        };
        // Reading a gist renews its 30 minutes: read at +25, it is still
        // there at +50; unread for 31 minutes, it is gone.
        for (text, at, there) in [
            ("How is my morning cello practice coming along?", 25, true),
            ("Any thoughts on my cello posture this week?", 50, true),
            ("Should Ana see my cello bow hold next time?", 81, false),
        ] {
            chat(&app, text, d + at * MIN);
            assert_eq!(generation(text).contains(&gist), there, "+{at} min: {}", generation(text));
        }
    }
}

/// A cycle that outlives its claim's lease (its thought is slow) loses the
/// claim to a later tick: it writes nothing and answers 200 with
/// `abandoned` (D-CL5); the later tick's drift is the one that stands.
#[test]
fn a_cycle_that_outlives_its_lease_is_abandoned() {
    for backend in BACKENDS {
        let b = BackendEnv::new(backend);
        let dir = tempfile::tempdir().unwrap();
        let (model, app, ..) = model_app(&b, dir.path(), 0);
        let cello = cello_concepts(&model, &app);
        let content = "Ana could watch a video of the morning cello practice";
        let at = T0 + 4 * H;
        model.route(THOUGHT, Script { delay: Duration::from_secs(4), ..thought("hypothesis", content) });
        let (slow, taker) = std::thread::scope(|s| {
            let slow = s.spawn(|| {
                let (t, seed) = (at.to_string(), cello.to_string());
                let headers =
                    [("authorization", CRON_AUTH), ("x-mneme-clock", t.as_str()), ("x-mneme-seed", seed.as_str())];
                app.request("POST", "/tick/drift", &headers, None)
            });
            let deadline = Instant::now() + Duration::from_secs(60);
            while model.requests_with(THOUGHT).is_empty() {
                assert!(Instant::now() < deadline, "the cycle never asked for its thought");
                std::thread::sleep(Duration::from_millis(20));
            }
            // While the first waits for its thought, its lease runs out on
            // the test clock and the next tick takes the claim.
            model.route(THOUGHT, thought("hypothesis", content));
            let taker = app.tick("drift", at + LEASE_MS + 1, cello);
            (slow.join().unwrap(), taker)
        });
        assert_eq!(taker["ran"], true, "{taker}");
        assert_eq!(slow.status, 200, "{}", slow.body);
        let result = &slow.json()["result"];
        assert_eq!(result["ran"], false, "{result}");
        assert!(result["abandoned"].as_str().unwrap().contains("claim"), "{result}");
        assert_eq!(table(&app, "drift_log", at + LEASE_MS + 1).len(), 1, "only the taker's drift");
    }
}

/// The names of the concepts the insight category would draw from, per
/// topic, as the stage reads them at `at`: topics (not `general`) with 3
/// exchanges or more in the week, by name, weighted by that count; each
/// topic's pool, the 5 strongest concepts of its 5 newest episodes (or
/// named for it), strongest first, then by id.
fn insight_pools(app: &App, at: u64) -> Vec<(String, f64, Vec<String>)> {
    let week = 7 * 24 * H;
    let mut counts: std::collections::BTreeMap<String, u32> = std::collections::BTreeMap::new();
    for e in table(app, "exchanges", at) {
        let topic = e["topic"].as_str().unwrap();
        if e["created_ms"].as_u64().unwrap() + week >= at && topic != "general" {
            *counts.entry(topic.to_string()).or_default() += 1;
        }
    }
    let episodes = table(app, "episodes", at);
    let concepts = table(app, "semantic_concepts", at);
    counts
        .into_iter()
        .filter(|(_, n)| *n >= 3)
        .map(|(topic, n)| {
            let mut eps: Vec<&Value> = episodes.iter().filter(|e| e["topic"] == topic.as_str()).collect();
            eps.sort_by(|a, b| {
                b["created_ms"].as_u64().cmp(&a["created_ms"].as_u64()).then(a["id"].as_str().cmp(&b["id"].as_str()))
            });
            let eps: Vec<String> = eps.iter().take(5).map(|e| format!("\"{}\"", e["id"].as_str().unwrap())).collect();
            let named = concept_name(&topic.replace('-', " "));
            let mut pool: Vec<&Value> = concepts
                .iter()
                .filter(|c| {
                    let sources = c["source_episodes"].as_str().unwrap();
                    (eps.iter().any(|e| sources.contains(e.as_str()))
                        || c["name"] == named.as_str()
                        || c["domain"] == topic.as_str())
                        && c["confidence"].as_f64().unwrap() >= 0.4
                })
                .collect();
            pool.sort_by(|a, b| {
                let s = |c: &Value| c["strength"].as_f64().unwrap();
                s(b).total_cmp(&s(a)).then(a["id"].as_str().cmp(&b["id"].as_str()))
            });
            let names = pool.iter().take(5).map(|c| c["name"].as_str().unwrap().to_string()).collect();
            (topic, f64::from(n), names)
        })
        .collect()
}

/// A seed whose first seed attempt draws the insight category and, in the
/// topic it draws, one of the concepts `names`: the seed and the topic.
fn insight_seed(pools: &[(String, f64, Vec<String>)], names: &[&str]) -> (u64, String) {
    let weights: Vec<f64> = pools.iter().map(|p| p.1).collect();
    (1..5_000_000u64)
        .find_map(|s| {
            let mut d = Draws::new(s);
            if next_run(0, d.draw(), d.draw()) > 300_000 || seed_kind(d.draw(), true) != SeedKind::Insight {
                return None;
            }
            let (topic, _, pool) = &pools[weighted(&weights, d.draw())?];
            let name = pool.get(pick(pool.len(), d.draw()))?;
            names.contains(&name.as_str()).then(|| (s, topic.clone()))
        })
        .expect("some seed draws them")
}

/// SEED_THREAD end to end: an insight seed on a strong pair, with a
/// thought close to two episodes (salience alignment) that COMMUNICATE
/// cannot send (the principal has been away over 24 h), that REFLECT has
/// already reflected on and that names nothing to do (no PLAN), becomes a
/// curiosity thread on the seed's topic; while it is open, the next
/// insight on that topic seeds none.
#[test]
fn an_insight_seed_opens_a_curiosity_thread_once_per_topic() {
    for backend in BACKENDS {
        let b = BackendEnv::new(backend);
        let dir = tempfile::tempdir().unwrap();
        let (model, app, ..) = model_app(&b, dir.path(), 0);
        let cello = cello_concepts(&model, &app);
        // Both episodes' gist is "The principal planned cello practice
        // with Ana."; the thought says the same (and no actionable verb).
        let content = "The principal planned cello practice with Ana";
        model.route(THOUGHT, thought("insight", content));

        // D1, once the focus is over: the 0.8 pair, a REFLECT on it.
        let d1 = T0 + 3 * H;
        let r = app.tick("drift", d1, cello);
        assert_eq!(r["drift"]["action"], "REFLECT", "{r}");
        assert!(table(&app, "curiosity_threads", d1).is_empty());

        // D2, over 24 h after the principal last wrote: an insight seed on
        // a 1.0 pair (activation 0.7).
        let d2 = T0 + 26 * H;
        let strong = ["bow", "rosin", "posture", "endpin"];
        let pools = insight_pools(&app, d2);
        let (seed, topic) = insight_seed(&pools, &strong);
        let r = app.tick("drift", d2, seed);
        assert_eq!(r["ran"], true, "{r}");
        assert_eq!(
            (r["seed"]["kind"].as_str(), r["seed"]["topic"].as_str()),
            (Some("insight"), Some(topic.as_str())),
            "{r}"
        );
        assert!(strong.contains(&r["seed"]["name"].as_str().unwrap()), "{r}");
        assert!((r["energy"].as_f64().unwrap() - 0.7).abs() < 1e-9, "{r}");
        let verdicts = r["drift"]["verdicts"].as_array().unwrap().clone();
        let why = |a: &str| verdicts.iter().find(|v| v["action"] == a).unwrap()["why"].as_str().unwrap().to_string();
        assert_eq!(why("SEED_THREAD"), "every gate passed", "{r}");
        assert_eq!(why("COMMUNICATE"), "the principal has been away over 24 h", "{r}");
        assert_eq!(why("REFLECT"), "too close to a recent reflection", "{r}");
        assert_eq!(why("PLAN"), "no actionable verb", "{r}");
        assert_eq!(r["drift"]["action"], "SEED_THREAD", "over NURTURE's 0.35: {r}");
        let thread = r["drift"]["applied"]["thread_id"].as_str().unwrap_or_else(|| panic!("{r}")).to_string();
        let drift_id = r["drift"]["drift_id"].as_str().unwrap().to_string();

        // The thread, as exported.
        let threads = table(&app, "curiosity_threads", d2);
        assert_eq!(threads.len(), 1, "{threads:?}");
        let t = &threads[0];
        assert_eq!(t["id"], thread.as_str());
        assert_eq!((t["topic"].as_str(), t["question"].as_str()), (Some(topic.as_str()), Some(content)), "{t}");
        assert_eq!((t["status"].as_str(), t["drift_id"].as_str()), (Some("active"), Some(drift_id.as_str())), "{t}");
        assert_eq!(t["seed_id"], r["seed"]["id"], "{t}");
        assert_eq!(t["created_ms"].as_u64().map(|c| c >= d2), Some(true), "{t}");
        let log = table(&app, "drift_log", d2);
        let row = log.iter().find(|d| d["id"] == drift_id.as_str()).unwrap();
        assert_eq!(
            (row["action"].as_str(), row["seed_kind"].as_str()),
            (Some("SEED_THREAD"), Some("insight")),
            "{row}"
        );
        let events = table(&app, "events", d2);
        assert!(events.iter().all(|e| !e["payload"].as_str().unwrap().contains(&drift_id)), "a thread says nothing");

        // D3, after the concepts' rest and the insight throttle: another
        // insight on the same topic finds the thread open.
        let d3 = d2 + 61 * MIN;
        let pools = insight_pools(&app, d3);
        let (seed, again) = insight_seed(&pools, &strong);
        assert_eq!(again, topic);
        let r = app.tick("drift", d3, seed);
        assert_eq!((r["ran"].as_bool(), r["seed"]["kind"].as_str()), (Some(true), Some("insight")), "{r}");
        let verdicts = r["drift"]["verdicts"].as_array().unwrap();
        let v = verdicts.iter().find(|v| v["action"] == "SEED_THREAD").unwrap();
        assert_eq!(
            (v["eligible"].as_bool(), v["why"].as_str()),
            (Some(false), Some("a thread on the topic is open")),
            "{r}"
        );
        assert_ne!(r["drift"]["action"], "SEED_THREAD", "{r}");
        assert_eq!(table(&app, "curiosity_threads", d3).len(), 1);
    }
}

/// Quiet hours (23:00–08:00) are the principal's, at `utc_offset_minutes`
/// (here 600, UTC+10): a thought for the principal at 14:00 UTC (00:00
/// for them) is held although 14:00 is not quiet at UTC, and is delivered
/// only once they write after 08:00 their time (22:00 UTC); one at 23:30
/// UTC (09:30 for them), which waits at UTC (the test above), is sent at
/// once.
#[test]
fn quiet_hours_follow_the_principals_utc_offset() {
    for backend in BACKENDS {
        let b = BackendEnv::new(backend);
        let dir = tempfile::tempdir().unwrap();
        let (model, app, ..) = model_app_with(&b, dir.path(), 0, &[("SPIN_VARIABLE_UTC_OFFSET_MINUTES", "600")]);
        let cello = cello_concepts(&model, &app);
        let concepts = table(&app, "semantic_concepts", T0 + 13 * MIN);
        let n = concepts.len();
        let on = |name: &str| seed_for(&[concept_index(&concepts, name)], n, 1);
        let drift = |at: u64, seed: u64, content: &str| drift_on(&model, &app, at, seed, content);
        let drift_events = |at: u64| -> Vec<String> {
            table(&app, "events", at)
                .iter()
                .filter(|e| e["type"] == "drift")
                .map(|e| e["payload"].as_str().unwrap().to_string())
                .collect()
        };
        // Two reflections on the 0.8 pair (an hour apart, for its rest), so
        // that REFLECT is out for each thought when it comes again.
        let x1 = "The principal practises the cello every morning before work";
        let x2 = "Cello bows strung with horsehair suit the principal's gentle playing";
        for (at, x, hour) in [(T0 + 3 * H, x1, 21), (T0 + 4 * H + 5 * MIN, x2, 22)] {
            let r = drift(at, cello, x);
            assert_eq!(r["drift"]["action"], "REFLECT", "{r}");
            assert_eq!(r["drift"]["situation"]["local_hour"], hour, "{r}");
        }

        // 14:00 UTC is 00:00 at UTC+10: COMMUNICATE is held.
        let held_at = T0 + 6 * H;
        let r = drift(held_at, on("bow"), x1);
        assert_eq!(r["drift"]["situation"]["local_hour"], 0, "{r}");
        assert_eq!(
            (r["drift"]["action"].as_str(), r["drift"]["delivery"].as_str()),
            (Some("COMMUNICATE"), Some("deferred")),
            "{r}"
        );
        let held = r["drift"]["drift_id"].as_str().unwrap().to_string();
        assert!(drift_events(held_at).is_empty());
        // 20:00 UTC is 06:00 for the principal, still quiet: a message then
        // does not bring it (at UTC it would: 20:00 is day, and they wrote
        // after it was held).
        chat(&app, "Good morning, tuning the cello before breakfast today", T0 + 12 * H);
        let r = app.tick("drift", T0 + 12 * H + MIN, 7);
        assert_eq!(r["flushed"], json!([]), "{r}");
        // 22:01 UTC is 08:01 for them: quiet hours are over, but they have
        // not written since.
        let r = app.tick("drift", T0 + 14 * H + MIN, 7);
        assert_eq!(r["flushed"], json!([]), "{r}");
        assert!(drift_events(T0 + 14 * H + MIN).is_empty());
        // They write at 08:05 their time: the next tick delivers it, once.
        chat(&app, "Back at the cello this morning with a brand new bow", T0 + 14 * H + 5 * MIN);
        let r = app.tick("drift", T0 + 14 * H + 6 * MIN, 7);
        assert_eq!(r["flushed"], json!([{"drift_id": held, "older_dropped": 0}]), "{r}");
        let events = drift_events(T0 + 14 * H + 6 * MIN);
        assert_eq!(events.len(), 1, "{events:?}");
        assert!(events[0].contains(&held) && events[0].contains(x1), "{events:?}");
        // They answer it; the queues are drained.
        chat(&app, "Thanks, the morning practice really is going well", T0 + 14 * H + 10 * MIN);
        app.tick("consolidate", T0 + 14 * H + 12 * MIN, 1);

        // 23:30 UTC is 09:30 at UTC+10: COMMUNICATE is sent at once.
        let sent_at = T0 + 15 * H + 30 * MIN;
        let r = drift(sent_at, on("posture"), x2);
        assert_eq!(r["drift"]["situation"]["local_hour"], 9, "{r}");
        assert_eq!(
            (r["drift"]["action"].as_str(), r["drift"]["delivery"].as_str()),
            (Some("COMMUNICATE"), Some("sent")),
            "{r}"
        );
        let sent = r["drift"]["drift_id"].as_str().unwrap().to_string();
        let events = drift_events(sent_at);
        assert_eq!(events.len(), 2, "{events:?}");
        assert!(events.iter().any(|e| e.contains(&sent) && e.contains(x2)), "{events:?}");
        let log = table(&app, "drift_log", sent_at);
        let delivery = |id: &str| log.iter().find(|d| d["id"] == id).unwrap()["delivery"].as_str().unwrap().to_string();
        assert_eq!((delivery(&held), delivery(&sent)), ("sent".to_string(), "sent".to_string()));
    }
}

/// Quiet hours follow the principal's zone with its daylight saving
/// (`time_zone = Europe/London`): 22:30 UTC is 22:30 GMT on 2027-03-27, a
/// waking hour, so a thought for the principal is sent; on 2027-03-28 the
/// same 22:30 UTC is 23:30 BST, a quiet hour, so the next one is held.
#[test]
fn quiet_hours_follow_the_principals_zone_across_the_change_to_summer_time() {
    // 2027-03-27T00:00:00Z.
    const D: u64 = 1_806_105_600_000;
    for backend in BACKENDS {
        let b = BackendEnv::new(backend);
        let dir = tempfile::tempdir().unwrap();
        let (model, app, ..) = model_app_with(&b, dir.path(), 0, &[("SPIN_VARIABLE_TIME_ZONE", "Europe/London")]);
        // The conversations at 16:00 on the Saturday, so their episodes are recent.
        let cello = cello_concepts_at(&model, &app, D + 16 * H);
        let concepts = table(&app, "semantic_concepts", D + 16 * H + 13 * MIN);
        let n = concepts.len();
        let on = |name: &str| seed_for(&[concept_index(&concepts, name)], n, 1);
        let drift = |at: u64, seed: u64, content: &str| drift_on(&model, &app, at, seed, content);
        // Two reflections on the 0.8 pair, an hour apart, so REFLECT is out.
        let x1 = "The principal practises the cello every morning before work";
        let x2 = "Cello bows strung with horsehair suit the principal's gentle playing";
        for (at, x, hour) in [(D + 19 * H, x1, 19), (D + 20 * H + 5 * MIN, x2, 20)] {
            let r = drift(at, cello, x);
            assert_eq!(r["drift"]["action"], "REFLECT", "{r}");
            assert_eq!(r["drift"]["situation"]["local_hour"], hour, "GMT is UTC: {r}");
        }
        // 22:30 UTC on the Saturday is 22:30 GMT: sent at once.
        let r = drift(D + 22 * H + 30 * MIN, on("posture"), x2);
        assert_eq!(r["drift"]["situation"]["local_hour"], 22, "{r}");
        assert_eq!(
            (r["drift"]["action"].as_str(), r["drift"]["delivery"].as_str()),
            (Some("COMMUNICATE"), Some("sent")),
            "{backend:?}: {r}"
        );
        chat(&app, "Thanks, the cello practice really is going well", D + 22 * H + 40 * MIN);
        app.tick("consolidate", D + 22 * H + 42 * MIN, 1);
        // 22:30 UTC on the Sunday is 23:30 BST: held for the morning.
        let r = drift(D + 46 * H + 30 * MIN, on("bow"), x1);
        assert_eq!(r["drift"]["situation"]["local_hour"], 23, "{backend:?}: BST is UTC+1: {r}");
        assert_eq!(
            (r["drift"]["action"].as_str(), r["drift"]["delivery"].as_str()),
            (Some("COMMUNICATE"), Some("deferred")),
            "{backend:?}: {r}"
        );
    }
}
