//! The Model Context Protocol as `/mcp` speaks it (#51), with no I/O: the
//! entry hands over a request's headers and body and gets back what to do
//! with it, or the failure to answer with.
//!
//! Two revisions are served on one endpoint, chosen per request
//! (`docs/research/mcp-facts.md` §3): an `initialize` request, a request
//! naming a handshake revision in `MCP-Protocol-Version`, or one with no
//! version at all is served under the handshake revisions (2025-11-25 and
//! the two before it), statelessly: no session is minted or kept. A
//! request that carries the 2026-07-28 `_meta`, or names a version in the
//! header that is not a handshake one, is checked as 2026-07-28 asks: the
//! version and client capabilities in `_meta`, and the `MCP-Protocol-Version`,
//! `Mcp-Method` and `Mcp-Name` headers agreeing with the body.

use serde_json::{Map, Value, json};

pub mod bridge;
pub mod tools;

/// The stateless revision.
pub const MODERN: &str = "2026-07-28";
/// The revisions with the `initialize` handshake that are served, newest
/// first; the first is offered when a client asks for one not served.
pub const HANDSHAKE: [&str; 3] = ["2025-11-25", "2025-06-18", "2025-03-26"];
/// What a handshake request with no `MCP-Protocol-Version` is taken to be
/// (the transport spec's default).
pub const UNNAMED: &str = "2025-03-26";

/// JSON-RPC and MCP error codes.
pub mod code {
    pub const PARSE_ERROR: i64 = -32700;
    pub const INVALID_REQUEST: i64 = -32600;
    pub const METHOD_NOT_FOUND: i64 = -32601;
    pub const INVALID_PARAMS: i64 = -32602;
    pub const INTERNAL_ERROR: i64 = -32603;
    /// 2025-11-25's "resource not found" (2026-07-28 uses `INVALID_PARAMS`).
    pub const RESOURCE_NOT_FOUND: i64 = -32002;
    pub const HEADER_MISMATCH: i64 = -32020;
    pub const UNSUPPORTED_PROTOCOL_VERSION: i64 = -32022;
}

const META_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
const META_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";
const META_SERVER: &str = "io.modelcontextprotocol/serverInfo";

/// Which revision a request is served under.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Era {
    Modern,
    /// A handshake revision, by name.
    Handshake(&'static str),
}

impl Era {
    pub fn version(self) -> &'static str {
        match self {
            Era::Modern => MODERN,
            Era::Handshake(v) => v,
        }
    }

    /// The code for a resource that does not exist.
    pub fn not_found_code(self) -> i64 {
        match self {
            Era::Modern => code::INVALID_PARAMS,
            Era::Handshake(_) => code::RESOURCE_NOT_FOUND,
        }
    }
}

/// The MCP headers of a request, as sent (a `=?base64?…?=` value is
/// decoded here).
#[derive(Debug, Default, Clone, Copy)]
pub struct Headers<'a> {
    pub protocol_version: Option<&'a str>,
    pub method: Option<&'a str>,
    pub name: Option<&'a str>,
}

/// A message that passed the protocol's checks.
#[derive(Debug, Clone, PartialEq)]
pub enum Incoming {
    Request {
        id: Value,
        method: String,
        params: Value,
        era: Era,
    },
    /// A notification or a response: answered 202 with no body.
    Accepted,
}

/// A request refused before any tool ran: its HTTP status and JSON-RPC
/// error.
#[derive(Debug, Clone, PartialEq)]
pub struct Failure {
    pub status: u16,
    pub id: Value,
    pub code: i64,
    pub message: String,
    pub data: Option<Value>,
}

impl Failure {
    pub fn new(id: Value, code: i64, message: impl Into<String>) -> Self {
        Failure { status: status_of(code), id, code, message: message.into(), data: None }
    }

    fn with(mut self, data: Value) -> Self {
        self.data = Some(data);
        self
    }

    /// The JSON-RPC error response.
    pub fn body(&self) -> Value {
        let mut error = json!({"code": self.code, "message": self.message});
        if let Some(d) = &self.data {
            error["data"] = d.clone();
        }
        json!({"jsonrpc": "2.0", "id": self.id, "error": error})
    }
}

/// The HTTP status an error is sent with: the request's own faults 400,
/// an unknown method 404 (its JSON body tells it from a missing endpoint),
/// anything else 200 with the error in the body.
pub fn status_of(code: i64) -> u16 {
    match code {
        code::PARSE_ERROR
        | code::INVALID_REQUEST
        | code::INVALID_PARAMS
        | code::HEADER_MISMATCH
        | code::UNSUPPORTED_PROTOCOL_VERSION => 400,
        code::METHOD_NOT_FOUND => 404,
        _ => 200,
    }
}

