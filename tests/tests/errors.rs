//! Every error `openapi.yaml` documents is one the running app gives (#7).
//!
//! The description is read as data. Each documented (operation, status)
//! pair from 400 up gets a probe: a generic one where the status has a
//! general cause (no credentials, a cookie without the CSRF header, an
//! unknown id, a body over the runner's limit, a secret left unset, a
//! malformed body or query), and a scripted one for the statuses that need
//! state (a terminal rec, a held door, a signal source that is down). Each
//! probe must get exactly its status with an `{error: {code, message}}`
//! body, and the probes together must cover every documented pair.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read, Write};
use std::time::Duration;

use mneme_e2e::{App, BACKENDS, BackendEnv, CRON_AUTH, Resp, TEST_KEY, edited_manifest, test_env};
use serde_json::{Value, json};

const INGEST: &str = "test-ingest-token";
const RX_INGEST: &str = "test-rx-ingest-token";
/// A port nothing listens on: the signal source of a door that is down.
const CLOSED: &str = "127.0.0.1:1";

/// Who an operation lets in (its `security`).
#[derive(Clone, Copy, Debug, PartialEq)]
enum Sec {
    Open,
    Key,
    Ingest,
    RxIngest,
    Cron,
}

#[derive(Debug)]
struct Param {
    name: String,
    at: String,
    required: bool,
    schema: Value,
}

#[derive(Debug)]
struct Op {
    id: String,
    method: String,
    path: String,
    errors: Vec<u16>,
    body: bool,
    csrf: bool,
    sec: Sec,
    /// Whether the session cookie opens it (the default security, or one
    /// of its alternatives): then a change needs the CSRF header.
    session: bool,
    params: Vec<Param>,
    /// The methods of the operation's path.
    siblings: Vec<String>,
}

fn description() -> Value {
    mneme_e2e::openapi_description()
}

fn resolve<'a>(doc: &'a Value, v: &'a Value) -> &'a Value {
    match v["$ref"].as_str() {
        Some(r) => r.strip_prefix("#/").unwrap().split('/').fold(doc, |node, key| &node[key]),
        None => v,
    }
}

fn operations(doc: &Value) -> Vec<Op> {
    let mut ops = Vec::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        let methods: Vec<String> = item
            .as_object()
            .unwrap()
            .keys()
            .filter(|m| ["get", "post", "put", "delete", "patch"].contains(&m.as_str()))
            .map(|m| m.to_uppercase())
            .collect();
        for m in &methods {
            let op = &item[m.to_lowercase()];
            let params: Vec<Param> = op["parameters"]
                .as_array()
                .map(|ps| {
                    ps.iter()
                        .map(|p| resolve(doc, p))
                        .map(|p| Param {
                            name: p["name"].as_str().unwrap().into(),
                            at: p["in"].as_str().unwrap().into(),
                            required: p["required"] == true,
                            schema: resolve(doc, &p["schema"]).clone(),
                        })
                        .collect()
                })
                .unwrap_or_default();
            let sec = match op.get("security").and_then(Value::as_array) {
                None => Sec::Key,
                Some(s) if s.is_empty() => Sec::Open,
                Some(s) => match s[0].as_object().unwrap().keys().next().map(String::as_str) {
                    Some("cronToken") => Sec::Cron,
                    Some("ingestToken") => Sec::Ingest,
                    Some("rxIngestToken") => Sec::RxIngest,
                    _ => Sec::Key,
                },
            };
            let session = op
                .get("security")
                .and_then(Value::as_array)
                .is_none_or(|s| s.iter().any(|alt| alt.as_object().is_some_and(|o| o.contains_key("sessionCookie"))));
            let errors = op["responses"]
                .as_object()
                .unwrap()
                .keys()
                .filter_map(|s| s.parse::<u16>().ok())
                .filter(|s| *s >= 400)
                .collect();
            ops.push(Op {
                id: op["operationId"].as_str().unwrap().into(),
                method: m.clone(),
                path: path.clone(),
                errors,
                body: op.get("requestBody").is_some(),
                csrf: params.iter().any(|p| p.name == "X-Mneme-CSRF"),
                session,
                sec,
                params,
                siblings: methods.clone(),
            });
        }
    }
    ops
}

