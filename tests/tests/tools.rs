//! Path B (002 §5, D-C19) through the runner over HTTP, on both backends:
//! the tool registry, tool work queued by `/chat` and run by the worker
//! behind `/tick/tools` (the runner's cron), each tool under its own
//! timeout, the critic's retry and escalation, and the hand-over of the
//! reply to the same stream when it is ready in time, else to `/events`.

use std::time::{Duration, Instant};

use mneme_e2e::fake_model::{FakeModel, Script, marker};
use mneme_e2e::json_server::JsonServer;
use mneme_e2e::{App, BACKENDS, BackendEnv, Resp, TEST_KEY, parse_sse, test_env, without_crons};
use serde_json::{Value, json};

const CRITIC: &str = "You check one result of a tool";
/// 2027-01-15 08:00 UTC.
const T0: u64 = 1_800_000_000_000;

fn start(b: &BackendEnv, dir: &std::path::Path, model: Option<&FakeModel>, server: &JsonServer, wait_ms: u64) -> App {
    let mut env = test_env(b, model);
    env.push(("SPIN_VARIABLE_TOOL_HOST".into(), server.addr.clone()));
    env.push(("SPIN_VARIABLE_CHAT_TOOL_WAIT_MS".into(), wait_ms.to_string()));
    // The tool worker's cron stays; the engines that would also call the
    // model are the tests' own.
    let manifest = without_crons(dir, &["consolidate", "drift", "tasks", "reflect"]);
    App::start(&manifest, &env)
}

fn ok(r: Resp, status: u16) -> Value {
    assert_eq!(r.status, status, "{}", r.body);
    r.json()
}

fn tool(app: &App, server: &JsonServer, name: &str, description: &str, extra: Value) -> Value {
    let mut config = json!({"description": description, "url": server.url(&format!("/{name}"))});
    for (k, v) in extra.as_object().unwrap() {
        config[k] = v.clone();
    }
    ok(app.call("PUT", &format!("/tools/{name}"), Some(config), T0), 200)
}

/// The chat's named events, and its request id.
fn chat(app: &App, text: &str, at: u64) -> (Vec<(String, Value)>, String) {
    let r = app.call("POST", "/chat", Some(json!({"text": text, "thread_id": "t1"})), at);
    assert_eq!(r.status, 200, "{}", r.body);
    (parse_sse(&r.body), r.header("x-request-id").unwrap().to_string())
}

fn event<'a>(events: &'a [(String, Value)], name: &str) -> Option<&'a Value> {
    events.iter().find(|(n, _)| n == name).map(|(_, v)| v)
}

fn statuses(events: &[(String, Value)]) -> Vec<String> {
    events.iter().filter(|(n, _)| n == "status").filter_map(|(_, v)| v["stage"].as_str().map(String::from)).collect()
}

/// The `tool_result` events' payloads on `/events`, read on the system
/// clock (the worker's; the cron sends no test clock).
fn tool_events(app: &App) -> Vec<Value> {
    let auth = format!("Bearer {TEST_KEY}");
    let r = app.request("GET", "/events?wait=0", &[("authorization", &auth)], None);
    assert_eq!(r.status, 200, "{}", r.body);
    parse_sse(&r.body).into_iter().filter(|(n, _)| n == "tool_result").map(|(_, v)| v["payload"].clone()).collect()
}

/// The `tool_result` events once one has arrived (within 60 s), checked
/// again after three more worker ticks: a reply is published once.
fn tool_results(app: &App) -> Vec<Value> {
    let deadline = Instant::now() + Duration::from_secs(60);
    let first = loop {
        let got = tool_events(app);
        if !got.is_empty() {
            break got;
        }
        assert!(Instant::now() < deadline, "no tool_result event: {}", app.log());
        std::thread::sleep(Duration::from_millis(250));
    };
    std::thread::sleep(Duration::from_secs(6));
    assert_eq!(tool_events(app), first, "published once");
    first
}

fn triage_with_tools(tools: &[&str]) -> Script {
    Script::json(json!({"branch": "act", "mode": "ACT", "tools": tools, "skills": [],
        "confidence_internal": 0.2, "confidence_tool_need": 0.9, "freshness_risk": 0.8, "reasoning": "needs the tool"}))
}

