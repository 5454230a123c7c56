//! `chaos`: the reliability suite's larger runs, each printing the rows of
//! `docs/RELIABILITY.md` (`scripts/chaos.sh` runs them all on both
//! backends).
//!
//! ```text
//! chaos input   --backend embedded|hosted       hostile input on every operation of openapi.yaml
//! chaos kill    --backend … [--rounds 10]       kill -9 during writes; acknowledged writes lost
//! chaos faults                                  PostgreSQL, Redis and the model refused, black-holed, restored
//! chaos race    --backend …                     concurrent rx runs, document batches, ingests, sign-ins
//! chaos flood   --backend …                     1,000 streams; 1,000 slow chats; 1,000 half-open connections
//! chaos soak    --backend … [--minutes 30]      a steady mix, resident memory each minute
//! ```
//!
//! Every row is `| scenario | backend | what | figure | verdict |`; a failed
//! check prints `FAIL` in its row and makes the process exit 1.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use mneme_e2e::fake_model::{FakeModel, Script, marker, triage_answer};
use mneme_e2e::fault::{FaultProxy, Mode};
use mneme_e2e::{
    App, Backend, BackendEnv, CRON_AUTH, PgDatabase, REDIS_ADDR, TEST_KEY, openapi_description, parse_sse,
    require_redis, test_env,
};
use serde_json::{Value, json};

const AUTH: &str = "Bearer test-api-key";
const INGEST: &str = "chaos-ingest-token";
const RX_INGEST: &str = "chaos-rx-ingest-token";

static FAILED: AtomicBool = AtomicBool::new(false);

fn row(scenario: &str, backend: &str, what: &str, figure: String, ok: bool) {
    if !ok {
        FAILED.store(true, Ordering::SeqCst);
    }
    println!("| {scenario} | {backend} | {what} | {figure} | {} |", if ok { "ok" } else { "FAIL" });
}

fn arg(name: &str) -> Option<String> {
    let args: Vec<String> = std::env::args().collect();
    args.iter().position(|a| a == name).and_then(|i| args.get(i + 1).cloned())
}

fn backend() -> Backend {
    match arg("--backend").as_deref() {
        Some("hosted") => Backend::Hosted,
        _ => Backend::Embedded,
    }
}

fn name(b: Backend) -> &'static str {
    match b {
        Backend::Embedded => "embedded",
        Backend::Hosted => "hosted",
    }
}

fn main() {
    let scenario = std::env::args().nth(1).unwrap_or_default();
    match scenario.as_str() {
        "input" => input(backend()),
        "kill" => kill(backend(), arg("--rounds").and_then(|r| r.parse().ok()).unwrap_or(10)),
        "faults" => faults(),
        "race" => race(backend()),
        "flood" => flood(backend()),
        "soak" => soak(backend(), arg("--minutes").and_then(|m| m.parse().ok()).unwrap_or(30)),
        _ => {
            eprintln!("usage: chaos input|kill|faults|race|flood|soak [--backend embedded|hosted]");
            std::process::exit(2);
        }
    }
    if FAILED.load(Ordering::SeqCst) {
        std::process::exit(1);
    }
}

fn env_for(b: &BackendEnv, model: Option<&FakeModel>) -> Vec<(String, String)> {
    let mut env = test_env(b, model);
    env.push(("SPIN_VARIABLE_INGEST_TOKEN".into(), INGEST.into()));
    env.push(("SPIN_VARIABLE_RX_INGEST_TOKEN".into(), RX_INGEST.into()));
    env
}

fn addr(app: &App) -> String {
    app.url.trim_start_matches("http://").to_string()
}

/// Sends raw bytes on a fresh connection; the whole answer (until the
/// server closes, or 20 s) and how long it took.
fn raw(addr: &str, bytes: &[u8]) -> (String, Duration) {
    let started = Instant::now();
    let Ok(mut s) = TcpStream::connect(addr) else { return (String::new(), started.elapsed()) };
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let _ = s.write_all(bytes);
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    (String::from_utf8_lossy(&out).into_owned(), started.elapsed())
}

fn request_bytes(method: &str, path: &str, headers: &[(&str, String)], body: &[u8]) -> Vec<u8> {
    let mut head = format!("{method} {path} HTTP/1.1\r\nHost: chaos\r\nConnection: close\r\nAuthorization: {AUTH}\r\n");
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    if !headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("content-length")) {
        head.push_str(&format!("Content-Length: {}\r\n", body.len()));
    }
    head.push_str("\r\n");
    let mut out = head.into_bytes();
    out.extend_from_slice(body);
    out
}

/// The status of a raw answer, and whether an error answer's body is the
/// JSON `{error:{code,message}}`.
fn judge(answer: &str) -> (u16, bool) {
    let status = answer.split(' ').nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    if status < 400 {
        return (status, true);
    }
    let body = answer.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    // A chunked body: take the JSON between the first chunk size and the end.
    let body = if answer.to_ascii_lowercase().contains("transfer-encoding: chunked") {
        body.split_once("\r\n").map_or(body, |(_, rest)| rest.rsplit_once("\r\n0\r\n").map_or(rest, |(j, _)| j))
    } else {
        body
    };
    let json: Option<Value> = serde_json::from_str(body.trim()).ok();
    // The API's `{error:{code,message}}`, or on `/mcp` a JSON-RPC error.
    let good = json.is_some_and(|v| {
        (v["error"]["code"].is_string() || (v["jsonrpc"] == "2.0" && v["error"]["code"].is_i64()))
            && v["error"]["message"].is_string()
    });
    (status, good)
}

// ------------------------------------------------------------------ input