/// Every version served, for an unsupported-version error.
pub fn supported() -> Vec<&'static str> {
    std::iter::once(MODERN).chain(HANDSHAKE).collect()
}

/// Reads one POSTed message and decides its revision.
pub fn read(headers: Headers<'_>, body: &[u8]) -> Result<Incoming, Failure> {
    let v: Value = serde_json::from_slice(body)
        .map_err(|e| Failure::new(Value::Null, code::PARSE_ERROR, format!("the body is not JSON: {e}")))?;
    let Some(o) = v.as_object() else {
        let what = if v.is_array() { "a batch (one message a request)" } else { "not a JSON-RPC object" };
        return Err(Failure::new(Value::Null, code::INVALID_REQUEST, format!("the body is {what}")));
    };
    let id = o.get("id").cloned();
    if o.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return Err(Failure::new(id.unwrap_or(Value::Null), code::INVALID_REQUEST, "`jsonrpc` must be \"2.0\""));
    }
    let Some(method) = o.get("method").and_then(Value::as_str) else {
        if id.is_some() && (o.contains_key("result") || o.contains_key("error")) {
            // A client's response: this server asks nothing of clients.
            return Ok(Incoming::Accepted);
        }
        return Err(Failure::new(id.unwrap_or(Value::Null), code::INVALID_REQUEST, "`method` must be a string"));
    };
    let Some(id) = id else { return Ok(Incoming::Accepted) };
    if !(id.is_string() || id.is_i64() || id.is_u64()) {
        return Err(Failure::new(Value::Null, code::INVALID_REQUEST, "`id` must be a string or an integer"));
    }
    let params = match o.get("params") {
        None | Some(Value::Null) => Value::Object(Map::new()),
        Some(p @ Value::Object(_)) => p.clone(),
        Some(_) => return Err(Failure::new(id, code::INVALID_PARAMS, "`params` must be an object")),
    };
    let header_version = headers.protocol_version.map(decode);
    let meta_version = params["_meta"][META_VERSION].as_str();
    let era = if method == "initialize" {
        let asked = params["protocolVersion"].as_str().unwrap_or_default();
        Era::Handshake(HANDSHAKE.iter().copied().find(|v| *v == asked).unwrap_or(HANDSHAKE[0]))
    } else {
        let handshake = header_version.as_deref().and_then(|h| HANDSHAKE.iter().copied().find(|v| *v == h));
        match (meta_version, header_version.as_deref(), handshake) {
            (None, None, _) => Era::Handshake(UNNAMED),
            (None, Some(_), Some(v)) => Era::Handshake(v),
            (None, Some(h), None) if h != MODERN => return Err(unsupported(id, h)),
            _ => {
                modern(&id, method, &params, headers, meta_version, header_version.as_deref())?;
                Era::Modern
            }
        }
    };
    Ok(Incoming::Request { id, method: method.to_string(), params, era })
}

fn unsupported(id: Value, requested: &str) -> Failure {
    Failure::new(id, code::UNSUPPORTED_PROTOCOL_VERSION, "Unsupported protocol version")
        .with(json!({"supported": supported(), "requested": requested}))
}

/// 2026-07-28's checks: the version and capabilities in `_meta`, and the
/// headers naming what the body says.
fn modern(
    id: &Value,
    method: &str,
    params: &Value,
    headers: Headers<'_>,
    meta_version: Option<&str>,
    header_version: Option<&str>,
) -> Result<(), Failure> {
    let missing = |what: &str| Failure::new(id.clone(), code::INVALID_PARAMS, format!("`params._meta` lacks `{what}`"));
    let version = meta_version.ok_or_else(|| missing(META_VERSION))?;
    if version != MODERN {
        return Err(unsupported(id.clone(), version));
    }
    if !params["_meta"][META_CAPABILITIES].is_object() {
        return Err(missing(META_CAPABILITIES));
    }
    let mismatch = |header: &str, want: &str, got: Option<&str>| {
        let got = got.map_or_else(|| "none".to_string(), |g| format!("`{g}`"));
        Failure::new(id.clone(), code::HEADER_MISMATCH, format!("the `{header}` header must be `{want}`, not {got}"))
    };
    if header_version != Some(version) {
        return Err(mismatch("MCP-Protocol-Version", version, header_version));
    }
    let sent_method = headers.method.map(decode);
    if sent_method.as_deref() != Some(method) {
        return Err(mismatch("Mcp-Method", method, sent_method.as_deref()));
    }
    let named = match method {
        "tools/call" | "prompts/get" => params["name"].as_str(),
        "resources/read" => params["uri"].as_str(),
        _ => None,
    };
    if let Some(want) = named {
        let sent = headers.name.map(decode);
        if sent.as_deref() != Some(want) {
            return Err(mismatch("Mcp-Name", want, sent.as_deref()));
        }
    }
    Ok(())
}

