//! The clock. Every "now" in Mneme comes from [`system_ms`], except where
//! a request carries a test time: the pipeline's time-based rules (TTLs,
//! the 2700 s silence gap, quiet hours, recurrences) are tested at their
//! boundaries by setting the time of one request, which a deployment
//! allows only with the Spin variable `test_clock = "true"`.

/// The header that sets a request's clock when the test clock is enabled.
pub const CLOCK_HEADER: &str = "x-mneme-clock";

/// Wall-clock time in Unix milliseconds (0 if the host clock reads before
/// 1970, which no host does).
pub fn system_ms() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

/// A request's time in Unix ms: the value of [`CLOCK_HEADER`] when the test
/// clock is enabled and the value is a whole number, else the system clock.
pub fn request_ms(header: Option<&str>, test_clock_enabled: bool) -> u64 {
    match header.and_then(|v| v.trim().parse::<u64>().ok()) {
        Some(t) if test_clock_enabled => t,
        _ => system_ms(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_clock_header_counts_only_when_enabled() {
        let before = system_ms();
        assert_eq!(request_ms(Some("1800000000000"), true), 1_800_000_000_000);
        assert!(request_ms(Some("1800000000000"), false) >= before, "disabled: the system clock");
        assert!(request_ms(Some("soon"), true) >= before, "not a number: the system clock");
        assert!(request_ms(None, true) >= before);
    }
}