/// A value for `schema` that is plausibly valid, with `leaf` put in every
/// string it contains.
fn instance(doc: &Value, schema: &Value, leaf: &dyn Fn() -> Value, depth: usize) -> Value {
    let schema = resolve(doc, schema);
    if depth > 6 {
        return Value::Null;
    }
    if let Some(all) = schema["allOf"].as_array() {
        let mut out = json!({});
        for s in all {
            if let Value::Object(m) = instance(doc, s, leaf, depth + 1) {
                out.as_object_mut().unwrap().extend(m);
            }
        }
        return out;
    }
    if let Some(first) = schema["oneOf"].as_array().or(schema["anyOf"].as_array()).and_then(|a| a.first()) {
        return instance(doc, first, leaf, depth + 1);
    }
    if let Some(first) = schema["enum"].as_array().and_then(|e| e.first()) {
        return first.clone();
    }
    match schema["type"].as_str() {
        Some("object") | None if schema["properties"].is_object() => {
            let mut out = serde_json::Map::new();
            for (k, p) in schema["properties"].as_object().unwrap() {
                out.insert(k.clone(), instance(doc, p, leaf, depth + 1));
            }
            Value::Object(out)
        }
        Some("object") => json!({}),
        Some("array") => json!([instance(doc, &schema["items"], leaf, depth + 1)]),
        Some("integer") => json!(schema["minimum"].as_i64().unwrap_or(1).max(1)),
        Some("number") => json!(schema["minimum"].as_f64().unwrap_or(0.5)),
        Some("boolean") => json!(true),
        Some("string") => leaf(),
        _ => Value::Null,
    }
}

fn resolve<'a>(doc: &'a Value, v: &'a Value) -> &'a Value {
    match v["$ref"].as_str() {
        Some(r) => resolve(doc, r.strip_prefix("#/").unwrap().split('/').fold(doc, |node, key| &node[key])),
        None => v,
    }
}

/// Every operation: method, path with its parameters filled, query
/// parameter names, and the body schema.
fn operations(doc: &Value) -> Vec<(String, String, Vec<String>, Option<Value>)> {
    let mut out = Vec::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for (method, op) in item.as_object().unwrap() {
            if !["get", "post", "put", "delete"].contains(&method.as_str()) {
                continue;
            }
            let params: Vec<Value> = op["parameters"]
                .as_array()
                .map(|p| p.iter().map(|x| resolve(doc, x).clone()).collect())
                .unwrap_or_default();
            let filled = params.iter().filter(|p| p["in"] == "path").fold(path.clone(), |acc, p| {
                let v = match p["name"].as_str().unwrap() {
                    "door" => "fitness",
                    "asset" => "app.js",
                    _ => "chaos-id",
                };
                acc.replace(&format!("{{{}}}", p["name"].as_str().unwrap()), v)
            });
            let query: Vec<String> =
                params.iter().filter(|p| p["in"] == "query").map(|p| p["name"].as_str().unwrap().to_string()).collect();
            let body = op["requestBody"]["content"]["application/json"]["schema"]
                .as_object()
                .map(|_| op["requestBody"]["content"]["application/json"]["schema"].clone());
            out.push((method.to_uppercase(), filled, query, body));
        }
    }
    out
}

/// Hostile input on every operation: NUL in every string of a plausible
/// body, invalid UTF-8, 10,000-deep nesting, a body over the limit, a
/// declared 64 MiB, a Content-Length longer than the body, NUL, invalid
/// UTF-8 and 100 KB in every query parameter and in the path, a 70 KB URI,
/// 200 headers. Nothing may answer 5xx, every error must be JSON, and
/// nothing may be left unanswered.
fn input(b: Backend) {
    let doc = openapi_description();
    let be = BackendEnv::new(b);
    let app = App::start("spin.toml", &env_for(&be, None));
    let a = addr(&app);
    let mut cases: Vec<(String, Vec<u8>)> = Vec::new();
    for (method, path, query, body) in operations(&doc) {
        if path.starts_with("/tick/") {
            continue;
        }
        let headers = |extra: Vec<(&'static str, String)>| {
            let mut h = vec![
                ("Content-Type", "application/json".to_string()),
                ("X-Ingest-Token", INGEST.to_string()),
                ("X-RX-Ingest-Token", RX_INGEST.to_string()),
            ];
            h.extend(extra);
            h
        };
        if let Some(schema) = &body {
            let nul = instance(&doc, schema, &|| json!("bad\u{0}text"), 0).to_string();
            cases.push((
                format!("{method} {path} NUL in every string"),
                request_bytes(&method, &path, &headers(vec![]), nul.as_bytes()),
            ));
            let plain = instance(&doc, schema, &|| json!("chaos text"), 0).to_string();
            let mut utf8 = plain.clone().into_bytes();
            utf8.splice(1..1, [0xff, 0xfe, 0xc3]);
            cases.push((
                format!("{method} {path} invalid UTF-8"),
                request_bytes(&method, &path, &headers(vec![]), &utf8),
            ));
            let deep = "[".repeat(10_000) + &"]".repeat(10_000);
            cases.push((
                format!("{method} {path} 10,000-deep JSON"),
                request_bytes(&method, &path, &headers(vec![]), deep.as_bytes()),
            ));
            let big = vec![b' '; (4 << 20) + 1];
            cases.push((format!("{method} {path} 4 MiB + 1"), request_bytes(&method, &path, &headers(vec![]), &big)));
            cases.push((
                format!("{method} {path} declares 64 MiB"),
                request_bytes(&method, &path, &headers(vec![("Content-Length", (64u64 << 20).to_string())]), b"{}"),
            ));
            cases.push((
                format!("{method} {path} Content-Length longer than the body"),
                request_bytes(
                    &method,
                    &path,
                    &headers(vec![("Content-Length", "200".to_string())]),
                    b"{\"text\":\"short\"}",
                ),
            ));
        }
        for q in &query {
            for (what, v) in
                [("NUL", "%00".to_string()), ("invalid UTF-8", "%ff%fe".into()), ("100 KB", "x".repeat(100_000))]
            {
                let p = format!("{path}?{q}={v}");
                cases
                    .push((format!("{method} {path} ?{q}: {what}"), request_bytes(&method, &p, &headers(vec![]), b"")));
            }
        }
        if path.contains("chaos-id") || path.contains("fitness") {
            for (what, seg) in
                [("NUL", "%00"), ("dot-dot", "..%2F..%2Fetc"), ("emoji", "%F0%9F%98%80"), ("1 KB", &"y".repeat(1000))]
            {
                let p = path.replace("chaos-id", seg).replace("fitness", seg);
                cases
                    .push((format!("{method} {path} path: {what}"), request_bytes(&method, &p, &headers(vec![]), b"")));
            }
        }
    }
    mcp_cases(&mut cases);
    cases.push(("a 70 KB URI".into(), format!("GET /{} HTTP/1.1\r\nHost: x\r\n\r\n", "u".repeat(70_000)).into_bytes()));
    let many: String = (0..200).map(|i| format!("X-Chaos-{i}: v\r\n")).collect();
    cases.push(("200 headers".into(), format!("GET /health HTTP/1.1\r\nHost: x\r\n{many}\r\n").into_bytes()));
    cases.push(("not HTTP".into(), b"\x16\x03\x01\x02\x00 hello\r\n\r\n".to_vec()));
    let mut by_class: BTreeMap<String, usize> = BTreeMap::new();
    let (mut server_errors, mut not_json, mut unanswered, mut slowest) =
        (Vec::new(), Vec::new(), Vec::new(), Duration::ZERO);
    for (what, bytes) in &cases {
        let (answer, took) = raw(&a, bytes);
        slowest = slowest.max(took);
        let (status, good) = judge(&answer);
        *by_class.entry(format!("{}xx", status / 100)).or_default() += 1;
        if status == 0 {
            unanswered.push(what.clone());
        } else if status >= 500 {
            server_errors.push(format!("{what}: {status}"));
        } else if !good {
            not_json.push(format!("{what}: {}", answer.lines().next().unwrap_or("")));
        }
    }
    let n = name(b);
    let classes = by_class.iter().map(|(k, v)| format!("{v} {k}")).collect::<Vec<_>>().join(", ");
    row(
        "input",
        n,
        &format!("{} hostile requests ({classes})", cases.len()),
        format!("slowest answer {:.1} s", slowest.as_secs_f64()),
        slowest < Duration::from_secs(15),
    );
    row(
        "input",
        n,
        "answered 5xx",
        format!("{} {:?}", server_errors.len(), server_errors.iter().take(3).collect::<Vec<_>>()),
        server_errors.is_empty(),
    );
    row(
        "input",
        n,
        "errors without the JSON body",
        format!("{} {:?}", not_json.len(), not_json.iter().take(3).collect::<Vec<_>>()),
        not_json.is_empty(),
    );
    row(
        "input",
        n,
        "left without an answer",
        format!("{} {:?}", unanswered.len(), unanswered.iter().take(3).collect::<Vec<_>>()),
        unanswered.is_empty(),
    );
    let health = app.get("/health");
    row("input", n, "/health afterwards", health.status.to_string(), health.status == 200);
}

