//! The HTTP conventions every Mneme entry component follows.
//!
//! Errors are JSON `{"error": {"code", "message"}}` so a caller can branch on
//! `code` and show `message`. Secrets are compared in constant time, and an
//! endpoint whose secret variable is unset answers 503 rather than opening
//! up. Everything here is pure and works on `http` crate types, so it is
//! tested natively and shared by every entry component.

pub mod session;
pub mod sse;

use http::{HeaderMap, Response, StatusCode, header};
use serde::Serialize;

/// The body of every error response.
#[derive(Debug, Serialize)]
struct ErrorBody<'a> {
    error: ErrorDetail<'a>,
}

#[derive(Debug, Serialize)]
struct ErrorDetail<'a> {
    code: &'a str,
    message: &'a str,
}

/// An error the caller can act on: an HTTP status, a stable code and a message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    pub status: StatusCode,
    pub code: String,
    pub message: String,
    /// The `Allow` header of a 405.
    pub allow: Option<String>,
}

impl ApiError {
    pub fn new(status: StatusCode, code: impl Into<String>, message: impl Into<String>) -> Self {
        Self { status, code: code.into(), message: message.into(), allow: None }
    }

    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, "not-found", message)
    }

    /// A 405 whose `Allow` header lists the methods named in `allowed`.
    pub fn method_not_allowed(allowed: &str) -> Self {
        const METHODS: [&str; 6] = ["GET", "HEAD", "POST", "PUT", "DELETE", "PATCH"];
        let methods: Vec<&str> =
            allowed.split(|c: char| !c.is_ascii_alphabetic()).filter(|w| METHODS.contains(w)).collect();
        let mut e = Self::new(StatusCode::METHOD_NOT_ALLOWED, "method-not-allowed", format!("use {allowed}"));
        e.allow = Some(methods.join(", "));
        e
    }

    /// Maps a stage failure (its `code` slug) to the status the caller sees.
    pub fn from_stage(code: &str, message: impl Into<String>) -> Self {
        let status = match code {
            "conflict" | "lease-lost" | "terminal" | "forced-decision" | "door-busy" => StatusCode::CONFLICT,
            "malformed-artifact" => StatusCode::UNPROCESSABLE_ENTITY,
            "upstream" | "model-draft-rejected" | "model-error" | "model-timeout" => StatusCode::BAD_GATEWAY,
            "invalid" | "bad-request" => StatusCode::BAD_REQUEST,
            "not-found" => StatusCode::NOT_FOUND,
            // A service the app depends on (a store, the model, the
            // embedding host) is down, or the deployment is missing a
            // setting, a permission or a migration: nothing the request
            // could change, and worth retrying once an operator has looked.
            "store-unavailable" | "model-unavailable" | "not-configured" | "embedding-failed" | "config"
            | "access-denied" | "migration" => StatusCode::SERVICE_UNAVAILABLE,
            // `internal`, `decode`, `bad-sql` and any code not listed: a
            // fault in Mneme itself.
            _ => StatusCode::INTERNAL_SERVER_ERROR,
        };
        Self::new(status, code, message)
    }

    pub fn into_response(self) -> Response<String> {
        let body =
            serde_json::to_string(&ErrorBody { error: ErrorDetail { code: &self.code, message: &self.message } })
                .expect("error body serialises");
        let mut r = json_body(self.status, body);
        if let Some(allow) = self.allow.as_deref().and_then(|a| http::HeaderValue::from_str(a).ok()) {
            r.headers_mut().insert(header::ALLOW, allow);
        }
        r
    }
}

/// A fresh id (a request, an exchange, a loop): 16 random bytes as 32
/// lowercase hex digits.
pub fn new_id() -> String {
    let mut b = [0u8; 16];
    getrandom::fill(&mut b).expect("the host provides randomness");
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// Parses a JSON request body into `T`, with the 400 a caller can act on:
/// `invalid-utf8`, `invalid-json` (with serde's line and column) or
/// `invalid` (the right JSON with a wrong or missing field).
pub fn parse_json_body<T: serde::de::DeserializeOwned>(body: &[u8]) -> Result<T, ApiError> {
    let text = std::str::from_utf8(body)
        .map_err(|e| ApiError::new(StatusCode::BAD_REQUEST, "invalid-utf8", format!("the body is not UTF-8: {e}")))?;
    if text.trim().is_empty() {
        return Err(ApiError::new(StatusCode::BAD_REQUEST, "invalid-json", "the body is empty; send a JSON object"));
    }
    serde_json::from_str(text).map_err(|e| {
        let code = if e.is_data() { "invalid" } else { "invalid-json" };
        ApiError::new(StatusCode::BAD_REQUEST, code, e.to_string())
    })
}

/// A JSON response with `status`.
pub fn json<T: Serialize>(status: StatusCode, value: &T) -> Response<String> {
    match serde_json::to_string(value) {
        Ok(body) => json_body(status, body),
        Err(e) => ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", e.to_string()).into_response(),
    }
}

fn json_body(status: StatusCode, body: String) -> Response<String> {
    Response::builder()
        .status(status)
        .header(header::CONTENT_TYPE, "application/json")
        .body(body)
        .expect("static response parts are valid")
}

/// Compares two secrets without an early exit on the first differing byte.
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    let mut diff = (a.len() ^ b.len()) as u8 | u8::from(a.len() != b.len());
    for i in 0..a.len().max(b.len()) {
        diff |= a.get(i).copied().unwrap_or(0) ^ b.get(i).copied().unwrap_or(0);
    }
    diff == 0
}