#[test]
fn tools_are_configuration_checked_before_they_are_stored() {
    for backend in BACKENDS {
        let b = BackendEnv::new(backend);
        let dir = tempfile::tempdir().unwrap();
        let server = JsonServer::start();
        let app = start(&b, dir.path(), None, &server, 1_000);
        let t = tool(&app, &server, "trains", "Looks up train departures from a station.", json!({}));
        assert_eq!((t["timeout_ms"].as_u64(), t["consequential"].as_bool()), (Some(10_000), Some(true)));
        // Only the tool host; never an innate action's name; a timeout in range.
        let elsewhere = json!({"description": "Anything at all.", "url": "http://127.0.0.1:1/x"});
        let r = app.call("PUT", "/tools/elsewhere", Some(elsewhere), T0);
        r.assert_error(400, "invalid");
        assert!(r.body.contains("tool_host"), "{}", r.body);
        let good = json!({"description": "Anything at all.", "url": server.url("/x")});
        app.call("PUT", "/tools/recall", Some(good.clone()), T0).assert_error(400, "invalid");
        app.call("PUT", "/tools/Trains", Some(good.clone()), T0).assert_error(400, "invalid");
        let mut slow = good.clone();
        slow["timeout_ms"] = json!(30_001);
        app.call("PUT", "/tools/slow", Some(slow), T0).assert_error(400, "invalid");
        let listed = ok(app.call("GET", "/tools", None, T0), 200);
        assert_eq!(listed["tools"].as_array().unwrap().len(), 1);
        assert_eq!(listed["tools"][0]["name"], "trains");
        ok(app.call("DELETE", "/tools/trains", None, T0), 200);
        app.call("DELETE", "/tools/trains", None, T0).assert_error(404, "not-found");
        app.call("POST", "/tools", None, T0).assert_error(405, "method-not-allowed");
    }
}

/// At most 32 tools (`MAX_TOOLS`), even when the PUTs race: 40 distinct
/// tools sent from 8 threads at once store exactly 32, the rest are refused
/// with 409, and replacing a stored tool still works at the cap.
#[test]
fn concurrent_puts_never_store_more_than_32_tools() {
    for backend in BACKENDS {
        let b = BackendEnv::new(backend);
        let dir = tempfile::tempdir().unwrap();
        let server = JsonServer::start();
        let app = start(&b, dir.path(), None, &server, 1_000);
        let put = |i: usize| {
            let config = json!({"description": format!("Looks up fact number {i}."), "url": server.url("/x")});
            app.call("PUT", &format!("/tools/fact{i:02}"), Some(config), T0)
        };
        let statuses: Vec<u16> = std::thread::scope(|s| {
            let threads: Vec<_> =
                (0..8).map(|t| s.spawn(move || (0..5).map(|j| put(t * 5 + j)).collect::<Vec<_>>())).collect();
            threads
                .into_iter()
                .flat_map(|h| h.join().unwrap())
                .map(|r| {
                    if r.status != 200 {
                        r.assert_error(409, "conflict");
                    }
                    r.status
                })
                .collect()
        });
        assert_eq!(statuses.iter().filter(|&&s| s == 200).count(), 32, "{backend:?}: {statuses:?}");
        let listed = ok(app.call("GET", "/tools", None, T0), 200);
        assert_eq!(listed["tools"].as_array().unwrap().len(), 32, "{backend:?}");
        let stored = listed["tools"][0]["name"].as_str().unwrap().to_string();
        let config = json!({"description": "Looks up a fact, revised.", "url": server.url("/x")});
        ok(app.call("PUT", &format!("/tools/{stored}"), Some(config), T0), 200);
    }
}

