//! The SSE parser of streamed model answers: any bytes, cut anywhere, give
//! the same events as the bytes fed whole.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mneme_llm::{StreamEvent, StreamParser};

fuzz_target!(|input: (Vec<u8>, Vec<u16>)| {
    let (bytes, cuts) = input;
    // Lines past the parser's MAX_LINE (1 MiB, not re-exported) are cut
    // where the buffer overflows, which depends on the chunking by design.
    if bytes.len() > 1 << 20 {
        return;
    }
    let mut whole = StreamParser::new();
    let want = whole.feed(&bytes);
    for e in &want {
        if let StreamEvent::Delta(d) = e {
            assert!(!d.is_empty() && !d.contains('\0'), "{d:?}");
        }
    }

    let mut cuts: Vec<usize> = cuts.iter().map(|&c| usize::from(c) % (bytes.len() + 1)).collect();
    cuts.sort_unstable();
    cuts.push(bytes.len());
    let mut p = StreamParser::new();
    let mut got = Vec::new();
    let mut at = 0;
    for c in cuts {
        got.extend(p.feed(&bytes[at..c]));
        at = c;
    }
    assert_eq!(got, want);
    assert_eq!(p.is_done(), whole.is_done());

    // One byte at a time.
    let mut p = StreamParser::new();
    let got: Vec<StreamEvent> = bytes.iter().flat_map(|b| p.feed(std::slice::from_ref(b))).collect();
    assert_eq!(got, want);
});