/// Checks `Authorization: Bearer <secret>` against the configured secret.
///
/// `configured` is the value of the secret's Spin variable: `None` (unset or
/// blank) answers 503 so a missing secret never leaves an endpoint open.
pub fn require_bearer(headers: &HeaderMap, configured: Option<&str>, variable: &str) -> Result<(), ApiError> {
    let expected = configured.filter(|s| !s.trim().is_empty()).ok_or_else(|| {
        ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "not-configured",
            format!("the Spin variable `{variable}` is not set, so this endpoint is closed"),
        )
    })?;
    let given = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .ok_or_else(|| {
            ApiError::new(StatusCode::UNAUTHORIZED, "unauthorized", "send `Authorization: Bearer <token>`")
        })?;
    if constant_time_eq(given.trim().as_bytes(), expected.as_bytes()) {
        Ok(())
    } else {
        Err(ApiError::new(StatusCode::UNAUTHORIZED, "unauthorized", "the bearer token is not valid"))
    }
}

/// Checks a secret sent in its own header (`X-Ingest-Token: <secret>`)
/// against the configured one, with the same rules as [`require_bearer`].
pub fn require_header_token(
    headers: &HeaderMap,
    name: &str,
    configured: Option<&str>,
    variable: &str,
) -> Result<(), ApiError> {
    let expected = configured.filter(|s| !s.trim().is_empty()).ok_or_else(|| {
        ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "not-configured",
            format!("the Spin variable `{variable}` is not set, so this endpoint is closed"),
        )
    })?;
    let given = headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .ok_or_else(|| ApiError::new(StatusCode::UNAUTHORIZED, "unauthorized", format!("send `{name}: <token>`")))?;
    if constant_time_eq(given.trim().as_bytes(), expected.as_bytes()) {
        Ok(())
    } else {
        Err(ApiError::new(StatusCode::UNAUTHORIZED, "unauthorized", format!("the `{name}` token is not valid")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_tokens_are_checked_like_bearers() {
        let mut h = HeaderMap::new();
        let status = |r: Result<(), ApiError>| r.map_err(|e| e.status).err();
        assert_eq!(
            status(require_header_token(&h, "x-ingest-token", None, "ingest_token")),
            Some(StatusCode::SERVICE_UNAVAILABLE)
        );
        assert_eq!(
            status(require_header_token(&h, "x-ingest-token", Some("s3cret"), "ingest_token")),
            Some(StatusCode::UNAUTHORIZED)
        );
        h.insert("x-ingest-token", "wrong".parse().unwrap());
        assert_eq!(
            status(require_header_token(&h, "x-ingest-token", Some("s3cret"), "ingest_token")),
            Some(StatusCode::UNAUTHORIZED)
        );
        h.insert("x-ingest-token", "s3cret".parse().unwrap());
        assert_eq!(status(require_header_token(&h, "x-ingest-token", Some("s3cret"), "ingest_token")), None);
    }

    fn headers(auth: Option<&str>) -> HeaderMap {
        let mut h = HeaderMap::new();
        if let Some(a) = auth {
            h.insert(header::AUTHORIZATION, a.parse().unwrap());
        }
        h
    }

    #[test]
    fn constant_time_eq_compares_content_and_length() {
        assert!(constant_time_eq(b"secret", b"secret"));
        assert!(!constant_time_eq(b"secret", b"secreT"));
        assert!(!constant_time_eq(b"secret", b"secret2"));
        assert!(!constant_time_eq(b"", b"x"));
        assert!(constant_time_eq(b"", b""));
    }

    #[test]
    fn bearer_rules_by_case() {
        let cases: &[(Option<&str>, Option<&str>, Option<u16>)] = &[
            (Some("Bearer k"), Some("k"), None),
            (Some("Bearer k"), None, Some(503)),
            (Some("Bearer k"), Some("  "), Some(503)),
            (None, Some("k"), Some(401)),
            (Some("Basic k"), Some("k"), Some(401)),
            (Some("Bearer wrong"), Some("k"), Some(401)),
        ];
        for (given, configured, want) in cases {
            let got = require_bearer(&headers(*given), *configured, "api_key").err().map(|e| e.status.as_u16());
            assert_eq!(got, *want, "given {given:?}, configured {configured:?}");
        }
    }

    #[test]
    fn error_body_has_code_and_message() {
        let r = ApiError::not_found("no route").into_response();
        assert_eq!(r.status(), 404);
        let v: serde_json::Value = serde_json::from_str(r.body()).unwrap();
        assert_eq!(v["error"]["code"], "not-found");
        assert_eq!(v["error"]["message"], "no route");
    }

    #[test]
    fn body_parsing_errors_by_case() {
        #[derive(serde::Deserialize, Debug)]
        #[allow(dead_code)]
        struct Chat {
            text: String,
        }
        let cases: &[(&[u8], Option<&str>)] = &[
            (br#"{"text":"hi"}"#, None),
            (b"\xff\xfe", Some("invalid-utf8")),
            (b"", Some("invalid-json")),
            (b"{not json", Some("invalid-json")),
            (br#"{"text": 5}"#, Some("invalid")),
            (br#"{}"#, Some("invalid")),
        ];
        for (body, want) in cases {
            let got = parse_json_body::<Chat>(body).err().map(|e| {
                assert_eq!(e.status, 400);
                e.code
            });
            assert_eq!(got.as_deref(), *want, "body {:?}", String::from_utf8_lossy(body));
        }
    }

    #[test]
    fn a_405_names_the_allowed_methods() {
        let r = ApiError::method_not_allowed("GET (POST takes the X-RX-Ingest-Token)").into_response();
        assert_eq!(r.status(), 405);
        assert_eq!(r.headers()[header::ALLOW], "GET, POST");
        assert_eq!(
            ApiError::method_not_allowed("GET, POST or DELETE").into_response().headers()[header::ALLOW],
            "GET, POST, DELETE"
        );
        assert!(ApiError::not_found("x").into_response().headers().get(header::ALLOW).is_none());
    }

    #[test]
    fn stage_codes_map_to_statuses() {
        assert_eq!(ApiError::from_stage("store-unavailable", "x").status, 503);
        assert_eq!(ApiError::from_stage("not-configured", "x").status, 503);
        assert_eq!(ApiError::from_stage("conflict", "x").status, 409);
        assert_eq!(ApiError::from_stage("bad-sql", "x").status, 500);
        for unavailable in ["embedding-failed", "config", "access-denied", "migration"] {
            assert_eq!(ApiError::from_stage(unavailable, "x").status, 503, "{unavailable}");
        }
        for upstream in ["model-error", "model-timeout", "upstream"] {
            assert_eq!(ApiError::from_stage(upstream, "x").status, 502, "{upstream}");
        }
        assert_eq!(ApiError::from_stage("decode", "x").status, 500);
    }
}

/// The header that sets a request's clock in tests.
pub const CLOCK_HEADER: &str = "x-mneme-clock";

/// A request's time in Unix ms: the `X-Mneme-Clock` header when the
/// deployment enables the test clock (the Spin variable `test_clock`, which
/// must stay false in production), else `system_ms`.
pub fn request_clock(headers: &HeaderMap, test_clock_enabled: bool, system_ms: u64) -> u64 {
    let injected = headers.get(CLOCK_HEADER).and_then(|v| v.to_str().ok()).and_then(|v| v.trim().parse::<u64>().ok());
    match injected {
        Some(t) if test_clock_enabled => t,
        _ => system_ms,
    }
}

#[cfg(test)]
mod clock_tests {
    use super::*;

    #[test]
    fn the_clock_header_counts_only_when_enabled() {
        let mut h = HeaderMap::new();
        assert_eq!(request_clock(&h, true, 7), 7);
        h.insert(CLOCK_HEADER, "1800000000000".parse().unwrap());
        assert_eq!(request_clock(&h, true, 7), 1_800_000_000_000);
        assert_eq!(request_clock(&h, false, 7), 7);
        h.insert(CLOCK_HEADER, "soon".parse().unwrap());
        assert_eq!(request_clock(&h, true, 7), 7);
    }
}
