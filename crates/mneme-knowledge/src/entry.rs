//! A knowledge entry: every field of the 001 seed's table, and the closed
//! lists of values with the weights the reranker gives them.

use serde::{Deserialize, Serialize};

/// The five knowledge types, and nothing else (001, "type").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum KnowledgeType {
    Framework,
    Decision,
    Standard,
    Philosophy,
    Reaction,
}

impl KnowledgeType {
    pub const ALL: [KnowledgeType; 5] = [
        KnowledgeType::Framework,
        KnowledgeType::Decision,
        KnowledgeType::Standard,
        KnowledgeType::Philosophy,
        KnowledgeType::Reaction,
    ];

    /// The exact name, case-insensitively; anything else is off the list
    /// (a plural, a synonym, a near miss): never coerced.
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|t| t.as_str().eq_ignore_ascii_case(s.trim()))
    }

    pub fn as_str(self) -> &'static str {
        match self {
            KnowledgeType::Framework => "framework",
            KnowledgeType::Decision => "decision",
            KnowledgeType::Standard => "standard",
            KnowledgeType::Philosophy => "philosophy",
            KnowledgeType::Reaction => "reaction",
        }
    }

    /// type_weight of the final ranking score (001, "final ranking score").
    pub fn weight(self) -> f64 {
        match self {
            KnowledgeType::Framework => 1.0,
            KnowledgeType::Philosophy => 0.9,
            KnowledgeType::Standard => 0.8,
            KnowledgeType::Decision => 0.7,
            KnowledgeType::Reaction => 0.5,
        }
    }
}

/// Reliability: how firmly the position is held (001, "confidence").
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Confidence {
    Low,
    Medium,
    High,
}

impl Confidence {
    /// The default when the model leaves it unspecified.
    pub const DEFAULT: Confidence = Confidence::Medium;

    pub fn parse(s: &str) -> Option<Self> {
        match s.trim().to_ascii_lowercase().as_str() {
            "high" => Some(Confidence::High),
            "medium" => Some(Confidence::Medium),
            "low" => Some(Confidence::Low),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Confidence::High => "high",
            Confidence::Medium => "medium",
            Confidence::Low => "low",
        }
    }

    /// confidence_weight of the final ranking score.
    pub fn weight(self) -> f64 {
        match self {
            Confidence::High => 1.0,
            Confidence::Medium => 0.7,
            Confidence::Low => 0.4,
        }
    }
}

/// Once corroboration_count reaches this, confidence is forced to high
/// (001, "How it can change without a human").
pub const PROMOTION_CORROBORATIONS: i64 = 3;

/// The confidence an entry has after a merge brought its count to `count`.
pub fn promoted(confidence: Confidence, corroboration_count: i64) -> Confidence {
    if corroboration_count >= PROMOTION_CORROBORATIONS { Confidence::High } else { confidence }
}

/// Durability, "joints vs welds" (001, "stability").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Stability {
    Evergreen,
    Stable,
    Evolving,
}

impl Stability {
    /// The default when unspecified.
    pub const DEFAULT: Stability = Stability::Stable;

    pub fn parse(s: &str) -> Option<Self> {
        match s.trim().to_ascii_lowercase().as_str() {
            "evergreen" => Some(Stability::Evergreen),
            "stable" => Some(Stability::Stable),
            "evolving" => Some(Stability::Evolving),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Stability::Evergreen => "evergreen",
            Stability::Stable => "stable",
            Stability::Evolving => "evolving",
        }
    }

    /// The freshness half-life in days; `None` never decays (a weld).
    pub fn half_life_days(self) -> Option<f64> {
        match self {
            Stability::Evergreen => None,
            Stability::Stable => Some(730.0),
            Stability::Evolving => Some(21.0),
        }
    }
}

/// Where an entry came from, set by the ingesting path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SourceType {
    Chat,
    Meeting,
}

impl SourceType {
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "chat" => Some(SourceType::Chat),
            "meeting" => Some(SourceType::Meeting),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            SourceType::Chat => "chat",
            SourceType::Meeting => "meeting",
        }
    }
}

/// Every entry is public in v1 (private is a v2 concept).
pub const TIER: &str = "public";

/// A knowledge entry as stored: the seed's fields, plus `extractor` (which
/// extractor produced it: the model's name, or `rules` for the labelled
/// rule-based fallback).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    pub id: String,
    #[serde(rename = "type")]
    pub kind: KnowledgeType,
    pub topic: String,
    pub position: String,
    pub reasoning: String,
    pub reasoning_pattern: Option<String>,
    pub confidence: Confidence,
    pub stability: Stability,
    pub tier: String,
    pub tags: Vec<String>,
    pub source_type: SourceType,
    pub source_channel: Option<String>,
    pub source_date: String,
    pub source_url: Option<String>,
    pub corroboration_count: i64,
    pub last_corroborated_at: Option<String>,
    pub superseded_by: Option<String>,
    pub created_at: String,
    pub extractor: String,
}