/// Self-evaluation (002 Phase B, D-C6) over HTTP: of the tools triage names,
/// unknown ones are dropped and at most 3 are kept; an unknown skill is
/// dropped; the triage_calibration row logs what was kept and why.
#[test]
fn triage_keeps_at_most_three_known_tools_and_only_real_skills() {
    for backend in BACKENDS {
        let b = BackendEnv::new(backend);
        let dir = tempfile::tempdir().unwrap();
        let server = JsonServer::start();
        let model = FakeModel::start(Script { reply: "Here is what I found.".into(), ..Default::default() });
        let app = start(&b, dir.path(), Some(&model), &server, 5_000);
        for name in ["atlas", "bus", "ferry", "metro"] {
            tool(&app, &server, name, &format!("Looks up {name} timetables."), json!({"consequential": false}));
            server.set("POST", &format!("/{name}"), 200, &json!({"result": format!("{name}: on time")}));
        }
        model.route(CRITIC, Script::json(json!({"verified": true})));
        model.route(
            marker::TRIAGE,
            Script::json(
                json!({"branch": "act", "mode": "ACT", "tools": ["atlas", "bus", "teleporter", "ferry", "metro"],
                "skills": ["recall", "levitate"], "confidence_internal": 0.2, "confidence_tool_need": 0.9,
                "freshness_risk": 0.8, "reasoning": "needs timetables"}),
            ),
        );
        let (events, _) = chat(&app, "Which way into town is running on time this morning?", T0);
        assert!(event(&events, "message").is_some(), "{events:?}");
        let rows = app.table("triage_calibration", T0);
        let row = rows.last().unwrap();
        let list = |k: &str| serde_json::from_str::<Vec<String>>(row[k].as_str().unwrap()).unwrap();
        assert_eq!(list("tools"), ["atlas", "bus", "ferry"], "{row}");
        assert!(!list("skills").iter().any(|s| s == "levitate"), "{row}");
        let overrides = list("overrides");
        for o in ["unknown_tools_dropped", "tools_capped"] {
            assert!(overrides.iter().any(|x| x == o), "{o} in {row}");
        }
        assert_eq!(server.requests("POST", "/metro").len(), 0, "the fourth tool never runs");
    }
}

/// On Postgres the cap's count and insert run under a lock on `tools`
/// (D-C19): a PUT waits while another transaction holds it.
#[test]
fn on_postgres_a_tool_put_waits_for_the_lock_on_tools() {
    let b = BackendEnv::new(mneme_e2e::Backend::Hosted);
    let dir = tempfile::tempdir().unwrap();
    let server = JsonServer::start();
    let app = start(&b, dir.path(), None, &server, 1_000);
    let mut pg = b.pg.as_ref().unwrap().client();
    let mut other = pg.transaction().unwrap();
    other.execute("LOCK TABLE tools IN SHARE ROW EXCLUSIVE MODE", &[]).unwrap();
    std::thread::scope(|s| {
        let put = s.spawn(|| tool(&app, &server, "trains", "Looks up train departures from a station.", json!({})));
        std::thread::sleep(Duration::from_millis(1000));
        assert!(!put.is_finished(), "the PUT must wait for the lock");
        other.commit().unwrap();
        assert_eq!(put.join().unwrap()["name"], "trains");
    });
}

