//! `/mcp` through the runner over HTTP, on both storage backends and both
//! protocol revisions (#51): closed without the key and to a foreign
//! Origin; the handshake revision's `initialize` and 2026-07-28's headers
//! and `_meta`; every tool called, with its structured result checked
//! against what the HTTP API then shows, and bad arguments answered as
//! tool errors naming their field with nothing written; resources read.

use mneme_e2e::{App, BACKENDS, BackendEnv, Resp, TEST_KEY, test_env};
use serde_json::{Value, json};

const MODERN: &str = "2026-07-28";
const HANDSHAKE: &str = "2025-11-25";

fn start(b: &BackendEnv) -> App {
    App::start("spin.toml", &test_env(b, None))
}

/// One JSON-RPC request under `version`: the handshake revision names
/// itself in `MCP-Protocol-Version` only; 2026-07-28 also sends `_meta`,
/// `Mcp-Method` and `Mcp-Name`.
fn rpc(app: &App, version: &str, method: &str, mut params: Value) -> Resp {
    let mut headers = vec![
        ("authorization".to_string(), format!("Bearer {TEST_KEY}")),
        ("content-type".to_string(), "application/json".to_string()),
        ("accept".to_string(), "application/json, text/event-stream".to_string()),
        ("mcp-protocol-version".to_string(), version.to_string()),
    ];
    if version == MODERN {
        params["_meta"] = json!({"io.modelcontextprotocol/protocolVersion": MODERN,
                                 "io.modelcontextprotocol/clientCapabilities": {}});
        headers.push(("mcp-method".into(), method.into()));
        let name = params["name"].as_str().or(params["uri"].as_str()).map(str::to_string);
        if let Some(n) = name {
            headers.push(("mcp-name".into(), n));
        }
    }
    let body = json!({"jsonrpc": "2.0", "id": 7, "method": method, "params": params}).to_string();
    let h: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    app.request("POST", "/mcp", &h, Some(body.as_bytes()))
}

/// A tool's result, asserting the call reached the tool.
fn tool(app: &App, version: &str, name: &str, args: Value) -> Value {
    let r = rpc(app, version, "tools/call", json!({"name": name, "arguments": args}));
    assert_eq!(r.status, 200, "{name}: {}", r.body);
    let v = r.json();
    assert_eq!(v["id"], 7, "{v}");
    v["result"].clone()
}

/// A tool's structured content, asserting it succeeded and said so in text.
fn ok(app: &App, version: &str, name: &str, args: Value) -> Value {
    let res = tool(app, version, name, args);
    assert_eq!(res["isError"], false, "{name}: {res}");
    assert!(!res["content"][0]["text"].as_str().unwrap_or_default().is_empty(), "{name}: {res}");
    res["structuredContent"].clone()
}

/// A tool error, asserting its message names `field`.
fn refused(app: &App, version: &str, name: &str, args: Value, field: &str) -> String {
    let res = tool(app, version, name, args);
    assert_eq!(res["isError"], true, "{name}: {res}");
    let text = res["content"][0]["text"].as_str().unwrap_or_default().to_string();
    assert!(text.contains(&format!("`{field}`")), "{name}: the error should name `{field}`: {text}");
    text
}

