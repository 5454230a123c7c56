//! The web app's sign-in: the principal gives the API key once, and the
//! app answers with a session cookie the browser sends by itself, which
//! is how the `/events` EventSource (which cannot set headers) is
//! authenticated.
//!
//! The cookie is stateless: `<expiry>.<HMAC-SHA256(api_key, expiry)>`.
//! It carries no secret, it expires after [`TTL_S`], and changing the API
//! key ends every session at once (D-CL2). It is `HttpOnly` (no script
//! reads it) and `SameSite=Strict` (no other site's page sends it); a
//! cookie-authenticated request that changes something must also carry
//! [`CSRF_HEADER`], which no cross-site form can add.

use hmac::{Hmac, KeyInit, Mac};
use http::{HeaderMap, Method, StatusCode, header};
use sha2::Sha256;

use crate::{ApiError, require_bearer};

/// The cookie's name.
pub const COOKIE: &str = "mneme_session";
/// How long a session lasts: 14 days.
pub const TTL_S: u64 = 14 * 24 * 3600;
/// The header a cookie-authenticated unsafe request must send, as `1`.
pub const CSRF_HEADER: &str = "x-mneme-csrf";

fn mac(key: &str, expiry: u64) -> Hmac<Sha256> {
    let mut m = Hmac::<Sha256>::new_from_slice(key.as_bytes()).expect("HMAC takes any key length");
    m.update(b"mneme-session-v1.");
    m.update(expiry.to_string().as_bytes());
    m
}

/// A session token for `key`, valid until `now_s + TTL_S`.
pub fn issue(key: &str, now_s: u64) -> String {
    let expiry = now_s + TTL_S;
    let tag = mac(key, expiry).finalize().into_bytes();
    let hex: String = tag.iter().map(|b| format!("{b:02x}")).collect();
    format!("{expiry}.{hex}")
}

/// The expiry of `token` when `key` signed it and it has not expired.
pub fn verify(token: &str, key: &str, now_s: u64) -> Option<u64> {
    let (expiry, hex) = token.split_once('.')?;
    if !expiry.bytes().all(|b| b.is_ascii_digit()) || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    let expiry: u64 = expiry.parse().ok()?;
    if expiry <= now_s || expiry > now_s + TTL_S || hex.len() != 64 {
        return None;
    }
    let tag: Vec<u8> =
        (0..32).map(|i| u8::from_str_radix(hex.get(2 * i..2 * i + 2)?, 16).ok()).collect::<Option<_>>()?;
    mac(key, expiry).verify_slice(&tag).ok()?;
    Some(expiry)
}

/// The session token in a request's `Cookie` headers.
pub fn token(headers: &HeaderMap) -> Option<&str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(name, _)| *name == COOKIE)
        .map(|(_, value)| value.trim())
}

/// The `Set-Cookie` value that starts a session (`secure` when the app is
/// reached over HTTPS).
pub fn set_cookie(token: &str, secure: bool) -> String {
    let secure = if secure { "; Secure" } else { "" };
    format!("{COOKIE}={token}; Max-Age={TTL_S}; Path=/; HttpOnly; SameSite=Strict{secure}")
}

/// The `Set-Cookie` value that ends a session.
pub fn clear_cookie(secure: bool) -> String {
    let secure = if secure { "; Secure" } else { "" };
    format!("{COOKIE}=; Max-Age=0; Path=/; HttpOnly; SameSite=Strict{secure}")
}

/// How a request proved it comes from the principal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Principal {
    Bearer,
    /// A session cookie, with its expiry in Unix seconds.
    Session(u64),
}

