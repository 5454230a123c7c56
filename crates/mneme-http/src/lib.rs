//! The HTTP conventions every Mneme entry component follows.
//!
//! Errors are JSON `{"error": {"code", "message"}}` so a caller can branch on
//! `code` and show `message`. Secrets are compared in constant time, and an
//! endpoint whose secret variable is unset answers 503 rather than opening
//! up. Everything here is pure and works on `http` crate types, so it is
//! tested natively and shared by every entry component.

pub mod health;
pub mod session;
pub mod sse;
pub mod throttle;

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
    /// The `Retry-After` header (seconds) of a 429 or 503.
    pub retry_after: Option<u64>,
}

impl ApiError {
    pub fn new(status: StatusCode, code: impl Into<String>, message: impl Into<String>) -> Self {
        Self { status, code: code.into(), message: message.into(), allow: None, retry_after: None }
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
            "upstream" | "model-error" | "model-timeout" => StatusCode::BAD_GATEWAY,
            "invalid" | "bad-request" => StatusCode::BAD_REQUEST,
            "not-found" => StatusCode::NOT_FOUND,
            // A service the app depends on (a store, the model, the
            // embedding host) is down, or the deployment is missing a
            // setting, a permission or a migration: nothing the request
            // could change, and worth retrying once an operator has looked.
            "store-unavailable" | "store-busy" | "model-unavailable" | "not-configured" | "misconfigured"
            | "embedding-failed" | "config" | "access-denied" | "migration" => StatusCode::SERVICE_UNAVAILABLE,
            // `internal`, `decode`, `bad-sql` and any code not listed: a
            // fault in Mneme itself.
            _ => StatusCode::INTERNAL_SERVER_ERROR,
        };
        let mut e = Self::new(status, code, message);
        // Another writer held the store: free again in a moment (D-F38).
        if code == "store-busy" {
            e.retry_after = Some(1);
        }
        e
    }

    pub fn into_response(self) -> Response<String> {
        let body =
            serde_json::to_string(&ErrorBody { error: ErrorDetail { code: &self.code, message: &self.message } })
                .expect("error body serialises");
        let mut r = json_body(self.status, body);
        if let Some(allow) = self.allow.as_deref().and_then(|a| http::HeaderValue::from_str(a).ok()) {
            r.headers_mut().insert(header::ALLOW, allow);
        }
        if let Some(s) = self.retry_after {
            r.headers_mut().insert(header::RETRY_AFTER, s.into());
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

/// The largest request body the app takes (openapi.yaml): bodies over it are
/// refused with 413 `payload-too-large` by the app itself, whoever runs it
/// (`spin up` has no body cap of its own), in the words `mneme up` uses.
pub const BODY_LIMIT: usize = 4 << 20;

/// What a request body of `seen` bytes so far (or declared by its
/// `Content-Length`) gets, for an endpoint that takes at most `max` bytes:
/// nothing yet, the 413 over [`BODY_LIMIT`], or the endpoint's own 400
/// `body-too-large` once the whole body is known to be over `max`.
pub fn body_verdict(seen: u64, max: usize, complete: bool) -> Result<(), ApiError> {
    if seen > BODY_LIMIT as u64 {
        return Err(ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "payload-too-large",
            format!("the request body is over the {BODY_LIMIT}-byte limit"),
        ));
    }
    if complete && seen > max as u64 {
        return Err(ApiError::new(StatusCode::BAD_REQUEST, "body-too-large", format!("the body is over {max} bytes")));
    }
    Ok(())
}

/// The 413 for a request whose `Content-Length` is over [`BODY_LIMIT`],
/// answered before its body is read.
pub fn refuse_declared_body(headers: &HeaderMap) -> Result<(), ApiError> {
    body_verdict(declared_length(headers).unwrap_or(0), BODY_LIMIT, false)
}

/// The most of a refused body the app reads and discards so that its client,
/// still sending, can read the 413 (a server that stops reading makes the
/// client's next write fail before it reads the answer). A body declared
/// larger is answered at once.
pub const DRAIN_LIMIT: u64 = 16 << 20;
/// The longest the drain waits for the next piece of a refused body.
pub const DRAIN_STALL: std::time::Duration = std::time::Duration::from_secs(2);
/// The longest a drain takes in all.
pub const DRAIN_TOTAL: std::time::Duration = std::time::Duration::from_secs(10);

/// Whether a refused body of `declared` length (none: chunked) is drained
/// before the answer.
pub fn drains(declared: Option<u64>) -> bool {
    declared.is_none_or(|n| n <= DRAIN_LIMIT)
}

/// The declared length of a request's body.
pub fn declared_length(headers: &HeaderMap) -> Option<u64> {
    headers.get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()?.trim().parse::<u64>().ok())
}

