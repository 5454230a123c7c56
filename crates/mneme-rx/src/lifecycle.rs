//! A rec's life: open → snoozed (1–7 days, again and again until the
//! forced decision) → acted or dismissed, which are terminal. Flags are
//! derived when read, never stored.

use serde::{Deserialize, Serialize};

/// Snoozes take 1 to 7 days.
pub const SNOOZE_DAYS: std::ops::RangeInclusive<i64> = 1..=7;
/// At this many snoozes the rec is a forced decision (D-031).
pub const FORCED_DECISION_SNOOZES: i64 = 2;
/// A rec older than this is aging.
pub const AGING_MS: i64 = 14 * 86_400_000;
pub const DAY_MS: i64 = 86_400_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Open,
    Snoozed,
    Acted,
    Dismissed,
}

impl Status {
    pub fn parse(s: &str) -> Option<Status> {
        Some(match s {
            "open" => Status::Open,
            "snoozed" => Status::Snoozed,
            "acted" => Status::Acted,
            "dismissed" => Status::Dismissed,
            _ => return None,
        })
    }
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Open => "open",
            Status::Snoozed => "snoozed",
            Status::Acted => "acted",
            Status::Dismissed => "dismissed",
        }
    }
    pub fn terminal(self) -> bool {
        matches!(self, Status::Acted | Status::Dismissed)
    }
    /// The list order: open, snoozed, acted, dismissed.
    pub fn rank(self) -> u8 {
        self as u8
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Disposition {
    ActedAsPrescribed,
    ActedModified,
    Skipped,
    Dismissed,
}

impl Disposition {
    pub fn parse(s: &str) -> Option<Disposition> {
        Some(match s {
            "acted_as_prescribed" => Disposition::ActedAsPrescribed,
            "acted_modified" => Disposition::ActedModified,
            "skipped" => Disposition::Skipped,
            "dismissed" => Disposition::Dismissed,
            _ => return None,
        })
    }
    pub fn as_str(self) -> &'static str {
        match self {
            Disposition::ActedAsPrescribed => "acted_as_prescribed",
            Disposition::ActedModified => "acted_modified",
            Disposition::Skipped => "skipped",
            Disposition::Dismissed => "dismissed",
        }
    }
    /// `dismissed` dismisses; the other three are kinds of acting.
    pub fn status(self) -> Status {
        if self == Disposition::Dismissed { Status::Dismissed } else { Status::Acted }
    }
    /// The acted kinds need a fit score.
    pub fn needs_fit(self) -> bool {
        matches!(self, Disposition::ActedAsPrescribed | Disposition::ActedModified)
    }
}

/// Why a change was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refused {
    /// 409: the rec is acted or dismissed.
    Terminal(Status),
    /// 409: two snoozes already; decide.
    ForcedDecision,
    /// 400: the request itself is wrong.
    Invalid(String),
}

impl Refused {
    pub fn code(&self) -> &'static str {
        match self {
            Refused::Terminal(_) => "terminal",
            Refused::ForcedDecision => "forced-decision",
            Refused::Invalid(_) => "invalid",
        }
    }
    pub fn message(&self) -> String {
        match self {
            Refused::Terminal(s) => format!("the rec is {} and can no longer change", s.as_str()),
            Refused::ForcedDecision => format!(
                "the rec was snoozed {FORCED_DECISION_SNOOZES} times and is a forced decision: act on it, skip it or dismiss it"
            ),
            Refused::Invalid(m) => m.clone(),
        }
    }
}

/// A snooze: `(snoozed_until_ms, new snooze_count)`.
pub fn snooze(status: Status, snooze_count: i64, days: i64, now_ms: i64) -> Result<(i64, i64), Refused> {
    if status.terminal() {
        return Err(Refused::Terminal(status));
    }
    if !SNOOZE_DAYS.contains(&days) {
        return Err(Refused::Invalid("`days` must be an integer from 1 to 7".into()));
    }
    if snooze_count >= FORCED_DECISION_SNOOZES {
        return Err(Refused::ForcedDecision);
    }
    Ok((now_ms + days * DAY_MS, snooze_count + 1))
}