/// The path with every parameter an id that names nothing.
fn concrete(op: &Op) -> String {
    let mut path = op.path.clone();
    for p in op.params.iter().filter(|p| p.at == "path") {
        let pattern = p.schema["pattern"].as_str().unwrap_or("");
        let value = match p.name.as_str() {
            "asset" => "nope.js",
            _ if pattern.contains("KE-") => "KE-9999",
            _ => "nowhere",
        };
        path = path.replace(&format!("{{{}}}", p.name), value);
    }
    path
}

/// A query that satisfies the required parameters.
fn base_query(op: &Op) -> Vec<(String, String)> {
    op.params
        .iter()
        .filter(|p| p.at == "query" && p.required)
        .map(|p| {
            let v = p.schema["enum"].get(0).and_then(Value::as_str).unwrap_or("probe");
            (p.name.clone(), v.to_string())
        })
        .collect()
}

fn with_query(path: &str, q: &[(String, String)]) -> String {
    if q.is_empty() {
        return path.to_string();
    }
    let pairs: Vec<String> = q.iter().map(|(k, v)| format!("{k}={v}")).collect();
    format!("{path}?{}", pairs.join("&"))
}

/// A body each operation accepts as well formed, for probes whose point is
/// elsewhere (an unknown id).
fn valid_body(op: &Op) -> Value {
    match op.id.as_str() {
        "forgetMemory" => json!({"scope": "exchange", "id": "ex-nowhere"}),
        "recordObservations" => json!({"observations": [{"kind": "session", "minutes": 10}]}),
        "disposeRec" => json!({"disposition": "dismissed"}),
        "snoozeRec" => json!({"days": 1}),
        _ => json!({}),
    }
}

/// The headers that let `op` in on an app with every secret set.
fn credentials(sec: Sec) -> Vec<(&'static str, String)> {
    match sec {
        Sec::Open => vec![],
        Sec::Key => vec![("authorization", format!("Bearer {TEST_KEY}"))],
        Sec::Ingest => vec![("x-ingest-token", INGEST.into())],
        Sec::RxIngest => vec![("x-rx-ingest-token", RX_INGEST.into())],
        Sec::Cron => vec![("authorization", CRON_AUTH.into())],
    }
}

fn send(app: &App, method: &str, path: &str, headers: &[(&str, String)], body: Option<&[u8]>) -> Resp {
    let h: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
    app.request(method, path, &h, body)
}

/// A request declaring a body of `len` bytes and sending none: the runner
/// answers from the declared length alone.
fn declared_body(app: &App, method: &str, path: &str, headers: &[(&str, String)], len: usize) -> Resp {
    let addr = app.url.strip_prefix("http://").unwrap();
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let mut head =
        format!("{method} {path} HTTP/1.1\r\nhost: {addr}\r\ncontent-length: {len}\r\nconnection: close\r\n");
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    s.write_all(head.as_bytes()).unwrap();
    let mut raw = Vec::new();
    let _ = s.read_to_end(&mut raw);
    let text = String::from_utf8_lossy(&raw).to_string();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    let headers = head
        .lines()
        .skip(1)
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    Resp { status, headers, body: body.to_string() }
}

/// The session cookie of a signed-in browser.
fn session_cookie(app: &App) -> String {
    let body = json!({"api_key": TEST_KEY}).to_string();
    let r = app.request("POST", "/session", &[("content-type", "application/json")], Some(body.as_bytes()));
    assert_eq!(r.status, 204, "{}", r.body);
    r.header("set-cookie").unwrap().split(';').next().unwrap().to_string()
}

struct Probe<'a> {
    open: &'a App,
    closed: &'a App,
    cookie: String,
}