#[test]
fn mcp_is_closed_without_the_key_and_to_foreign_origins() {
    let b = BackendEnv::new(mneme_e2e::Backend::Embedded);
    let app = start(&b);
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).to_string();
    let r = app.request("POST", "/mcp", &[("content-type", "application/json")], Some(body.as_bytes()));
    assert_eq!(r.status, 401, "{}", r.body);
    assert!(r.header("www-authenticate").is_some_and(|h| h.starts_with("Bearer")), "{:?}", r.headers);
    let r = app.request("POST", "/mcp", &[("authorization", "Bearer wrong")], Some(body.as_bytes()));
    assert_eq!(r.status, 401, "{}", r.body);
    let auth = format!("Bearer {TEST_KEY}");
    // A page on another origin, with the key (DNS rebinding): refused.
    let r = app.request(
        "POST",
        "/mcp",
        &[("authorization", &auth), ("origin", "http://evil.example")],
        Some(body.as_bytes()),
    );
    r.assert_error(403, "forbidden-origin");
    let r = app.request(
        "POST",
        "/mcp",
        &[("authorization", &auth), ("origin", "http://localhost:5173")],
        Some(body.as_bytes()),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    // No server stream and no session: GET and DELETE are not served.
    let r = app.request("GET", "/mcp", &[("authorization", &auth), ("accept", "text/event-stream")], None);
    assert_eq!(r.status, 405, "{}", r.body);
    assert_eq!(r.header("allow"), Some("POST"));
    // Not JSON, a batch, an unknown method: JSON-RPC errors with their statuses.
    let r = app.request("POST", "/mcp", &[("authorization", &auth)], Some(b"{not json"));
    assert_eq!((r.status, r.json()["error"]["code"].as_i64()), (400, Some(-32700)), "{}", r.body);
    let r = app.request("POST", "/mcp", &[("authorization", &auth)], Some(b"[]"));
    assert_eq!((r.status, r.json()["error"]["code"].as_i64()), (400, Some(-32600)), "{}", r.body);
    let r = rpc(&app, HANDSHAKE, "prompts/list", json!({}));
    assert_eq!((r.status, r.json()["error"]["code"].as_i64()), (404, Some(-32601)), "{}", r.body);
    // A notification is accepted with no body.
    let n = json!({"jsonrpc": "2.0", "method": "notifications/initialized"}).to_string();
    let r = app.request("POST", "/mcp", &[("authorization", &auth)], Some(n.as_bytes()));
    assert_eq!(r.status, 202, "{}", r.body);
}

#[test]
fn each_revision_is_served_by_its_own_rules() {
    let b = BackendEnv::new(mneme_e2e::Backend::Embedded);
    let app = start(&b);
    // 2025-11-25: initialize, answered with the version asked for, and no session.
    let r = rpc(
        &app,
        HANDSHAKE,
        "initialize",
        json!({"protocolVersion": HANDSHAKE, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let v = r.json();
    assert_eq!(v["result"]["protocolVersion"], HANDSHAKE, "{v}");
    assert_eq!(v["result"]["serverInfo"]["name"], "mneme");
    assert!(v["result"]["capabilities"]["tools"].is_object());
    assert!(r.header("mcp-session-id").is_none());
    // 2026-07-28: server/discover, and every result typed.
    let r = rpc(&app, MODERN, "server/discover", json!({}));
    assert_eq!(r.status, 200, "{}", r.body);
    let v = r.json();
    assert_eq!(v["result"]["supportedVersions"], json!([MODERN]), "{v}");
    assert_eq!(v["result"]["resultType"], "complete", "{v}");
    // Its headers must agree with the body.
    let body = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/list", "params": {"_meta": {
        "io.modelcontextprotocol/protocolVersion": MODERN, "io.modelcontextprotocol/clientCapabilities": {}}}})
    .to_string();
    let auth = format!("Bearer {TEST_KEY}");
    let r = app.request(
        "POST",
        "/mcp",
        &[("authorization", &auth), ("mcp-protocol-version", MODERN), ("mcp-method", "tools/call")],
        Some(body.as_bytes()),
    );
    assert_eq!((r.status, r.json()["error"]["code"].as_i64()), (400, Some(-32020)), "{}", r.body);
    // A version not served: the list of those that are.
    let r = rpc(&app, "2024-01-01", "tools/list", json!({}));
    assert_eq!((r.status, r.json()["error"]["code"].as_i64()), (400, Some(-32022)), "{}", r.body);
    assert!(r.json()["error"]["data"]["supported"].as_array().unwrap().contains(&json!(MODERN)));
    // The same tools under both, each with its schemas and annotations.
    let old = rpc(&app, HANDSHAKE, "tools/list", json!({})).json();
    let new = rpc(&app, MODERN, "tools/list", json!({})).json();
    assert_eq!(old["result"]["tools"], new["result"]["tools"]);
    let tools = old["result"]["tools"].as_array().unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
    for want in [
        "remember",
        "search",
        "recall",
        "retrieve_knowledge",
        "ingest_transcript",
        "list_recommendations",
        "read_recommendation",
        "decide_recommendation",
        "create_reminder",
        "list_reminders",
        "create_task",
        "list_tasks",
        "cancel_task",
        "forget",
    ] {
        assert!(names.contains(&want), "{want} missing from {names:?}");
    }
    let forget = tools.iter().find(|t| t["name"] == "forget").unwrap();
    assert_eq!(forget["annotations"]["destructiveHint"], true);
    assert_eq!(tools.iter().find(|t| t["name"] == "search").unwrap()["annotations"]["readOnlyHint"], true);
    // An unknown tool is a protocol error, not a tool error.
    let r = rpc(&app, MODERN, "tools/call", json!({"name": "drop_tables", "arguments": {}}));
    assert_eq!((r.status, r.json()["error"]["code"].as_i64()), (400, Some(-32602)), "{}", r.body);
}