/// `/mcp`'s hostile input (#51 item 4): its framing broken every way the
/// API's bodies are, and every tool called with each argument NUL-laden,
/// of the wrong type, huge, or the arguments not an object.
fn mcp_cases(cases: &mut Vec<(String, Vec<u8>)>) {
    let head = |extra: &[(&'static str, String)]| {
        let mut h =
            vec![("Content-Type", "application/json".to_string()), ("MCP-Protocol-Version", "2025-11-25".into())];
        h.extend_from_slice(extra);
        h
    };
    let post = |body: &[u8]| request_bytes("POST", "/mcp", &head(&[]), body);
    let call = |name: &str, args: Value| {
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": name, "arguments": args}})
            .to_string()
            .into_bytes()
    };
    for tool in mneme_mcp::tools::catalogue() {
        let name = tool["name"].as_str().unwrap_or_default().to_string();
        let props: Vec<String> =
            tool["inputSchema"]["properties"].as_object().map(|p| p.keys().cloned().collect()).unwrap_or_default();
        let every = |v: Value| Value::Object(props.iter().map(|k| (k.clone(), v.clone())).collect());
        for (what, args) in [
            ("NUL in every argument", every(json!("bad\u{0}text"))),
            ("every argument a number", every(json!(1e308))),
            ("every argument 100 KB", every(json!("x".repeat(100_000)))),
            ("every argument an object", every(json!({"nested": [1, 2, {"deep": null}]}))),
            ("arguments a string", json!("chaos")),
        ] {
            cases.push((format!("POST /mcp {name}: {what}"), post(&call(&name, args))));
        }
    }
    let plain = call("search", json!({"query": "chaos text"}));
    let mut utf8 = plain.clone();
    utf8.splice(1..1, [0xff, 0xfe, 0xc3]);
    cases.push(("POST /mcp invalid UTF-8".into(), post(&utf8)));
    let deep = "[".repeat(10_000) + &"]".repeat(10_000);
    cases.push(("POST /mcp 10,000-deep JSON".into(), post(deep.as_bytes())));
    let deep_params = format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{}{}}}",
        "{\"a\":".repeat(5_000),
        "1".to_string() + &"}".repeat(5_000)
    );
    cases.push(("POST /mcp params 5,000 deep".into(), post(deep_params.as_bytes())));
    cases.push(("POST /mcp 4 MiB + 1".into(), post(&vec![b' '; (4 << 20) + 1])));
    cases.push((
        "POST /mcp declares 64 MiB".into(),
        request_bytes("POST", "/mcp", &head(&[("Content-Length", (64u64 << 20).to_string())]), b"{}"),
    ));
    cases.push((
        "POST /mcp Content-Length longer than the body".into(),
        request_bytes("POST", "/mcp", &head(&[("Content-Length", "200".to_string())]), b"{\"jsonrpc\":\"2.0\"}"),
    ));
    for (what, v) in [("an unknown version", "1999-01-01"), ("the modern version without _meta", "2026-07-28")] {
        cases.push((
            format!("POST /mcp {what}"),
            request_bytes("POST", "/mcp", &[("MCP-Protocol-Version", v.to_string())], &plain),
        ));
    }
    cases.push(("GET /mcp".into(), request_bytes("GET", "/mcp", &head(&[]), b"")));
}

