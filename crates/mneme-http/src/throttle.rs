//! Throttling failed sign-ins (D-CL6): a client address may fail at most
//! [`LIMIT`] times in a fixed window of [`WINDOW_MS`] that starts at its
//! first failure; until the window ends, its next attempt, right or wrong,
//! is refused with 429 and the seconds to wait.

/// Failures allowed per window.
pub const LIMIT: u32 = 10;
/// How long a window lasts.
pub const WINDOW_MS: u64 = 5 * 60 * 1000;

/// A client's failures: how many, and when their window ends (Unix ms).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Failures {
    pub count: u32,
    pub window_end_ms: u64,
}

/// Seconds `client` must still wait before another attempt, or `None` when
/// it may try now.
pub fn wait_s(f: Option<Failures>, now_ms: u64) -> Option<u64> {
    let f = f.filter(|f| f.window_end_ms > now_ms)?;
    (f.count >= LIMIT).then(|| (f.window_end_ms - now_ms).div_ceil(1000).max(1))
}

/// The client part of `spin-client-addr` (`ip:port` or `[v6]:port`): the
/// address without the port, which changes with every connection.
pub fn client_key(addr: Option<&str>) -> String {
    let Some(a) = addr.map(str::trim).filter(|a| !a.is_empty()) else { return "unknown".into() };
    if let Some(v6) = a.strip_prefix('[') {
        return v6.split(']').next().unwrap_or(v6).to_string();
    }
    match a.rsplit_once(':') {
        Some((host, port)) if !host.contains(':') && port.chars().all(|c| c.is_ascii_digit()) => host.to_string(),
        _ => a.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_eleventh_attempt_in_a_window_waits_for_its_end() {
        let now = 1_000_000;
        assert_eq!(wait_s(None, now), None);
        let f = |count| Some(Failures { count, window_end_ms: now + 90_500 });
        assert_eq!(wait_s(f(LIMIT - 1), now), None, "ten failures are allowed");
        assert_eq!(wait_s(f(LIMIT), now), Some(91), "then the rest of the window, rounded up");
        assert_eq!(
            wait_s(Some(Failures { count: 50, window_end_ms: now }), now),
            None,
            "an ended window counts nothing"
        );
        assert_eq!(wait_s(Some(Failures { count: 50, window_end_ms: now + 1 }), now), Some(1));
    }

    #[test]
    fn clients_are_keyed_by_address_without_port() {
        assert_eq!(client_key(Some("127.0.0.1:51234")), "127.0.0.1");
        assert_eq!(client_key(Some("[::1]:8080")), "::1");
        assert_eq!(client_key(Some("10.0.0.7")), "10.0.0.7");
        assert_eq!(client_key(Some("fe80::1")), "fe80::1");
        assert_eq!(client_key(None), "unknown");
        assert_eq!(client_key(Some(" ")), "unknown");
    }
}
