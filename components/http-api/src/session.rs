//! `/session`: the web app's sign-in (D-CL2). `POST` trades the API key,
//! sent in a JSON body (never in a URL), for a session cookie; `GET` says
//! whether the request is signed in; `DELETE` ends the session.

use mneme_http::session::{self, Principal};
use mneme_http::throttle;
use mneme_http::{ApiError, constant_time_eq, json};
use serde_json::json;
use spin_sdk::http::{Method, Request, StatusCode};

use crate::knowledge::bad;
use crate::mneme::store::store;
use crate::{Reply, err, reply};

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct SignIn {
    api_key: String,
}

/// The session cookie gets `Secure` when the app is reached over HTTPS.
fn secure(req: &Request) -> bool {
    req.headers().get("spin-full-url").and_then(|v| v.to_str().ok()).is_some_and(|u| u.starts_with("https://"))
}

fn no_content(cookie: String) -> Reply {
    reply(
        spin_sdk::http::Response::builder()
            .status(204)
            .header("set-cookie", cookie)
            .header("cache-control", "no-store")
            .body(String::new())
            .expect("static parts"),
    )
}

/// Adds `add` failed sign-ins to `client`'s window and returns its count.
async fn failures(client: &str, add: u32, now_ms: u64) -> Result<throttle::Failures, ApiError> {
    store::count_failures(client.to_string(), add, throttle::WINDOW_MS, now_ms)
        .await
        .map(|(count, window_end_ms)| throttle::Failures { count, window_end_ms })
        .map_err(|e| ApiError::from_stage(e.code.name(), e.message))
}

/// A 429 that says how long to wait.
fn too_many(wait_s: u64) -> ApiError {
    let mut e = ApiError::new(
        StatusCode::TOO_MANY_REQUESTS,
        "too-many-attempts",
        format!("too many failed sign-ins from this address; try again in {wait_s} s"),
    );
    e.retry_after = Some(wait_s);
    e
}

pub async fn route(req: Request, method: &Method, key: Option<&str>, now_s: u64) -> Reply {
    match *method {
        Method::GET => match session::authenticate(req.headers(), method, key, now_s) {
            Ok(Principal::Session(expiry)) => {
                reply(json(StatusCode::OK, &json!({"signed_in": true, "expires_at": expiry})))
            }
            Ok(Principal::Bearer) => reply(json(StatusCode::OK, &json!({"signed_in": true, "expires_at": null}))),
            Err(e) => err(e),
        },
        Method::DELETE => no_content(session::clear_cookie(secure(&req))),
        Method::POST => {
            let Some(expected) = key.filter(|k| !k.trim().is_empty()) else {
                return err(ApiError::new(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "not-configured",
                    "the Spin variable `api_key` is not set, so no one can sign in",
                ));
            };
            let secure = secure(&req);
            let client = throttle::client_key(req.headers().get("spin-client-addr").and_then(|v| v.to_str().ok()));
            let now_ms = now_s * 1000;
            match failures(&client, 0, now_ms).await {
                Ok(f) => {
                    if let Some(wait) = throttle::wait_s(Some(f), now_ms) {
                        return err(too_many(wait));
                    }
                }
                Err(e) => return err(e),
            }
            let given: SignIn = match crate::knowledge::body_json(req, 4 * 1024)
                .await
                .and_then(|v| serde_json::from_value(v).map_err(|e| bad("invalid", e.to_string())))
            {
                Ok(v) => v,
                Err(e) => return err(e),
            };
            if !constant_time_eq(given.api_key.trim().as_bytes(), expected.as_bytes()) {
                return match failures(&client, 1, now_ms).await {
                    Ok(f) => match throttle::wait_s(Some(f), now_ms) {
                        // This failure used up the window's allowance.
                        Some(wait) => err(too_many(wait)),
                        None => {
                            err(ApiError::new(StatusCode::UNAUTHORIZED, "unauthorized", "that API key is not valid"))
                        }
                    },
                    Err(e) => err(e),
                };
            }
            no_content(session::set_cookie(&session::issue(expected, now_s), secure))
        }
        _ => err(ApiError::method_not_allowed("GET, POST or DELETE")),
    }
}
