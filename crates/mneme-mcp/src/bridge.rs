//! `mneme mcp`, the stdio bridge (#51 item 2), as rules with no I/O: what
//! HTTP headers one message from a stdio client is POSTed to `/mcp` with,
//! the revision a handshake settled on, and what the client reads when the
//! endpoint answers with an HTTP error instead of JSON-RPC.
//!
//! A stdio client sends no headers, so the bridge writes them: under
//! 2026-07-28 (the message's `_meta` names it) the version, `Mcp-Method`
//! and `Mcp-Name` from the body, as the endpoint checks them; under a
//! handshake revision, the version `initialize` settled on (none before
//! it, which the endpoint reads as the transport's default).

use serde_json::{Value, json};

use crate::{META_VERSION, code};

/// The headers for `message`, given the revision a handshake settled on.
pub fn headers(message: &Value, negotiated: Option<&str>) -> Vec<(&'static str, String)> {
    let mut out = vec![
        ("content-type", "application/json".to_string()),
        ("accept", "application/json, text/event-stream".to_string()),
    ];
    let method = message["method"].as_str();
    let params = &message["params"];
    if let Some(v) = params["_meta"][META_VERSION].as_str() {
        out.push(("mcp-protocol-version", v.to_string()));
        if let Some(m) = method {
            out.push(("mcp-method", encode(m)));
        }
        let name = match method {
            Some("tools/call" | "prompts/get") => params["name"].as_str(),
            Some("resources/read") => params["uri"].as_str(),
            _ => None,
        };
        if let Some(n) = name {
            out.push(("mcp-name", encode(n)));
        }
    } else if let Some(v) = negotiated.filter(|_| method != Some("initialize")) {
        out.push(("mcp-protocol-version", v.to_string()));
    }
    out
}

/// The revision an `initialize` response settled on, if `request` was one
/// and `response` answered it.
pub fn negotiated(request: &Value, response: &Value) -> Option<String> {
    (request["method"] == "initialize" && response["id"] == request["id"])
        .then(|| response["result"]["protocolVersion"].as_str().map(str::to_string))
        .flatten()
}

/// What the stdio client reads when `/mcp` answered `status` with a body
/// that is not a JSON-RPC message (the API's own 401, 403, 413 or 503
/// JSON error, or a proxy's page): a JSON-RPC error for the request, with
/// the API's code and message, so the client shows why.
pub fn http_failure(id: Value, status: u16, body: &[u8]) -> Value {
    let v: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    if v["jsonrpc"] == "2.0" && (v.get("result").is_some() || v.get("error").is_some()) {
        return v;
    }
    let (api_code, message) = match (v["error"]["code"].as_str(), v["error"]["message"].as_str()) {
        (Some(c), Some(m)) => (c.to_string(), m.to_string()),
        _ => (format!("http-{status}"), String::from_utf8_lossy(&body[..body.len().min(300)]).trim().to_string()),
    };
    let hint = match status {
        401 => " (check MNEME_API_KEY: it must be the app's `api_key`)",
        _ => "",
    };
    json!({"jsonrpc": "2.0", "id": id, "error": {
        "code": code::INTERNAL_ERROR,
        "message": format!("Mneme answered {status} {api_code}: {message}{hint}"),
        "data": {"status": status, "code": api_code},
    }})
}

/// A header value as the spec sends one: as it is when it is visible
/// ASCII, else `=?base64?…?=`.
pub fn encode(value: &str) -> String {
    if value.bytes().all(|b| (0x20..0x7f).contains(&b)) && !value.starts_with("=?") {
        return value.to_string();
    }
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::from("=?base64?");
    for chunk in value.as_bytes().chunks(3) {
        let n = chunk.iter().enumerate().fold(0u32, |n, (i, &b)| n | (b as u32) << (16 - 8 * i));
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out.push_str("?=");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header<'a>(h: &'a [(&'static str, String)], name: &str) -> Option<&'a str> {
        h.iter().find(|(k, _)| *k == name).map(|(_, v)| v.as_str())
    }

    #[test]
    fn a_modern_message_carries_its_method_and_name_as_headers() {
        let m = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
            "name": "search", "arguments": {}, "_meta": {META_VERSION: "2026-07-28"}}});
        let h = headers(&m, None);
        assert_eq!(header(&h, "mcp-protocol-version"), Some("2026-07-28"));
        assert_eq!(header(&h, "mcp-method"), Some("tools/call"));
        assert_eq!(header(&h, "mcp-name"), Some("search"));
        // What the endpoint reads back is what the body says.
        let incoming = crate::read(
            crate::Headers {
                protocol_version: header(&h, "mcp-protocol-version"),
                method: header(&h, "mcp-method"),
                name: header(&h, "mcp-name"),
            },
            json!({"jsonrpc": "2.0", "id": 1, "method": "resources/read", "params": {"uri": "mneme://rx/é",
                "_meta": {META_VERSION: "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}}})
            .to_string()
            .as_bytes(),
        );
        assert!(incoming.is_err(), "the method header says tools/call");
        let r = json!({"jsonrpc": "2.0", "id": 1, "method": "resources/read", "params": {"uri": "mneme://rx/é",
            "_meta": {META_VERSION: "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}}});
        let h = headers(&r, None);
        assert!(header(&h, "mcp-name").unwrap().starts_with("=?base64?"));
        let back = crate::read(
            crate::Headers {
                protocol_version: header(&h, "mcp-protocol-version"),
                method: header(&h, "mcp-method"),
                name: header(&h, "mcp-name"),
            },
            r.to_string().as_bytes(),
        );
        assert!(matches!(back, Ok(crate::Incoming::Request { era: crate::Era::Modern, .. })), "{back:?}");
    }

    #[test]
    fn a_handshake_session_names_its_settled_version_after_initialize() {
        let init =
            json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": "2025-11-25"}});
        assert_eq!(header(&headers(&init, None), "mcp-protocol-version"), None);
        let answer = json!({"jsonrpc": "2.0", "id": 0, "result": {"protocolVersion": "2025-06-18"}});
        assert_eq!(negotiated(&init, &answer).as_deref(), Some("2025-06-18"));
        let list = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"});
        assert_eq!(header(&headers(&list, Some("2025-06-18")), "mcp-protocol-version"), Some("2025-06-18"));
        assert_eq!(negotiated(&list, &answer), None);
    }

    #[test]
    fn an_http_error_reaches_the_client_as_its_requests_error() {
        let e = http_failure(
            json!(4),
            401,
            br#"{"error":{"code":"unauthorized","message":"the bearer token is not valid"}}"#,
        );
        assert_eq!(e["id"], 4);
        assert!(e["error"]["message"].as_str().unwrap().contains("MNEME_API_KEY"), "{e}");
        assert_eq!(e["error"]["data"]["code"], "unauthorized");
        let e = http_failure(json!("a"), 502, b"<html>Bad Gateway</html>");
        assert_eq!(e["error"]["data"]["code"], "http-502");
        let rpc = json!({"jsonrpc": "2.0", "id": 1, "error": {"code": -32601, "message": "no"}});
        assert_eq!(http_failure(json!(1), 404, rpc.to_string().as_bytes()), rpc);
    }

    #[test]
    fn encoding_round_trips() {
        for s in ["search", "mneme://rx/é", "日本", "=?x", "a\nb", "ab", "abcd"] {
            assert_eq!(crate::decode(&encode(s)), s);
        }
    }
}