// ------------------------------------------------------------------- kill

/// What the writers were told was stored, by kind.
#[derive(Default)]
struct Acked {
    documents: Vec<String>,
    observations: Vec<String>,
    exchanges: Vec<String>,
    tasks: Vec<String>,
}

/// Writers on four kinds of write, until `stop`.
fn write_until(app: &App, stop: &AtomicBool, acked: &Mutex<Acked>, round: usize) {
    std::thread::scope(|s| {
        s.spawn(|| {
            let mut i = 0;
            while !stop.load(Ordering::SeqCst) {
                let body =
                    json!({"text": format!("Round {round} note {i}: the shed roof needs new felt.")}).to_string();
                let r = try_request(app, "POST", "/documents", Some(&body));
                if let Some((201, v)) = r {
                    acked
                        .lock()
                        .unwrap()
                        .documents
                        .extend(v["ids"].as_array().into_iter().flatten().filter_map(|x| x.as_str().map(String::from)));
                }
                i += 1;
            }
        });
        s.spawn(|| {
            let mut i = 0;
            while !stop.load(Ordering::SeqCst) {
                let batch: Vec<Value> =
                    (0..5).map(|k| json!({"kind": "workout", "type": "run", "minutes": 20 + (i + k) % 40})).collect();
                let body = json!({"observations": batch}).to_string();
                if let Some((201, v)) = try_request(app, "POST", "/rx/fitness/observations", Some(&body)) {
                    acked
                        .lock()
                        .unwrap()
                        .observations
                        .extend(v["ids"].as_array().into_iter().flatten().filter_map(|x| x.as_str().map(String::from)));
                }
                i += 1;
            }
        });
        s.spawn(|| {
            let mut i = 0;
            while !stop.load(Ordering::SeqCst) {
                let body = json!({"text": format!("thanks, that was round {round} message {i}"), "thread_id": format!("kill-{round}")}).to_string();
                if let Some((200, Value::String(raw))) = try_request(app, "POST", "/chat", Some(&body)) {
                    let events = parse_sse(&raw);
                    let done = events.iter().any(|(n, _)| n == "done");
                    if let Some((_, m)) = events.iter().find(|(n, _)| n == "message")
                        && done
                        && let Some(id) = m["exchange_id"].as_str()
                    {
                        acked.lock().unwrap().exchanges.push(id.to_string());
                    }
                }
                i += 1;
            }
        });
        s.spawn(|| {
            let mut i = 0;
            while !stop.load(Ordering::SeqCst) {
                let body = json!({"goal": goal(round * 1000 + i)}).to_string();
                if let Some((201, v)) = try_request(app, "POST", "/tasks", Some(&body))
                    && let Some(id) = v["id"].as_str()
                {
                    acked.lock().unwrap().tasks.push(id.to_string());
                }
                i += 1;
                std::thread::sleep(Duration::from_millis(200));
            }
        });
    });
}

/// A goal unlike every other (the task dedup refuses near-duplicates).
fn goal(n: usize) -> String {
    const A: [&str; 12] = [
        "roofing",
        "violin",
        "sourdough",
        "kayak",
        "orchard",
        "telescope",
        "pottery",
        "beekeeping",
        "chess",
        "tango",
        "welding",
        "origami",
    ];
    const B: [&str; 12] = [
        "suppliers",
        "teachers",
        "courses",
        "prices",
        "reviews",
        "clubs",
        "books",
        "tools",
        "festivals",
        "podcasts",
        "grants",
        "museums",
    ];
    const C: [&str; 10] = ["Lisbon", "Oslo", "Quito", "Osaka", "Nairobi", "Tartu", "Perth", "Dakar", "Hanoi", "Bergen"];
    format!("Compare {} {} near {} before season {n}", A[n % 12], B[(n / 12) % 12], C[(n / 144) % 10])
}

/// A request that may fail because the runner is gone: the status and the
/// JSON (or, for a stream, the raw text as a JSON string).
fn try_request(app: &App, method: &str, path: &str, body: Option<&str>) -> Option<(u16, Value)> {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(30)))
        .build()
        .into();
    let req =
        ureq::http::Request::builder().method(method).uri(format!("{}{path}", app.url)).header("authorization", AUTH);
    let resp = match body {
        Some(b) => agent.run(req.body(b.as_bytes().to_vec()).ok()?),
        None => agent.run(req.body(Vec::new()).ok()?),
    }
    .ok()?;
    let status = resp.status().as_u16();
    let mut text = String::new();
    resp.into_body().into_reader().read_to_string(&mut text).ok()?;
    Some((status, serde_json::from_str(&text).unwrap_or(Value::String(text))))
}