#[test]
fn every_tool_works_on_both_backends_and_refuses_bad_arguments() {
    for backend in BACKENDS {
        let b = BackendEnv::new(backend);
        let app = start(&b);
        for (i, v) in [HANDSHAKE, MODERN].into_iter().enumerate() {
            // remember, then search finds it.
            let word = format!("zephyrine{i}");
            let doc = ok(
                &app,
                v,
                "remember",
                json!({"text": format!("The {word} lamp goes in the hallway."), "title": "Lamp"}),
            );
            assert!(doc["id"].is_string(), "{doc}");
            let found = ok(&app, v, "search", json!({"query": word, "mode": "text"}));
            assert!(
                found["results"].as_array().unwrap().iter().any(|h| h["id"] == doc["id"]),
                "{backend:?} {v}: {found}"
            );
            refused(&app, v, "search", json!({"query": word, "k": 0}), "k");
            refused(&app, v, "remember", json!({"text": ""}), "text");
            refused(&app, v, "remember", json!({"text": "a\u{0}b"}), "text");
            // recall answers from memory (empty here), typed.
            let recalled = ok(&app, v, "recall", json!({"topic": "the hallway lamp"}));
            assert!(recalled["memories"].is_array(), "{recalled}");
            // ingest, then its job.
            let job = ok(
                &app,
                v,
                "ingest_transcript",
                json!({"text": format!("Ana: We always write the test first ({v})."), "principal": "Ana"}),
            );
            let id = job["job_id"].as_str().unwrap().to_string();
            let status = ok(&app, v, "ingest_status", json!({"job_id": id}));
            assert!(status["status"].is_string(), "{status}");
            refused(&app, v, "ingest_transcript", json!({"text": "Ana: x", "source_type": "email"}), "source_type");
            let knowledge = ok(&app, v, "retrieve_knowledge", json!({"query": "testing"}));
            assert!(knowledge["entries"].is_array(), "{knowledge}");
            // reminders: one set, then listed; one in the past refused.
            let set = ok(
                &app,
                v,
                "create_reminder",
                json!({"message": format!("water the plants {v}"), "due_at": "2031-05-01T09:00"}),
            );
            assert!(set["result"].as_str().unwrap().contains("Reminder set"), "{set}");
            let listed = ok(&app, v, "list_reminders", json!({}));
            assert!(listed["result"].as_str().unwrap().contains(&format!("water the plants {v}")), "{listed}");
            let past = tool(&app, v, "create_reminder", json!({"message": "too late", "due_at": "2001-01-01T09:00"}));
            assert_eq!(past["isError"], true, "{past}");
            // tasks: created, listed, cancelled.
            let task = ok(
                &app,
                v,
                "create_task",
                json!({"goal": format!("Compare three standing desks under 600 euros ({v})")}),
            );
            let task_id = task["task"]["id"].as_str().unwrap().to_string();
            let tasks = ok(&app, v, "list_tasks", json!({}));
            assert!(tasks["tasks"].as_array().unwrap().iter().any(|t| t["id"] == task_id.as_str()), "{tasks}");
            let cancelled = ok(&app, v, "cancel_task", json!({"id": task_id}));
            assert_eq!(cancelled["task"]["status"], "cancelled", "{cancelled}");
            refused(&app, v, "create_task", json!({"goal": "x", "priority": 11}), "priority");
            // recommendations: none yet; deciding on one that does not exist is a tool error.
            let recs = ok(&app, v, "list_recommendations", json!({"status": "open"}));
            assert!(recs["recommendations"].is_array(), "{recs}");
            refused(&app, v, "decide_recommendation", json!({"id": "r1", "decision": "acted_modified"}), "fit");
            let missing = tool(&app, v, "decide_recommendation", json!({"id": "no-such-rec", "decision": "skipped"}));
            assert_eq!(missing["isError"], true, "{missing}");
            // forget: refused without confirmation, and nothing is gone.
            refused(&app, v, "forget", json!({"scope": "topic", "topic": "lamps"}), "confirm");
            let forgot = ok(&app, v, "forget", json!({"scope": "topic", "topic": "lamps", "confirm": true}));
            assert!(forgot["forgotten"].is_object(), "{forgot}");
        }
        // What the tools wrote is what the HTTP API shows.
        let tasks = app.call_as(TEST_KEY, "GET", "/tasks", None, None).json();
        assert_eq!(tasks["tasks"].as_array().unwrap().len(), 2, "{backend:?}: {tasks}");
        // Resources: the list pages from knowledge to recs; an unknown URI is not found.
        let list = rpc(&app, HANDSHAKE, "resources/list", json!({})).json();
        assert!(list["result"]["resources"].is_array(), "{list}");
        let templates = rpc(&app, MODERN, "resources/templates/list", json!({})).json();
        assert_eq!(templates["result"]["resourceTemplates"].as_array().unwrap().len(), 2, "{templates}");
        let r = rpc(&app, HANDSHAKE, "resources/read", json!({"uri": "mneme://knowledge/no-such-entry"}));
        assert_eq!(r.json()["error"]["code"], -32002, "{}", r.body);
        let r = rpc(&app, MODERN, "resources/read", json!({"uri": "mneme://elsewhere/1"}));
        assert_eq!((r.status, r.json()["error"]["code"].as_i64()), (400, Some(-32602)), "{}", r.body);
    }
}