/// With a model: triage names the tools; each runs under its own timeout;
/// the critic checks each success, a safe tool is retried with its
/// correction (twice at most), a consequential one is escalated; the reply
/// reaches the same stream and is committed.
#[test]
fn named_tools_run_on_the_worker_and_answer_in_the_same_stream() {
    for backend in BACKENDS {
        let b = BackendEnv::new(backend);
        let dir = tempfile::tempdir().unwrap();
        let server = JsonServer::start();
        let model = FakeModel::start(Script { reply: "The 9:40 leaves from platform 2.".into(), ..Default::default() });
        let app = start(&b, dir.path(), Some(&model), &server, 60_000);
        tool(&app, &server, "trains", "Looks up train departures from a station.", json!({"consequential": false}));
        tool(
            &app,
            &server,
            "weather",
            "The weather forecast for a place.",
            json!({"timeout_ms": 300, "consequential": false}),
        );
        server.set("POST", "/trains", 200, &json!({"result": "Leeds: 9:40 from platform 2"}));
        server.set_delayed("POST", "/weather", 200, &json!({"result": "rain"}), Duration::from_millis(1_500));
        model.route(CRITIC, Script::json(json!({"verified": true})));
        model.route(marker::TRIAGE, triage_with_tools(&["trains", "weather"]));

        let (events, request_id) = chat(&app, "When does the next train to Leeds leave, and will it rain?", T0);
        assert_eq!(statuses(&events).iter().filter(|s| *s == "tools").count(), 1, "{events:?}");
        let message = event(&events, "message").unwrap_or_else(|| panic!("a message: {events:?}"));
        assert_eq!(message["text"], "The 9:40 leaves from platform 2.");
        assert_eq!(message["mode"], "RESPOND");
        assert_eq!(message["source"], "model");
        assert!(event(&events, "done").is_some());
        // The tool got the message and its context; the reply's prompt has
        // both results, the slow one as a timeout.
        let calls = server.requests("POST", "/trains");
        assert_eq!(calls.len(), 1);
        let sent: Value = serde_json::from_str(&calls[0].body).unwrap();
        assert_eq!(sent["tool"], "trains");
        assert!(sent["text"].as_str().unwrap().contains("Leeds"));
        let generation: Vec<String> =
            model.requests_with("You are Mneme").into_iter().filter(|r| r.contains("platform 2")).collect();
        assert_eq!(generation.len(), 1, "one reply over the results");
        assert!(generation[0].contains("timeout"), "{}", generation[0]);
        // The critic looked at the one success, not at the timeout.
        assert_eq!(model.requests_with(CRITIC).len(), 1);
        // The cycle: queued, then run; the job is done; the exchange is in
        // working memory with the reply.
        let cycles = app.table("cortex_iterations", T0);
        let modes: Vec<&str> = cycles.iter().filter_map(|c| c["mode"].as_str()).collect();
        assert!(modes.contains(&"ACT (Path B: tool work queued)") && modes.contains(&"ACT (Path B)"), "{modes:?}");
        let jobs = ok(app.call("GET", "/jobs?queue=tool-queue", None, T0), 200);
        assert_eq!(jobs[0]["status"], "done", "{jobs}");
        let recent = ok(app.call("GET", "/conversation/recent?thread_id=t1", None, T0), 200);
        assert!(recent.to_string().contains("The 9:40 leaves from platform 2."), "{recent}");
        assert!(!request_id.is_empty());

        // A safe tool the critic corrects each time: two retries with the
        // correction, then the reply over what there is.
        model.route(
            CRITIC,
            Script::json(json!({"verified": false, "severity": "minor", "issue": "that is yesterday's",
                                                "correction": "ask for today's departures"})),
        );
        model.route(marker::TRIAGE, triage_with_tools(&["trains"]));
        let (events, _) = chat(&app, "Which trains leave for York this morning?", T0 + 60_000);
        assert!(event(&events, "message").is_some(), "{events:?}");
        let calls = server.requests("POST", "/trains");
        assert_eq!(calls.len(), 4, "one more call and two retries");
        for c in &calls[2..] {
            assert!(c.body.contains("ask for today's departures"), "{}", c.body);
        }
        // A consequential tool with no correction: the principal is asked.
        tool(&app, &server, "book-table", "Books a restaurant table.", json!({}));
        server.set("POST", "/book-table", 200, &json!({"result": "booked for Tuesday"}));
        model.route(
            CRITIC,
            Script::json(json!({"verified": false, "severity": "major", "issue": "the booking is for the wrong day"})),
        );
        model.route(marker::TRIAGE, triage_with_tools(&["book-table"]));
        let (events, _) = chat(&app, "Book a table for two on Friday", T0 + 120_000);
        let message = event(&events, "message").unwrap_or_else(|| panic!("{events:?}"));
        assert_eq!(message["mode"], "CLARIFY");
        assert_eq!(message["source"], "critic-escalation");
        assert_eq!(
            message["text"],
            "I was about to rely on book-table but paused — the booking is for the wrong day. Should I go ahead?"
        );
        assert_eq!(server.requests("POST", "/book-table").len(), 1, "a consequential tool is not retried");
    }
}

/// Without a model: heuristic triage chooses ACT for a command with tools
/// configured, relevance picks the tool, the labelled rules write the
/// reply; the tool is slower than the stream waits, so the reply arrives
/// on `/events` as a `tool_result`, once.
#[test]
fn a_reply_later_than_the_stream_waits_arrives_on_events() {
    for backend in BACKENDS {
        let b = BackendEnv::new(backend);
        let dir = tempfile::tempdir().unwrap();
        let server = JsonServer::start();
        let app = start(&b, dir.path(), None, &server, 1_000);
        tool(&app, &server, "trains", "Looks up the latest train departures from a station.", json!({}));
        server.set_delayed(
            "POST",
            "/trains",
            200,
            &json!({"result": "Leeds: 9:40 from platform 2"}),
            Duration::from_millis(3_000),
        );
        let (events, request_id) = chat(&app, "Check the latest train departures to Leeds", T0);
        assert_eq!(statuses(&events), ["processing", "thinking", "tools", "deferred"], "{events:?}");
        assert!(event(&events, "message").is_none(), "{events:?}");
        assert!(event(&events, "done").is_some());
        let delivered = tool_results(&app);
        assert_eq!(delivered.len(), 1, "{delivered:?}");
        let e = &delivered[0];
        assert_eq!(e["request_id"], request_id.as_str());
        assert_eq!(e["source"], "rule-based");
        let text = e["text"].as_str().unwrap();
        assert!(text.starts_with("[rule-based reply: no model is configured]"), "{text}");
        assert!(text.contains("platform 2"), "{text}");
        let jobs = ok(app.call("GET", "/jobs?queue=tool-queue", None, T0), 200);
        assert_eq!(jobs[0]["status"], "done", "{jobs}");
        // A message no tool is relevant to stays on Path C.
        let (events, _) = chat(&app, "Check my notes about the garden", T0 + 60_000);
        assert!(!statuses(&events).contains(&"tools".to_string()), "{events:?}");
        assert!(event(&events, "message").is_some());
    }
}