fn kill(b: Backend, rounds: usize) {
    let be = BackendEnv::new(b);
    let env = env_for(&be, None);
    let mut app = App::start("spin.toml", &env);
    let acked = Mutex::new(Acked::default());
    let mut restart_ms = Vec::new();
    for round in 0..rounds {
        let stop = AtomicBool::new(false);
        std::thread::scope(|s| {
            s.spawn(|| write_until(&app, &stop, &acked, round));
            std::thread::sleep(Duration::from_millis(700 + (round as u64 * 397) % 2300));
            // SIGKILL while writes are in flight; the writers see failures
            // and only count what was acknowledged before.
            let _ = std::process::Command::new("kill").arg("-9").arg(pid(&app).to_string()).status();
            stop.store(true, Ordering::SeqCst);
        });
        let started = Instant::now();
        app = app.crash_and_restart("spin.toml", &env);
        restart_ms.push(started.elapsed().as_millis());
    }
    let export = app.call_as(TEST_KEY, "GET", "/privacy/export", None, None).json();
    let ids = |table: &str, col: &str| -> std::collections::HashSet<String> {
        // The search index is the export's `search` section (D-M5).
        let rows = if table == "search_index" { &export["search"] } else { &export["tables"][table] };
        rows.as_array().into_iter().flatten().filter_map(|r| r[col].as_str().map(String::from)).collect()
    };
    let acked = acked.into_inner().unwrap();
    let n = name(b);
    let checks = [
        ("documents", &acked.documents, ids("search_index", "ref_id")),
        ("observations", &acked.observations, ids("rx_observations", "id")),
        ("chats (exchanges)", &acked.exchanges, ids("exchanges", "id")),
        ("tasks", &acked.tasks, ids("persistent_tasks", "id")),
    ];
    for (what, sent, stored) in checks {
        let lost = sent.iter().filter(|id| !stored.contains(*id)).count();
        row(
            "kill -9",
            n,
            &format!("{what}: acknowledged writes lost over {rounds} kills"),
            format!("{lost} of {}", sent.len()),
            lost == 0 && !sent.is_empty(),
        );
    }
    if b == Backend::Embedded {
        let c = rusqlite::Connection::open(app.state.path().join("sqlite_db.db")).unwrap();
        let check: String = c.query_row("PRAGMA integrity_check", [], |r| r.get(0)).unwrap();
        row("kill -9", n, "SQLite integrity_check", check.clone(), check == "ok");
    }
    restart_ms.sort();
    row(
        "kill -9",
        n,
        "restart to serving (median / max)",
        format!("{} / {} ms", restart_ms[restart_ms.len() / 2], restart_ms.last().unwrap()),
        true,
    );
}

fn pid(app: &App) -> u32 {
    app.pid()
}

// ----------------------------------------------------------------- faults

fn faults() {
    require_redis();
    let db = PgDatabase::create();
    for (what, upstream) in [("PostgreSQL", "127.0.0.1:5432"), ("Redis", REDIS_ADDR)] {
        let proxy = FaultProxy::start(upstream);
        let (pg, redis) = if what == "PostgreSQL" {
            (proxy.addr.clone(), REDIS_ADDR.to_string())
        } else {
            ("127.0.0.1:5432".to_string(), proxy.addr.clone())
        };
        let app = hosted_through(&db, &pg, &redis);
        for mode in [Mode::Refuse, Mode::BlackHole] {
            proxy.set(mode);
            let started = Instant::now();
            let h = app.get("/health");
            let health = started.elapsed();
            let started = Instant::now();
            let code = needs(&app, what);
            let req = started.elapsed();
            proxy.set(Mode::Pass);
            let started = Instant::now();
            let mut back = app.get("/health").status;
            while back != 200 && started.elapsed() < Duration::from_secs(30) {
                back = app.get("/health").status;
            }
            let recovered = started.elapsed();
            row(
                "faults",
                "hosted",
                &format!("{what} {mode:?}: /health"),
                format!("{} in {:.2} s", h.status, health.as_secs_f64()),
                h.status == 503 && health < Duration::from_secs(2),
            );
            row(
                "faults",
                "hosted",
                &format!("{what} {mode:?}: a request that needs it"),
                format!("{code} in {:.2} s", req.as_secs_f64()),
                code == "store-unavailable" && req < Duration::from_secs(5),
            );
            row(
                "faults",
                "hosted",
                &format!("{what} {mode:?}: restored, /health 200 after"),
                format!("{:.2} s", recovered.as_secs_f64()),
                back == 200 && recovered < Duration::from_secs(1),
            );
        }
    }
    // The model: black-holed, /health says degraded; a chat's stream ends
    // with the generation budget's recoverable error.
    let model = FakeModel::start(Script::default());
    model.route(marker::TRIAGE, triage_answer("RESPOND"));
    let proxy = FaultProxy::start(&model.addr);
    let be = BackendEnv::new(Backend::Embedded);
    let mut env = env_for(&be, Some(&model));
    for (k, v) in env.iter_mut() {
        if k == "SPIN_VARIABLE_LLM_URL" {
            *v = format!("http://{}/v1", proxy.addr);
        } else if k == "SPIN_VARIABLE_LLM_HOST" {
            *v = proxy.addr.clone();
        }
    }
    let app = App::start("spin.toml", &env);
    for mode in [Mode::Refuse, Mode::BlackHole] {
        proxy.set(mode);
        std::thread::sleep(Duration::from_millis(5_100));
        let started = Instant::now();
        let h = app.get("/health");
        let took = started.elapsed();
        let v = h.json();
        row(
            "faults",
            "embedded",
            &format!("model {mode:?}: /health"),
            format!("{} {} in {:.2} s", h.status, v["status"], took.as_secs_f64()),
            h.status == 200 && v["status"] == "degraded" && took < Duration::from_secs(2),
        );
        let started = Instant::now();
        let r = app.request(
            "POST",
            "/chat",
            &[("authorization", AUTH)],
            Some(json!({"text": "Explain how tides work in detail"}).to_string().as_bytes()),
        );
        let took = started.elapsed();
        let events = parse_sse(&r.body);
        let ended = events.iter().any(|(n, _)| n == "done");
        let message = events.iter().any(|(n, _)| n == "message");
        row(
            "faults",
            "embedded",
            &format!("model {mode:?}: a RESPOND chat"),
            format!(
                "{} with {} in {:.1} s",
                r.status,
                if message { "a labelled fallback reply" } else { "an error event" },
                took.as_secs_f64()
            ),
            r.status == 200 && ended && took < Duration::from_secs(40),
        );
        proxy.set(Mode::Pass);
    }
}

fn hosted_through(db: &PgDatabase, pg: &str, redis: &str) -> App {
    let (h, p) = pg.split_once(':').unwrap();
    let mut env = env_for(&BackendEnv::new(Backend::Embedded), None);
    env.push((
        "SPIN_VARIABLE_PG_URL".into(),
        format!("host={h} port={p} user=postgres dbname={} sslmode=disable", db.name),
    ));
    env.push(("SPIN_VARIABLE_PG_HOST".into(), pg.into()));
    env.push(("SPIN_VARIABLE_REDIS_URL".into(), format!("redis://{redis}")));
    env.push(("SPIN_VARIABLE_REDIS_HOST".into(), redis.into()));
    App::start("spin.toml", &env)
}