impl Probe<'_> {
    /// The generic probe for `status` on `op`, if the status has one.
    fn generic(&self, op: &Op, status: u16) -> Option<Resp> {
        let path = concrete(op);
        let query = base_query(op);
        let target = with_query(&path, &query);
        let creds = credentials(op.sec);
        let empty = op.body.then(|| b"{}".to_vec());
        let (m, open) = (op.method.as_str(), self.open);
        Some(match status {
            401 => match (op.sec, op.id.as_str()) {
                (Sec::Open, "getSession") => send(open, m, &target, &[("cookie", "mneme_session=1.00".into())], None),
                (Sec::Open, _) => {
                    let wrong = json!({"api_key": "not-the-key"}).to_string();
                    send(open, m, &target, &[], Some(wrong.as_bytes()))
                }
                _ => send(open, m, &target, &[], empty.as_deref()),
            },
            403 => {
                assert!(op.csrf, "`{}` documents a 403 but takes no X-Mneme-CSRF header", op.id);
                let headers = [("cookie", self.cookie.clone())];
                send(open, m, &target, &headers, empty.as_deref())
            }
            404 => {
                let body = op.body.then(|| valid_body(op).to_string().into_bytes());
                send(open, m, &target, &creds, body.as_deref())
            }
            405 => {
                let other = ["GET", "POST", "PUT", "DELETE", "PATCH"]
                    .into_iter()
                    .find(|x| !op.siblings.iter().any(|s| s == x))
                    .unwrap();
                send(open, other, &path, &creds, None)
            }
            413 => declared_body(open, m, &target, &creds, 64 << 20),
            503 if op.id == "getHealth" => return None,
            503 => {
                let body = if op.id == "createSession" {
                    Some(json!({"api_key": TEST_KEY}).to_string().into_bytes())
                } else {
                    empty.clone()
                };
                let mut creds = creds.clone();
                if op.id == "getSession" {
                    creds.push(("cookie", self.cookie.clone()));
                }
                send(self.closed, m, &target, &creds, body.as_deref())
            }
            400 if op.body => send(open, m, &target, &creds, Some(b"{\"not json")),
            400 => {
                let mut last = None;
                for q in bad_queries(op) {
                    let r = send(open, m, &with_query(&path, &q), &creds, None);
                    if r.status == 400 {
                        return Some(r);
                    }
                    last = Some(r);
                }
                return last;
            }
            _ => return None,
        })
    }
}

/// Queries that break one query parameter each (the others valid).
fn bad_queries(op: &Op) -> Vec<Vec<(String, String)>> {
    let base = base_query(op);
    let mut out = Vec::new();
    for p in op.params.iter().filter(|p| p.at == "query") {
        let others: Vec<(String, String)> = base.iter().filter(|(k, _)| *k != p.name).cloned().collect();
        if p.required {
            out.push(others.clone());
        }
        let bad = match p.schema["type"].as_str() {
            Some("integer") => Some("not-a-number".to_string()),
            Some("boolean") => Some("maybe".to_string()),
            Some("string") if p.schema.get("enum").is_some() => Some("not-a-value".to_string()),
            Some("string") if p.schema["pattern"] == "\\S" => Some("%20".to_string()),
            _ => None,
        };
        if let Some(v) = bad {
            let mut q = others;
            q.push((p.name.clone(), v));
            out.push(q);
        }
    }
    out
}

/// Writes a lock on `door` held by nobody's run until ten minutes from now.
fn hold_door(b: &BackendEnv, app: &App, door: &str) {
    let until =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as i64 + 600_000;
    let sql = "INSERT INTO rx_locks (door, claim, until_ms) VALUES ($1, 'held-by-the-test', $2) \
               ON CONFLICT (door) DO UPDATE SET claim = excluded.claim, until_ms = excluded.until_ms";
    match &b.pg {
        Some(pg) => {
            pg.client().execute(sql, &[&door, &until]).unwrap();
        }
        None => {
            let c = rusqlite::Connection::open(app.state.path().join("sqlite_db.db")).unwrap();
            c.busy_timeout(Duration::from_secs(30)).unwrap();
            c.execute(sql, rusqlite::params![door, until]).unwrap();
        }
    }
}

