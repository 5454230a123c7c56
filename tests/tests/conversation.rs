//! The conversation path through the runner over HTTP, on both storage
//! backends, against a scripted OpenAI-compatible model on loopback: input
//! validation, the social exit, triage and its 500 ms fallback, the mode
//! router, generation streamed token by token, the rule-based fallbacks, the
//! ACT loop, working memory (TTL and concurrency) and the commit's logs.

use std::time::Duration;

use mneme_conversation::mode::Mode;
use mneme_conversation::router;
use mneme_e2e::fake_model::{FakeModel, Script, marker, triage_answer};
use mneme_e2e::{App, BACKENDS, Backend, BackendEnv, TEST_KEY, parse_sse, test_env};
use serde_json::{Value, json};

struct Chat {
    status: u16,
    request_id: Option<String>,
    raw: String,
    events: Vec<(String, Value)>,
}

impl Chat {
    fn named(&self, name: &str) -> Vec<&Value> {
        self.events.iter().filter(|(n, _)| n == name).map(|(_, v)| v).collect()
    }
    fn message(&self) -> &Value {
        self.named("message").first().copied().unwrap_or_else(|| panic!("no message event in:\n{}", self.raw))
    }
}

fn start(b: &BackendEnv, model: Option<&FakeModel>) -> App {
    let mut env = test_env(b, model);
    if model.is_some() {
        env.push(("SPIN_VARIABLE_LLM_LIGHT_MODEL".into(), "small-model".into()));
    }
    App::start("spin.toml", &env)
}

fn auth() -> String {
    format!("Bearer {TEST_KEY}")
}

fn chat_at(app: &App, body: Value, clock: Option<u64>) -> Chat {
    let a = auth();
    let c = clock.map(|c| c.to_string());
    let mut headers = vec![("authorization", a.as_str()), ("content-type", "application/json")];
    if let Some(c) = &c {
        headers.push(("x-mneme-clock", c.as_str()));
    }
    let r = app.request("POST", "/chat", &headers, Some(body.to_string().as_bytes()));
    Chat {
        status: r.status,
        request_id: r.header("x-request-id").map(String::from),
        events: parse_sse(&r.body),
        raw: r.body,
    }
}

fn chat(app: &App, text: &str) -> Chat {
    chat_at(app, json!({"text": text}), None)
}

fn get(app: &App, path: &str) -> Value {
    let a = auth();
    let r = app.request("GET", path, &[("authorization", a.as_str())], None);
    assert_eq!(r.status, 200, "{path}: {}", r.body);
    r.json()
}

fn table(app: &App, name: &str) -> Vec<Value> {
    get(app, "/privacy/export")["tables"][name].as_array().cloned().unwrap_or_default()
}