/// A request that needs `what`: the code it failed with, or `ok`.
fn needs(app: &App, what: &str) -> String {
    if what == "PostgreSQL" {
        let r = app.request("POST", "/documents", &[("authorization", AUTH)], Some(br#"{"text":"a note"}"#));
        return if r.status == 201 { "ok".into() } else { r.json()["error"]["code"].as_str().unwrap_or("?").into() };
    }
    let r =
        app.request("POST", "/chat", &[("authorization", AUTH)], Some(br#"{"text":"what did I say about the shed?"}"#));
    let events = parse_sse(&r.body);
    match events.iter().find(|(n, _)| n == "error") {
        Some((_, e)) => e["message"].as_str().unwrap_or("?").split(':').next().unwrap_or("?").to_string(),
        None => "ok".into(),
    }
}

// ------------------------------------------------------------------- race

fn race(b: Backend) {
    let be = BackendEnv::new(b);
    let app = App::start("spin.toml", &env_for(&be, None));
    let n = name(b);
    let post = |path: &str, body: &Value| {
        app.request(
            "POST",
            path,
            &[("authorization", AUTH), ("x-ingest-token", INGEST)],
            Some(body.to_string().as_bytes()),
        )
    };
    // Observations that make the fitness door drift, then 20 runs at once.
    let obs: Vec<Value> = (0..30)
        .map(|d| json!({"kind": "checkin", "energy": 1, "sleep": 2, "at": format!("2026-11-{:02}", 1 + d % 24)}))
        .collect();
    assert_eq!(post("/rx/fitness/observations", &json!({"observations": obs})).status, 201);
    let statuses = Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..20 {
            s.spawn(|| {
                let r = post("/rx/fitness", &json!({}));
                if ![200, 201, 409].contains(&r.status) {
                    eprintln!("a run answered {}: {}", r.status, r.body);
                }
                statuses.lock().unwrap().push((
                    r.status,
                    r.json()["rec_id"].as_str().map(String::from),
                    r.json()["path"].as_str().map(String::from),
                ));
            });
        }
    });
    let statuses = statuses.into_inner().unwrap();
    let bad: Vec<u16> = statuses.iter().map(|s| s.0).filter(|s| ![200, 201, 409].contains(s)).collect();
    let recs: std::collections::HashSet<_> = statuses.iter().filter_map(|s| s.1.clone()).collect();
    let listed = app.call_as(TEST_KEY, "GET", "/v1/rx/recs?limit=200", None, None).json();
    let open = listed["recs"].as_array().map_or(0, Vec::len);
    row(
        "race",
        n,
        "20 concurrent runs of one door: statuses other than 200/201/409",
        format!(
            "{} ({} new rec, {} no change, {} busy; {} rec listed)",
            bad.len(),
            statuses.iter().filter(|s| s.0 == 201).count(),
            statuses.iter().filter(|s| s.0 == 200).count(),
            statuses.iter().filter(|s| s.0 == 409).count(),
            open
        ),
        // One run makes the rec; the rest find it within the 48 h dedup.
        bad.is_empty() && recs.len() == 1 && open == 1,
    );
    // 20 batches of 50 documents at once: 1,000 distinct ids, all stored.
    let ids = Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for t in 0..20 {
            let ids = &ids;
            let post = &post;
            s.spawn(move || {
                let docs: Vec<Value> = (0..50)
                    .map(|i| json!({"text": format!("Batch {t} document {i} about pruning apple trees.")}))
                    .collect();
                let r = post("/documents", &json!({"documents": docs}));
                if r.status != 201 {
                    eprintln!("a batch answered {}: {}", r.status, r.body);
                }
                if r.status == 201 {
                    ids.lock()
                        .unwrap()
                        .extend(r.json()["ids"].as_array().unwrap().iter().map(|v| v.as_str().unwrap().to_string()));
                }
            });
        }
    });
    let ids = ids.into_inner().unwrap();
    let distinct: std::collections::HashSet<_> = ids.iter().collect();
    let export = app.call_as(TEST_KEY, "GET", "/privacy/export", None, None).json();
    let stored = export["search"].as_array().map_or(0, |r| r.iter().filter(|x| x["corpus"] == "document").count());
    row(
        "race",
        n,
        "20 concurrent batches of 50 documents",
        format!("{} acknowledged, {} distinct, {} stored", ids.len(), distinct.len(), stored),
        ids.len() == 1000 && distinct.len() == 1000 && stored == 1000,
    );
    // 10 ingests at once: every job ends done.
    let jobs = Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for t in 0..10 {
            let jobs = &jobs;
            let post = &post;
            s.spawn(move || {
                let r = post("/knowledge/ingest", &json!({"source_type": "meeting", "source_date": "2026-11-20", "text": format!("Ana: for project {t} we always review designs on paper before any code, because rework is expensive.")}));
                if r.status == 202 {
                    jobs.lock().unwrap().push(r.json()["job_id"].as_str().unwrap().to_string());
                }
            });
        }
    });
    let jobs = jobs.into_inner().unwrap();
    let done = jobs.iter().filter(|j| app.knowledge_job(j)["status"] == "done").count();
    row(
        "race",
        n,
        "10 concurrent ingests",
        format!("{} queued, {done} done", jobs.len()),
        jobs.len() == 10 && done == 10,
    );
    // 40 wrong sign-ins at once from one address: at most 10 are judged.
    let codes = Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..40 {
            s.spawn(|| {
                codes.lock().unwrap().push(app.request("POST", "/session", &[], Some(br#"{"api_key":"wrong"}"#)).status)
            });
        }
    });
    let codes = codes.into_inner().unwrap();
    let judged = codes.iter().filter(|&&c| c == 401).count();
    let throttled = codes.iter().filter(|&&c| c == 429).count();
    let right = app.request("POST", "/session", &[], Some(json!({"api_key": TEST_KEY}).to_string().as_bytes())).status;
    row(
        "race",
        n,
        "40 concurrent wrong sign-ins, then the right key",
        format!("{judged} × 401, {throttled} × 429, then {right}"),
        judged <= 10 && judged + throttled == 40 && right == 429,
    );
}