/// A disposition: the new status.
pub fn dispose(status: Status, d: Disposition, fit: Option<i64>) -> Result<Status, Refused> {
    if status.terminal() {
        return Err(Refused::Terminal(status));
    }
    match fit {
        Some(f) if !(1..=5).contains(&f) => {
            Err(Refused::Invalid("`subjective_fit_1_5` must be an integer from 1 to 5".into()))
        }
        None if d.needs_fit() => Err(Refused::Invalid(format!("`{}` needs `subjective_fit_1_5` (1–5)", d.as_str()))),
        _ => Ok(d.status()),
    }
}

/// Step 0.5 (D-032): a snoozed rec whose time is up is open again.
pub fn revives(status: Status, snoozed_until_ms: Option<i64>, now_ms: i64) -> bool {
    status == Status::Snoozed && snoozed_until_ms.is_some_and(|u| u <= now_ms)
}

/// The flags a reader sees.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Flags {
    pub forced_decision: bool,
    pub aging: bool,
    pub auto_revived: bool,
}

/// `revived_ms`: when step 0.5 last reopened it. A snoozed rec past its time
/// that no run has revived yet reads as auto-revived too.
pub fn flags(
    status: Status,
    snooze_count: i64,
    created_ms: i64,
    snoozed_until_ms: Option<i64>,
    revived_ms: Option<i64>,
    now_ms: i64,
) -> Flags {
    Flags {
        forced_decision: !status.terminal() && snooze_count >= FORCED_DECISION_SNOOZES,
        aging: now_ms - created_ms > AGING_MS,
        auto_revived: revives(status, snoozed_until_ms, now_ms) || (status == Status::Open && revived_ms.is_some()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: i64 = 1_800_000_000_000;

    #[test]
    fn snoozes_take_one_to_seven_days_until_the_forced_decision() {
        assert_eq!(snooze(Status::Open, 0, 1, NOW), Ok((NOW + DAY_MS, 1)));
        assert_eq!(snooze(Status::Snoozed, 1, 7, NOW), Ok((NOW + 7 * DAY_MS, 2)));
        assert_eq!(snooze(Status::Open, 0, 0, NOW).unwrap_err().code(), "invalid");
        assert_eq!(snooze(Status::Open, 0, 8, NOW).unwrap_err().code(), "invalid");
        // The third snooze is refused: two make it a forced decision.
        assert_eq!(snooze(Status::Open, 2, 1, NOW), Err(Refused::ForcedDecision));
        assert_eq!(snooze(Status::Acted, 0, 1, NOW), Err(Refused::Terminal(Status::Acted)));
    }

    #[test]
    fn dispositions_need_a_fit_for_acting_and_terminal_states_refuse() {
        assert_eq!(dispose(Status::Open, Disposition::ActedAsPrescribed, Some(5)), Ok(Status::Acted));
        assert_eq!(dispose(Status::Snoozed, Disposition::Skipped, None), Ok(Status::Acted));
        assert_eq!(dispose(Status::Open, Disposition::Dismissed, None), Ok(Status::Dismissed));
        assert_eq!(dispose(Status::Open, Disposition::ActedModified, None).unwrap_err().code(), "invalid");
        assert_eq!(dispose(Status::Open, Disposition::ActedModified, Some(6)).unwrap_err().code(), "invalid");
        assert_eq!(dispose(Status::Open, Disposition::ActedModified, Some(0)).unwrap_err().code(), "invalid");
        for t in [Status::Acted, Status::Dismissed] {
            assert_eq!(dispose(t, Disposition::Dismissed, None), Err(Refused::Terminal(t)));
        }
    }

    #[test]
    fn flags_are_derived() {
        let f = flags(Status::Snoozed, 2, NOW - AGING_MS - 1, Some(NOW), None, NOW);
        assert_eq!(f, Flags { forced_decision: true, aging: true, auto_revived: true });
        let f = flags(Status::Snoozed, 1, NOW - AGING_MS, Some(NOW + 1), None, NOW);
        assert_eq!(f, Flags { forced_decision: false, aging: false, auto_revived: false });
        assert!(flags(Status::Open, 1, NOW, None, Some(NOW - 5), NOW).auto_revived);
        assert!(!flags(Status::Acted, 2, NOW, None, None, NOW).forced_decision);
        assert!(revives(Status::Snoozed, Some(NOW), NOW) && !revives(Status::Snoozed, Some(NOW + 1), NOW));
    }
}
