//! `GET /events`: the proactive stream (drift thoughts, task progress,
//! reminders). Events are rows with increasing ids; each is sent with its
//! `id:` so a reconnecting client's `Last-Event-ID` replays exactly what it
//! missed. A first connection gets the last 24 h (at most 200 events). The
//! handler streams for a bounded window (25 s by default, `?wait=` 0–55 s),
//! polling once a second, then ends cleanly so the client reconnects: no
//! instance is held open for long (serverless-friendly, D-C14). The streams
//! on one instance share one look at the newest event id per poll, and a
//! stream reads events only when one is newer than what it sent.

use std::collections::HashMap;
use std::time::Duration;

use futures::SinkExt;
use mneme_http::{ApiError, sse};
use serde_json::{Value, json};
use spin_sdk::http::{Request, StatusCode};

use crate::mneme::memory::memory;
use crate::{Reply, err, reply};

const DEFAULT_WINDOW_S: u64 = 25;
const KEEPALIVE_MS: u64 = 15_000;
const POLL_MS: u64 = 1_000;
const BACKLOG_MS: u64 = 24 * 3600 * 1000;

thread_local! {
    /// The newest event id this instance has seen, and when it asked: the
    /// streams an instance serves share one question per poll instead of a
    /// query each (a thousand open streams made a thousand a second).
    static LATEST: std::cell::Cell<(u64, i64)> = const { std::cell::Cell::new((0, 0)) };
}

/// The newest event id, asked of the store at most once per poll interval
/// per instance; a stream that has sent everything up to it asks nothing.
async fn latest_id(now_ms: u64) -> Result<i64, mneme_types::StageError> {
    let (asked, id) = LATEST.get();
    if now_ms.saturating_sub(asked) < POLL_MS {
        return Ok(id);
    }
    // The others keep the last answer while this one asks.
    LATEST.set((now_ms, id));
    let id = memory::latest_event_id().await?;
    LATEST.set((now_ms, id));
    Ok(id)
}

pub async fn handle(req: &Request, query: &HashMap<String, String>) -> Reply {
    // The header a reconnecting EventSource sends, else `?after=`, which a
    // page that opens a new EventSource (which cannot set headers) uses.
    // Both are checked when both come (present but empty is not a number);
    // the header wins.
    let parse = |v: Option<&str>| -> Result<Option<i64>, ApiError> {
        match v.map(str::trim) {
            None => Ok(None),
            Some(v) => v.parse::<i64>().ok().filter(|n| *n >= 0).map(Some).ok_or_else(|| {
                ApiError::new(
                    StatusCode::BAD_REQUEST,
                    "invalid",
                    "`Last-Event-ID` (or `after`) must be a non-negative integer",
                )
            }),
        }
    };
    let header = req.headers().get("last-event-id").map(|v| v.to_str().unwrap_or("not text"));
    let after_id = match (parse(header), parse(query.get("after").map(String::as_str))) {
        (Ok(h), Ok(a)) => h.or(a),
        (Err(e), _) | (_, Err(e)) => return err(e),
    };
    let window_s = match query.get("wait") {
        None => DEFAULT_WINDOW_S,
        Some(w) => match w.parse::<u64>() {
            Ok(n) if n <= 55 => n,
            _ => {
                return err(ApiError::new(
                    StatusCode::BAD_REQUEST,
                    "invalid",
                    "`wait` must be an integer from 0 to 55 (seconds)",
                ));
            }
        },
    };
    let now = mneme_entry::clock::request_ms(req.headers()).await;
    // Check the store answers before committing to a stream.
    let first = match memory::events_after(after_id, now.saturating_sub(BACKLOG_MS), 200).await {
        Ok(events) => events,
        Err(e) => return err(ApiError::from_stage(e.code.name(), e.message)),
    };
    let (mut tx, body) = spin_sdk::http::body::stream::<String>();
    spin_sdk::wasip3::spawn(async move {
        let started = mneme_entry::clock::system_ms();
        let mut last_id = after_id.unwrap_or(0);
        let mut last_write = started;
        if tx.send(sse::retry(3000)).await.is_err() {
            return;
        }
        let mut batch = first;
        loop {
            for ev in &batch {
                let (id, kind) = (ev.id, ev.kind.as_str());
                let payload = serde_json::from_str::<Value>(&ev.payload).unwrap_or(Value::Null);
                let data = json!({"id": id, "type": kind, "payload": payload, "created_ms": ev.created_ms});
                if tx.send(sse::event_with_id(id as u64, kind, &data.to_string())).await.is_err() {
                    return;
                }
                last_id = last_id.max(id);
                last_write = mneme_entry::clock::system_ms();
            }
            let now = mneme_entry::clock::system_ms();
            if now.saturating_sub(started) >= window_s * 1000 {
                break;
            }
            if now.saturating_sub(last_write) >= KEEPALIVE_MS {
                if tx.send(sse::comment("keepalive")).await.is_err() {
                    return;
                }
                last_write = now;
            }
            spin_sdk::time::sleep(Duration::from_millis(POLL_MS)).await;
            let fetched = match latest_id(mneme_entry::clock::system_ms()).await {
                Ok(latest) if latest <= last_id => Ok(Vec::new()),
                Ok(_) => memory::events_after(Some(last_id), 0, 200).await,
                Err(e) => Err(e),
            };
            batch = match fetched {
                Ok(b) => b,
                Err(e) => {
                    let _ = tx
                        .send(sse::event("error", &json!({"message": e.message, "recoverable": true}).to_string()))
                        .await;
                    return;
                }
            };
        }
        let _ = tx.send(sse::event("done", &json!({"reconnect": true}).to_string())).await;
    });
    reply(crate::event_stream().body(body).expect("static parts"))
}