// ------------------------------------------------------------------ flood

fn flood(b: Backend) {
    let n = name(b);
    // 1,000 /events streams.
    let be = BackendEnv::new(b);
    let app = App::start("spin.toml", &env_for(&be, None));
    let a = addr(&app);
    let streams: Vec<TcpStream> = (0..1000)
        .filter_map(|_| TcpStream::connect(&a).ok())
        .map(|mut s| {
            let _ = s.write_all(
                format!(
                    "GET /events?wait=20 HTTP/1.1\r\nHost: x\r\nAuthorization: {AUTH}\r\nConnection: close\r\n\r\n"
                )
                .as_bytes(),
            );
            s
        })
        .collect();
    std::thread::sleep(Duration::from_secs(3));
    rest_answers(&app, n, "1,000 open /events streams");
    let (codes, _) = heads(streams);
    row(
        "flood",
        n,
        "1,000 streams: answered 200 / 503+Retry-After / other",
        format!("{} / {} / {}", codes.0, codes.1, codes.2),
        codes.2 == 0,
    );
    row("flood", n, "1,000 streams: runner resident memory", format!("{} MB", rss_mb(&app)), true);
    drop(app);
    // 1,000 chats against a model that answers in 30 s.
    let model = FakeModel::start(Script {
        reply: "A slow answer.".into(),
        delay: Duration::from_secs(30),
        ..Default::default()
    });
    model.route(marker::TRIAGE, triage_answer("RESPOND"));
    let be = BackendEnv::new(b);
    let app = App::start("spin.toml", &env_for(&be, Some(&model)));
    let a = addr(&app);
    let chats: Vec<TcpStream> = (0..1000)
        .filter_map(|i| {
            let mut s = TcpStream::connect(&a).ok()?;
            let body = json!({"text": format!("Explain how tides work, in detail, time {i}")}).to_string();
            let _ = s.write_all(&request_bytes(
                "POST",
                "/chat",
                &[("Content-Type", "application/json".into())],
                body.as_bytes(),
            ));
            Some(s)
        })
        .collect();
    std::thread::sleep(Duration::from_secs(3));
    rest_answers(&app, n, "1,000 chats waiting on a 30 s model");
    row("flood", n, "1,000 slow chats: runner resident memory", format!("{} MB", rss_mb(&app)), true);
    // Each chat ends its reply, a recoverable error event (its commit could
    // not be taken in time), a 503 with Retry-After, or unclearly (a fault).
    let mut ended = (0, 0, 0, 0);
    let mut why = BTreeMap::<String, usize>::new();
    for mut s in chats {
        s.set_read_timeout(Some(Duration::from_secs(120))).unwrap();
        let mut out = String::new();
        let _ = s.read_to_string(&mut out);
        let recoverable =
            out.contains("event: error") && out.contains("\"recoverable\":true") && out.contains("event: done");
        match out.split(' ').nth(1) {
            Some("200") if out.contains("event: message") && !out.contains("event: error") => ended.0 += 1,
            Some("200") if recoverable => {
                ended.1 += 1;
                let m = out.split("\"message\":\"").nth(1).unwrap_or("").split(':').next().unwrap_or("").to_string();
                *why.entry(m).or_default() += 1;
            }
            Some("503") if out.to_ascii_lowercase().contains("retry-after") => ended.2 += 1,
            _ => ended.3 += 1,
        }
    }
    row(
        "flood",
        n,
        "1,000 slow chats: replied / recoverable error / 503+Retry-After / unclear",
        format!("{} / {} {why:?} / {} / {}", ended.0, ended.1, ended.2, ended.3),
        ended.3 == 0 && ended.0 >= 500,
    );
    drop(app);
    // 1,000 half-open connections (a head that never ends): each is
    // answered 408 by the head deadline, and the app serves meanwhile.
    let be = BackendEnv::new(b);
    let app = App::start("spin.toml", &env_for(&be, None));
    let a = addr(&app);
    let started = Instant::now();
    let lorises: Vec<TcpStream> = (0..1000)
        .filter_map(|_| TcpStream::connect(&a).ok())
        .map(|mut s| {
            let _ = s.write_all(b"GET /health HTTP/1.1\r\nHost: x\r\nX-Slow: ");
            s
        })
        .collect();
    rest_answers(&app, n, "1,000 half-open connections");
    let mut timed_out = 0;
    for mut s in lorises {
        s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        let mut out = String::new();
        let _ = s.read_to_string(&mut out);
        if out.starts_with("HTTP/1.1 408 ") {
            timed_out += 1;
        }
    }
    row(
        "flood",
        n,
        "1,000 half-open connections answered 408",
        format!("{timed_out} within {:.0} s", started.elapsed().as_secs_f64()),
        timed_out == 1000,
    );
}

/// Counts of 200, 503 with Retry-After, and anything else, by status line.
fn heads(streams: Vec<TcpStream>) -> ((usize, usize, usize), ()) {
    let mut c = (0, 0, 0);
    for mut s in streams {
        s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
        let mut head = Vec::new();
        let mut byte = [0u8; 1];
        while !head.ends_with(b"\r\n\r\n") && s.read(&mut byte).unwrap_or(0) == 1 {
            head.push(byte[0]);
        }
        let head = String::from_utf8_lossy(&head).to_ascii_lowercase();
        match head.split(' ').nth(1) {
            Some("200") => c.0 += 1,
            Some("503") if head.contains("retry-after:") => c.1 += 1,
            _ => c.2 += 1,
        }
    }
    (c, ())
}

