//! The pipeline's clock. Every stage takes "now" from its request, so the
//! time-based rules (working-memory and gist TTLs, the 2700 s silence gap)
//! can be tested at their boundaries: when the Spin variable `test_clock`
//! is `true`, the header `X-Mneme-Clock: <unix ms>` sets the time of that
//! request. The variable defaults to `false` and must stay so in production.

use spin_sdk::http::HeaderMap;

pub use mneme_time::clock::system_ms;

pub async fn now_ms(headers: &HeaderMap) -> u64 {
    mneme_entry::clock::request_ms(headers).await
}
