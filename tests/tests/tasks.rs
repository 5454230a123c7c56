//! Persistent tasks (002 §7) through the runner over HTTP, on both storage
//! backends: the API and its errors, plan decomposition (the scripted model,
//! a rejected plan, the rules), the worker's jittered schedule at its
//! bounds, FIFO within priority, expiry, cycles with checkpoints, the
//! surfacing rules as `/events` rows, and a crash mid-cycle followed by a
//! run that finishes the work exactly once.

use std::time::{Duration, Instant};

use mneme_background::Draws;
use mneme_background::tasks::{MAX_AGE_MS, next_run};
use mneme_e2e::fake_model::{FakeModel, Script, marker};
use mneme_e2e::{App, BACKENDS, BackendEnv, TEST_KEY, parse_sse, test_env, without_crons};
use serde_json::{Value, json};

/// In the plan-decomposition system prompt.
const PLAN: &str = "You break one of the principal's long-running goals";
/// The task lease of `components/tick/src/tasks.rs`.
const LEASE_MS: u64 = 300_000;
const T0: u64 = 1_800_000_000_000;

/// The app without the tasks cron, so only the test's ticks (on the test
/// clock) run cycles.
fn manifest(dir: &std::path::Path) -> String {
    without_crons(dir, &["tasks"])
}

fn env(b: &BackendEnv, model: Option<&FakeModel>) -> Vec<(String, String)> {
    test_env(b, model)
}

fn create(app: &App, goal: &str, priority: i64, at: u64) -> Value {
    let r = app.call("POST", "/tasks", Some(json!({"goal": goal, "priority": priority})), at);
    assert_eq!(r.status, 201, "{}", r.body);
    r.json()
}

fn task(app: &App, id: &str) -> Value {
    let r = app.call("GET", &format!("/tasks/{id}"), None, T0);
    assert_eq!(r.status, 200, "{}", r.body);
    r.json()
}

/// Runs the worker's tick at `at` with seed 1; its `result`.
fn tick(app: &App, at: u64) -> Value {
    app.tick("tasks", at, 1)
}

/// The period the seed-1 draw gives.
fn period() -> u64 {
    next_run(0, Draws::new(1).draw()) as u64
}

fn task_events(app: &App) -> Vec<Value> {
    let a = format!("Bearer {TEST_KEY}");
    let r = app.request("GET", "/events?wait=0", &[("authorization", &a)], None);
    assert_eq!(r.status, 200, "{}", r.body);
    parse_sse(&r.body).into_iter().filter(|(n, _)| n == "task").map(|(_, v)| v["payload"].clone()).collect()
}

fn step_status(t: &Value) -> Vec<String> {
    t["plan"]["steps"].as_array().unwrap().iter().map(|s| s["status"].as_str().unwrap().to_string()).collect()
}