#[test]
fn bad_input_gets_a_400_before_any_stream() {
    for backend in BACKENDS {
        let b = BackendEnv::new(backend);
        let app = start(&b, None);
        let a = auth();
        let h = [("authorization", a.as_str())];
        let cases: [(&[u8], &str); 9] = [
            (b"{}", "missing-text"),
            (br#"{"text": "   "}"#, "empty-text"),
            (br#"{"text": 5}"#, "invalid"),
            (b"{not json", "invalid-json"),
            (b"", "invalid-json"),
            (b"{\"text\": \"\xff\xfe\"}", "invalid-utf8"),
            (br#"{"text": "hi", "thread_id": "a b"}"#, "invalid-thread-id"),
            (br#"{"text": "hi", "source": "fax"}"#, "invalid-source"),
            (br#"{"text": "hi", "colour": "red"}"#, "invalid"),
        ];
        for (body, code) in cases {
            app.request("POST", "/chat", &h, Some(body)).assert_error(400, code);
        }
        let long = json!({"text": "x".repeat(32_001)}).to_string();
        app.request("POST", "/chat", &h, Some(long.as_bytes())).assert_error(400, "text-too-long");
        let huge = json!({"text": "x".repeat(300_000)}).to_string();
        app.request("POST", "/chat", &h, Some(huge.as_bytes())).assert_error(400, "body-too-large");
        app.request("GET", "/chat", &h, None).assert_error(405, "method-not-allowed");
    }
}

#[test]
fn every_endpoint_but_health_needs_the_api_key() {
    for backend in BACKENDS {
        let b = BackendEnv::new(backend);
        let app = start(&b, None);
        for (m, p) in [
            ("POST", "/chat"),
            ("GET", "/events"),
            ("GET", "/conversation/recent"),
            ("GET", "/memory/search?q=x"),
            ("POST", "/memory/forget"),
            ("GET", "/privacy/export"),
            ("POST", "/privacy/import"),
            ("DELETE", "/privacy/delete-all"),
            ("GET", "/jobs"),
        ] {
            app.request(m, p, &[], None).assert_error(401, "unauthorized");
            app.request(m, p, &[("authorization", "Bearer wrong")], None).assert_error(401, "unauthorized");
        }
        assert_eq!(app.get("/health").status, 200);
        // With no key configured, the API is closed, not open.
        let b2 = BackendEnv::new(backend);
        let mut vars = b2.vars.clone();
        vars.push(("SPIN_VARIABLE_CRON_TOKEN".into(), mneme_e2e::CRON_TOKEN.into()));
        let closed = App::start("spin.toml", &vars);
        closed
            .request("POST", "/chat", &[("authorization", "Bearer anything")], Some(b"{}"))
            .assert_error(503, "not-configured");
    }
}

#[test]
fn social_exits_answer_without_any_model_call_on_both_backends() {
    for backend in BACKENDS {
        let b = BackendEnv::new(backend);
        let model = FakeModel::start(Script::default());
        let app = start(&b, Some(&model));
        let c = chat(&app, "Hey there!");
        assert_eq!(c.status, 200);
        assert!(c.raw.starts_with("retry: 3000\n\n"), "{}", c.raw);
        assert!(c.request_id.as_deref().is_some_and(|r| r.len() == 32), "X-Request-ID: {:?}", c.request_id);
        let m = c.message();
        assert_eq!(m["mode"], "ACKNOWLEDGE", "{m}");
        assert_eq!(m["text"], "Hello.");
        assert_eq!(m["source"], "social");
        assert_eq!(c.events.last().unwrap().0, "done", "{}", c.raw);
        assert!(c.events.last().unwrap().1["duration_ms"].is_u64());
        assert_eq!(chat(&app, "never mind").message()["mode"], "CANCEL");
        let ignore = chat(&app, "sorted it myself");
        assert_eq!((ignore.message()["mode"].clone(), ignore.message()["text"].clone()), (json!("IGNORE"), json!("")));
        // What people type, with a trailing clause (#26 item 2).
        for (text, mode) in [
            ("cheers, that helped", "ACKNOWLEDGE"),
            ("nvm, scratch that", "CANCEL"),
            ("stop, I don't need it anymore", "CANCEL"),
            ("ok never mind then", "CANCEL"),
        ] {
            assert_eq!(chat(&app, text).message()["mode"], mode, "{backend:?}: {text}");
        }
        // A readiness probe's `GET /models` is no model call, under either runner.
        assert!(model.completions().is_empty(), "a social exit made a model call: {:?}", model.completions());
        // Committed: seven exchanges, working memory (its last four turns),
        // interaction_log; no encode jobs.
        assert_eq!(table(&app, "exchanges").len(), 7);
        assert_eq!(table(&app, "working_memory").len(), 8);
        assert_eq!(table(&app, "interaction_log").len(), 14);
        assert!(table(&app, "jobs").is_empty());
        assert_eq!(table(&app, "spark_state")[0]["exchange_count"], 7);
    }
}

#[test]
fn respond_streams_tokens_from_the_model_and_commits_on_both_backends() {
    for backend in BACKENDS {
        let b = BackendEnv::new(backend);
        let model =
            FakeModel::start(Script { reply: "Photosynthesis turns light into sugar.".into(), ..Default::default() });
        model.route(marker::TRIAGE, triage_answer("RESPOND"));
        model.route(marker::TIEBREAK, Script { reply: r#"{"choice":"A"}"#.into(), ..Default::default() });
        let app = start(&b, Some(&model));
        // Not a plain question, which the rules would settle: the model triages it.
        let c = chat(&app, "Tell me about photosynthesis.");
        let tokens: Vec<String> = c.named("token").iter().map(|t| t["text"].as_str().unwrap().to_string()).collect();
        assert!(tokens.len() >= 4, "streamed in pieces: {tokens:?}\n{}", c.raw);
        assert_eq!(tokens.concat(), "Photosynthesis turns light into sugar.");
        let m = c.message();
        assert_eq!(m["text"], "Photosynthesis turns light into sugar.");
        assert_eq!(m["source"], "model");
        assert!(["RESPOND", "CLARIFY", "ACKNOWLEDGE"].contains(&m["mode"].as_str().unwrap()), "{m}");
        assert!(m["exchange_id"].as_str().is_some_and(|e| e.len() == 32));
        // Triage went to the light model under its JSON Schema (D-L2);
        // generation to the primary, streamed.
        let triage: Value = serde_json::from_str(&model.requests_with(marker::TRIAGE)[0]).unwrap();
        assert_eq!(
            (triage["model"].clone(), triage["response_format"]["type"].clone()),
            (json!("small-model"), json!("json_schema"))
        );
        assert_eq!(triage["response_format"]["json_schema"]["schema"]["required"], json!(["mode", "skills", "tools"]));
        let generation: Value =
            serde_json::from_str(model.requests().iter().find(|r| r.contains("\"stream\":true")).unwrap()).unwrap();
        assert_eq!(generation["model"], "big-model");
        assert!(generation["messages"][0]["content"].as_str().unwrap().starts_with("You are Mneme"));
        // Logs: triage calibration from the model, a routing decision, the commit.
        let cal = table(&app, "triage_calibration");
        assert_eq!((cal[0]["source"].clone(), cal[0]["mode"].clone()), (json!("model"), json!("RESPOND")), "{cal:?}");
        let rd = table(&app, "routing_decisions");
        assert_eq!(rd.len(), 1);
        assert_eq!(rd[0]["exchange_id"], m["exchange_id"]);
        assert!(serde_json::from_str::<Value>(rd[0]["scores"].as_str().unwrap()).unwrap()["RESPOND"].is_f64());
        let jobs = get(&app, "/jobs?queue=memory-chunker-queue");
        assert_eq!(jobs.as_array().unwrap().len(), 1, "{jobs}");
        assert_eq!(jobs[0]["payload"]["exchange_id"], m["exchange_id"]);
        let recent = get(&app, "/conversation/recent");
        assert_eq!(recent["exchanges"][0]["response"], "Photosynthesis turns light into sugar.");
    }
}

#[test]
fn with_no_model_every_path_completes_with_labelled_fallbacks() {
    for backend in BACKENDS {
        let b = BackendEnv::new(backend);
        let app = start(&b, None);
        let c = chat(&app, "remember that my favourite tea is oolong");
        assert_eq!(c.status, 200);
        let m = c.message();
        assert_eq!(m["source"], "rule-based", "{}", c.raw);
        assert!(m["text"].as_str().unwrap().starts_with("[rule-based reply: no model is configured]"), "{m}");
        let cal = table(&app, "triage_calibration");
        assert_eq!(cal[0]["source"], "heuristic");
        assert_eq!(cal[0]["fallback_reason"], "model-unavailable");
        let c = chat(&app, "Tell me about oolong tea and my favourite tea");
        let text = c.message()["text"].as_str().unwrap().to_string();
        assert!(text.starts_with("[rule-based reply"), "{text}");
        assert!(text.contains("oolong"), "the fallback answers from memory: {text}");
    }
}

#[test]
fn triage_falls_back_at_500_ms_and_on_malformed_output() {
    for backend in BACKENDS {
        let b = BackendEnv::new(backend);
        let model = FakeModel::start(Script { reply: "Sure.".into(), ..Default::default() });
        let app = start(&b, Some(&model));
        let cases = [
            (Script { delay: Duration::from_millis(50), ..triage_answer("RESPOND") }, "model", Value::Null),
            (
                Script { delay: Duration::from_millis(800), ..triage_answer("RESPOND") },
                "heuristic",
                json!("model-timeout"),
            ),
            (Script { reply: "I would respond.".into(), ..Default::default() }, "heuristic", Value::Null),
            (
                Script { reply: "overloaded".into(), status: 503, ..Default::default() },
                "heuristic",
                json!("model-error"),
            ),
        ];
        for (i, (script, source, reason)) in cases.into_iter().enumerate() {
            model.route(marker::TRIAGE, script);
            let c = chat_at(
                &app,
                json!({"text": format!("Explain case number {i} of the tests please"), "thread_id": format!("t{i}")}),
                None,
            );
            assert_eq!(c.message()["text"], "Sure.", "{}", c.raw);
            let cal = table(&app, "triage_calibration");
            let row = &cal[i];
            assert_eq!(row["source"], source, "case {i}: {row}");
            if reason.is_null() && source == "heuristic" {
                assert!(row["fallback_reason"].as_str().unwrap().starts_with("malformed"), "{row}");
            } else if !reason.is_null() {
                assert_eq!(row["fallback_reason"], reason, "{row}");
            }
        }
    }
}

#[test]
fn act_loop_runs_innate_actions_and_logs_iterations() {
    for backend in BACKENDS {
        let b = BackendEnv::new(backend);
        let app = start(&b, None);
        let c = chat(&app, "add milk and eggs to my shopping list");
        let statuses = c.named("status");
        assert!(statuses.iter().any(|s| s["stage"] == "acting"), "{}", c.raw);
        assert_eq!(c.message()["mode"], "RESPOND");
        let items: Vec<String> =
            table(&app, "list_items").iter().map(|r| r["content"].as_str().unwrap().to_string()).collect();
        assert_eq!(items, vec!["milk", "eggs"]);
        let its = table(&app, "cortex_iterations");
        assert_eq!(its.len(), 2, "one dispatched iteration and the terminating check: {its:?}");
        assert_eq!(its[1]["termination_reason"], "no_actions");
        assert!(its[0]["fatigue"].as_f64().unwrap() > 0.0);
    }
}

/// The `focus` and `introspect` actions through `/chat`'s ACT loop: focus
/// sets an explicit session that the next message's world state shows, and
/// introspect reports the assistant's own state, that session included.
#[test]
fn act_sets_an_explicit_focus_and_introspects() {
    for backend in BACKENDS {
        let b = BackendEnv::new(backend);
        let model = FakeModel::start(Script { reply: "Done.".into(), ..Default::default() });
        model.route(
            marker::TRIAGE,
            Script {
                reply: json!({"mode": "ACT", "skills": ["focus", "introspect"]}).to_string(),
                ..Default::default()
            },
        );
        model.route(
            marker::ACT_PLAN,
            Script::json(json!({"actions": [
                {"type": "focus", "action": "set", "description": "the quarterly budget review", "minutes": 90},
                {"type": "introspect"}]})),
        );
        let app = start(&b, Some(&model));
        let c = chat(&app, "Help me stay on the quarterly budget review");
        assert_eq!(c.message()["text"], "Done.", "{}", c.raw);
        let its = table(&app, "cortex_iterations");
        let first: Value = serde_json::from_str(its[0]["actions_executed"].as_str().unwrap()).unwrap();
        assert_eq!(first[0]["type"], "focus");
        assert_eq!(first[0]["result"], "focus set for 90 min: the quarterly budget review", "{first}");
        assert_eq!(first[1]["type"], "introspect");
        let state: Value = serde_json::from_str(first[1]["result"].as_str().unwrap()).unwrap();
        assert_eq!(state["focus"], "the quarterly budget review", "{state}");
        assert_eq!(state["working_memory_turns"], 0, "the first message: {state}");
        assert!(state["warmth"].as_f64().is_some() && state["recent_modes"].is_array(), "{state}");
        // The next message routes normally and sees the session in its world state.
        model.route(marker::TRIAGE, triage_answer("RESPOND"));
        chat(&app, "What should I look at first in the budget");
        let prompt = model.requests().into_iter().rfind(|r| r.contains("\"stream\":true")).unwrap();
        assert!(prompt.contains("the quarterly budget review"), "{prompt}");
    }
}

/// A slow model keeps the stream alive: a keepalive comment after 15 s of
/// silence, `status: still_working` at 20 s, then the reply. The backends
/// run side by side, since each waits 21 s for the model.
#[test]
fn a_slow_reply_gets_a_keepalive_then_still_working_before_the_message() {
    let slow = Script { reply: "Slow but sure.".into(), delay: Duration::from_secs(21), ..Default::default() };
    ask_a_slow_model_on_both_backends_at_once(slow, |backend, c| {
        let at = |needle: &str| c.raw.find(needle).unwrap_or_else(|| panic!("{backend:?}: no {needle:?} in {}", c.raw));
        let (keepalive, working, message) = (at(": keepalive\n\n"), at("still_working"), at("event: message"));
        assert!(keepalive < working && working < message, "{backend:?}: {}", c.raw);
        assert_eq!(c.message()["text"], "Slow but sure.");
    });
}

/// Asks one RESPOND question of a model answering with `script`, on both
/// backends side by side (each waits tens of seconds for the model), and
/// checks each stream with `check`.
fn ask_a_slow_model_on_both_backends_at_once(script: Script, check: impl Fn(Backend, &Chat) + Sync) {
    std::thread::scope(|s| {
        for backend in BACKENDS {
            let (script, check) = (script.clone(), &check);
            s.spawn(move || {
                let b = BackendEnv::new(backend);
                let model = FakeModel::start(script);
                model.route(marker::TRIAGE, triage_answer("RESPOND"));
                model.route(marker::TIEBREAK, Script::json(json!({"mode": "RESPOND"})));
                let app = start(&b, Some(&model));
                check(backend, &chat(&app, "Tell me about the history of the printing press"));
            });
        }
    });
}

/// The loop's other limits, end to end (D-C8): two actions a turn can never
/// repeat one action three times running, so the budget stops the loop.
/// Recall (1.0) + introspect (0.5) cost 1.5 × (1 + 0.3 i) at iteration i:
/// 8.7 after four, 12.0 after five, over the fatigue budget of 10. Two
/// introspects cost 1.0 × (1 + 0.3 i): 8.0 after five, so the iteration cap
/// of 5 stops that loop first.
#[test]
fn act_loop_stops_at_the_fatigue_budget_or_the_iteration_cap() {
    for backend in BACKENDS {
        for (plan, reason, fatigue) in [
            (json!([{"type": "recall", "query": "tea"}, {"type": "introspect"}]), "fatigue_exhausted", 12.0),
            (json!([{"type": "introspect"}, {"type": "introspect"}]), "max_iterations", 8.0),
        ] {
            let b = BackendEnv::new(backend);
            let model = FakeModel::start(Script { reply: "Done.".into(), ..Default::default() });
            model.route(
                marker::TRIAGE,
                Script { reply: json!({"mode": "ACT", "skills": ["recall"]}).to_string(), ..Default::default() },
            );
            model.route(marker::ACT_PLAN, Script::json(json!({"actions": plan})));
            let app = start(&b, Some(&model));
            let c = chat(&app, "What do you remember about my tea?");
            assert_eq!(c.message()["text"], "Done.", "{}", c.raw);
            let mut its = table(&app, "cortex_iterations");
            its.sort_by_key(|r| r["iteration_number"].as_i64());
            let dispatched: Vec<&Value> = its.iter().filter(|r| r["termination_reason"].is_null()).collect();
            assert_eq!(dispatched.len(), 5, "{reason}: {its:?}");
            let last = its.last().unwrap();
            assert_eq!(last["termination_reason"], reason, "{its:?}");
            assert!((dispatched[4]["fatigue"].as_f64().unwrap() - fatigue).abs() < 1e-9, "{reason}: {its:?}");
        }
    }
}

/// A model that stalls mid-stream for longer than the 30 s generation
/// budget: the words already streamed are kept as the reply, and a
/// recoverable `error` event says it may be incomplete. Both backends side by
/// side, since each waits 30 s.
#[test]
fn a_stream_that_stalls_keeps_its_words_and_says_it_stopped_early() {
    let stalling = Script {
        reply: "The printing press spread quickly".into(),
        chunk_delay: Duration::from_secs(31),
        ..Default::default()
    };
    ask_a_slow_model_on_both_backends_at_once(stalling, |backend, c| {
        let errors = c.named("error");
        assert_eq!(errors.len(), 1, "{backend:?}: {}", c.raw);
        assert!(errors[0]["message"].as_str().unwrap().contains("stopped early"), "{}", c.raw);
        assert_eq!(errors[0]["recoverable"], true);
        assert_eq!(c.message()["text"], "The", "{backend:?}: the streamed word is the reply: {}", c.raw);
        assert!(!c.named("done").is_empty(), "{}", c.raw);
    });
}

#[test]
fn act_loop_stops_at_the_third_identical_action() {
    for backend in BACKENDS {
        let b = BackendEnv::new(backend);
        let model = FakeModel::start(Script { reply: "Done.".into(), ..Default::default() });
        model.route(
            marker::TRIAGE,
            Script { reply: json!({"mode": "ACT", "skills": ["recall"]}).to_string(), ..Default::default() },
        );
        model.route(
            marker::ACT_PLAN,
            Script {
                reply: json!({"actions": [{"type": "recall", "query": "tea"}]}).to_string(),
                ..Default::default()
            },
        );
        let app = start(&b, Some(&model));
        let c = chat(&app, "What do you remember about my tea?");
        assert_eq!(c.message()["text"], "Done.", "{}", c.raw);
        let its = table(&app, "cortex_iterations");
        let dispatched = its.iter().filter(|r| r["termination_reason"].is_null()).count();
        assert_eq!(dispatched, 2, "recall ran twice, the third was refused: {its:?}");
        assert_eq!(its.last().unwrap()["termination_reason"], "repeated_action");
    }
}

#[test]
fn working_memory_expires_24_hours_after_the_last_append() {
    for backend in BACKENDS {
        let b = BackendEnv::new(backend);
        let model = FakeModel::start(Script { reply: "ok then".into(), ..Default::default() });
        model.route(marker::TRIAGE, triage_answer("RESPOND"));
        let app = start(&b, Some(&model));
        let t0: u64 = 1_800_000_000_000;
        let day = 24 * 3600 * 1000;
        chat_at(&app, json!({"text": "My cat is called Miso and she is grey"}), Some(t0));
        let gen_bodies =
            |m: &FakeModel| m.requests().into_iter().filter(|r| r.contains("\"stream\":true")).collect::<Vec<_>>();
        chat_at(&app, json!({"text": "Describe the colour of my pet please"}), Some(t0 + day - 1));
        assert!(gen_bodies(&model)[1].contains("Miso"), "within 24 h the earlier turn is in working memory");
        chat_at(&app, json!({"text": "Describe the colour of my pet again"}), Some(t0 + 2 * day - 2));
        assert!(
            gen_bodies(&model)[2].contains("Describe the colour of my pet please"),
            "each append refreshes the window"
        );
        assert!(gen_bodies(&model)[2].contains("Miso"), "4 turns kept");
        // Exactly 24 h after the last append, the window has expired.
        chat_at(&app, json!({"text": "Describe the colour of my pet once more"}), Some(t0 + 3 * day - 2));
        assert!(
            !gen_bodies(&model)[3].contains("Describe the colour of my pet again"),
            "24 h after the last append it is gone"
        );
    }
}

#[test]
fn five_messages_on_one_topic_infer_a_focus_session_that_outlasts_a_change_of_topic() {
    for backend in BACKENDS {
        let b = BackendEnv::new(backend);
        let model = FakeModel::start(Script { reply: "noted".into(), ..Default::default() });
        model.route(marker::TRIAGE, triage_answer("RESPOND"));
        let app = start(&b, Some(&model));
        let prompts =
            |m: &FakeModel| m.requests().into_iter().filter(|r| r.contains("\"stream\":true")).collect::<Vec<_>>();
        let sourdough = [
            "My sourdough starter smells sour and bubbly today",
            "How often should I feed my sourdough starter",
            "My sourdough loaf came out dense and flat",
            "Should I proof the sourdough dough overnight in the fridge",
            "What hydration works best for an open sourdough crumb",
        ];
        for (i, text) in sourdough.iter().enumerate() {
            chat(&app, text);
            let last = prompts(&model).pop().unwrap();
            // The fifth message in a row on one topic (FOCUS_INFER_STREAK)
            // infers the session; the fourth does not.
            assert_eq!(last.contains("Deep work on:"), i == 4, "message {}: {last}", i + 1);
        }
        let last = prompts(&model).pop().unwrap();
        assert!(last.contains("[FOCUS] Deep work on:") && last.contains("(inferred)"), "world state: {last}");
        // A message on another topic leaves the session in place.
        chat(&app, "Which trains run from Lisbon to Porto on Sundays");
        let last = prompts(&model).pop().unwrap();
        assert!(last.contains("- Focus: Deep work on:"), "the session outlasts one stray message: {last}");
        // The router logs the stray message as a distraction from the focus
        // (D-C22); the fifth sourdough message, routed before the session
        // existed, is not one.
        let mut decisions = table(&app, "routing_decisions");
        decisions.sort_by_key(|r| r["id"].as_i64());
        let distraction = |r: &Value| -> Value {
            serde_json::from_str::<Value>(r["signal_snapshot"].as_str().unwrap()).unwrap()["focus_distraction"].clone()
        };
        let n = decisions.len();
        assert_eq!(n, 6, "{decisions:?}");
        assert_eq!((distraction(&decisions[n - 2]), distraction(&decisions[n - 1])), (json!(false), json!(true)));
    }
}

#[test]
fn concurrent_requests_on_one_thread_lose_no_turn() {
    for backend in BACKENDS {
        let b = BackendEnv::new(backend);
        let app = start(&b, None);
        let texts: Vec<String> = (0..4).map(|i| format!("concurrent note number {i} about gardening")).collect();
        std::thread::scope(|s| {
            for t in &texts {
                let app = &app;
                s.spawn(move || assert_eq!(chat(app, t).status, 200));
            }
        });
        let wm = table(&app, "working_memory");
        assert_eq!(wm.len(), 8, "4 turns = 8 rows: {wm:?}");
        for t in &texts {
            assert!(wm.iter().any(|r| r["content"] == t.as_str()), "lost the turn {t:?}");
        }
    }
}

#[test]
fn memory_search_forget_export_and_delete_all() {
    for backend in BACKENDS {
        let b = BackendEnv::new(backend);
        let app = start(&b, None);
        chat(&app, "remember that my favourite tea is oolong");
        chat(&app, "The marathon training plan starts in March");
        let hits = get(&app, "/memory/search?q=marathon%20training");
        assert_eq!(hits["results"][0]["kind"], "exchange", "{hits}");
        assert!(hits["results"][0]["text"].as_str().unwrap().contains("marathon"));
        let facts = get(&app, "/memory/search?q=favourite%20tea");
        assert!(
            facts["results"].as_array().unwrap().iter().any(|r| r["kind"] == "fact" && r["text"] == "oolong"),
            "{facts}"
        );
        let a = auth();
        let h = [("authorization", a.as_str())];
        app.request("GET", "/memory/search", &h, None).assert_error(400, "invalid");
        app.request("POST", "/memory/forget", &h, Some(br#"{"scope":"planet"}"#)).assert_error(400, "invalid");
        app.request("POST", "/memory/forget", &h, Some(br#"{"scope":"fact","key":"nope"}"#))
            .assert_error(404, "not-found");
        let r = app.request("POST", "/memory/forget", &h, Some(br#"{"scope":"fact","key":"favourite_tea"}"#));
        assert_eq!(r.status, 200, "{}", r.body);
        let facts = get(&app, "/memory/search?q=favourite%20tea");
        assert!(!facts["results"].as_array().unwrap().iter().any(|r| r["kind"] == "fact"), "{facts}");
        let ex = get(&app, "/conversation/recent")["exchanges"][1]["id"].as_str().unwrap().to_string();
        let r = app.request(
            "POST",
            "/memory/forget",
            &h,
            Some(json!({"scope": "exchange", "id": ex}).to_string().as_bytes()),
        );
        assert_eq!(r.status, 200, "{}", r.body);
        assert_eq!(get(&app, "/conversation/recent")["exchanges"].as_array().unwrap().len(), 1);
        let r = app.request("POST", "/documents", &h, Some(br#"{"id":"d-1","text":"Notes on brewing oolong"}"#));
        assert_eq!(r.status, 201, "{}", r.body);
        app.request("DELETE", "/privacy/delete-all", &h, None).assert_error(400, "confirmation-required");
        let r = app.request("DELETE", "/privacy/delete-all?confirm=true", &h, None);
        assert_eq!(r.status, 200, "{}", r.body);
        let export = get(&app, "/privacy/export");
        // The configuration (rx doors and weights, tools, the entry
        // counter) is not the principal's data and stays (D-M7).
        for (name, rows) in export["tables"].as_object().unwrap() {
            if !["rx_doors", "rx_weights", "tools", "knowledge_counter"].contains(&name.as_str()) {
                assert!(rows.as_array().unwrap().is_empty(), "{name} still has rows after delete-all");
            }
        }
        assert_eq!((&export["search"], &export["kv"]), (&json!([]), &json!({})), "{export}");
        if let Some(db) = &b.pg {
            for table in ["search_terms", "search_corpora"] {
                let n: i64 = db.client().query_one(&format!("SELECT count(*) FROM {table}"), &[]).unwrap().get(0);
                assert_eq!(n, 0, "the counts in {table} (D-K14, D-K15) go with the items they count");
            }
        }
        assert_eq!(get(&app, "/memory/search?q=oolong")["results"], json!([]));
    }
}

/// `POST /tick/reminders` at `at`: how many fired.
fn fire_reminders(app: &App, at: u64) -> i64 {
    let r = app.request(
        "POST",
        "/tick/reminders",
        &[("authorization", mneme_e2e::CRON_AUTH), ("x-mneme-clock", &at.to_string())],
        None,
    );
    assert_eq!(r.status, 200, "{}", r.body);
    r.json()["result"]["fired"].as_i64().unwrap()
}

#[test]
fn reminders_fire_as_events_that_replay_after_last_event_id() {
    for backend in BACKENDS {
        let b = BackendEnv::new(backend);
        let app = start(&b, None);
        let t0: u64 = 1_800_000_000_000;
        let c = chat_at(&app, json!({"text": "remind me to stretch in 5 minutes"}), Some(t0));
        assert_eq!(c.message()["mode"], "RESPOND", "{}", c.raw);
        let items = table(&app, "scheduled_items");
        assert_eq!(items.len(), 1, "{items:?}");
        assert_eq!(items[0]["due_ms"], (t0 + 300_000) as i64);
        let tick = |at: u64| fire_reminders(&app, at);
        assert_eq!(tick(t0 + 299_999), 0, "not due yet");
        assert_eq!(tick(t0 + 300_000), 1);
        assert_eq!(tick(t0 + 300_001), 0, "fires once");
        // A first connection gets the backlog; each event carries its id.
        let a = auth();
        let first = app.request("GET", "/events?wait=0", &[("authorization", a.as_str())], None);
        assert_eq!(first.status, 200);
        assert!(first.body.starts_with("retry: 3000"), "{}", first.body);
        let events = parse_sse(&first.body);
        let reminder = events.iter().find(|(n, _)| n == "reminder").map(|(_, v)| v.clone()).expect(&first.body);
        assert_eq!(reminder["payload"]["message"], "stretch");
        let id = reminder["id"].as_i64().unwrap();
        assert!(first.body.contains(&format!("id: {id}\n")), "{}", first.body);
        assert_eq!(events.last().unwrap().0, "done");
        // Reconnecting with Last-Event-ID replays only what came after it.
        let lei = id.to_string();
        let again =
            app.request("GET", "/events?wait=0", &[("authorization", a.as_str()), ("last-event-id", &lei)], None);
        assert!(!parse_sse(&again.body).iter().any(|(n, _)| n == "reminder"), "{}", again.body);
        let before = (id - 1).to_string();
        let replay =
            app.request("GET", "/events?wait=0", &[("authorization", a.as_str()), ("last-event-id", &before)], None);
        assert!(parse_sse(&replay.body).iter().any(|(n, v)| n == "reminder" && v["id"] == id), "{}", replay.body);
        app.request("GET", "/events", &[("authorization", a.as_str()), ("last-event-id", "x")], None)
            .assert_error(400, "invalid");
        app.request("GET", "/events?wait=99", &[("authorization", a.as_str())], None).assert_error(400, "invalid");
    }
}

/// A model whose triage asks for the `schedule` skill and whose ACT plan
/// is the one `action`; it answers "Noted." otherwise.
fn scheduling_model(action: Value) -> FakeModel {
    let model = FakeModel::start(Script { reply: "Noted.".into(), ..Default::default() });
    model.route(marker::TRIAGE, Script::json(json!({"mode": "ACT", "skills": ["schedule"]})));
    model.route(marker::ACT_PLAN, Script::json(json!({"actions": [action]})));
    model
}

/// Reminders live in the principal's time zone (`time_zone`): a model's
/// `due_at` without an offset is their local time, and a daily reminder at
/// 09:00 stays at 09:00 in London across the 2027-03-28 change to summer
/// time (09:00 GMT is 09:00 UTC, then 09:00 BST is 08:00 UTC).
#[test]
fn a_daily_reminder_keeps_its_local_time_across_the_change_to_summer_time() {
    const H: u64 = 3_600_000;
    // 2027-03-26T12:00:00Z, a Friday in GMT.
    let friday: u64 = 1_806_062_400_000;
    let nine_gmt = friday + 21 * H; // 2027-03-27T09:00Z
    let nine_bst = nine_gmt + 23 * H; // 2027-03-28T08:00Z, a 23-hour day later
    for backend in BACKENDS {
        let b = BackendEnv::new(backend);
        let model = scheduling_model(
            json!({"type": "schedule", "action": "create", "message": "take the pills", "due_at": "2027-03-27T09:00", "recurrence": "daily"}),
        );
        let mut env = test_env(&b, Some(&model));
        env.push(("SPIN_VARIABLE_TIME_ZONE".into(), "Europe/London".into()));
        let app = App::start("spin.toml", &env);
        let c = chat_at(&app, json!({"text": "Remind me every day at 9 to take the pills"}), Some(friday));
        assert!(c.named("status").iter().any(|s| s["stage"] == "acting"), "{}", c.raw);
        let its = table(&app, "cortex_iterations");
        let first: Value = serde_json::from_str(its[0]["actions_executed"].as_str().unwrap()).unwrap();
        let said = first[0]["result"].as_str().unwrap();
        assert!(
            said.contains("for Sat 27 Mar 2027 at 09:00 (2027-03-27T09:00:00Z), repeating daily"),
            "the confirmation shows local time: {said}"
        );
        let items = table(&app, "scheduled_items");
        assert_eq!(items.len(), 1, "{items:?}");
        assert_eq!(items[0]["due_ms"], nine_gmt as i64, "09:00 GMT is 09:00 UTC");
        let tick = |at: u64| fire_reminders(&app, at);
        assert_eq!(tick(nine_gmt), 1);
        assert_eq!(table(&app, "scheduled_items")[0]["due_ms"], nine_bst as i64, "{backend:?}: 09:00 BST is 08:00 UTC");
        assert_eq!(tick(nine_bst - 1), 0, "not before 09:00 local");
        assert_eq!(tick(nine_bst), 1);
        assert_eq!(table(&app, "scheduled_items")[0]["due_ms"], (nine_bst + 24 * H) as i64, "then every 24 hours");
    }
}

/// Thursday 2026-11-26 15:00 UTC, 10:00 in New York, and the next day's
/// 09:00 there (2026-11-27T09:00-05:00).
const THURSDAY_TEN_NY: u64 = 1_795_705_200_000;
const FRIDAY_NINE_NY: i64 = 1_795_788_000_000;

/// With a model, the rules' reading of a reminder wins where they read a
/// time (D-L4, amending D-C31): a model that plans 10:30 and its own words
/// for "tomorrow at 9" gets 09:00 and the principal's words, and the
/// iteration's log says what the rules changed; a model that plans no
/// reminder at all gets the rules' one added; when the model gives no
/// usable plan, the rules plan.
#[test]
fn the_rules_reading_of_a_reminder_wins_over_the_models() {
    let (now, tomorrow_nine_ny) = (THURSDAY_TEN_NY, FRIDAY_NINE_NY);
    for backend in BACKENDS {
        let b = BackendEnv::new(backend);
        let model = scheduling_model(
            json!({"type": "schedule", "action": "create", "message": "call the dentist about the crown", "due_at": "2026-11-27T10:30"}),
        );
        let mut env = test_env(&b, Some(&model));
        env.push(("SPIN_VARIABLE_TIME_ZONE".into(), "America/New_York".into()));
        let app = App::start("spin.toml", &env);
        let c = chat_at(&app, json!({"text": "Remind me tomorrow at 9 to call the dentist"}), Some(now));
        assert_eq!(c.message()["source"], "model", "{}", c.raw);
        let items = table(&app, "scheduled_items");
        assert_eq!(items.len(), 1, "{backend:?}: {items:?}");
        assert_eq!(items[0]["due_ms"], tomorrow_nine_ny, "{backend:?}: the rules' 09:00, not the model's 10:30");
        assert_eq!(items[0]["message"], "call the dentist");
        let its = table(&app, "cortex_iterations");
        assert!(
            its.iter()
                .any(|i| i["mode"].as_str().is_some_and(|m| m.contains("the reminder's due_at as the rules read it"))),
            "{its:?}"
        );

        // A plan with no reminder in it: the rules' reminder is added.
        model.route(marker::ACT_PLAN, Script::json(json!({"actions": [{"type": "recall", "query": "dentist"}]})));
        chat_at(&app, json!({"text": "Remind me tomorrow at 9 to book the car service"}), Some(now));
        let items = table(&app, "scheduled_items");
        let car = items.iter().find(|i| i["message"] == "book the car service").unwrap_or_else(|| panic!("{items:?}"));
        assert_eq!(car["due_ms"], tomorrow_nine_ny, "{backend:?}");

        // A plan the model fails to give: the rules read the message.
        model.route(marker::ACT_PLAN, Script { status: 500, ..Default::default() });
        chat_at(&app, json!({"text": "Remind me tomorrow at 9 to water the plants"}), Some(now));
        let items = table(&app, "scheduled_items");
        let plants = items.iter().find(|i| i["message"] == "water the plants").unwrap_or_else(|| panic!("{items:?}"));
        assert_eq!(plants["due_ms"], tomorrow_nine_ny, "{backend:?}: the rules' 09:00 in New York");
    }
}

/// With no model, a clear question is answered honestly (Mneme needs a
/// model, says what it can still do and the variable to set) and only a
/// really unclear message gets a question back; a reminder is read off
/// the message in the principal's zone, confirmed, and listed when asked
/// (#26 items 1 and 3; D-C31, D-C32).
#[test]
fn with_no_model_questions_get_an_honest_reply_and_reminders_are_set() {
    let (now, tomorrow_nine_ny) = (THURSDAY_TEN_NY, FRIDAY_NINE_NY);
    for backend in BACKENDS {
        let b = BackendEnv::new(backend);
        let mut env = test_env(&b, None);
        env.push(("SPIN_VARIABLE_TIME_ZONE".into(), "America/New_York".into()));
        let app = App::start("spin.toml", &env);
        let say = |text: &str| chat_at(&app, json!({"text": text}), Some(now)).message().clone();
        for question in [
            "What is the capital of Portugal?",
            "How does compound interest work?",
            "Tell me a short story about a lighthouse keeper",
        ] {
            let m = say(question);
            assert_eq!(
                (m["mode"].as_str(), m["source"].as_str()),
                (Some("RESPOND"), Some("rule-based")),
                "{backend:?} {question}: {m}"
            );
            let text = m["text"].as_str().unwrap();
            assert!(text.starts_with("[rule-based reply: no model is configured] I need a language model"), "{text}");
            assert!(text.contains("llm_url") && text.contains("remind"), "{text}");
            assert!(!text.contains("Could you say more"), "{text}");
        }
        let unclear = say("do the thing");
        assert_eq!(unclear["mode"], "CLARIFY", "{backend:?}: {unclear}");
        assert!(!unclear["text"].as_str().unwrap().contains("\"thing\""), "{unclear}");

        let set = say("Remind me tomorrow at 9 to call the dentist");
        let text = set["text"].as_str().unwrap();
        assert!(
            text.contains(
                "Reminder set: \"call the dentist\" for Fri 27 Nov 2026 at 09:00 (2026-11-27T09:00:00-05:00)"
            ),
            "{backend:?}: {text}"
        );
        let weekly = say("every Sunday evening remind me to water the plants");
        assert!(weekly["text"].as_str().unwrap().contains("repeating weekly"), "{weekly}");
        let items = table(&app, "scheduled_items");
        assert_eq!(items.len(), 2, "{items:?}");
        let dentist = items.iter().find(|i| i["message"] == "call the dentist").expect("the dentist reminder");
        assert_eq!(dentist["due_ms"], tomorrow_nine_ny, "{backend:?}: 09:00 in New York");
        let plants = items.iter().find(|i| i["message"] == "water the plants").expect("the plants reminder");
        assert_eq!(plants["recurrence"], "weekly");
        assert_eq!(plants["due_ms"], tomorrow_nine_ny + 2 * 86_400_000 + 9 * 3_600_000, "Sunday 18:00");

        let listed = say("what reminders do I have?");
        let text = listed["text"].as_str().unwrap();
        assert!(
            text.contains("Pending reminders: \"call the dentist\" Fri 27 Nov 2026 at 09:00"),
            "{backend:?}: {text}"
        );
        assert!(text.contains("\"water the plants\" Sun 29 Nov 2026 at 18:00"), "{text}");
        let no_time = say("remind me to call mum");
        assert!(no_time["text"].as_str().unwrap().contains("When should I remind you to call mum?"), "{no_time}");
        assert_eq!(table(&app, "scheduled_items").len(), 2, "no reminder without a time");
    }
}

/// A `time_zone` that names no zone is the deployment's error, said as a
/// 503 `misconfigured` by the job that needs it, never a silent UTC.
#[test]
fn an_unknown_time_zone_is_a_503_that_names_the_variable() {
    for backend in BACKENDS {
        let b = BackendEnv::new(backend);
        let mut env = test_env(&b, None);
        env.push(("SPIN_VARIABLE_TIME_ZONE".into(), "Europe/Atlantis".into()));
        let app = App::start("spin.toml", &env);
        let r = app.request("POST", "/tick/reminders", &[("authorization", mneme_e2e::CRON_AUTH)], None);
        r.assert_error(503, "misconfigured");
        assert!(r.body.contains("time_zone") && r.body.contains("Europe/Atlantis"), "{}", r.body);
    }
}

/// D-C21. On Postgres, ids come from a sequence and transactions commit in
/// any order, so without the event-order lock a reader could see id n + 1,
/// move its `Last-Event-ID` past n, and never get n. With it, an event waits
/// for the open transaction that holds an earlier id. (SQLite has one writer
/// at a time, so its ids always commit in order.)
#[test]
fn on_postgres_an_event_waits_for_an_open_transaction_holding_an_earlier_event_id() {
    // The value of `mneme_substrate::events::EVENT_ORDER_LOCK`.
    const EVENT_ORDER_LOCK: i64 = 0x6d6e_656d_6576_0001;
    let b = BackendEnv::new(Backend::Hosted);
    let app = start(&b, None);
    let t0: u64 = 1_800_000_000_000;
    chat_at(&app, json!({"text": "remind me to stretch in 5 minutes"}), Some(t0));
    // Another publisher, mid-transaction: it holds the lock and an id it has not committed.
    let mut pg = b.pg.as_ref().unwrap().client();
    let mut other = pg.transaction().unwrap();
    other.execute("SELECT pg_advisory_xact_lock($1)", &[&EVENT_ORDER_LOCK]).unwrap();
    let now_ms = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as i64;
    let earlier: i64 = other
        .query_one("INSERT INTO events (type, payload, created_ms) VALUES ('note', '{}', $1) RETURNING id", &[&now_ms])
        .unwrap()
        .get(0);
    let a = auth();
    std::thread::scope(|s| {
        let tick = s.spawn(|| {
            app.request(
                "POST",
                "/tick/reminders",
                &[("authorization", mneme_e2e::CRON_AUTH), ("x-mneme-clock", &(t0 + 300_000).to_string())],
                None,
            )
        });
        std::thread::sleep(Duration::from_millis(1000));
        assert!(!tick.is_finished(), "the reminder's event must wait for the open transaction");
        let seen = app.request("GET", "/events?wait=0", &[("authorization", a.as_str())], None);
        assert!(!parse_sse(&seen.body).iter().any(|(n, _)| n == "reminder"), "{}", seen.body);
        other.commit().unwrap();
        let r = tick.join().unwrap();
        assert_eq!(r.status, 200, "{}", r.body);
        assert_eq!(r.json()["result"]["fired"], 1, "{}", r.body);
    });
    let events = parse_sse(&app.request("GET", "/events?wait=0", &[("authorization", a.as_str())], None).body);
    let ids = |name: &str| {
        events.iter().filter(|(n, _)| n == name).map(|(_, v)| v["id"].as_i64().unwrap()).collect::<Vec<_>>()
    };
    assert_eq!(ids("note"), vec![earlier]);
    assert!(ids("reminder")[0] > earlier, "{events:?}");
}

#[test]
fn a_live_events_stream_delivers_an_event_published_while_connected() {
    for backend in BACKENDS {
        let b = BackendEnv::new(backend);
        let app = start(&b, None);
        let t0: u64 = 1_800_000_000_000;
        chat_at(&app, json!({"text": "remind me to drink water in 1 minute"}), Some(t0));
        let a = auth();
        std::thread::scope(|s| {
            let stream = s.spawn(|| app.request("GET", "/events?wait=10", &[("authorization", a.as_str())], None));
            std::thread::sleep(Duration::from_millis(1500));
            let r = app.request(
                "POST",
                "/tick/reminders",
                &[("authorization", mneme_e2e::CRON_AUTH), ("x-mneme-clock", &(t0 + 60_000).to_string())],
                None,
            );
            assert_eq!(r.status, 200, "{}", r.body);
            let body = stream.join().unwrap().body;
            assert!(
                parse_sse(&body).iter().any(|(n, v)| n == "reminder" && v["payload"]["message"] == "drink water"),
                "{body}"
            );
        });
    }
}

/// The context rules at their boundaries, seen in the generation prompt:
/// a stated name (the IIP hook) and the 2700 s silence gap (exactly 2700 s
/// is not a return; one millisecond more is). And the router's rule: the
/// tie-breaker is asked exactly when the relative margin is below the
/// effective margin (and the top mode is not IGNORE) among the modes triage
/// left open, and its choice wins. The triage model fails here, so the
/// router has every mode but where the rules settled triage (D-L5).
#[test]
fn identity_silence_gap_and_tie_break_at_their_boundaries() {
    for backend in BACKENDS {
        let b = BackendEnv::new(backend);
        let model = FakeModel::start(Script { reply: "Noted.".into(), ..Default::default() });
        model.route(marker::TRIAGE, Script { status: 500, ..Default::default() });
        model.route(marker::TIEBREAK, Script { reply: r#"{"choice":"B"}"#.into(), ..Default::default() });
        let app = start(&b, Some(&model));
        let t0: u64 = 1_800_000_000_000;
        let prompts =
            |m: &FakeModel| m.requests().into_iter().filter(|r| r.contains("\"stream\":true")).collect::<Vec<_>>();
        let texts = [
            "Please call me Sam from now on",
            "What should I cook tonight with leeks and potatoes?",
            "Can you explain how compound interest works over ten years",
            "I think the meeting went badly, maybe I should write to them",
            "Tell me something about the history of the bicycle",
            "Which is better for a small flat, a heat pump or a gas boiler?",
            "Why do cats purr when they are content?",
            // Short, with an implicit reference, once the thread is warm:
            // CLARIFY and RESPOND land within the margin.
            "and that?",
        ];
        let gap = 2_700_000;
        let mut at = t0;
        for (i, text) in texts.iter().enumerate() {
            // The third message comes exactly 2700 s after the second; the
            // fourth 2700 s and one millisecond after the third.
            at += match i {
                2 => gap,
                3 => gap + 1,
                _ => 60_000,
            };
            let c = chat_at(&app, json!({"text": text}), Some(at));
            assert_eq!(c.status, 200);
            assert!(!c.named("done").is_empty(), "{}", c.raw);
        }
        let p = prompts(&model);
        assert!(p.iter().all(|g| g.contains("The principal's name: Sam")), "the stated name reaches every prompt");
        let back = |g: &String| g.contains("The principal is back after");
        assert!(!back(&p[2]), "exactly 2700 s is not a return");
        assert!(p[3].contains("The principal is back after 45 minutes away"), "{}", p[3]);
        assert!(!back(&p[1]) && !back(&p[4]));
        // Every routing decision follows the margin rule.
        let mut rd = table(&app, "routing_decisions");
        rd.sort_by_key(|d| d["id"].as_i64());
        assert!(rd.len() >= texts.len(), "a decision per message: {rd:?}");
        let mut asked = 0;
        let mut after_act = 0;
        for (i, d) in rd.iter().enumerate() {
            // Each logged score is the router's formula over the logged
            // signals and weights, hysteresis from the prior mode included.
            let parse = |k: &str| serde_json::from_str::<Value>(d[k].as_str().unwrap()).unwrap();
            let signals: router::Signals = serde_json::from_value(parse("signal_snapshot")).unwrap();
            let weights: router::Weights = serde_json::from_value(parse("weight_snapshot")).unwrap();
            let previous: Option<Mode> = d["previous_mode"].as_str().map(|m| serde_json::from_value(json!(m)).unwrap());
            let want = router::scores(&signals, &weights, previous);
            assert_eq!(serde_json::to_value(&want).unwrap(), parse("scores"), "{d}");
            if previous == Some(Mode::Act) {
                after_act += 1;
                let without = router::scores(&signals, &weights, None);
                let penalty = without[&Mode::Act] - want[&Mode::Act];
                assert!((penalty - weights.prior_act_penalty).abs() < 1e-9, "ACT pays the prior-ACT penalty: {d}");
            }
            // After an ACT loop the router routes again to a terminal mode,
            // never with the tie-breaker.
            if rd[..i].iter().any(|e| e["exchange_id"] == d["exchange_id"]) {
                assert_eq!(d["tiebreaker_used"].as_i64(), Some(0), "{d}");
                continue;
            }
            let scores: Value = serde_json::from_str(d["scores"].as_str().unwrap()).unwrap();
            let excluded: Vec<String> =
                d["excluded_modes"].as_str().map(|e| serde_json::from_str(e).unwrap()).unwrap_or_default();
            let top = scores
                .as_object()
                .unwrap()
                .iter()
                .filter(|(m, _)| !excluded.contains(m))
                .max_by(|a, b| a.1.as_f64().unwrap().total_cmp(&b.1.as_f64().unwrap()))
                .unwrap()
                .0
                .clone();
            let (margin, effective) = (d["margin"].as_f64().unwrap(), d["effective_margin"].as_f64().unwrap());
            let wanted = margin < effective && top != "IGNORE";
            let used = d["tiebreaker_used"].as_i64().unwrap() == 1;
            assert_eq!(used, wanted, "margin {margin} against {effective}, top {top}: {d}");
            if used {
                asked += 1;
                let candidates: Value = serde_json::from_str(d["tiebreaker_candidates"].as_str().unwrap()).unwrap();
                assert_eq!(d["selected_mode"], candidates[1], "choice B, the second candidate, wins: {d}");
            }
        }
        assert_eq!(model.requests_with(marker::TIEBREAK).len(), asked);
        assert!(after_act > 0, "a decision after an ACT loop shows the hysteresis: {rd:?}");
        assert!(asked > 0 && asked < rd.len(), "both sides of the margin occur: {asked} of {}", rd.len());
    }
}

/// `llm_backend = "spin"`: every model call goes through Spin's `llm`
/// interface (the runner forwards `infer` to the endpoint its runtime
/// config names), with the chat flattened into one prompt.
#[test]
fn the_spin_llm_interface_can_serve_every_model_call() {
    mneme_e2e::runner_only!("its `[llm_compute]` forwarding to an OpenAI-compatible endpoint");
    for backend in BACKENDS {
        let b = BackendEnv::new(backend);
        let model = FakeModel::start(Script { reply: "Light becomes sugar.".into(), ..Default::default() });
        model.route(marker::TRIAGE, triage_answer("RESPOND"));
        model.route(marker::TIEBREAK, Script { reply: r#"{"choice":"A"}"#.into(), ..Default::default() });
        let dir = tempfile::tempdir().unwrap();
        let manifest = mneme_e2e::edited_manifest(dir.path(), "spin.toml", |m| {
            m.replace(r#"ai_models = ["all-minilm-l6-v2"]"#, r#"ai_models = ["all-minilm-l6-v2", "scripted-llm"]"#)
        });
        let config = dir.path().join("runtime-config.toml");
        std::fs::write(&config, format!("[llm_compute]\ntype = \"remote_http\"\nurl = \"{}\"\n", model.url())).unwrap();
        let mut env = test_env(&b, None);
        env.push(("SPIN_VARIABLE_LLM_BACKEND".into(), "spin".into()));
        env.push(("SPIN_VARIABLE_LLM_MODEL".into(), "scripted-llm".into()));
        let app =
            App::start_with(manifest.to_str().unwrap(), &env, &["--runtime-config-file", config.to_str().unwrap()])
                .unwrap();
        let c = chat(&app, "Tell me about photosynthesis.");
        let m = c.message();
        assert_eq!(
            (m["text"].as_str(), m["source"].as_str()),
            (Some("Light becomes sugar."), Some("model")),
            "{}",
            c.raw
        );
        // Triage and generation both went through `infer`: one user
        // message holding the flattened chat, for the model named.
        let triage: Value = serde_json::from_str(&model.requests_with(marker::TRIAGE)[0]).unwrap();
        assert_eq!(triage["model"], "scripted-llm");
        let prompt = triage["messages"][0]["content"].as_str().unwrap();
        assert!(prompt.starts_with("### System\n") && prompt.ends_with("### Assistant\n"), "{prompt}");
        assert!(prompt.contains("Answer with one JSON object"), "{prompt}");
        let generation = model.requests_with("You are Mneme");
        assert_eq!(generation.len(), 1);
        let g: Value = serde_json::from_str(&generation[0]).unwrap();
        assert_eq!(g["messages"].as_array().unwrap().len(), 1, "{g}");
        assert!(g["messages"][0]["content"].as_str().unwrap().contains("### User\nTell me about photosynthesis."));
    }
}

/// A fact lives 24 h from when it was written: one millisecond before, the
/// generation prompt lists it; at 24 h it is gone.
#[test]
fn a_fact_expires_24_hours_after_it_was_written() {
    for backend in BACKENDS {
        let b = BackendEnv::new(backend);
        let model = FakeModel::start(Script { reply: "Noted.".into(), ..Default::default() });
        // The ACT plan fails, so the rules plan: "remember that my X is Y"
        // memorizes a fact.
        model.route(marker::ACT_PLAN, Script { status: 500, ..Default::default() });
        model.route(
            "remember that my favourite",
            Script::json(json!({"branch": "act", "mode": "ACT", "tools": [], "skills": ["memorize"],
                "confidence_internal": 0.8, "confidence_tool_need": 0.1, "freshness_risk": 0.1, "reasoning": "scripted"})),
        );
        model.route(marker::TRIAGE, triage_answer("RESPOND"));
        let app = start(&b, Some(&model));
        let t0: u64 = 1_800_000_000_000;
        let day = 24 * 3600 * 1000;
        let said = chat_at(&app, json!({"text": "remember that my favourite tea is oolong"}), Some(t0));
        assert_eq!(said.status, 200, "{}", said.raw);
        let listed = |at: u64| {
            let c = chat_at(&app, json!({"text": "Tell me about oolong tea and my favourite tea"}), Some(at));
            assert!(!c.named("done").is_empty(), "{}", c.raw);
            let prompts: Vec<String> = model.requests().into_iter().filter(|r| r.contains("\"stream\":true")).collect();
            let last = prompts.last().unwrap().clone();
            last.contains("## Facts") && last.contains("oolong (confidence")
        };
        assert!(listed(t0 + day - 1), "the fact lives until 24 h after it was written");
        assert!(!listed(t0 + day), "at 24 h it has expired");
    }
}
