//! The SSE side of `/chat`. The pipeline sends frames through a channel; a
//! writer task forwards them and adds the keepalive comment (15 s),
//! `status: still_working` (20 s) and the hard timeout (360 s).

use std::time::Duration;

use futures::channel::mpsc;
use futures::future::{Either, select};
use futures::{SinkExt, StreamExt};
use mneme_http::sse;
use serde_json::{Value, json};

use mneme_entry::clock;

const KEEPALIVE_MS: u64 = 15_000;
const STILL_WORKING_MS: u64 = 20_000;
const HARD_TIMEOUT_MS: u64 = 360_000;
/// The gap between the two comments that confirm a client still reads.
const CONFIRM_GAP_MS: u64 = 100;

pub enum Frame {
    Raw(String),
    Status(String),
    /// Answers whether the client is still reading (see [`Out::confirm`]).
    Confirm(futures::channel::oneshot::Sender<()>),
    Close,
}

/// The pipeline's side of the stream.
pub struct Out {
    pub frames: mpsc::UnboundedSender<Frame>,
}

impl Out {
    pub fn raw(&mut self, s: String) {
        let _ = self.frames.unbounded_send(Frame::Raw(s));
    }
    pub fn event(&mut self, name: &str, data: Value) {
        let f = sse::event(name, &data.to_string());
        let _ = self.frames.unbounded_send(if name == "status" { Frame::Status(f) } else { Frame::Raw(f) });
    }
    pub fn close(&mut self) {
        let _ = self.frames.unbounded_send(Frame::Close);
    }
    /// The client went away (the writer stopped).
    pub fn gone(&self) -> bool {
        self.frames.is_closed()
    }
    /// Whether the client is still reading once everything sent so far is
    /// out. A socket the client closed still takes the first write after
    /// the close (the reset comes back afterwards), so the writer sends two
    /// comments, [`CONFIRM_GAP_MS`] apart, after what came before; the
    /// answer is yes only if both went out.
    pub async fn confirm(&mut self) -> bool {
        let (ack, acked) = futures::channel::oneshot::channel();
        if self.frames.unbounded_send(Frame::Confirm(ack)).is_err() {
            return false;
        }
        acked.await.is_ok()
    }
}

/// Forwards frames to the client, adding keepalives and `still_working`,
/// and ends the stream at the hard timeout.
pub async fn writer(mut rx: mpsc::UnboundedReceiver<Frame>, mut tx: impl futures::Sink<String> + Unpin) {
    let started = clock::system_ms();
    let (mut last_write, mut last_status) = (started, started);
    loop {
        let tick = spin_sdk::time::sleep(Duration::from_millis(1000));
        match select(rx.next(), Box::pin(tick)).await {
            Either::Left((Some(Frame::Close), _)) | Either::Left((None, _)) => break,
            Either::Left((Some(f), _)) => {
                let now = clock::system_ms();
                let s = match f {
                    Frame::Status(s) => {
                        last_status = now;
                        s
                    }
                    Frame::Raw(s) => s,
                    Frame::Confirm(ack) => {
                        for _ in 0..2 {
                            spin_sdk::time::sleep(Duration::from_millis(CONFIRM_GAP_MS)).await;
                            if tx.send(sse::comment("delivered")).await.is_err() {
                                return;
                            }
                        }
                        let _ = ack.send(());
                        last_write = clock::system_ms();
                        continue;
                    }
                    Frame::Close => unreachable!(),
                };
                if tx.send(s).await.is_err() {
                    return;
                }
                last_write = now;
            }
            Either::Right(_) => {
                let now = clock::system_ms();
                if now.saturating_sub(started) >= HARD_TIMEOUT_MS {
                    let e =
                        sse::event("error", &json!({"message": "Request timed out", "recoverable": true}).to_string());
                    let d = sse::event("done", &json!({"duration_ms": now - started}).to_string());
                    let _ = tx.send(e).await;
                    let _ = tx.send(d).await;
                    return;
                }
                if now.saturating_sub(last_status) >= STILL_WORKING_MS {
                    if tx.send(sse::event("status", &json!({"stage": "still_working"}).to_string())).await.is_err() {
                        return;
                    }
                    last_status = now;
                    last_write = now;
                } else if now.saturating_sub(last_write) >= KEEPALIVE_MS {
                    if tx.send(sse::comment("keepalive")).await.is_err() {
                        return;
                    }
                    last_write = now;
                }
            }
        }
    }
}