#[test]
fn the_api_rules_based_plans_schedule_priority_and_expiry() {
    for backend in BACKENDS {
        let b = BackendEnv::new(backend);
        let dir = tempfile::tempdir().unwrap();
        let app = App::start(&manifest(dir.path()), &env(&b, None));
        app.request("GET", "/tasks", &[], None).assert_error(401, "unauthorized");
        // Bad input is a 400 before anything is written.
        for (body, code) in [
            (json!({}), "invalid"),
            (json!({"goal": "  "}), "invalid"),
            (json!({"goal": "ok"}), "invalid"),
            (json!({"goal": "Find a laptop", "priority": 0}), "invalid"),
            (json!({"goal": "Find a laptop", "priority": "high"}), "invalid"),
            (json!({"goal": "Find a laptop", "colour": "red"}), "invalid"),
        ] {
            app.call("POST", "/tasks", Some(body.clone()), T0).assert_error(400, code);
        }
        let a = format!("Bearer {TEST_KEY}");
        app.request("POST", "/tasks", &[("authorization", &a)], Some(b"{not json")).assert_error(400, "invalid-json");
        app.call("GET", "/tasks?status=done", None, T0).assert_error(400, "invalid");
        app.call("GET", "/tasks/pt-nope", None, T0).assert_error(404, "not-found");
        app.call("PUT", "/tasks", None, T0).assert_error(405, "method-not-allowed");
        assert_eq!(app.call("GET", "/tasks", None, T0).json()["tasks"], json!([]));

        // With no model, the plan is the labelled rules' plan.
        let low = create(&app, "Find a quiet laptop for travel", 5, T0);
        assert_eq!(low["status"], "accepted");
        assert_eq!(low["plan_source"], "rules (no model configured)");
        assert_eq!(step_status(&low), ["pending", "pending", "pending"]);
        assert_eq!(low["plan"]["confidence"], Value::Null);
        app.call("POST", "/tasks", Some(json!({"goal": "find a quiet laptop for travel!"})), T0)
            .assert_error(409, "conflict");
        // FIFO within priority: the later, more urgent task runs first.
        let urgent = create(&app, "Plan the garden beds for spring planting", 2, T0 + 1);
        let cycle = tick(&app, T0 + 10);
        assert_eq!(cycle["task_id"], urgent["id"], "{cycle}");
        assert_eq!(cycle["model"], "rules (no model configured)");
        // Three ready steps a cycle: the rules' plan finishes in one.
        assert_eq!((cycle["status"].as_str(), cycle["coverage"].as_f64()), (Some("completed"), Some(1.0)), "{cycle}");
        let done = task(&app, urgent["id"].as_str().unwrap());
        assert_eq!(step_status(&done), ["done", "done", "done"]);
        assert!(
            done["plan"]["steps"][0]["result"].as_str().unwrap().starts_with("[rules (no model configured)] recall:")
        );
        let related = done["plan"]["steps"][1]["result"].as_str().unwrap();
        assert!(related.starts_with("[rules (no model configured)] associate:"), "{related}");
        assert!(!related.contains("(error)"), "every rule action is well formed: {related}");
        let events = task_events(&app);
        assert_eq!(events.len(), 1, "{events:?}");
        assert_eq!(
            (events[0]["reason"].as_str(), events[0]["task_id"].clone()),
            (Some("completed"), urgent["id"].clone())
        );

        // The jittered period at its bounds: not a millisecond early.
        let next = T0 + 10 + period();
        assert_eq!(cycle["next_ms"], next);
        let early = tick(&app, next - 1);
        assert_eq!((early["due"].as_bool(), early["reason"].as_str()), (Some(false), Some("not due yet")), "{early}");
        assert_eq!(task(&app, low["id"].as_str().unwrap())["status"], "accepted");
        let ran = tick(&app, next);
        assert_eq!(ran["task_id"], low["id"], "{ran}");
        // Idle: no eligible task leaves the worker free for the next tick.
        let idle = tick(&app, next + period());
        assert_eq!((idle["due"].as_bool(), idle["task"].clone()), (Some(true), Value::Null), "{idle}");

        // Cancel, and cancelling twice.
        let third = create(&app, "Compare three running shoes for flat feet", 5, T0);
        let id = third["id"].as_str().unwrap();
        let r = app.call("DELETE", &format!("/tasks/{id}"), None, T0 + 5);
        assert_eq!((r.status, r.json()["status"].as_str()), (200, Some("cancelled")), "{}", r.body);
        app.call("DELETE", &format!("/tasks/{id}"), None, T0 + 6).assert_error(409, "conflict");

        // At most five open tasks.
        for i in 0..5 {
            create(&app, &format!("Open question number {i} about topic{i} details{i}"), 5, T0 + 20);
        }
        let r = app.call("POST", "/tasks", Some(json!({"goal": "One task too many for the worker"})), T0 + 21);
        r.assert_error(409, "conflict");
        // Fourteen days: a task is kept at exactly max_age and expired after.
        let at_limit = tick(&app, T0 + 20 + MAX_AGE_MS as u64);
        assert_eq!(at_limit["expired"], 0, "{at_limit}");
        let past = tick(&app, T0 + 21 + MAX_AGE_MS as u64);
        assert!(past["expired"].as_u64().unwrap() >= 4, "{past}");
        let listed = app.call("GET", "/tasks?status=expired", None, T0).json();
        assert!(listed["tasks"].as_array().unwrap().len() >= 4, "{listed}");
        assert!(listed["tasks"].as_array().unwrap().iter().all(|t| t["status"] == "expired"));
    }
}