/// Reads and discards the rest of a refused body, of which `seen` bytes
/// were read already, up to [`DRAIN_LIMIT`] in all, a piece at most
/// [`DRAIN_STALL`] apart and [`DRAIN_TOTAL`] in all, keeping none of it.
/// `sleep` is the host's timer; the bytes read in all come back.
pub async fn drain<S, B, E, F>(mut body: S, mut seen: u64, sleep: impl Fn(std::time::Duration) -> F) -> u64
where
    S: futures::Stream<Item = Result<B, E>> + Unpin,
    B: AsRef<[u8]>,
    F: std::future::Future<Output = ()>,
{
    use futures::StreamExt;
    use futures::future::{Either, select};
    let mut total = std::pin::pin!(sleep(DRAIN_TOTAL));
    while seen <= DRAIN_LIMIT {
        let stall = std::pin::pin!(sleep(DRAIN_STALL));
        match select(select(body.next(), stall), total.as_mut()).await {
            Either::Left((Either::Left((Some(Ok(bytes)), _)), _)) => seen += bytes.as_ref().len() as u64,
            _ => break,
        }
    }
    seen
}

/// Parses a JSON request body into `T`, with the 400 a caller can act on:
/// `invalid-utf8`, `invalid-json` (with serde's line and column; nesting
/// deeper than 128 is refused by the parser) or `invalid` (the right JSON
/// with a wrong or missing field, or a string the store cannot keep).
pub fn parse_json_body<T: serde::de::DeserializeOwned>(body: &[u8]) -> Result<T, ApiError> {
    let text = std::str::from_utf8(body)
        .map_err(|e| ApiError::new(StatusCode::BAD_REQUEST, "invalid-utf8", format!("the body is not UTF-8: {e}")))?;
    if text.trim().is_empty() {
        return Err(ApiError::new(StatusCode::BAD_REQUEST, "invalid-json", "the body is empty; send a JSON object"));
    }
    let value: serde_json::Value = serde_json::from_str(text)
        .map_err(|e| ApiError::new(StatusCode::BAD_REQUEST, "invalid-json", e.to_string()))?;
    refuse_nul(&value, &mut String::new())?;
    serde_json::from_value(value).map_err(|e| ApiError::new(StatusCode::BAD_REQUEST, "invalid", e.to_string()))
}

/// The one rule for text the stores cannot keep (D-F21): U+0000 (NUL),
/// which PostgreSQL refuses in text and JSON, is refused in every string and
/// key of a request, with a 400 that names the field (`messages[2].text`).
fn refuse_nul(v: &serde_json::Value, path: &mut String) -> Result<(), ApiError> {
    use serde_json::Value as V;
    let here = |path: &str| if path.is_empty() { "the body".to_string() } else { format!("`{path}`") };
    match v {
        V::String(s) if s.contains('\0') => Err(nul_error(&here(path))),
        V::Array(items) => items.iter().enumerate().try_for_each(|(i, item)| {
            let len = path.len();
            path.push_str(&format!("[{i}]"));
            let r = refuse_nul(item, path);
            path.truncate(len);
            r
        }),
        V::Object(map) => map.iter().try_for_each(|(k, item)| {
            let len = path.len();
            if !path.is_empty() {
                path.push('.');
            }
            path.push_str(k);
            if k.contains('\0') {
                return Err(nul_error(&format!("a key of {}", here(&path[..len]))));
            }
            let r = refuse_nul(item, path);
            path.truncate(len);
            r
        }),
        _ => Ok(()),
    }
}

fn nul_error(field: &str) -> ApiError {
    ApiError::new(
        StatusCode::BAD_REQUEST,
        "invalid",
        format!("{field} contains U+0000 (NUL), which Mneme does not store; remove it"),
    )
}

