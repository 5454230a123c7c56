//! A guest's stdout and stderr, passed on to the runner's one line at a
//! time. A guest's `eprintln!` reaches the host as several writes (the text,
//! each argument, the newline), and instances run on many threads: written
//! through as they come, two instances' lines cut into each other (seen in
//! CI: `schema: applied migration 8schema: applied migration 1 (init)`).
//! Here each instance keeps its unfinished line and hands the runner's
//! stream whole lines, each batch in one locked write, so a line is never
//! split and one instance's lines keep their order.
//!
//! A line with no newline yet waits for one, for [`LONGEST`] bytes, or for
//! the instance to end (the buffer is written out when its store drops).
//!
//! While tracing, each whole line is also an event, `app_log`, on the
//! innermost span open in the instance, as Spin turns an app's log lines
//! into events on its current span: a model's fallback, which the guest
//! logs, is then on the trace of the request that fell back.

use std::io::Write;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use bytes::Bytes;
use tokio::io::AsyncWrite;
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::p2::{OutputStream, Pollable, StreamError, StreamResult};

/// An unfinished line this long is written as it is.
const LONGEST: usize = 16 << 10;

/// Which of the runner's streams a guest stream goes to.
#[derive(Clone, Copy)]
pub enum Target {
    Stdout,
    Stderr,
}

impl Target {
    fn write(self, bytes: &[u8]) -> std::io::Result<()> {
        match self {
            Target::Stdout => {
                let mut out = std::io::stdout().lock();
                out.write_all(bytes)?;
                out.flush()
            }
            Target::Stderr => std::io::stderr().lock().write_all(bytes),
        }
    }
}

/// One instance's stream: every handle the guest opens on it shares the
/// unfinished line.
#[derive(Clone)]
pub struct Lines {
    pending: Arc<Pending>,
}

struct Pending {
    target: Target,
    bytes: Mutex<Vec<u8>>,
    /// Where a line's event goes while tracing: the instance's open spans,
    /// and the component's id.
    trace: Option<(Arc<crate::otel::Scope>, Arc<str>)>,
}

impl Drop for Pending {
    fn drop(&mut self) {
        let rest = std::mem::take(self.bytes.get_mut().unwrap_or_else(|p| p.into_inner()));
        if !rest.is_empty() {
            let _ = self.target.write(&rest);
        }
    }
}

impl Lines {
    pub fn new(target: Target, trace: Option<(Arc<crate::otel::Scope>, Arc<str>)>) -> Lines {
        Lines { pending: Arc::new(Pending { target, bytes: Mutex::new(Vec::new()), trace }) }
    }

    /// Adds `bytes` and writes out every line they finish.
    fn push(&self, bytes: &[u8]) -> std::io::Result<()> {
        let ready = {
            let mut pending = self.pending.bytes.lock().unwrap_or_else(|p| p.into_inner());
            pending.extend_from_slice(bytes);
            split_ready(&mut pending)
        };
        match ready {
            Some(lines) => {
                if let Some((scope, component)) = &self.pending.trace {
                    trace_lines(scope, component, &lines);
                }
                self.pending.target.write(&lines)
            }
            None => Ok(()),
        }
    }
}

/// Each line as an `app_log` event on the innermost open span (the
/// attribute names are Spin's).
fn trace_lines(scope: &crate::otel::Scope, component: &str, lines: &[u8]) {
    let Some(span) = scope.parent(&[]) else { return };
    for line in lines.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
        let text = String::from_utf8_lossy(line).into_owned();
        let attributes = vec![("app_log", text.into()), ("component_id", component.to_string().into())];
        crate::otel::add_event(span, "app_log", attributes);
    }
}

/// Takes from `pending` what is ready to go: everything up to its last
/// newline, or all of it once it is [`LONGEST`] bytes or more.
fn split_ready(pending: &mut Vec<u8>) -> Option<Vec<u8>> {
    if pending.len() >= LONGEST {
        return Some(std::mem::take(pending));
    }
    let end = pending.iter().rposition(|&b| b == b'\n')? + 1;
    let rest = pending.split_off(end);
    Some(std::mem::replace(pending, rest))
}

impl IsTerminal for Lines {
    fn is_terminal(&self) -> bool {
        match self.pending.target {
            Target::Stdout => std::io::IsTerminal::is_terminal(&std::io::stdout()),
            Target::Stderr => std::io::IsTerminal::is_terminal(&std::io::stderr()),
        }
    }
}

impl StdoutStream for Lines {
    fn p2_stream(&self) -> Box<dyn OutputStream> {
        Box::new(self.clone())
    }

    fn async_stream(&self) -> Box<dyn AsyncWrite + Send + Sync> {
        Box::new(self.clone())
    }
}

impl OutputStream for Lines {
    fn write(&mut self, bytes: Bytes) -> StreamResult<()> {
        self.push(&bytes).map_err(|e| StreamError::LastOperationFailed(e.into()))
    }

    /// Whole lines are already out; an unfinished one keeps waiting, or a
    /// guest that flushes after every piece would split its lines again.
    fn flush(&mut self) -> StreamResult<()> {
        Ok(())
    }

    fn check_write(&mut self) -> StreamResult<usize> {
        Ok(1 << 20)
    }
}

#[async_trait::async_trait]
impl Pollable for Lines {
    async fn ready(&mut self) {}
}

impl AsyncWrite for Lines {
    fn poll_write(self: Pin<&mut Self>, _cx: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
        Poll::Ready(self.push(buf).map(|()| buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_finished_lines_are_ready() {
        let mut p = b"schema: applied migration 8".to_vec();
        assert_eq!(split_ready(&mut p), None);
        p.extend_from_slice(b" (drift)\nnext: ");
        assert_eq!(split_ready(&mut p).as_deref(), Some(&b"schema: applied migration 8 (drift)\n"[..]));
        assert_eq!(p, b"next: ");
        p.extend_from_slice(b"a\nb\nc");
        assert_eq!(split_ready(&mut p).as_deref(), Some(&b"next: a\nb\n"[..]));
        assert_eq!(p, b"c");
    }

    #[test]
    fn a_line_that_never_ends_goes_out_at_the_limit() {
        let mut p = vec![b'x'; LONGEST - 1];
        assert_eq!(split_ready(&mut p), None);
        p.push(b'x');
        assert_eq!(split_ready(&mut p).map(|v| v.len()), Some(LONGEST));
        assert!(p.is_empty());
    }
}