/// An eight-step chain the scripted model proposes.
fn chain_plan() -> String {
    let steps: Vec<Value> = (1..=8)
        .map(|i| {
            let deps: Vec<String> = if i == 1 { vec![] } else { vec![format!("s{}", i - 1)] };
            json!({"id": format!("s{i}"), "description": format!("Work through research stage number {i} of topic{i} carefully"), "depends_on": deps})
        })
        .collect();
    json!({"steps": steps, "confidence": 0.8}).to_string()
}

fn script(reply: &str) -> Script {
    Script { reply: reply.into(), ..Script::default() }
}

/// The marker of a step's iterations in the model's requests: the end of
/// the step object (a dependency's copy goes on with its result).
fn step_marker(n: u32) -> String {
    format!("carefully\\\",\\\"id\\\":\\\"s{n}\\\"}}")
}

#[test]
fn model_plans_cycles_surfacing_and_a_crash_mid_cycle() {
    for backend in BACKENDS {
        let b = BackendEnv::new(backend);
        let dir = tempfile::tempdir().unwrap();
        let model =
            FakeModel::start(script(r#"{"actions": [], "done": true, "result": "step result", "coverage": 0.5}"#));
        // A rejected plan (a cycle) leaves the task plan-less: it runs flat.
        model.route(
            "Untangle the circular goal",
            script(
                r#"{"steps":[{"id":"a","description":"Do the first thing well","depends_on":["b"]},
                   {"id":"b","description":"Then do another different thing","depends_on":["a"]}],"confidence":0.9}"#,
            ),
        );
        model.route(PLAN, script(&chain_plan()));
        // A step's first iteration calls a skill; its second finishes it.
        model.route(
            "this_step_so_far\\\":[]",
            script(r#"{"actions": [{"type": "recall", "params": {"query": "laptops"}}], "done": false}"#),
        );
        let manifest = manifest(dir.path());
        let env = env(&b, Some(&model));
        let app = App::start(&manifest, &env);

        let flat = create(&app, "Untangle the circular goal of the garage", 9, T0);
        assert_eq!(flat["plan"], Value::Null);
        assert!(
            flat["plan_note"]
                .as_str()
                .unwrap()
                .starts_with("the model's plan was rejected: the dependencies form a cycle")
        );
        // From now on its iterations get the default answer (a re-routed
        // marker goes to the back of the routes).
        model.route("Untangle the circular goal", script(r#"{"actions": [], "done": true, "result": "step result"}"#));
        let t = create(&app, "Choose a laptop for the whole family", 1, T0);
        let id = t["id"].as_str().unwrap().to_string();
        assert_eq!(t["plan_source"], "scripted-model", "the name the model answered with");
        assert_eq!(t["plan"]["confidence"], 0.8);
        assert_eq!(t["plan"]["steps"].as_array().unwrap().len(), 8);

        // Cycle 1: three steps (each a recall, then done), 3/8 covered, a
        // jump over 15 points → surfaced.
        let c1 = tick(&app, T0);
        assert_eq!((c1["task_id"].as_str(), c1["cycle"].as_u64()), (Some(id.as_str()), Some(1)), "{c1}");
        assert_eq!(c1["coverage"], 0.375);
        assert_eq!(c1["surfaced"], "coverage_jump");
        let now = task(&app, &id);
        assert_eq!(step_status(&now)[..4], ["done", "done", "done", "pending"]);
        assert_eq!(now["plan"]["steps"][0]["result"], "step result");
        assert_eq!(model.requests_with(&step_marker(1)).len(), 2);

        // Cycle 2 crashes: step 4 finishes and is checkpointed, step 5's
        // model call hangs, and the runner is killed.
        model.route(&step_marker(5), Script { delay: Duration::from_secs(60), ..script("{}") });
        let at2 = T0 + period();
        let app = std::thread::scope(|s| {
            let url = app.url.clone();
            s.spawn(move || {
                let _ = ureq::post(&format!("{url}/tick/tasks"))
                    .header("authorization", mneme_e2e::CRON_AUTH)
                    .header("x-mneme-clock", &at2.to_string())
                    .header("x-mneme-seed", "1")
                    .send_empty();
            });
            let deadline = Instant::now() + Duration::from_secs(60);
            while model.requests_with(&step_marker(5)).is_empty() {
                assert!(Instant::now() < deadline, "step 5 never started");
                std::thread::sleep(Duration::from_millis(50));
            }
            assert_eq!(step_status(&task(&app, &id))[3], "done", "step 4 was checkpointed before the crash");
            app.crash_and_restart(&manifest, &env)
        });
        model.route(&step_marker(5), script(r#"{"actions": [], "done": true, "result": "step result"}"#));
        // The crashed cycle's leases hold until they end…
        let held = tick(&app, at2 + 1_000);
        assert_eq!(
            (held["due"].as_bool(), held["reason"].as_str()),
            (Some(false), Some("another cycle holds the worker"))
        );
        // …then the next run takes the work over and does each step once.
        // (A checkpoint renews the lease from its own time, a few
        // milliseconds after the cycle began.)
        let taken = at2 + LEASE_MS + 60_000;
        let c2 = tick(&app, taken);
        assert_eq!((c2["task_id"].as_str(), c2["cycle"].as_u64()), (Some(id.as_str()), Some(2)), "{c2}");
        assert_eq!(c2["steps"].as_array().unwrap().len(), 3, "steps 5–7: {c2}");
        assert_eq!(c2["coverage"], 0.875);
        assert_eq!(c2["surfaced"], "after_cycle2");
        assert_eq!(model.requests_with(&step_marker(4)).len(), 2, "step 4 ran once");
        let after = task(&app, &id);
        assert_eq!(after["cycles"], 2);
        assert_eq!(step_status(&after), ["done", "done", "done", "done", "done", "done", "done", "pending"]);

        // Cycle 3: the model fails, nothing finishes, nothing is surfaced.
        model.route(&step_marker(8), Script { status: 500, ..script("{}") });
        let at3 = taken + period();
        let c3 = tick(&app, at3);
        assert_eq!((c3["cycle"].as_u64(), c3["surfaced"].clone()), (Some(3), Value::Null), "{c3}");
        assert_eq!(c3["coverage"], 0.875);
        // Cycle 4 completes it.
        model.route(&step_marker(8), script(r#"{"done": true, "result": "the pick: the X1"}"#));
        let c4 = tick(&app, at3 + period());
        assert_eq!((c4["status"].as_str(), c4["surfaced"].as_str()), (Some("completed"), Some("completed")), "{c4}");
        let events = task_events(&app);
        let reasons: Vec<&str> =
            events.iter().filter(|e| e["task_id"] == id.as_str()).map(|e| e["reason"].as_str().unwrap()).collect();
        assert_eq!(reasons, ["coverage_jump", "after_cycle2", "completed"], "each surfacing once");
        assert_eq!(task(&app, &id)["status"], "completed");

        // The plan-less task runs flat: the model's coverage estimate.
        let c5 = tick(&app, at3 + 2 * period());
        assert_eq!(c5["task_id"], flat["id"], "{c5}");
        let f = task(&app, flat["id"].as_str().unwrap());
        assert_eq!((f["status"].as_str(), f["coverage"].as_f64()), (Some("completed"), Some(1.0)), "{f}");
        assert_eq!(f["findings"][0]["text"], "step result");
    }
}

/// Cancelled by `DELETE /tasks/{id}` or by the ACT loop's
/// `persistent_task` skill, which share one statement: either way the
/// cycle finds its claim gone.
#[test]
fn a_task_cancelled_mid_cycle_keeps_what_it_had_and_frees_the_worker() {
    for (backend, by_chat) in BACKENDS.into_iter().flat_map(|b| [(b, false), (b, true)]) {
        let b = BackendEnv::new(backend);
        let dir = tempfile::tempdir().unwrap();
        let model = FakeModel::start(script(r#"{"actions": [], "done": true, "result": "step result"}"#));
        model.route(PLAN, script(&chain_plan()));
        // Step 1's answer comes after the principal has cancelled.
        model.route(
            &step_marker(1),
            Script { delay: Duration::from_secs(3), ..script(r#"{"done": true, "result": "late"}"#) },
        );
        let app = App::start(&manifest(dir.path()), &env(&b, Some(&model)));
        let t = create(&app, "Choose a laptop for the whole family", 1, T0);
        let id = t["id"].as_str().unwrap().to_string();
        if by_chat {
            model.route(marker::TRIAGE, script(r#"{"mode": "ACT", "skills": ["persistent_task"]}"#));
            let cancel = json!({"actions": [{"type": "persistent_task", "action": "cancel", "id": id}]});
            model.route(marker::ACT_PLAN, script(&cancel.to_string()));
        }
        let cycle = std::thread::scope(|s| {
            let running = s.spawn(|| tick(&app, T0));
            let deadline = Instant::now() + Duration::from_secs(30);
            while model.requests_with(&step_marker(1)).is_empty() {
                assert!(Instant::now() < deadline, "step 1 never started");
                std::thread::sleep(Duration::from_millis(20));
            }
            if by_chat {
                let r = app.call("POST", "/chat", Some(json!({"text": "Stop the laptop research, please"})), T0 + 1);
                assert_eq!(r.status, 200, "{}", r.body);
            } else {
                let r = app.call("DELETE", &format!("/tasks/{id}"), None, T0 + 1);
                assert_eq!(r.status, 200, "{}", r.body);
            }
            running.join().unwrap()
        });
        assert!(cycle["abandoned"].as_str().unwrap_or_default().contains("no longer claimed"), "{by_chat}: {cycle}");
        let after = task(&app, &id);
        assert_eq!(after["status"], "cancelled", "{by_chat}: {after}");
        let row = app.table("persistent_tasks", T0 + 2).into_iter().find(|t| t["id"] == id.as_str()).expect("its row");
        assert_eq!(
            (&row["claim"], &row["lease_until_ms"]),
            (&Value::Null, &json!(0)),
            "{by_chat}: the cancel took the claim and the lease: {row}"
        );
        assert_eq!(step_status(&after)[0], "pending", "the late step is not written: {after}");
        assert!(task_events(&app).is_empty(), "nothing is surfaced for a cancelled task");
        // The worker is free at its next time, not after the lease.
        let next = tick(&app, T0 + period());
        assert_eq!((next["due"].as_bool(), next["task"].clone()), (Some(true), Value::Null), "{next}");
    }
}

/// The `message` event of a `/chat` stream.
fn chat_message(app: &App, text: &str, at: u64) -> Value {
    let r = app.call("POST", "/chat", Some(json!({"text": text})), at);
    assert_eq!(r.status, 200, "{}", r.body);
    parse_sse(&r.body).into_iter().find(|(n, _)| n == "message").map(|(_, v)| v).expect("a message event")
}

/// A goal asked for in conversation: the ACT loop's `persistent_task`
/// skill creates the task with no plan, and the worker's first cycle
/// decomposes it, by the labelled rules with no model and by the model's
/// plan with one.
#[test]
fn a_task_asked_for_in_chat_is_planned_in_its_first_cycle() {
    for backend in BACKENDS {
        let b = BackendEnv::new(backend);
        let dir = tempfile::tempdir().unwrap();
        let app = App::start(&manifest(dir.path()), &env(&b, None));
        // The triage heuristics pick the skill from the wording.
        let ask = "Please research quiet travel laptops over the next two weeks";
        let m = chat_message(&app, ask, T0);
        assert!(m["text"].as_str().unwrap().contains("persistent_task: created task pt-"), "{m}");
        let listed = app.call("GET", "/tasks", None, T0).json()["tasks"].as_array().unwrap().clone();
        assert_eq!(listed.len(), 1, "{listed:?}");
        let id = listed[0]["id"].as_str().unwrap().to_string();
        let t = task(&app, &id);
        assert_eq!((t["goal"].as_str(), t["status"].as_str()), (Some(ask), Some("accepted")), "{t}");
        assert_eq!((&t["plan"], &t["plan_source"]), (&Value::Null, &Value::Null), "not planned yet: {t}");

        let c = tick(&app, T0 + 1_000);
        assert_eq!((c["task_id"].as_str(), c["cycle"].as_u64()), (Some(id.as_str()), Some(1)), "{c}");
        let t = task(&app, &id);
        assert_eq!(t["plan_source"], "rules (no model configured)", "{t}");
        assert_eq!(step_status(&t), ["done", "done", "done"], "the rules' plan finishes in its first cycle");
        assert_eq!(t["status"], "completed");
        drop(app);

        // With a model: the ACT loop asks for the task (a second identical
        // request finds it open), and cycle 1 plans it with the model.
        let model = FakeModel::start(script("On it: I will keep working on that in the background."));
        model.route(marker::TRIAGE, script(r#"{"mode": "ACT", "skills": ["persistent_task"]}"#));
        let goal = "Choose a laptop for the whole family";
        model.route(
            marker::ACT_PLAN,
            script(
                &json!({"actions": [{"type": "persistent_task", "action": "create", "goal": goal, "priority": 2}]})
                    .to_string(),
            ),
        );
        model.route(PLAN, script(&chain_plan()));
        model.route(
            "You are working in the background",
            script(r#"{"actions": [], "done": true, "result": "step result"}"#),
        );
        let b = BackendEnv::new(backend);
        let app = App::start(&manifest(dir.path()), &env(&b, Some(&model)));
        let m = chat_message(&app, "Can you look into which family laptop we should get?", T0);
        assert_eq!(m["text"], "On it: I will keep working on that in the background.", "{m}");
        let listed = app.call("GET", "/tasks", None, T0).json()["tasks"].as_array().unwrap().clone();
        assert!(model.requests_with(marker::ACT_PLAN).len() >= 2, "the loop asked for the task more than once");
        assert_eq!(listed.len(), 1, "one task for two identical requests: {listed:?}");
        let id = listed[0]["id"].as_str().unwrap().to_string();
        assert_eq!((listed[0]["goal"].as_str(), listed[0]["priority"].as_i64()), (Some(goal), Some(2)));
        assert!(model.requests_with(PLAN).is_empty(), "no plan before the worker's first cycle");

        let c = tick(&app, T0 + 1_000);
        assert_eq!((c["task_id"].as_str(), c["cycle"].as_u64()), (Some(id.as_str()), Some(1)), "{c}");
        assert_eq!(model.requests_with(PLAN).len(), 1);
        let t = task(&app, &id);
        assert_eq!(t["plan_source"], "scripted-model", "{t}");
        assert_eq!(step_status(&t)[..4], ["done", "done", "done", "pending"], "{t}");
        assert_eq!(t["status"], "in_progress");
    }
}
