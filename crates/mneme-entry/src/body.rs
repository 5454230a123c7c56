//! Reading a request body as it arrives, within the limits the API
//! documents: the app enforces them itself, so they hold under `spin up`,
//! which caps no body, as under `mneme up` (#24).

use futures::StreamExt;
use mneme_http::{ApiError, body_verdict};
use spin_sdk::http::body::IncomingBodyExt;
use spin_sdk::http::{Request, StatusCode};

/// The body, of at most `max` bytes. A body over the app's limit is refused
/// with 413 as soon as its bytes so far pass it (one declared over it never
/// gets here);
/// one over `max` gets the endpoint's 400 once it has all arrived (the
/// bytes past `max` are counted, not kept).
pub async fn read(req: Request, max: usize) -> Result<Vec<u8>, ApiError> {
    // The declared length was checked by `handle` before any route ran.
    let mut stream = req.into_body().stream();
    let (mut kept, mut seen) = (Vec::new(), 0u64);
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|e| {
            ApiError::new(StatusCode::BAD_REQUEST, "invalid-body", format!("the body could not be read: {e:?}"))
        })?;
        seen += chunk.len() as u64;
        if let Err(e) = body_verdict(seen, max, false) {
            // The rest is read and dropped, so the client can read the 413.
            mneme_http::drain(stream, seen, spin_sdk::time::sleep).await;
            return Err(e);
        }
        if kept.len() + chunk.len() <= max {
            kept.extend_from_slice(&chunk);
        }
    }
    body_verdict(seen, max, true)?;
    Ok(kept)
}

/// Before the 413 for a body declared over the limit: reads and drops it,
/// if it is not declared too large to wait for (`mneme_http::drains`), so
/// the client, still sending, gets to read the answer under any runner.
pub async fn drain_refused(req: Request) {
    if mneme_http::drains(mneme_http::declared_length(req.headers())) {
        mneme_http::drain(req.into_body().stream(), 0, spin_sdk::time::sleep).await;
    }
}