/// A header value as sent, or the text a `=?base64?…?=` value encodes (an
/// undecodable one is kept as it is, and so will not match).
pub fn decode(value: &str) -> String {
    value
        .strip_prefix("=?base64?")
        .and_then(|r| r.strip_suffix("?="))
        .and_then(base64)
        .and_then(|b| String::from_utf8(b).ok())
        .unwrap_or_else(|| value.to_string())
}

/// Standard base64, padded or not.
fn base64(s: &str) -> Option<Vec<u8>> {
    let value = |c: u8| -> Option<u32> {
        Some(match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        } as u32)
    };
    let s = s.trim_end_matches('=').as_bytes();
    let mut out = Vec::with_capacity(s.len() * 3 / 4);
    for chunk in s.chunks(4) {
        if chunk.len() == 1 {
            return None;
        }
        let mut n = 0u32;
        for (i, &c) in chunk.iter().enumerate() {
            n |= value(c)? << (18 - 6 * i);
        }
        out.extend_from_slice(&n.to_be_bytes()[1..chunk.len()]);
    }
    Some(out)
}

/// The server's name and version, as results carry them.
#[derive(Debug, Clone, Copy)]
pub struct Server<'a> {
    pub name: &'a str,
    pub version: &'a str,
    /// Read by a model choosing among servers: what this one is for.
    pub instructions: &'a str,
}

/// What a result may be cached for: lists and reads of the principal's own
/// data are private, and change as they write.
const CACHED: [&str; 6] =
    ["server/discover", "tools/list", "resources/list", "resources/templates/list", "resources/read", "prompts/list"];

/// A successful response to `method` under `era`: 2026-07-28 adds the
/// result type, the server's name and, where the method is cacheable, how
/// long for (`ttl_ms`) and for whom.
pub fn respond(era: Era, id: Value, method: &str, mut result: Value, server: Server<'_>, ttl_ms: u64) -> Value {
    if era == Era::Modern
        && let Some(o) = result.as_object_mut()
    {
        o.insert("resultType".into(), json!("complete"));
        let meta = o.entry("_meta").or_insert_with(|| json!({}));
        meta[META_SERVER] = json!({"name": server.name, "version": server.version});
        if CACHED.contains(&method) {
            o.insert("ttlMs".into(), json!(ttl_ms));
            o.insert("cacheScope".into(), json!("private"));
        }
    }
    json!({"jsonrpc": "2.0", "id": id, "result": result})
}

/// What this server offers: tools and resources, with no change
/// notifications and no subscriptions.
fn capabilities() -> Value {
    json!({"tools": {"listChanged": false}, "resources": {}})
}

/// `initialize`'s result under `version`.
pub fn initialize(version: &str, server: Server<'_>) -> Value {
    json!({
        "protocolVersion": version,
        "capabilities": capabilities(),
        "serverInfo": {"name": server.name, "version": server.version},
        "instructions": server.instructions,
    })
}

/// `server/discover`'s result (2026-07-28).
pub fn discover(server: Server<'_>) -> Value {
    json!({"supportedVersions": [MODERN], "capabilities": capabilities(), "instructions": server.instructions})
}

/// Whether `method` exists under `era` (the lifecycle methods differ).
pub fn known(era: Era, method: &str) -> bool {
    let common =
        ["tools/list", "tools/call", "resources/list", "resources/templates/list", "resources/read"].contains(&method);
    common
        || match era {
            Era::Modern => method == "server/discover",
            Era::Handshake(_) => method == "initialize" || method == "ping",
        }
}