/// The probes that need state: `(operationId, status, response)`.
fn scripted(b: &BackendEnv, app: &App) -> Vec<(&'static str, u16, Resp)> {
    let call = |m: &str, p: &str, body: Option<Value>| app.call_as(TEST_KEY, m, p, body.as_ref(), None);
    let mut out = Vec::new();
    // Tasks: nearly the same goal twice; a cancelled task cancelled again.
    let task = call("POST", "/tasks", Some(json!({"goal": "Plan the spring garden beds"})));
    assert_eq!(task.status, 201, "{}", task.body);
    out.push(("createTask", 409, call("POST", "/tasks", Some(json!({"goal": "plan the spring garden beds!"})))));
    let id = task.json()["id"].as_str().unwrap().to_string();
    assert_eq!(call("DELETE", &format!("/tasks/{id}"), None).status, 200);
    out.push(("cancelTask", 409, call("DELETE", &format!("/tasks/{id}"), None)));
    // A restore's part that skips ahead (D-M6): the store has the tasks
    // above, so a first part would be refused for them too.
    let skip = json!({"format": "mneme-export", "version": 2, "export_id": "probe", "exported_at_ms": 1, "part": 3,
                      "last": false, "tables": {}});
    out.push(("restoreExport", 409, call("POST", "/privacy/import", Some(skip))));
    // Recs: one pushed without the counter-thesis's conditions (D-008);
    // a dismissed one is terminal.
    let push = |body: &Value| {
        app.request("POST", "/v1/rx/recs", &[("x-rx-ingest-token", RX_INGEST)], Some(body.to_string().as_bytes()))
    };
    let mut rec = json!({"door": "learning", "drift_score": 0.4, "confidence": 70, "tldr": "Study more",
                         "body_md": "## TL;DR\nStudy more.\n## Counter-thesis\nIt may pass.\n"});
    out.push(("ingestRec", 422, push(&rec)));
    rec["body_md"] = json!(
        "## TL;DR\nStudy more.\n## Counter-thesis\nIt may pass.\n- Reject if: recall holds.\n- Accept if: recall falls.\n"
    );
    let pushed = push(&rec);
    assert_eq!(pushed.status, 201, "{}", pushed.body);
    let rec_id = pushed.json()["id"].as_str().unwrap().to_string();
    let dismissed = json!({"disposition": "dismissed"});
    assert_eq!(call("POST", &format!("/v1/rx/recs/{rec_id}/disposition"), Some(dismissed.clone())).status, 200);
    out.push(("disposeRec", 409, call("POST", &format!("/v1/rx/recs/{rec_id}/disposition"), Some(dismissed))));
    out.push(("snoozeRec", 409, call("POST", &format!("/v1/rx/recs/{rec_id}/snooze"), Some(json!({"days": 1})))));
    // A door whose signal source is down, and a door another run holds
    // (the run waits for it, then gives up).
    let door = json!({"name": "probe", "title": "Probe", "components": [{"name": "a", "weight": 1.0}],
                      "signals": {"kind": "http", "url": format!("http://{CLOSED}/signals")},
                      "composite": {"kind": "flat"}, "store": {"kind": "local"}});
    let put = call("PUT", "/rx/doors/probe", Some(door));
    assert_eq!(put.status, 200, "{}", put.body);
    out.push(("runDoor", 502, call("POST", "/rx/probe", None)));
    hold_door(b, app, "learning");
    out.push(("runDoor", 409, call("POST", "/rx/learning", None)));
    // Tools: at most 32.
    let tool = |i: usize| json!({"description": format!("Tool number {i}."), "url": "http://127.0.0.1:8091/x"});
    for i in 0..32 {
        let r = call("PUT", &format!("/tools/t{i}"), Some(tool(i)));
        assert_eq!(r.status, 200, "{}", r.body);
    }
    out.push(("putTool", 409, call("PUT", "/tools/t32", Some(tool(32)))));
    // Sign-in: wrong keys until this address is throttled (the generic 401
    // probe counted one already).
    let wrong = json!({"api_key": "not-the-key"}).to_string();
    let sign_in = || app.request("POST", "/session", &[], Some(wrong.as_bytes()));
    let throttled =
        (0..mneme_http::throttle::LIMIT).map(|_| sign_in()).find(|r| r.status == 429).unwrap_or_else(sign_in);
    assert!(throttled.header("retry-after").is_some_and(|s| s.parse::<u64>().is_ok_and(|s| s > 0)), "{throttled:?}");
    out.push(("createSession", 429, throttled));
    out
}

fn start(b: &BackendEnv) -> App {
    let mut env = test_env(b, None);
    env.push(("SPIN_VARIABLE_INGEST_TOKEN".into(), INGEST.into()));
    env.push(("SPIN_VARIABLE_RX_INGEST_TOKEN".into(), RX_INGEST.into()));
    env.push(("SPIN_VARIABLE_RX_REMOTE_HOST".into(), CLOSED.into()));
    App::start("spin.toml", &env)
}

