//! The scheduler's timing rules, shared by `mneme up` and `mneme cron`
//! (#24): when a job's next run is due, how far it is spread, and how long
//! a failing job waits. Pure: times and random draws come in as arguments.

use std::time::Duration;

/// The longest a failing job is held back, unless its own interval is
/// longer.
pub const MAX_BACKOFF: Duration = Duration::from_secs(300);

/// The most a run is moved later at random, so replicas of the scheduler
/// and jobs that share a second do not all call at once: a tenth of the
/// job's interval, at most 5 s.
pub fn jitter_bound(interval: Duration) -> Duration {
    (interval / 10).min(Duration::from_secs(5))
}

/// A run's delay past its scheduled time for a random draw `r`.
pub fn jitter(interval: Duration, r: u64) -> Duration {
    let bound = jitter_bound(interval).as_millis() as u64;
    if bound == 0 { Duration::ZERO } else { Duration::from_millis(r % bound) }
}

/// How long after its last failure a job that failed `failures` times in a
/// row waits before its next run: none while it succeeds, then its interval,
/// doubled per further failure, up to [`MAX_BACKOFF`] (or the interval, if
/// longer). Runs that fall inside the wait are skipped, not queued.
pub fn backoff(failures: u32, interval: Duration) -> Duration {
    if failures == 0 {
        return Duration::ZERO;
    }
    let cap = MAX_BACKOFF.max(interval);
    let factor = 1u32.checked_shl(failures - 1).unwrap_or(u32::MAX);
    interval.checked_mul(factor).map_or(cap, |d| d.min(cap))
}

/// Whether a tick's answer counts as a success; anything else backs off.
pub fn succeeded(status: u16) -> bool {
    (200..300).contains(&status)
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: fn(u64) -> Duration = Duration::from_secs;

    #[test]
    fn jitter_is_a_tenth_of_the_interval_at_most_five_seconds() {
        assert_eq!(jitter_bound(S(2)), Duration::from_millis(200));
        assert_eq!(jitter_bound(S(60)), S(5));
        assert_eq!(jitter_bound(S(86_400)), S(5));
        assert_eq!(jitter(S(2), 1_234_567), Duration::from_millis(1_234_567 % 200));
        assert_eq!(jitter(Duration::from_millis(5), 7), Duration::ZERO);
    }

    #[test]
    fn backoff_doubles_from_the_interval_up_to_its_cap() {
        assert_eq!(backoff(0, S(2)), Duration::ZERO);
        let waits: Vec<u64> = (1..=10).map(|f| backoff(f, S(2)).as_secs()).collect();
        assert_eq!(waits, [2, 4, 8, 16, 32, 64, 128, 256, 300, 300]);
        assert_eq!(backoff(3, S(3600)), S(3600), "an hourly job waits for its next hour");
        assert_eq!(backoff(u32::MAX, S(2)), S(300), "no overflow");
    }

    #[test]
    fn only_2xx_succeeds() {
        assert!(succeeded(200) && succeeded(204));
        assert!(!succeeded(401) && !succeeded(409) && !succeeded(503));
    }
}
