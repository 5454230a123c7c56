//! The request log: one line per request on stderr, buffered. A request
//! appends its line to a shared buffer; the buffer goes out in one `write`
//! when it holds 32 KiB or, at the latest, within [`EVERY`] (a thread wakes
//! that often only while lines are waiting). Under load many lines share a
//! system call; at rest a line appears within milliseconds. Lines keep
//! their order and none is dropped while the runner runs (`mneme up`
//! flushes on its way out; a crash loses at most the last [`EVERY`]). Writing each line as it came cost a
//! tenth of the runner's CPU on a trivial component, and a writer thread
//! woken per line cost more than it saved (BENCHMARKS, "At least as fast as
//! Spin").

use std::io::Write;
use std::sync::{Condvar, Mutex};
use std::time::Duration;

/// The longest a line waits in the buffer.
const EVERY: Duration = Duration::from_millis(20);
/// A buffer this full is written at once.
const FULL: usize = 32 << 10;

struct Buffer {
    text: Mutex<String>,
    /// Signalled when the buffer turns non-empty.
    filled: Condvar,
}

static BUFFER: Buffer = Buffer { text: Mutex::new(String::new()), filled: Condvar::new() };
static FLUSHER: std::sync::Once = std::sync::Once::new();

fn write(text: &str) {
    let mut err = std::io::stderr().lock();
    let _ = err.write_all(text.as_bytes());
    let _ = err.flush();
}

/// Appends `line` (without its newline) to the log.
pub fn line(line: String) {
    FLUSHER.call_once(|| {
        std::thread::Builder::new()
            .name("request-log".into())
            .spawn(flusher)
            .expect("spawning the request log flusher");
    });
    let full = {
        let mut text = BUFFER.text.lock().unwrap_or_else(|p| p.into_inner());
        let was_empty = text.is_empty();
        text.push_str(&line);
        text.push('\n');
        if was_empty {
            BUFFER.filled.notify_one();
        }
        (text.len() >= FULL).then(|| std::mem::take(&mut *text))
    };
    if let Some(text) = full {
        write(&text);
    }
}

/// Writes what is buffered now.
pub fn flush() {
    let text = std::mem::take(&mut *BUFFER.text.lock().unwrap_or_else(|p| p.into_inner()));
    if !text.is_empty() {
        write(&text);
    }
}

fn flusher() {
    loop {
        {
            let text = BUFFER.text.lock().unwrap_or_else(|p| p.into_inner());
            let _unused = BUFFER.filled.wait_while(text, |t| t.is_empty()).unwrap_or_else(|p| p.into_inner());
        }
        std::thread::sleep(EVERY);
        flush();
    }
}
