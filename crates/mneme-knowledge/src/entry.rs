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
}
