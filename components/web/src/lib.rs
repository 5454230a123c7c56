//! The web app's assets and the OpenAPI description, built into the
//! component so the app works offline and needs no CDN. Open to all: the
//! pages hold no data; everything they show comes from the API after
//! sign-in. Each answer carries an ETag, so a browser revalidates cheaply.

use spin_sdk::http::body::IncomingBodyExt;
use spin_sdk::http::{IntoResponse, Method, Request};
use spin_sdk::http_service;

type Reply = Result<spin_sdk::wasip3::http::types::Response, spin_sdk::wasip3::http::types::ErrorCode>;

/// (path, content type, bytes) of every asset.
const ASSETS: &[(&str, &str, &[u8])] = &[
    ("/", "text/html; charset=utf-8", include_bytes!("../../../web/index.html")),
    ("/app/app.js", "text/javascript; charset=utf-8", include_bytes!("../../../web/app.js")),
    ("/app/md.js", "text/javascript; charset=utf-8", include_bytes!("../../../web/md.js")),
    ("/app/app.css", "text/css; charset=utf-8", include_bytes!("../../../web/app.css")),
    ("/app/icon.svg", "image/svg+xml", include_bytes!("../../../web/icon.svg")),
    ("/openapi.yaml", "application/yaml; charset=utf-8", include_bytes!("../../../openapi.yaml")),
];

/// Scripts, styles and connections only from this origin; no framing.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
                   connect-src 'self'; manifest-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

/// FNV-1a, enough to tell one build's asset from another's. It runs at
/// compile time: hashing the 89 KB openapi.yaml on every request was over
/// half of that route's CPU (#24 item 8, BENCHMARKS "Spin-native, step 3").
const fn fnv1a(bytes: &[u8]) -> u64 {
    let mut h = 0xcbf2_9ce4_8422_2325_u64;
    let mut i = 0;
    while i < bytes.len() {
        h = (h ^ bytes[i] as u64).wrapping_mul(0x0100_0000_01b3);
        i += 1;
    }
    h
}

/// Each asset's hash, in the order of `ASSETS`.
const HASHES: [u64; ASSETS.len()] = {
    let mut out = [0; ASSETS.len()];
    let mut i = 0;
    while i < ASSETS.len() {
        out[i] = fnv1a(ASSETS[i].2);
        i += 1;
    }
    out
};

fn error(status: u16, code: &str, message: &str, allow: Option<&str>) -> Reply {
    let body = format!(r#"{{"error":{{"code":"{code}","message":"{message}"}}}}"#);
    let mut b = spin_sdk::http::Response::builder()
        .status(status)
        .header("content-type", "application/json")
        .header("content-length", body.len());
    if let Some(a) = allow {
        b = b.header("allow", a);
    }
    b.body(body).expect("static parts").into_response()
}

#[http_service]
async fn handle(req: Request) -> Reply {
    // The app's body limit (4 MiB, openapi.yaml) holds whoever runs it
    // (#24); no asset takes a body.
    if let Err(e) = mneme_http::refuse_declared_body(req.headers()) {
        // Read and dropped first, so the client can read the 413 (D-F35).
        if mneme_http::drains(mneme_http::declared_length(req.headers())) {
            mneme_http::drain(req.into_body().stream(), 0, spin_sdk::time::sleep).await;
        }
        return error(413, &e.code, &e.message, None);
    }
    let path = req.uri().path();
    let Some(((_, kind, bytes), hash)) = ASSETS.iter().zip(HASHES).find(|((p, _, _), _)| *p == path) else {
        return error(404, "not-found", "no such asset", None);
    };
    let head = *req.method() == Method::HEAD;
    if *req.method() != Method::GET && !head {
        return error(405, "method-not-allowed", "use GET", Some("GET, HEAD"));
    }
    let tag = format!("\"{hash:016x}\"");
    let fresh = req
        .headers()
        .get("if-none-match")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.split(',').any(|t| t.trim() == tag || t.trim() == "*"));
    let builder = spin_sdk::http::Response::builder()
        .status(if fresh { 304 } else { 200 })
        .header("content-type", *kind)
        .header("etag", &tag)
        .header("cache-control", "no-cache")
        .header("x-content-type-options", "nosniff")
        .header("referrer-policy", "no-referrer")
        .header("content-security-policy", CSP);
    let body = if fresh || head { bytes::Bytes::new() } else { bytes::Bytes::from_static(bytes) };
    builder.body(spin_sdk::http::FullBody::new(body)).expect("static parts").into_response()
}
