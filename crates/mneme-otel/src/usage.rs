//! The span of an outbound HTTP call lasts until its response body ends. On
//! the way it reads the token counts an OpenAI-compatible endpoint reports
//! (`"prompt_tokens": N`, `"completion_tokens": N`, in a JSON body or in an
//! SSE stream's last chunk) into `gen_ai.usage.input_tokens` and
//! `gen_ai.usage.output_tokens`. The body passes through unchanged.

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};

use super::Span;

/// Finds `"key"` followed by `:` and digits in a stream of pieces.
#[derive(Debug, Default)]
pub struct Counts {
    /// The end of the previous piece, so a number split across two is read.
    tail: Vec<u8>,
    pub input: Option<u64>,
    pub output: Option<u64>,
}

const KEEP: usize = 48;

impl Counts {
    pub fn feed(&mut self, piece: &[u8]) {
        let mut text = std::mem::take(&mut self.tail);
        text.extend_from_slice(piece);
        for (key, slot) in [(&b"\"prompt_tokens\""[..], 0), (&b"\"completion_tokens\""[..], 1)] {
            let mut from = 0;
            while let Some(at) = find(&text[from..], key) {
                let mut i = from + at + key.len();
                while i < text.len() && matches!(text[i], b' ' | b':' | b'\t' | b'\r' | b'\n') {
                    i += 1;
                }
                let digits = text[i..].iter().take_while(|b| b.is_ascii_digit()).count();
                // A number at the very end may go on in the next piece.
                if digits > 0 && i + digits < text.len() {
                    let n = std::str::from_utf8(&text[i..i + digits]).ok().and_then(|d| d.parse().ok());
                    if slot == 0 { self.input = n.or(self.input) } else { self.output = n.or(self.output) }
                }
                from = from + at + key.len();
            }
        }
        let keep = text.len().min(KEEP);
        self.tail = text[text.len() - keep..].to_vec();
    }

    /// Reads what is left (the body ended).
    pub fn finish(&mut self) {
        if !self.tail.is_empty() {
            self.feed(b" ");
        }
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// A response body carrying its call's span.
pub struct Watched<B> {
    inner: B,
    span: Option<Span>,
    counts: Counts,
}

impl<B> Watched<B> {
    pub fn new(inner: B, span: Span) -> Self {
        Self { inner, span: Some(span), counts: Counts::default() }
    }

    fn end(&mut self) {
        if let Some(mut span) = self.span.take() {
            self.counts.finish();
            if let Some(n) = self.counts.input {
                span.set("gen_ai.usage.input_tokens", n);
            }
            if let Some(n) = self.counts.output {
                span.set("gen_ai.usage.output_tokens", n);
            }
        }
    }
}

impl<B> Drop for Watched<B> {
    fn drop(&mut self) {
        self.end();
    }
}

impl<B: Body<Data = Bytes> + Unpin> Body for Watched<B>
where
    B::Error: std::fmt::Debug,
{
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, B::Error>>> {
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        match &polled {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(data) = frame.data_ref() {
                    self.counts.feed(data);
                }
            }
            Poll::Ready(Some(Err(e))) => {
                let msg = format!("{e:?}");
                if let Some(s) = &mut self.span {
                    s.fail(msg);
                }
                self.end();
            }
            Poll::Ready(None) => self.end(),
            Poll::Pending => {}
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_are_read_from_json_and_from_pieces_of_a_stream() {
        let mut c = Counts::default();
        c.feed(br#"{"choices":[],"usage":{"prompt_tokens":12,"completion_tokens":3,"total_tokens":15}}"#);
        c.finish();
        assert_eq!((c.input, c.output), (Some(12), Some(3)));

        let body = b"data: {\"choices\":[{\"delta\":{\"content\":\"hi\"}}]}\n\ndata: {\"usage\": {\"prompt_tokens\": 1234, \"completion_tokens\": 56}}\n\ndata: [DONE]\n\n";
        for cut in 1..body.len() {
            let mut c = Counts::default();
            c.feed(&body[..cut]);
            c.feed(&body[cut..]);
            c.finish();
            assert_eq!((c.input, c.output), (Some(1234), Some(56)), "cut at {cut}");
        }
        let mut none = Counts::default();
        none.feed(b"{\"text\":\"no usage here\"}");
        none.finish();
        assert_eq!((none.input, none.output), (None, None));
    }
}
