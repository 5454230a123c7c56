//! `POST /chat`: the message flow of design 002, wired across the stages.
//!
//! Validation happens before the stream opens (a 400 JSON error, in
//! `validate`); then the response is `text/event-stream` and the pipeline
//! (`flow`, with Path B in `path_b`) runs in a spawned task that sends its
//! frames through a channel to the writer (`stream`).

mod flow;
mod path_b;
mod request;
mod stream;

use futures::channel::mpsc;
use mneme_http::{new_id, sse};
use serde_json::json;
use spin_sdk::http::Request;

use crate::{Reply, err, reply};
use flow::pipeline;
use mneme_entry::clock;
use request::validate;
use stream::{Frame, Out, writer};

pub async fn handle(req: Request) -> Reply {
    let now = clock::request_ms(req.headers()).await;
    let bytes = match mneme_entry::body::read(req, request::MAX_BODY_BYTES).await {
        Ok(b) => b,
        Err(e) => return err(e),
    };
    let msg = match validate(&bytes) {
        Ok(m) => m,
        Err(e) => return err(e),
    };
    let request_id = new_id();
    let (frames, rx) = mpsc::unbounded::<Frame>();
    let (tx, body) = spin_sdk::http::body::stream::<String>();
    spin_sdk::wasip3::spawn(writer(rx, tx));
    let rid = request_id.clone();
    spin_sdk::wasip3::spawn(async move {
        let mut out = Out { frames };
        out.raw(sse::retry(3000));
        out.event("status", json!({"stage": "processing"}));
        let started = clock::system_ms();
        match pipeline(&mut out, &msg, &rid, now).await {
            Ok((model_us, steps, cost)) => {
                let d = clock::system_ms().saturating_sub(started);
                // Milliseconds to the µs: the time spent waiting on models.
                let model_ms = model_us as f64 / 1000.0;
                out.event("done", json!({"duration_ms": d, "model_ms": model_ms, "steps": steps, "model": cost}));
            }
            Err(e) => {
                out.event(
                    "error",
                    json!({"message": format!("{}: {}", e.code, e.message), "recoverable": e.code.is_unavailable()}),
                );
                out.event("done", json!({"duration_ms": clock::system_ms().saturating_sub(started)}));
            }
        }
        out.close();
    });
    reply(crate::event_stream().header("x-request-id", request_id).body(body).expect("static parts"))
}
