//! One client connection, as hyper sees it through [`Guarded`]: the socket
//! plus the few things hyper's HTTP/1 server does not do the way this runner
//! answers (D-F18):
//!
//! - hyper answers a request head it cannot parse (400), one whose URI is too
//!   long (414) or whose headers are too large (431) with an empty body and
//!   closes. `Guarded` gives those answers the JSON `{error:{code,message}}`
//!   body every other error of the runner has.
//! - A client that starts a request head and stalls gets a 408 (with that
//!   body) after [`HEAD_TIMEOUT`], and the connection is closed.
//! - A keep-alive connection idle between requests for [`IDLE_TIMEOUT`] is
//!   closed, so half-open connections do not accumulate.
//!
//! How an answer of hyper's own is told apart from the app's: hyper writes it
//! only while no request is in the service ([`Watch`] counts them), and the
//! app's responses carry a body or come right after their request ended.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// How long a started request head may take to arrive.
pub const HEAD_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a keep-alive connection may wait for its next request.
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(75);

/// What the service tells the connection about its requests.
#[derive(Default)]
pub struct Watch {
    in_flight: AtomicUsize,
    /// A response just ended: its last bytes (or, for an empty body, its
    /// head) may still be on their way to the socket.
    just_ended: AtomicBool,
}

impl Watch {
    /// A request reached the service; the guard ends it when dropped (put
    /// it in the response body, so it lasts until hyper has the body).
    pub fn start(self: &Arc<Self>) -> InFlight {
        self.in_flight.fetch_add(1, Ordering::SeqCst);
        self.just_ended.store(false, Ordering::SeqCst);
        InFlight(self.clone())
    }
}

pub struct InFlight(Arc<Watch>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.just_ended.store(true, Ordering::SeqCst);
        self.0.in_flight.fetch_sub(1, Ordering::SeqCst);
    }
}

/// The socket, watched.
pub struct Guarded<IO> {
    io: IO,
    watch: Arc<Watch>,
    /// Bytes of a head that started while no request was in the service.
    head_started: bool,
    timer: Pin<Box<tokio::time::Sleep>>,
    timer_for: Option<Duration>,
    /// What replaces hyper's own empty answer, and how much of it is out.
    rewrite: Option<(Vec<u8>, usize)>,
    closed: bool,
}

impl<IO> Guarded<IO> {
    pub fn new(io: IO, watch: Arc<Watch>) -> Self {
        Self {
            io,
            watch,
            head_started: false,
            timer: Box::pin(tokio::time::sleep(IDLE_TIMEOUT)),
            timer_for: None,
            rewrite: None,
            closed: false,
        }
    }

    fn idle(&self) -> bool {
        self.watch.in_flight.load(Ordering::SeqCst) == 0
    }

    /// Arms the timer for `d` unless it already runs for `d`.
    fn arm(&mut self, d: Duration) {
        if self.timer_for != Some(d) {
            self.timer.as_mut().reset(tokio::time::Instant::now() + d);
            self.timer_for = Some(d);
        }
    }
}

/// A JSON error answer of the runner's own, closing the connection.
pub fn raw_error(status: u16, reason: &str, code: &str, message: &str) -> Vec<u8> {
    let body = serde_json::json!({ "error": { "code": code, "message": message } }).to_string();
    format!(
        "HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// hyper's own answer to a head it could not read, if `buf` is one: a
/// complete response head for 400, 414 or 431 with no body and no type.
fn hypers_error(buf: &[u8]) -> Option<Vec<u8>> {
    let mut headers = [httparse::EMPTY_HEADER; 8];
    let mut resp = httparse::Response::new(&mut headers);
    let httparse::Status::Complete(len) = resp.parse(buf).ok()? else { return None };
    if len != buf.len() {
        return None;
    }
    let empty = resp.headers.iter().any(|h| h.name.eq_ignore_ascii_case("content-length") && h.value == b"0");
    let typed = resp.headers.iter().any(|h| h.name.eq_ignore_ascii_case("content-type"));
    if !empty || typed {
        return None;
    }
    Some(match resp.code? {
        400 => raw_error(400, "Bad Request", "bad-request", "the request could not be read as HTTP/1.1"),
        414 => raw_error(414, "URI Too Long", "uri-too-long", "the request URI is too long"),
        431 => raw_error(
            431,
            "Request Header Fields Too Large",
            "headers-too-large",
            "the request headers are too large or too many",
        ),
        _ => return None,
    })
}

impl<IO: AsyncRead + AsyncWrite + Unpin> AsyncRead for Guarded<IO> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        if self.closed {
            return Poll::Ready(Ok(()));
        }
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.io).poll_read(cx, buf);
        let got = buf.filled().len() > before;
        if !self.idle() {
            self.head_started = false;
            self.timer_for = None;
            return polled;
        }
        if got {
            self.head_started = true;
        }
        if !polled.is_pending() {
            return polled;
        }
        // Waiting on the client with no request in the service: either for a
        // head it started, or for its next request on a kept-alive connection.
        let (limit, started) = if self.head_started { (HEAD_TIMEOUT, true) } else { (IDLE_TIMEOUT, false) };
        self.arm(limit);
        if self.timer.as_mut().poll(cx).is_pending() {
            return Poll::Pending;
        }
        self.closed = true;
        if started {
            let answer = raw_error(
                408,
                "Request Timeout",
                "request-timeout",
                &format!("the request head did not arrive within {} s", HEAD_TIMEOUT.as_secs()),
            );
            // A fresh answer on a quiet socket goes out in one write; if it
            // cannot, the client gets the close alone.
            let _ = Pin::new(&mut self.io).poll_write(cx, &answer);
            let _ = Pin::new(&mut self.io).poll_flush(cx);
        }
        Poll::Ready(Ok(()))
    }
}