/// An app that does not run the startup migration (it would be refused:
/// the cron token is unset, or the store is down).
fn without_startup(vars: &[(String, String)]) -> (tempfile::TempDir, App) {
    let dir = tempfile::tempdir().unwrap();
    let manifest = edited_manifest(dir.path(), "spin.toml", |m| m.replace("at_startup = true", "at_startup = false"));
    let app = App::start(manifest.to_str().unwrap(), vars);
    (dir, app)
}

/// An app whose Postgres does not answer: its health is a 503.
fn unhealthy() -> (tempfile::TempDir, App) {
    without_startup(&[
        (
            "SPIN_VARIABLE_PG_URL".to_string(),
            "host=127.0.0.1 port=1 user=postgres dbname=x sslmode=disable".to_string(),
        ),
        ("SPIN_VARIABLE_PG_HOST".to_string(), CLOSED.to_string()),
    ])
}

fn check(op: &Op, status: u16, r: &Resp) {
    let what = format!("{} {} (`{}`) for {status}", op.method, op.path, op.id);
    assert_eq!(r.status, status, "{what}: got {} {}", r.status, r.body);
    let v: Value = serde_json::from_str(&r.body).unwrap_or_else(|e| panic!("{what}: not JSON ({e}): {}", r.body));
    assert!(v["error"]["code"].as_str().is_some_and(|c| !c.is_empty()), "{what}: {}", r.body);
    assert!(v["error"]["message"].as_str().is_some_and(|m| !m.is_empty()), "{what}: {}", r.body);
    assert!(r.header("content-type").is_some_and(|c| c.starts_with("application/json")), "{what}: {:?}", r.headers);
    // Sized, not chunked: a client reading to the end gets the JSON itself.
    assert_eq!(r.header("content-length"), Some(r.body.len().to_string().as_str()), "{what}: {:?}", r.headers);
    if status == 405 {
        assert!(r.header("allow").is_some_and(|a| !a.is_empty()), "{what}: a 405 names what is allowed");
    }
}

#[test]
fn every_documented_error_is_reachable() {
    let doc = description();
    let ops = operations(&doc);
    assert!(ops.len() >= 50, "{} operations", ops.len());
    let documented: BTreeSet<(String, u16)> =
        ops.iter().flat_map(|o| o.errors.iter().map(|s| (o.id.clone(), *s))).collect();
    for op in &ops {
        // A cookie without the CSRF header is refused on every operation
        // that changes state and takes the session, and only there.
        let changes = op.method != "GET" && op.session;
        assert_eq!(op.csrf, changes, "`{}`: the X-Mneme-CSRF parameter", op.id);
        assert_eq!(op.errors.contains(&403), changes, "`{}`: a documented 403", op.id);
    }
    let by_id: BTreeMap<&str, &Op> = ops.iter().map(|o| (o.id.as_str(), o)).collect();
    // A health check's 503 is a store that does not answer: Postgres
    // down. (An embedded store has no connection to lose.)
    let (_dir, sick) = unhealthy();
    check(by_id["getHealth"], 503, &sick.get("/health"));
    drop(sick);
    for backend in BACKENDS {
        let (b, shut) = (BackendEnv::new(backend), BackendEnv::new(backend));
        let open = start(&b);
        // Every secret unset: the API key, the cron and ingest tokens.
        let (_dir, closed) = without_startup(&shut.vars);
        let probe = Probe { open: &open, closed: &closed, cookie: session_cookie(&open) };
        let mut reached = BTreeSet::new();
        for op in &ops {
            for &status in &op.errors {
                if let Some(r) = probe.generic(op, status) {
                    check(op, status, &r);
                    reached.insert((op.id.clone(), status));
                }
            }
        }
        for (id, status, r) in scripted(&b, &open) {
            let op = by_id.get(id).unwrap_or_else(|| panic!("no operation `{id}` in openapi.yaml"));
            assert!(op.errors.contains(&status), "`{id}` answers {status}, which openapi.yaml does not document");
            check(op, status, &r);
            reached.insert((id.to_string(), status));
        }
        assert_eq!(open.get("/health").status, 200, "a working store is healthy");
        reached.insert(("getHealth".to_string(), 503));
        let missing: Vec<_> = documented.difference(&reached).collect();
        assert!(missing.is_empty(), "{backend:?}: documented but never reached: {missing:?}");
    }
}
