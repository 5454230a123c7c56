//! The scheduler's timing rules, shared by `mneme up` and `mneme cron`
//! (#24): when a job's next run is due, how far it is spread, and how long
//! a failing job waits, and what the console says about runs. Pure: times,
//! random draws and outcomes come in as arguments.

use std::collections::BTreeMap;
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

/// How a run ended, as the console and `mneme.tick.outcome` count it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// 2xx, and the job ran.
    Ok,
    /// 2xx, but the job was not due or another scheduler's run held it.
    Skipped,
    /// Any other answer, or none.
    Failed,
}

/// Runs of one job since the last summary.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    pub ok: u32,
    pub skipped: u32,
    pub failed: u32,
}

impl Counts {
    pub fn add(&mut self, outcome: Outcome) {
        let n = match outcome {
            Outcome::Ok => &mut self.ok,
            Outcome::Skipped => &mut self.skipped,
            Outcome::Failed => &mut self.failed,
        };
        *n = n.saturating_add(1);
    }
}

/// How often the console sums up the runs when it does not print each one.
pub const SUMMARY_EVERY: Duration = Duration::from_secs(300);

/// The summary line of the runs in `window`, per job (`/tick/drift` →
/// `drift`), or none when nothing ran:
/// `cron summary, last 5 min: drift 2 ok, 8 skipped; tools 150 ok`.
pub fn summary(window: Duration, counts: &BTreeMap<String, Counts>) -> Option<String> {
    let parts: Vec<String> = counts
        .iter()
        .filter(|(_, c)| **c != Counts::default())
        .map(|(job, c)| {
            let kinds = [(c.ok, "ok"), (c.skipped, "skipped"), (c.failed, "failed")];
            let said: Vec<String> = kinds.iter().filter(|(n, _)| *n > 0).map(|(n, k)| format!("{n} {k}")).collect();
            format!("{} {}", job.rsplit('/').next().unwrap_or(job), said.join(", "))
        })
        .collect();
    if parts.is_empty() {
        return None;
    }
    let secs = window.as_secs();
    let span = if secs >= 60 && secs.is_multiple_of(60) { format!("{} min", secs / 60) } else { format!("{secs} s") };
    Some(format!("cron summary, last {span}: {}", parts.join("; ")))
}

/// What the console prints about one run.
#[derive(Debug, PartialEq, Eq)]
pub enum Say {
    /// Nothing: it went as the last one did (the summary counts it).
    Nothing,
    /// The run's own line, as every run printed before (verbose mode).
    Every,
    /// The failure, with its backoff.
    Failure,
    /// A success after this many failures in a row.
    Recovered(u32),
}

/// What to print about a run that ended `succeeded`, after
/// `failures_before` failures in a row: every run when `verbose`, else
/// only failures and the first success after them.
pub fn say(verbose: bool, failures_before: u32, succeeded: bool) -> Say {
    match (succeeded, verbose, failures_before) {
        (false, _, _) => Say::Failure,
        (true, _, n) if n > 0 => Say::Recovered(n),
        (true, true, _) => Say::Every,
        (true, false, _) => Say::Nothing,
    }
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

    #[test]
    fn the_console_speaks_of_failures_and_recoveries_unless_verbose() {
        assert_eq!(say(false, 0, true), Say::Nothing);
        assert_eq!(say(true, 0, true), Say::Every);
        assert_eq!(say(false, 0, false), Say::Failure);
        assert_eq!(say(false, 4, false), Say::Failure);
        assert_eq!(say(false, 3, true), Say::Recovered(3));
        assert_eq!(say(true, 1, true), Say::Recovered(1));
    }

    #[test]
    fn a_summary_counts_each_job_and_is_silent_when_nothing_ran() {
        let mut counts = BTreeMap::new();
        assert_eq!(summary(SUMMARY_EVERY, &counts), None);
        counts.insert("/tick/tools".to_string(), Counts::default());
        assert_eq!(summary(SUMMARY_EVERY, &counts), None, "a job with no runs says nothing");
        for o in [Outcome::Ok, Outcome::Skipped, Outcome::Skipped, Outcome::Failed] {
            counts.entry("/tick/drift".to_string()).or_default().add(o);
        }
        counts.get_mut("/tick/tools").unwrap().add(Outcome::Ok);
        assert_eq!(
            summary(SUMMARY_EVERY, &counts).unwrap(),
            "cron summary, last 5 min: drift 1 ok, 2 skipped, 1 failed; tools 1 ok"
        );
        assert_eq!(
            summary(Duration::from_secs(3), &counts).unwrap().split(':').next().unwrap(),
            "cron summary, last 3 s"
        );
    }
}