/// `/health`, a social chat and every tick, with their times.
fn rest_answers(app: &App, n: &str, under: &str) {
    let started = Instant::now();
    let h = app.get("/health");
    let health = started.elapsed();
    row(
        "flood",
        n,
        &format!("{under}: /health"),
        format!("{} in {:.0} ms", h.status, health.as_secs_f64() * 1e3),
        h.status == 200 && health < Duration::from_secs(2),
    );
    let started = Instant::now();
    let r = app.request("POST", "/chat", &[("authorization", AUTH)], Some(br#"{"text":"thanks!"}"#));
    let chat = started.elapsed();
    let social = parse_sse(&r.body).iter().any(|(n, v)| n == "message" && v["source"] == "social");
    row(
        "flood",
        n,
        &format!("{under}: a social /chat"),
        format!("{} in {:.0} ms", r.status, chat.as_secs_f64() * 1e3),
        r.status == 200 && social,
    );
    let mut worst = (String::new(), Duration::ZERO);
    let mut failed = Vec::new();
    for job in mneme_e2e::TICK_JOBS {
        let started = Instant::now();
        let r = app.request("POST", &format!("/tick/{job}"), &[("authorization", CRON_AUTH)], None);
        let took = started.elapsed();
        if took > worst.1 {
            worst = (job.to_string(), took);
        }
        if r.status != 200 {
            failed.push(format!("{job} {}", r.status));
        }
    }
    row(
        "flood",
        n,
        &format!("{under}: every tick"),
        format!("{} failed; slowest {} {:.0} ms", failed.len(), worst.0, worst.1.as_secs_f64() * 1e3),
        failed.is_empty(),
    );
}

fn rss_mb(app: &App) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{}/status", app.pid())).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
        .unwrap_or(0)
        / 1024
}

// ------------------------------------------------------------------- soak

/// A steady mix for `minutes`: chats (social and answered by a scripted
/// model), ingests, searches, observations and door runs, about ten
/// requests a second; resident memory every minute. After the first five
/// minutes (warm-up) it may grow by at most 5%.
fn soak(b: Backend, minutes: u64) {
    let model =
        FakeModel::start(Script { reply: "A short scripted answer for the soak.".into(), ..Default::default() });
    model.route(marker::TRIAGE, triage_answer("RESPOND"));
    // A draft the content rules accept: a counter-thesis, and no number
    // the signals do not hold (it names none).
    let draft = json!({"tldr": "Training load drives the drift.", "seeing": "Runs changed this week.",
        "recommendation": "Keep the runs short.", "why": "Load moved most.",
        "counter_thesis": {"argument": "The change may be noise.", "reject_if": "load settles alone", "accept_if": "load keeps moving"}});
    model.route(marker::RX_COMPOSE, Script { reply: draft.to_string(), ..Default::default() });
    let be = BackendEnv::new(b);
    let app = App::start("spin.toml", &env_for(&be, Some(&model)));
    let stop = AtomicBool::new(false);
    let errors = AtomicUsize::new(0);
    let requests = AtomicUsize::new(0);
    // What failed, by method, path and status, for the row.
    let kinds = std::sync::Mutex::new(std::collections::BTreeMap::<String, usize>::new());
    let mut samples = Vec::new();
    std::thread::scope(|s| {
        for worker in 0..4 {
            let (app, stop, errors, requests, kinds) = (&app, &stop, &errors, &requests, &kinds);
            s.spawn(move || {
                let mut i = 0u64;
                while !stop.load(Ordering::SeqCst) {
                    let (method, path, body) = match (worker, i % 5) {
                        (0, _) => ("POST", "/chat", json!({"text": if i.is_multiple_of(2) { "thanks!".to_string() } else { format!("Tell me about tide pools, part {i}") }})),
                        (1, 0) => ("POST", "/knowledge/ingest", json!({"source_type": "chat", "source_date": "2026-11-20", "text": format!("Ana: we always ship small changes, number {i}, because big ones break.")})),
                        (1, _) => ("GET", "/search?q=small+changes", Value::Null),
                        (2, 4) => ("POST", "/rx/fitness", json!({})),
                        (2, _) => ("POST", "/rx/fitness/observations", json!({"kind": "workout", "type": "run", "minutes": 20 + i % 30})),
                        _ => ("POST", "/documents", json!({"text": format!("Soak note {i} about mulching the beds.")})),
                    };
                    let body = (!body.is_null()).then(|| body.to_string());
                    let r = app.request(method, path, &[("authorization", AUTH), ("x-ingest-token", INGEST)], body.as_deref().map(str::as_bytes));
                    requests.fetch_add(1, Ordering::SeqCst);
                    if r.status >= 500 || (path == "/chat" && r.body.contains("event: error")) {
                        errors.fetch_add(1, Ordering::SeqCst);
                        let code = r.body.split("\"code\":\"").nth(1).and_then(|c| c.split('"').next()).unwrap_or("");
                        *kinds.lock().unwrap().entry(format!("{method} {path} {} {code}", r.status)).or_default() += 1;
                    }
                    i += 1;
                    std::thread::sleep(Duration::from_millis(400));
                }
            });
        }
        for _ in 0..=minutes {
            samples.push(rss_mb(&app));
            std::thread::sleep(Duration::from_secs(60));
        }
        stop.store(true, Ordering::SeqCst);
    });
    let n = name(b);
    let warm = samples[5.min(samples.len() - 1)];
    let end = *samples.last().unwrap();
    let growth = (end as f64 - warm as f64) / warm.max(1) as f64 * 100.0;
    row(
        "soak",
        n,
        &format!("{minutes} min, {} requests, errors", requests.load(Ordering::SeqCst)),
        format!("{} {:?}", errors.load(Ordering::SeqCst), kinds.lock().unwrap()),
        errors.load(Ordering::SeqCst) == 0,
    );
    row("soak", n, "resident MB each minute", samples.iter().map(u64::to_string).collect::<Vec<_>>().join(" "), true);
    row(
        "soak",
        n,
        "growth after warm-up (minute 5 to the end)",
        format!("{warm} → {end} MB, {growth:+.1}%"),
        growth <= 5.0,
    );
}