/// Whether a request's `Origin` may reach `/mcp` (the spec's defence
/// against DNS rebinding): none (not a browser), a loopback one, or one
/// listed in `allowed` (exact scheme://host[:port], as browsers send it).
pub fn origin_allowed(origin: Option<&str>, allowed: &[&str]) -> bool {
    let Some(origin) = origin.map(str::trim) else { return true };
    if allowed.iter().any(|a| a.trim().trim_end_matches('/').eq_ignore_ascii_case(origin)) {
        return true;
    }
    let Some(rest) = origin.strip_prefix("http://").or_else(|| origin.strip_prefix("https://")) else {
        return false;
    };
    let host = if let Some(v6) = rest.strip_prefix('[') {
        v6.split(']').next().map(|h| format!("[{h}]")).unwrap_or_default()
    } else {
        rest.split(':').next().unwrap_or_default().to_ascii_lowercase()
    };
    let port_ok = rest.rsplit_once(':').is_none_or(|(_, p)| p.parse::<u16>().is_ok()) || rest.ends_with(']');
    port_ok && matches!(host.as_str(), "localhost" | "127.0.0.1" | "[::1]")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(method: &str, params: Value) -> Vec<u8> {
        json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).to_string().into_bytes()
    }

    fn modern_params(extra: Value) -> Value {
        let mut p = json!({"_meta": {META_VERSION: MODERN, META_CAPABILITIES: {}}});
        for (k, v) in extra.as_object().unwrap() {
            p[k] = v.clone();
        }
        p
    }

    fn headers<'a>(method: &'a str, name: Option<&'a str>) -> Headers<'a> {
        Headers { protocol_version: Some(MODERN), method: Some(method), name }
    }

    #[test]
    fn initialize_negotiates_a_handshake_revision() {
        let era = |asked: &str| match read(Headers::default(), &body("initialize", json!({"protocolVersion": asked}))) {
            Ok(Incoming::Request { era, .. }) => era,
            other => panic!("{other:?}"),
        };
        assert_eq!(era("2025-11-25"), Era::Handshake("2025-11-25"));
        assert_eq!(era("2025-06-18"), Era::Handshake("2025-06-18"));
        // One not served gets the newest handshake revision offered back.
        assert_eq!(era("2024-11-05"), Era::Handshake("2025-11-25"));
        assert_eq!(era(MODERN), Era::Handshake("2025-11-25"));
        let r = initialize("2025-11-25", Server { name: "mneme", version: "0.1.0", instructions: "memory" });
        assert_eq!(r["protocolVersion"], "2025-11-25");
        assert_eq!(r["serverInfo"]["name"], "mneme");
        assert!(r["capabilities"]["tools"].is_object() && r.get("resultType").is_none());
    }

    #[test]
    fn handshake_requests_are_served_by_their_header_or_as_the_unnamed_default() {
        let era = |h: Option<&str>| match read(
            Headers { protocol_version: h, ..Default::default() },
            &body("tools/list", json!({})),
        ) {
            Ok(Incoming::Request { era, .. }) => era,
            other => panic!("{other:?}"),
        };
        assert_eq!(era(Some("2025-11-25")), Era::Handshake("2025-11-25"));
        assert_eq!(era(None), Era::Handshake(UNNAMED));
        let f = read(
            Headers { protocol_version: Some("1999-01-01"), ..Default::default() },
            &body("tools/list", json!({})),
        )
        .unwrap_err();
        assert_eq!((f.status, f.code), (400, code::UNSUPPORTED_PROTOCOL_VERSION));
        assert_eq!(f.body()["error"]["data"]["requested"], "1999-01-01");
        assert_eq!(f.body()["error"]["data"]["supported"][0], MODERN);
    }

    #[test]
    fn a_modern_request_passes_only_with_its_meta_and_agreeing_headers() {
        let call = modern_params(json!({"name": "search", "arguments": {"query": "x"}}));
        let ok = read(headers("tools/call", Some("search")), &body("tools/call", call.clone()));
        assert!(matches!(ok, Ok(Incoming::Request { era: Era::Modern, .. })), "{ok:?}");
        let fail = |h: Headers<'_>, p: Value| read(h, &body("tools/call", p)).unwrap_err();
        // The name, base64-encoded as a non-ASCII value would be, still matches.
        assert!(read(headers("tools/call", Some("=?base64?c2VhcmNo?=")), &body("tools/call", call.clone())).is_ok());
        let f = fail(headers("tools/call", Some("forget")), call.clone());
        assert_eq!((f.status, f.code), (400, code::HEADER_MISMATCH));
        assert!(f.message.contains("Mcp-Name"), "{}", f.message);
        let f = fail(headers("tools/list", Some("search")), call.clone());
        assert!(f.message.contains("Mcp-Method"), "{}", f.message);
        let f = fail(Headers { protocol_version: None, ..headers("tools/call", Some("search")) }, call.clone());
        assert_eq!(f.code, code::HEADER_MISMATCH);
        let mut no_caps = call.clone();
        no_caps["_meta"].as_object_mut().unwrap().remove(META_CAPABILITIES);
        let f = fail(headers("tools/call", Some("search")), no_caps);
        assert_eq!((f.status, f.code), (400, code::INVALID_PARAMS));
        // The 2026 header without the 2026 `_meta` is a malformed request.
        let f = fail(headers("tools/call", Some("search")), json!({"name": "search"}));
        assert_eq!(f.code, code::INVALID_PARAMS);
        let mut old = call;
        old["_meta"][META_VERSION] = json!("2027-01-01");
        let f = fail(Headers { protocol_version: Some("2027-01-01"), ..headers("tools/call", Some("search")) }, old);
        assert_eq!(f.code, code::UNSUPPORTED_PROTOCOL_VERSION);
    }

    #[test]
    fn malformed_messages_get_their_json_rpc_errors_and_notifications_are_accepted() {
        let f = read(Headers::default(), b"{not json").unwrap_err();
        assert_eq!((f.status, f.code, f.id.clone()), (400, code::PARSE_ERROR, Value::Null));
        let f = read(Headers::default(), b"[]").unwrap_err();
        assert!(f.message.contains("batch"));
        let f = read(Headers::default(), br#"{"jsonrpc":"1.0","id":1,"method":"ping"}"#).unwrap_err();
        assert_eq!((f.code, f.id.clone()), (code::INVALID_REQUEST, json!(1)));
        let f = read(Headers::default(), br#"{"jsonrpc":"2.0","id":null,"method":"ping"}"#).unwrap_err();
        assert_eq!(f.code, code::INVALID_REQUEST);
        let f = read(Headers::default(), br#"{"jsonrpc":"2.0","id":"a","method":"ping","params":[1]}"#).unwrap_err();
        assert_eq!((f.code, f.status), (code::INVALID_PARAMS, 400));
        let n = read(Headers::default(), br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
        assert_eq!(n, Ok(Incoming::Accepted));
        let r = read(Headers::default(), br#"{"jsonrpc":"2.0","id":3,"result":{}}"#);
        assert_eq!(r, Ok(Incoming::Accepted));
        assert_eq!(status_of(code::METHOD_NOT_FOUND), 404);
        assert_eq!(status_of(code::INTERNAL_ERROR), 200);
    }

    #[test]
    fn modern_results_carry_their_type_server_and_cache_fields() {
        let s = Server { name: "mneme", version: "0.1.0", instructions: "" };
        let r = respond(Era::Modern, json!(7), "tools/list", json!({"tools": []}), s, 60_000);
        assert_eq!(r["result"]["resultType"], "complete");
        assert_eq!(r["result"]["_meta"][META_SERVER]["name"], "mneme");
        assert_eq!(
            (r["result"]["ttlMs"].as_u64(), r["result"]["cacheScope"].as_str()),
            (Some(60_000), Some("private"))
        );
        let call = respond(Era::Modern, json!(8), "tools/call", json!({"content": []}), s, 0);
        assert!(call["result"].get("ttlMs").is_none());
        let old = respond(Era::Handshake("2025-11-25"), json!(9), "tools/list", json!({"tools": []}), s, 60_000);
        assert!(old["result"].get("resultType").is_none() && old["result"].get("ttlMs").is_none());
        assert_eq!(Era::Modern.not_found_code(), code::INVALID_PARAMS);
        assert_eq!(Era::Handshake("2025-11-25").not_found_code(), code::RESOURCE_NOT_FOUND);
        assert!(known(Era::Modern, "server/discover") && !known(Era::Modern, "initialize"));
        assert!(known(Era::Handshake("2025-11-25"), "ping") && !known(Era::Handshake("2025-11-25"), "server/discover"));
        assert_eq!(discover(s)["supportedVersions"], json!([MODERN]));
    }

    #[test]
    fn only_loopback_or_listed_origins_pass() {
        assert!(origin_allowed(None, &[]));
        for ok in ["http://localhost:3000", "http://127.0.0.1", "https://[::1]:8443", "http://LOCALHOST:1"] {
            assert!(origin_allowed(Some(ok), &[]), "{ok}");
        }
        for bad in ["http://evil.example", "http://localhost.evil.example", "http://127.0.0.1.nip.io:3000", "null", ""]
        {
            assert!(!origin_allowed(Some(bad), &[]), "{bad}");
        }
        assert!(origin_allowed(Some("https://mneme.example.org"), &["https://mneme.example.org/"]));
    }

    #[test]
    fn base64_header_values_decode() {
        assert_eq!(decode("=?base64?w6ljcml0dXJl?="), "écriture");
        assert_eq!(decode("=?base64?not*base64?="), "=?base64?not*base64?=");
        assert_eq!(decode("plain"), "plain");
        assert_eq!(base64("aGk"), Some(b"hi".to_vec()));
        assert_eq!(base64("aGk="), Some(b"hi".to_vec()));
    }
}
