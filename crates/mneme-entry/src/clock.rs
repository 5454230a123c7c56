//! An entry's request clock: the test clock when the deployment enables it
//! (`test_clock = "true"`, tests only), else the system clock
//! (`mneme_time::clock`).

use spin_sdk::http::HeaderMap;

pub use mneme_time::clock::system_ms;

/// Whether the deployment lets requests set their time.
pub async fn test_clock_enabled() -> bool {
    spin_sdk::variables::get("test_clock").await.is_ok_and(|v| v.trim() == "true")
}

/// The time of a request with these headers, in Unix ms.
pub async fn request_ms(headers: &HeaderMap) -> u64 {
    mneme_http::request_clock(headers, test_clock_enabled().await)
}