/// The official MCP Python SDK (`mcp` 2.3.0), as an agent uses it: over
/// HTTP under each revision, and through `mneme mcp` over stdio, on both
/// backends; every tool called once or more, resources listed.
#[test]
fn the_python_sdk_uses_every_tool_over_http_and_through_the_bridge() {
    let venv = std::env::var("MNEME_MCP_VENV").map(std::path::PathBuf::from).unwrap_or_else(|_| {
        std::path::PathBuf::from(std::env::var("HOME").expect("HOME")).join(".cache/mneme/mcp-venv")
    });
    let python = venv.join("bin/python");
    assert!(
        python.is_file(),
        "the MCP Python SDK is missing: run scripts/install.sh --test (it installs mcp into {})",
        venv.display()
    );
    let script = mneme_e2e::repo_root().join("tests/mcp/client.py");
    for backend in BACKENDS {
        let b = BackendEnv::new(backend);
        let app = start(&b);
        for (mode, version) in [("legacy", HANDSHAKE), (MODERN, MODERN), ("stdio", HANDSHAKE)] {
            let out = std::process::Command::new(&python)
                .arg(&script)
                .arg(&app.url)
                .arg(TEST_KEY)
                .arg(mode)
                .arg(mneme_e2e::mneme_bin())
                .output()
                .expect("python runs");
            let said = String::from_utf8_lossy(&out.stdout);
            assert!(out.status.success(), "{backend:?} {mode}: {said}{}", String::from_utf8_lossy(&out.stderr));
            let v: Value = serde_json::from_str(said.trim()).unwrap_or_else(|e| panic!("{e}: {said}"));
            assert_eq!(v["protocol_version"], version, "{backend:?} {mode}: {v}");
            assert_eq!(v["tools"].as_array().unwrap().len(), 15, "{v}");
            assert_eq!(v["annotated"], v["tools"], "every tool has annotations and an output schema: {v}");
            let calls = &v["calls"];
            let first = |name: &str| calls[name][0].clone();
            for name in [
                "remember",
                "search",
                "recall",
                "ingest_transcript",
                "ingest_status",
                "retrieve_knowledge",
                "create_reminder",
                "list_reminders",
                "create_task",
                "list_tasks",
                "cancel_task",
                "list_recommendations",
            ] {
                assert_eq!(first(name)["is_error"], false, "{backend:?} {mode} {name}: {}", first(name));
            }
            let doc = v["document"]["id"].clone();
            assert!(
                first("search")["structured"]["results"].as_array().unwrap().iter().any(|h| h["id"] == doc),
                "{backend:?} {mode}: the remembered document was not found: {}",
                first("search")
            );
            assert!(
                first("list_reminders")["text"].as_str().unwrap().contains("check the umbrella"),
                "{}",
                first("list_reminders")
            );
            assert_eq!(first("cancel_task")["structured"]["task"]["status"], "cancelled");
            // Refusals reach the model as tool errors that say why.
            assert_eq!(first("read_recommendation")["is_error"], true);
            let snooze = first("decide_recommendation");
            assert!(snooze["is_error"] == true && snooze["text"].as_str().unwrap().contains("`days`"), "{snooze}");
            let unconfirmed = &calls["forget"][0];
            assert!(
                unconfirmed["is_error"] == true && unconfirmed["text"].as_str().unwrap().contains("`confirm`"),
                "{unconfirmed}"
            );
            assert_eq!(calls["forget"][1]["is_error"], false, "{}", calls["forget"][1]);
            assert_eq!(v["templates"], json!(["mneme://knowledge/{id}", "mneme://rx/{id}"]));
            assert!(v["resources"].is_array());
        }
    }
}