/// Decodes a query string (`application/x-www-form-urlencoded`: `+` is a
/// space, `%XX` a byte, invalid UTF-8 replaced) into its parameters; the
/// last value of a repeated name wins. A NUL in a name or value is a 400
/// naming the parameter, as in a body.
pub fn parse_query(q: &str) -> Result<std::collections::HashMap<String, String>, ApiError> {
    let mut out = std::collections::HashMap::new();
    for (k, v) in form_urlencoded::parse(q.as_bytes()) {
        if k.contains('\0') || v.contains('\0') {
            return Err(nul_error(&format!("the query parameter `{}`", k.replace('\0', "\\0"))));
        }
        out.insert(k.into_owned(), v.into_owned());
    }
    Ok(out)
}

/// A JSON response with `status`.
pub fn json<T: Serialize>(status: StatusCode, value: &T) -> Response<String> {
    match serde_json::to_string(value) {
        Ok(body) => json_body(status, body),
        Err(e) => ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", e.to_string()).into_response(),
    }
}

fn json_body(status: StatusCode, body: String) -> Response<String> {
    // A length, not chunks: a client reading until the connection closes
    // (a refused upload) gets the JSON itself, under any runner.
    Response::builder()
        .status(status)
        .header(header::CONTENT_TYPE, "application/json")
        .header(header::CONTENT_LENGTH, body.len())
        .body(body)
        .expect("static response parts are valid")
}

/// Compares two secrets in time that depends only on their lengths.
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    use subtle::ConstantTimeEq;
    a.ct_eq(b).into()
}

