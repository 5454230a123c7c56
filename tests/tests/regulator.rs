//! The routing stability regulator and routing reflection (002 §10, §12)
//! through the runner over HTTP, on both storage backends: one bounded
//! change a day on the worst pressure, the router routing with it, the
//! 48 h cooldown, the judgement that reverts a change that did not help
//! and the one that keeps a change that did; reflection batches by the scripted strong model, their filters, and the
//! regulator acting on a dominant disagreement dimension.

use mneme_background::regulator::{Judgement, judge};
use mneme_e2e::fake_model::{FakeModel, Script, marker, triage_answer};
use mneme_e2e::{App, BACKENDS, BackendEnv, test_env, without_crons};
use serde_json::{Value, json};

const T0: u64 = 1_800_000_000_000;
const MIN: u64 = 60_000;
const H: u64 = 60 * MIN;
const REFLECTION: &str = "You review one decision of a personal assistant's mode router";
const JOBS: [&str; 5] = ["consolidate", "tasks", "drift", "regulate", "reflect"];

fn tick(app: &App, job: &str, at: u64) -> Value {
    app.tick(job, at, 3)
}

fn table(app: &App, name: &str, at: u64) -> Vec<Value> {
    let mut rows = app.table(name, at);
    rows.sort_by_key(|x| x["created_ms"].as_i64().unwrap_or(0));
    rows
}

/// `n` plain statements a minute apart from `from`, each routed.
fn converse(app: &App, n: usize, from: u64) {
    for i in 0..n {
        let text = format!("The history of string instrument number {i} goes back many centuries");
        let r = app.call("POST", "/chat", Some(json!({"text": text, "thread_id": "t1"})), from + i as u64 * MIN);
        assert_eq!(r.status, 200, "{}", r.body);
    }
}

/// One plain statement on each of `n` fresh threads, a minute apart from
/// `from`: a cold session's first statement goes to CLARIFY.
fn first_messages(app: &App, n: usize, from: u64) {
    for i in 0..n {
        let text = format!("The history of bowed instrument number {i} is long and varied");
        let body = json!({"text": text, "thread_id": format!("fresh-{from}-{i}")});
        let r = app.call("POST", "/chat", Some(body), from + i as u64 * MIN);
        assert_eq!(r.status, 200, "{}", r.body);
    }
}

fn weight(app: &App, param: &str, at: u64) -> Option<f64> {
    table(app, "router_weights", at).iter().find(|w| w["param"] == param).and_then(|w| w["value"].as_f64())
}