/// The MCP Inspector's CLI mode (npm `@modelcontextprotocol/inspector`
/// 2.12.0), a second client written by others, lists the fifteen tools over
/// Streamable HTTP with the bearer key.
#[test]
fn the_mcp_inspector_lists_the_tools() {
    let dir = std::env::var("MNEME_INSPECTOR_DIR").map(std::path::PathBuf::from).unwrap_or_else(|_| {
        std::path::PathBuf::from(std::env::var("HOME").expect("HOME")).join(".cache/mneme/mcp-inspector")
    });
    let cli = dir.join("node_modules/.bin/mcp-inspector");
    assert!(
        cli.is_file(),
        "the MCP Inspector is missing: run scripts/install.sh --test (it installs it into {})",
        dir.display()
    );
    let b = BackendEnv::new(mneme_e2e::Backend::Embedded);
    let app = start(&b);
    let out = std::process::Command::new(&cli)
        .args(["--cli", &format!("{}/mcp", app.url), "--transport", "http", "--method", "tools/list"])
        .args(["--header", &format!("Authorization: Bearer {TEST_KEY}")])
        .output()
        .expect("the inspector runs");
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{said}{}", String::from_utf8_lossy(&out.stderr));
    let v: Value = serde_json::from_str(said.trim()).unwrap_or_else(|e| panic!("{e}: {said}"));
    let names: Vec<&str> = v["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(names.len(), 15, "{names:?}");
    assert!(names.contains(&"remember") && names.contains(&"forget"), "{names:?}");
    // Without the key, the inspector is refused.
    let out = std::process::Command::new(&cli)
        .args(["--cli", &format!("{}/mcp", app.url), "--transport", "http", "--method", "tools/list"])
        .output()
        .expect("the inspector runs");
    assert!(!out.status.success(), "{}", String::from_utf8_lossy(&out.stdout));
}