/// The hand-over's other ends: a stream whose client went away leaves the
/// reply to `/events` (the worker's sweep sends it once the stream's
/// deadline is past), and a job deleted while the stream waits ends the
/// stream with an error instead of a wait without end.
#[test]
fn a_dropped_stream_or_a_deleted_job_still_ends_cleanly() {
    for backend in BACKENDS {
        let b = BackendEnv::new(backend);
        let dir = tempfile::tempdir().unwrap();
        let server = JsonServer::start();
        let app = start(&b, dir.path(), None, &server, 2_000);
        tool(&app, &server, "trains", "Looks up the latest train departures from a station.", json!({}));
        server.set("POST", "/trains", 200, &json!({"result": "Leeds: 9:40 from platform 2"}));
        // The client reads until the tool work is queued, then hangs up.
        let addr = app.url.strip_prefix("http://").unwrap().to_string();
        let body = json!({"text": "Check the latest train departures to Leeds", "thread_id": "t1"}).to_string();
        {
            use std::io::{Read, Write};
            let mut s = std::net::TcpStream::connect(&addr).unwrap();
            write!(
                s,
                "POST /chat HTTP/1.1\r\nhost: {addr}\r\nauthorization: Bearer {TEST_KEY}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
                body.len()
            )
            .unwrap();
            let mut seen = Vec::new();
            let mut buf = [0u8; 4096];
            while !String::from_utf8_lossy(&seen).contains("\"stage\":\"tools\"") {
                let n = s.read(&mut buf).unwrap();
                assert!(n > 0, "the stream ended early: {}", String::from_utf8_lossy(&seen));
                seen.extend_from_slice(&buf[..n]);
            }
        }
        let delivered = tool_results(&app);
        assert_eq!(delivered.len(), 1);
        assert!(delivered[0]["text"].as_str().unwrap().contains("platform 2"), "{delivered:?}");

        drop(app);

        // A job deleted under a waiting stream: the stream says so and
        // ends, and the worker commits nothing of it afterwards.
        let (b, dir) = (BackendEnv::new(backend), tempfile::tempdir().unwrap());
        let app = start(&b, dir.path(), None, &server, 30_000);
        tool(&app, &server, "trains", "Looks up the latest train departures from a station.", json!({}));
        server.set_delayed("POST", "/trains", 200, &json!({"result": "late"}), Duration::from_millis(4_000));
        let (events, _) = std::thread::scope(|s| {
            let chat = s.spawn(|| chat(&app, "Check the latest train departures to York", T0 + 60_000));
            let deadline = Instant::now() + Duration::from_secs(20);
            while ok(app.call("GET", "/jobs?queue=tool-queue", None, T0), 200).as_array().is_none_or(Vec::is_empty) {
                assert!(Instant::now() < deadline, "the tool job was never queued");
                std::thread::sleep(Duration::from_millis(50));
            }
            ok(app.call("DELETE", "/privacy/delete-all?confirm=true", None, T0 + 60_000), 200);
            chat.join().unwrap()
        });
        let error = event(&events, "error").unwrap_or_else(|| panic!("an error event: {events:?}"));
        assert!(error["message"].as_str().unwrap().contains("deleted"), "{error}");
        assert_eq!(error["recoverable"], true, "sending the message again can succeed: {error}");
        assert!(event(&events, "done").is_some());
        // The tool answers after 4 s; by 8 s the worker has tried to commit.
        std::thread::sleep(Duration::from_secs(8));
        assert!(app.table("exchanges", T0 + 60_000).is_empty(), "nothing of the deleted job comes back");
    }
}