#[test]
fn the_regulator_moves_one_weight_a_day_and_reverts_what_did_not_help() {
    for backend in BACKENDS {
        let b = BackendEnv::new(backend);
        let dir = tempfile::tempdir().unwrap();
        let app = App::start(&without_crons(dir.path(), &JOBS), &test_env(&b, None));
        app.request("POST", "/tick/regulate", &[], None).assert_error(401, "unauthorized");

        // Too few decisions: the day is taken, nothing changes.
        let r = tick(&app, "regulate", T0);
        assert_eq!(r["due"], true, "{r}");
        assert_eq!(r["no_change"], "0 routing decisions in the last day, under 10", "{r}");
        assert_eq!(r["next_ms"].as_u64(), Some(T0 + 24 * H));
        assert_eq!(tick(&app, "regulate", T0 + 24 * H - 1)["due"], false);
        // Without a model, reflection does not run.
        let r = tick(&app, "reflect", T0);
        assert_eq!(r["due"], false, "{r}");
        assert!(r["reason"].as_str().unwrap().contains("no model configured"));

        // A day of plain questions, all RESPOND by the rules: RESPOND is
        // overused (1.0 − 0.75 = 0.25 over 0.10), so its base steps down by
        // min(1.5 × 0.05, 0.02).
        // (A cold session's first statements go to CLARIFY; 40 make a day.)
        converse(&app, 40, T0 + 2 * H);
        let decisions = table(&app, "routing_decisions", T0 + 3 * H);
        assert_eq!(decisions.len(), 40);
        let day1 = T0 + 24 * H;
        let r = tick(&app, "regulate", day1);
        assert_eq!(r["metrics"]["decisions"], 40, "{r}");
        let before = r["metrics"]["respond_overused"].as_f64().unwrap();
        assert!(before > 0.14, "over 0.10 by at least 40%, so the step is the cap: {r}");
        assert_eq!(r["change"]["param"], "RESPOND.base", "{r}");
        assert_eq!((r["change"]["from"].as_f64(), r["change"]["to"].as_f64()), (Some(0.4), Some(0.38)), "{r}");
        assert_eq!(weight(&app, "RESPOND.base", day1), Some(0.38));
        // Two ticks at once: the day is regulated once.
        let (a, b2) = std::thread::scope(|s| {
            let one = s.spawn(|| tick(&app, "regulate", day1 + 24 * H));
            let two = s.spawn(|| tick(&app, "regulate", day1 + 24 * H));
            (one.join().unwrap(), two.join().unwrap())
        });
        assert_eq!([&a, &b2].iter().filter(|r| r["due"] == true).count(), 1, "{a} {b2}");

        // Day 3: 48 h on, the change is judged on its pressure. It did not
        // fall by 10% (it did not help), so it is reverted, and the
        // reverted parameter rests again.
        converse(&app, 40, day1 + 25 * H);
        // The router routed with the change, and logged the weights it used.
        let last = table(&app, "routing_decisions", day1 + 26 * H);
        let snapshot: Value = serde_json::from_str(last.last().unwrap()["weight_snapshot"].as_str().unwrap()).unwrap();
        assert_eq!(snapshot["base"]["RESPOND"], 0.38, "{snapshot}");
        let day3 = day1 + 48 * H;
        let r = tick(&app, "regulate", day3);
        let after = r["metrics"]["respond_overused"].as_f64().unwrap();
        assert!(after >= 0.9 * before, "{before} → {after}");
        let verdict = json!(judge(before, after));
        assert_ne!(verdict, "confirmed");
        assert_eq!(r["judged"][0]["verdict"], verdict, "{r}");
        assert_eq!(r["change"], Value::Null, "{r}");
        assert!(r["no_change"].as_str().unwrap().contains("RESPOND.base is cooling down"), "{r}");
        assert_eq!(weight(&app, "RESPOND.base", day3), Some(0.4));
        let log = table(&app, "routing_adjustments", day3);
        assert_eq!(log.len(), 1);
        assert_eq!((log[0]["status"].as_str(), log[0]["pressure_after"].as_f64()), (verdict.as_str(), Some(after)));
        let days = table(&app, "routing_metrics", day3);
        assert_eq!(days.len(), 4, "one record a day regulated: {days:?}");
    }
}

