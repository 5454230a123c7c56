//! The pipeline's clock. Every stage takes "now" from its request, so the
//! time-based rules (working-memory and gist TTLs, the 2700 s silence gap)
//! can be tested at their boundaries: when the Spin variable `test_clock`
//! is `true`, the header `X-Mneme-Clock: <unix ms>` sets the time of that
//! request. The variable defaults to `false` and must stay so in production.

use spin_sdk::http::HeaderMap;

pub fn system_ms() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

pub async fn now_ms(headers: &HeaderMap) -> u64 {
    let enabled = spin_sdk::variables::get("test_clock").await.is_ok_and(|v| v.trim() == "true");
    mneme_http::request_clock(headers, enabled, system_ms())
}