/// `KE-0001`, `KE-0002`…: the n-th entry's id (at least four digits).
pub fn entry_id(n: i64) -> String {
    format!("KE-{n:04}")
}

/// Days since 1970-01-01 of a proleptic Gregorian date.
pub fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The date of days since the epoch.
pub fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

/// Parses `YYYY-MM-DD`, optionally followed by a time (`T…` or ` …`), to
/// days since the epoch; `None` when it is not a real calendar date.
pub fn parse_date(s: &str) -> Option<i64> {
    let s = s.trim();
    let date = s.get(..10)?;
    if s.len() > 10 && !matches!(s.as_bytes()[10], b'T' | b't' | b' ') {
        return None;
    }
    let b = date.as_bytes();
    if b[4] != b'-' || b[7] != b'-' {
        return None;
    }
    let num = |r: std::ops::Range<usize>| date.get(r)?.parse::<i64>().ok();
    let (y, m, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    if !(1..=12).contains(&m) || d < 1 {
        return None;
    }
    let days = days_from_civil(y, m, d);
    // Reject 2026-02-30 and the like: the day must survive the round trip.
    (civil_from_days(days) == (y, m, d)).then_some(days)
}

/// `YYYY-MM-DD` of days since the epoch.
pub fn format_date(days: i64) -> String {
    let (y, m, d) = civil_from_days(days);
    format!("{y:04}-{m:02}-{d:02}")
}

/// An RFC 3339 UTC timestamp (seconds) of epoch milliseconds.
pub fn timestamp(ms: u64) -> String {
    let secs = (ms / 1000) as i64;
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    format!("{}T{:02}:{:02}:{:02}Z", format_date(days), rem / 3600, rem % 3600 / 60, rem % 60)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn types_are_the_closed_list_and_never_coerced() {
        assert_eq!(KnowledgeType::parse("framework"), Some(KnowledgeType::Framework));
        assert_eq!(KnowledgeType::parse(" Reaction "), Some(KnowledgeType::Reaction));
        for off in ["frameworks", "principle", "belief", "", "decision-ish", "opinion"] {
            assert_eq!(KnowledgeType::parse(off), None, "{off} must be off the list");
        }
    }

    #[test]
    fn the_seed_weights() {
        let w: Vec<f64> = KnowledgeType::ALL.iter().map(|t| t.weight()).collect();
        assert_eq!(w, [1.0, 0.7, 0.8, 0.9, 0.5]);
        assert_eq!([Confidence::High.weight(), Confidence::Medium.weight(), Confidence::Low.weight()], [1.0, 0.7, 0.4]);
        assert_eq!(Stability::Stable.half_life_days(), Some(730.0));
        assert_eq!(Stability::Evolving.half_life_days(), Some(21.0));
        assert_eq!(Stability::Evergreen.half_life_days(), None);
    }

    #[test]
    fn promotion_happens_at_the_third_corroboration() {
        assert_eq!(promoted(Confidence::Low, 1), Confidence::Low);
        assert_eq!(promoted(Confidence::Medium, 2), Confidence::Medium);
        assert_eq!(promoted(Confidence::Low, 3), Confidence::High);
        assert_eq!(promoted(Confidence::Medium, 4), Confidence::High);
    }

    #[test]
    fn ids_are_zero_padded_to_four_digits() {
        assert_eq!(entry_id(1), "KE-0001");
        assert_eq!(entry_id(9999), "KE-9999");
        assert_eq!(entry_id(10000), "KE-10000");
    }

    #[test]
    fn dates_parse_only_when_real() {
        assert_eq!(parse_date("1970-01-01"), Some(0));
        assert_eq!(parse_date("2026-11-22"), Some(days_from_civil(2026, 11, 22)));
        assert_eq!(parse_date("2026-11-22T10:00:00Z"), parse_date("2026-11-22"));
        for bad in ["2026-02-30", "2026-13-01", "22/11/2026", "2026-11-2", "soon", "2026-11-22x"] {
            assert_eq!(parse_date(bad), None, "{bad}");
        }
        assert_eq!(format_date(parse_date("2024-02-29").unwrap()), "2024-02-29");
        assert_eq!(timestamp(86_400_000 + 3_661_000), "1970-01-02T01:01:01Z");
    }
}