/// The other side of the judgement: a change whose pressure fell under
/// 0.9 × what it was when it was made is kept (confirmed), with nothing
/// reverted, and the router goes on routing with it.
#[test]
fn the_regulator_keeps_a_change_that_helped() {
    for backend in BACKENDS {
        let b = BackendEnv::new(backend);
        let dir = tempfile::tempdir().unwrap();
        let app = App::start(&without_crons(dir.path(), &JOBS), &test_env(&b, None));

        // Day 1: RESPOND overused; its base steps down 0.40 → 0.38.
        converse(&app, 40, T0 + 2 * H);
        let day1 = T0 + 24 * H;
        let r = tick(&app, "regulate", day1);
        let before = r["metrics"]["respond_overused"].as_f64().unwrap();
        assert!(before > 0.10, "over its threshold: {r}");
        assert_eq!(r["change"]["param"], "RESPOND.base", "{r}");
        assert_eq!((r["change"]["from"].as_f64(), r["change"]["to"].as_f64()), (Some(0.4), Some(0.38)), "{r}");
        let id = r["change"]["id"].as_str().unwrap().to_string();
        // Day 2 is regulated (the change is not 48 h old yet: not judged).
        let r = tick(&app, "regulate", day1 + 24 * H);
        assert_eq!(r["judged"], json!([]), "{r}");

        // Day 3: a day where the principal's messages are spread over
        // sessions, a third of them first messages (CLARIFY), so RESPOND
        // is no longer overused.
        converse(&app, 27, day1 + 25 * H);
        first_messages(&app, 13, day1 + 26 * H);
        let day3 = day1 + 48 * H;
        let r = tick(&app, "regulate", day3);
        assert_eq!(r["metrics"]["decisions"], 40, "{r}");
        assert!(r["metrics"]["mode_shares"]["CLARIFY"].as_f64().unwrap() >= 13.0 / 40.0, "{r}");
        let after = r["metrics"]["respond_overused"].as_f64().unwrap();
        assert!(after < 0.9 * before, "the pressure fell by more than 10%: {before} → {after}");
        assert_eq!(judge(before, after), Judgement::Confirmed);
        assert_eq!(
            r["judged"],
            json!([{"id": id, "param": "RESPOND.base", "verdict": "confirmed", "pressure_after": after}]),
            "{r}"
        );
        // Kept: the weight is still the changed one, and with no pressure
        // over its threshold nothing else moves.
        assert_eq!(r["change"], Value::Null, "{r}");
        assert_eq!(r["no_change"], "no pressure over its threshold", "{r}");
        assert_eq!(weight(&app, "RESPOND.base", day3), Some(0.38));
        let log = table(&app, "routing_adjustments", day3);
        assert_eq!(log.len(), 1, "{log:?}");
        assert_eq!(
            (log[0]["id"].as_str(), log[0]["status"].as_str(), log[0]["pressure_after"].as_f64()),
            (Some(id.as_str()), Some("confirmed"), Some(after)),
            "{log:?}"
        );
        assert_eq!(log[0]["to_value"].as_f64(), Some(0.38), "{log:?}");
        // The router routes with the kept weight. A confirmed change is
        // never judged again: when RESPOND is overused once more, the next
        // step starts from it.
        converse(&app, 40, day3 + H);
        let last = table(&app, "routing_decisions", day3 + 2 * H);
        let snapshot: Value = serde_json::from_str(last.last().unwrap()["weight_snapshot"].as_str().unwrap()).unwrap();
        assert_eq!(snapshot["base"]["RESPOND"], 0.38, "{snapshot}");
        let r = tick(&app, "regulate", day3 + 24 * H);
        assert!(r["metrics"]["respond_overused"].as_f64().unwrap() > 0.10, "{r}");
        assert_eq!(r["judged"], json!([]), "{r}");
        assert_eq!(r["change"]["param"], "RESPOND.base", "{r}");
        assert_eq!(r["change"]["from"].as_f64(), Some(0.38), "{r}");
        assert!(r["change"]["to"].as_f64().unwrap() < 0.38, "{r}");
        let log = table(&app, "routing_adjustments", day3 + 24 * H);
        assert_eq!(log.len(), 2, "{log:?}");
        assert_eq!(log.iter().find(|a| a["id"] == id.as_str()).unwrap()["status"], "confirmed", "{log:?}");
    }
}

fn reflection(agree: bool, confidence: f64) -> Script {
    Script {
        reply: json!({"ambiguity_level": "medium",
                      "uncertainty_dimensions": [{"dimension": "tone_ambiguity", "description": "was it a joke?",
                                                  "affected_modes": ["RESPOND", "ACKNOWLEDGE"], "signal_gap": "no tone signal"}],
                      "agree_with_decision": agree, "suggested_mode": if agree { Value::Null } else { json!("ACKNOWLEDGE") },
                      "confidence": confidence})
        .to_string(),
        ..Default::default()
    }
}