/// The token of an `Authorization: Bearer <token>` header; the scheme is
/// matched without regard to case (RFC 9110, 11.1).
pub fn bearer_token(value: &str) -> Option<&str> {
    let (scheme, token) = value.split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then_some(token)
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
    let given =
        headers.get(header::AUTHORIZATION).and_then(|v| v.to_str().ok()).and_then(bearer_token).ok_or_else(|| {
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

pub use mneme_time::clock::CLOCK_HEADER;

/// A request's time in Unix ms: the `X-Mneme-Clock` header when the
/// deployment enables the test clock (the Spin variable `test_clock`, which
/// must stay false in production), else the system clock.
pub fn request_clock(headers: &HeaderMap, test_clock_enabled: bool) -> u64 {
    mneme_time::clock::request_ms(headers.get(CLOCK_HEADER).and_then(|v| v.to_str().ok()), test_clock_enabled)
}

#[cfg(test)]
mod tests {

    fn never(
        _: std::time::Duration,
    ) -> futures::future::Either<futures::future::Pending<()>, futures::future::Ready<()>> {
        futures::future::Either::Left(futures::future::pending())
    }

    #[test]
    fn a_refused_body_is_drained_within_its_bounds_and_none_is_kept() {
        use futures::executor::block_on;
        use futures::stream;
        assert!(drains(None) && drains(Some(DRAIN_LIMIT)));
        assert!(!drains(Some(DRAIN_LIMIT + 1)), "a body declared past the drain limit is answered at once");
        // All of it, when it comes.
        let pieces = stream::iter((0..4).map(|_| Ok::<_, ()>(vec![0u8; 1 << 20])));
        assert_eq!(block_on(drain(pieces, 5, never)), (4 << 20) + 5);
        // Up to the limit, then no further.
        let endless = stream::repeat_with(|| Ok::<_, ()>(vec![0u8; 1 << 20]));
        assert_eq!(block_on(drain(endless, 0, never)), DRAIN_LIMIT + (1 << 20));
        // A client that stops sending is waited for a stall, not for ever.
        let stalled = stream::pending::<Result<Vec<u8>, ()>>();
        let stall = |d: std::time::Duration| {
            if d == DRAIN_STALL {
                futures::future::Either::Right(futures::future::ready(()))
            } else {
                futures::future::Either::Left(futures::future::pending())
            }
        };
        assert_eq!(block_on(drain(stalled, 7, stall)), 7);
        // A broken body ends the drain.
        let broken = stream::iter([Ok(vec![0u8; 10]), Err(()), Ok(vec![0u8; 10])]);
        assert_eq!(block_on(drain(broken, 0, never)), 10);
    }

    #[test]
    fn json_answers_carry_their_length() {
        let r = ApiError::new(StatusCode::PAYLOAD_TOO_LARGE, "payload-too-large", "too big").into_response();
        let len: usize = r.headers()[header::CONTENT_LENGTH].to_str().unwrap().parse().unwrap();
        assert_eq!(len, r.body().len());
    }

    use super::*;

    #[test]
    fn body_limits_answer_413_over_the_app_limit_and_400_over_the_endpoints() {
        let limit = BODY_LIMIT as u64;
        assert!(body_verdict(1000, 1000, true).is_ok());
        assert_eq!(body_verdict(1001, 1000, false), Ok(()), "an endpoint's limit waits for the whole body");
        assert_eq!(body_verdict(1001, 1000, true).unwrap_err().code, "body-too-large");
        assert_eq!(body_verdict(1001, 1000, true).unwrap_err().status, StatusCode::BAD_REQUEST);
        assert!(body_verdict(limit, BODY_LIMIT, true).is_ok());
        let e = body_verdict(limit + 1, 1000, false).unwrap_err();
        assert_eq!((e.status, e.code.as_str()), (StatusCode::PAYLOAD_TOO_LARGE, "payload-too-large"));
        assert_eq!(e.message, "the request body is over the 4194304-byte limit", "the runner's words");
        let mut h = HeaderMap::new();
        assert!(refuse_declared_body(&h).is_ok());
        h.insert(header::CONTENT_LENGTH, "4194305".parse().unwrap());
        assert_eq!(refuse_declared_body(&h).unwrap_err().status, StatusCode::PAYLOAD_TOO_LARGE);
        h.insert(header::CONTENT_LENGTH, "4194304".parse().unwrap());
        assert!(refuse_declared_body(&h).is_ok());
    }

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
            (Some("bearer k"), Some("k"), None),
            (Some("BEARER k"), Some("k"), None),
            (Some("Bearerk"), Some("k"), Some(401)),
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
            (br#"{"text":"a\u0000b"}"#, Some("invalid")),
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
    fn a_nul_anywhere_in_a_body_is_refused_naming_its_field() {
        let field = |body: &str| {
            let e = parse_json_body::<serde_json::Value>(body.as_bytes()).unwrap_err();
            assert_eq!((e.status.as_u16(), e.code.as_str()), (400, "invalid"), "{body}");
            e.message
        };
        assert!(field(r#"{"text":"a\u0000b"}"#).starts_with("`text` contains U+0000"));
        assert!(field(r#"{"a":{"b":[1,"x","\u0000"]}}"#).starts_with("`a.b[2]` contains"));
        assert!(field(r#""\u0000""#).starts_with("the body contains"));
        assert!(field(r#"{"a":{"k\u0000":1}}"#).starts_with("a key of `a` contains"));
        assert!(parse_json_body::<serde_json::Value>(br#"{"text":"a\\u0000b \u0001"}"#).is_ok());
    }

    #[test]
    fn deep_nesting_is_a_400_not_a_stack_overflow() {
        let deep = "[".repeat(10_000) + &"]".repeat(10_000);
        let e = parse_json_body::<serde_json::Value>(deep.as_bytes()).unwrap_err();
        assert_eq!((e.status.as_u16(), e.code.as_str()), (400, "invalid-json"));
    }

    #[test]
    fn queries_decode_as_forms_and_refuse_nul() {
        let q = parse_query("a=1&b=x+y&c=%41%2B1&a=2&d&e=%ff").unwrap();
        assert_eq!(q["a"], "2");
        assert_eq!(q["b"], "x y");
        assert_eq!(q["c"], "A+1");
        assert_eq!(q["d"], "");
        assert_eq!(q["e"], "\u{fffd}");
        assert_eq!(parse_query("x=%+1").unwrap()["x"], "% 1", "`%+1` is not a byte");
        let e = parse_query("thread_id=%00").unwrap_err();
        assert_eq!(e.status, 400);
        assert!(e.message.contains("`thread_id`"), "{}", e.message);
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
        assert_eq!(ApiError::from_stage("store-unavailable", "x").retry_after, None);
        let busy = ApiError::from_stage("store-busy", "x");
        assert_eq!((busy.status.as_u16(), busy.retry_after), (503, Some(1)));
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