/// Authenticates the principal: `Authorization: Bearer <api_key>` when the
/// header is sent, else the session cookie (plus [`CSRF_HEADER`] for a
/// method other than GET or HEAD). The key unset answers 503, as for a bearer.
pub fn authenticate(
    headers: &HeaderMap,
    method: &Method,
    configured: Option<&str>,
    now_s: u64,
) -> Result<Principal, ApiError> {
    // A bearer header is checked alone; any other Authorization scheme (a
    // proxy's Basic credentials, say) leaves the cookie to decide.
    let bearer =
        headers.get_all(header::AUTHORIZATION).iter().any(|v| v.to_str().ok().and_then(crate::bearer_token).is_some());
    if bearer {
        return require_bearer(headers, configured, "api_key").map(|()| Principal::Bearer);
    }
    let Some(token) = token(headers) else {
        // No credentials at all: the bearer rules give the 503 or the 401.
        return require_bearer(headers, configured, "api_key").map(|()| Principal::Bearer);
    };
    let key = configured.filter(|s| !s.trim().is_empty()).ok_or_else(|| {
        ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "not-configured",
            "the Spin variable `api_key` is not set, so this endpoint is closed",
        )
    })?;
    let expiry = verify(token, key, now_s).ok_or_else(|| {
        ApiError::new(StatusCode::UNAUTHORIZED, "session-expired", "the session has ended; sign in again")
    })?;
    let safe = *method == Method::GET || *method == Method::HEAD;
    if !safe && headers.get(CSRF_HEADER).and_then(|v| v.to_str().ok()).map(str::trim) != Some("1") {
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "csrf",
            format!("a request signed in by cookie must send `{CSRF_HEADER}: 1`"),
        ));
    }
    Ok(Principal::Session(expiry))
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: u64 = 1_800_000_000;

    fn with_cookie(value: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(header::COOKIE, format!("theme=dark; {COOKIE}={value}; other=1").parse().unwrap());
        h
    }

    #[test]
    fn a_token_verifies_until_it_expires_and_only_under_its_key() {
        let t = issue("k3y", NOW);
        assert_eq!(verify(&t, "k3y", NOW), Some(NOW + TTL_S));
        assert_eq!(verify(&t, "k3y", NOW + TTL_S - 1), Some(NOW + TTL_S));
        assert_eq!(verify(&t, "k3y", NOW + TTL_S), None, "expired");
        assert_eq!(verify(&t, "other", NOW), None, "a new key ends every session");
        let (exp, tag) = t.split_once('.').unwrap();
        let later = format!("{}.{tag}", exp.parse::<u64>().unwrap() + 1);
        assert_eq!(verify(&later, "k3y", NOW), None, "the expiry is signed");
        let mut flipped = t.clone().into_bytes();
        let last = flipped.len() - 1;
        flipped[last] = if flipped[last] == b'0' { b'1' } else { b'0' };
        assert_eq!(verify(std::str::from_utf8(&flipped).unwrap(), "k3y", NOW), None);
        let signed = format!("+{t}");
        assert_eq!(verify(&signed, "k3y", NOW), None, "one spelling per token");
        for junk in ["", ".", "x.y", "123", &format!("{}.zz", NOW + 5), &format!("{}.{}", NOW + 5, "é".repeat(32))] {
            assert_eq!(verify(junk, "k3y", NOW), None, "{junk:?}");
        }
    }

    #[test]
    fn a_token_from_further_ahead_than_one_ttl_is_refused() {
        let t = issue("k3y", NOW + 2 * TTL_S);
        assert_eq!(verify(&t, "k3y", NOW), None);
    }

    #[test]
    fn the_cookie_is_found_among_others_and_its_attributes_are_strict() {
        assert_eq!(token(&with_cookie("abc")), Some("abc"));
        assert_eq!(token(&HeaderMap::new()), None);
        let c = set_cookie("abc", false);
        for part in ["mneme_session=abc", "HttpOnly", "SameSite=Strict", "Path=/", "Max-Age=1209600"] {
            assert!(c.contains(part), "{c}");
        }
        assert!(!c.contains("Secure"));
        assert!(set_cookie("abc", true).ends_with("; Secure"));
        assert!(clear_cookie(false).contains("Max-Age=0"));
    }

    #[test]
    fn authentication_by_case() {
        let good = issue("k", NOW);
        let status = |h: &HeaderMap, m: Method, key: Option<&str>| {
            authenticate(h, &m, key, NOW).map_err(|e| (e.status.as_u16(), e.code))
        };
        let mut bearer = HeaderMap::new();
        bearer.insert(header::AUTHORIZATION, "Bearer k".parse().unwrap());
        assert_eq!(status(&bearer, Method::POST, Some("k")), Ok(Principal::Bearer));
        // A wrong bearer is not rescued by a good cookie.
        let mut both = with_cookie(&good);
        both.insert(header::AUTHORIZATION, "Bearer nope".parse().unwrap());
        assert_eq!(status(&both, Method::GET, Some("k")).unwrap_err().0, 401);
        assert_eq!(status(&with_cookie(&good), Method::GET, Some("k")), Ok(Principal::Session(NOW + TTL_S)));
        assert_eq!(status(&with_cookie(&good), Method::POST, Some("k")), Err((403, "csrf".into())));
        let mut csrf = with_cookie(&good);
        csrf.insert(CSRF_HEADER, "1".parse().unwrap());
        assert_eq!(status(&csrf, Method::DELETE, Some("k")), Ok(Principal::Session(NOW + TTL_S)));
        assert_eq!(status(&with_cookie("junk"), Method::GET, Some("k")), Err((401, "session-expired".into())));
        assert_eq!(status(&with_cookie(&good), Method::GET, None).unwrap_err().0, 503);
        assert_eq!(status(&HeaderMap::new(), Method::GET, Some("k")).unwrap_err().0, 401);
        assert_eq!(status(&HeaderMap::new(), Method::GET, None).unwrap_err().0, 503);
        // A proxy's Basic credentials do not hide the cookie.
        let mut basic = with_cookie(&good);
        basic.insert(header::AUTHORIZATION, "Basic dXNlcjpwdw==".parse().unwrap());
        assert_eq!(status(&basic, Method::GET, Some("k")), Ok(Principal::Session(NOW + TTL_S)));
    }
}