#[test]
fn reflection_reviews_batches_and_the_regulator_acts_on_their_dimension() {
    for backend in BACKENDS {
        let b = BackendEnv::new(backend);
        let dir = tempfile::tempdir().unwrap();
        let model = FakeModel::start(Script { reply: "Sounds good.".into(), ..Default::default() });
        model.route(marker::TRIAGE, triage_answer("RESPOND"));
        model.route(REFLECTION, reflection(false, 0.9));
        // Consolidation's answers, so its queues drain.
        let answer = Script::json;
        model.route(marker::CHUNKER, answer(json!({"gists": [], "facts": []})));
        model.route(
            marker::EPISODE,
            answer(json!({"intent": {"type": "learning", "direction": "history"}, "context": {}, "action": "read",
                          "emotion": {"type": "calm"}, "outcome": "notes", "gist": "The principal read about instruments.",
                          "salience_factors": {"novelty": 1, "emotional": 0, "commitment": 0, "unresolved": false},
                          "open_loops": []})),
        );
        model.route(marker::SEMANTIC, answer(json!({"concepts": [], "relationships": []})));
        let app = App::start(&without_crons(dir.path(), &JOBS), &test_env(&b, Some(&model)));
        converse(&app, 12, T0);
        let n = table(&app, "routing_decisions", T0 + H).len();
        assert!(n >= 10, "{n} decisions");
        // Reflection waits for every queue to be idle.
        assert_eq!(tick(&app, "reflect", T0 + 30 * MIN)["reason"], "queues busy");
        tick(&app, "consolidate", T0 + 40 * MIN);
        let jobs = app.call("GET", "/jobs?limit=100", None, T0 + 40 * MIN).json();
        assert!(jobs.as_array().unwrap().iter().all(|j| j["status"] == "done"), "{jobs}");

        // A batch of 5, each judged by the strong model at temperature 0.3.
        let at = T0 + H;
        let r = tick(&app, "reflect", at);
        assert_eq!(r["decisions"].as_array().unwrap().len(), 5, "{r}");
        assert_eq!((r["stored"]["reflected"].as_u64(), r["stored"]["counted"].as_u64()), (Some(5), Some(5)), "{r}");
        let asked: Value = serde_json::from_str(&model.requests_with(REFLECTION)[0]).unwrap();
        assert_eq!(asked["temperature"].as_f64(), Some(0.3));
        let content = asked["messages"][1]["content"].as_str().unwrap_or_else(|| panic!("{asked}"));
        let input: Value = serde_json::from_str(content).unwrap();
        assert!(input["message"].as_str().unwrap().contains("string instrument"), "{input}");
        assert!(input["signals"].is_object() && input["selected_mode"].is_string(), "{input}");
        // At most one batch in 30 minutes.
        assert_eq!(tick(&app, "reflect", at + 29 * MIN)["due"], false);
        // Under 0.7 confidence a reflection is kept but does not count.
        model.route(REFLECTION, reflection(false, 0.5));
        let r = tick(&app, "reflect", at + 31 * MIN);
        assert_eq!(r["stored"]["counted"], 0, "{r}");
        let rows = table(&app, "routing_decisions", at + 31 * MIN);
        let filtered: Vec<&Value> = rows.iter().filter(|d| d["reflection_counted"] == 0).collect();
        assert!(!filtered.is_empty());
        assert!(filtered.iter().all(|d| d["reflection_filter"] == "confidence under 0.7"));
        assert_eq!(rows.iter().filter(|d| d["reflection_counted"] == 1).count(), 5);

        // Every counted reflection disagrees over tone: that pressure (1.0,
        // severity 4) beats RESPOND's, and its dimension moves the
        // tie-breaker margin up a step.
        let r = tick(&app, "regulate", T0 + 2 * H);
        assert_eq!(r["metrics"]["reflection_disagreement"], 1.0, "{r}");
        assert_eq!(r["dimension"], "tone_ambiguity");
        assert_eq!(r["change"]["param"], "tiebreaker_base_margin", "{r}");
        assert_eq!(r["change"]["to"].as_f64(), Some(0.22));
        assert_eq!(weight(&app, "tiebreaker_base_margin", T0 + 2 * H), Some(0.22));
    }
}