impl<IO: AsyncRead + AsyncWrite + Unpin> AsyncWrite for Guarded<IO> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        if self.rewrite.is_none() && self.idle() && !self.watch.just_ended.swap(false, Ordering::SeqCst) {
            if let Some(answer) = hypers_error(buf) {
                self.rewrite = Some((answer, 0));
            }
        } else if !self.idle() {
            self.watch.just_ended.store(false, Ordering::SeqCst);
        }
        let this = &mut *self;
        if let Some((answer, sent)) = &mut this.rewrite {
            while *sent < answer.len() {
                match Pin::new(&mut this.io).poll_write(cx, &answer[*sent..]) {
                    Poll::Ready(Ok(0)) => return Poll::Ready(Err(io::ErrorKind::WriteZero.into())),
                    Poll::Ready(Ok(n)) => *sent += n,
                    other => return other.map(|r| r.map(|_| 0)),
                }
            }
            // hyper's head counts as written; nothing more follows it.
            return Poll::Ready(Ok(buf.len()));
        }
        Pin::new(&mut this.io).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        // hyper's own answers have no body: a head alone, one slice, which
        // goes through the check above. A head with a body cannot be one
        // of them and goes out in one `writev`, uncopied.
        if self.rewrite.is_some() || bufs.iter().filter(|b| !b.is_empty()).count() <= 1 {
            let first = bufs.iter().find(|b| !b.is_empty()).map_or(&[][..], |b| &**b);
            return self.poll_write(cx, first);
        }
        if self.idle() {
            self.watch.just_ended.swap(false, Ordering::SeqCst);
        } else {
            self.watch.just_ended.store(false, Ordering::SeqCst);
        }
        Pin::new(&mut self.io).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hypers_empty_answers_become_json() {
        let head = b"HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-length: 0\r\ndate: Wed, 25 Nov 2026 10:00:00 GMT\r\n\r\n";
        let out = String::from_utf8(hypers_error(head).unwrap()).unwrap();
        assert!(out.starts_with("HTTP/1.1 431 "), "{out}");
        assert!(out.contains("content-type: application/json"), "{out}");
        assert!(out.ends_with(
            r#"{"error":{"code":"headers-too-large","message":"the request headers are too large or too many"}}"#
        ));
        let len: usize = out.split("content-length: ").nth(1).unwrap().split("\r\n").next().unwrap().parse().unwrap();
        assert_eq!(len, out.split("\r\n\r\n").nth(1).unwrap().len());
        for code in [400, 414] {
            let head = format!("HTTP/1.1 {code} X\r\ncontent-length: 0\r\n\r\n");
            assert!(hypers_error(head.as_bytes()).is_some(), "{code}");
        }
    }

    #[test]
    fn answers_with_a_body_a_type_or_another_status_are_left_alone() {
        for head in [
            &b"HTTP/1.1 400 Bad Request\r\ncontent-type: text/plain\r\ncontent-length: 0\r\n\r\n"[..],
            b"HTTP/1.1 400 Bad Request\r\ncontent-length: 2\r\n\r\n",
            b"HTTP/1.1 400 Bad Request\r\ncontent-length: 2\r\n\r\nhi",
            b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n",
            b"HTTP/1.1 400 Bad Req",
            b"{\"a\":1}",
        ] {
            assert!(hypers_error(head).is_none(), "{}", String::from_utf8_lossy(head));
        }
    }
}
