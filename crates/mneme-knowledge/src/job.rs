//! An ingest job's stored forms: the transcript it was queued with
//! (`knowledge_jobs.request`) and the report of what it did
//! (`knowledge_jobs.outcome`), which `GET /knowledge/jobs/{id}` shows.

use crate::entry::SourceType;
use crate::patterns::Resolution;
use serde::{Deserialize, Serialize};

/// A transcript to learn from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Source {
    pub source_type: SourceType,
    pub source_channel: Option<String>,
    pub source_date: String,
    pub source_url: Option<String>,
    /// The name the principal goes by in the text; jobs queued before it
    /// existed have none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub principal: Option<String>,
    pub text: String,
}

/// What became of one candidate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum OutcomeKind {
    Kept,
    Dropped,
    Merged,
    KeptAsHistory,
}

/// One candidate's outcome; what does not apply is left out of the JSON.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Outcome {
    pub index: u32,
    pub outcome: OutcomeKind,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub entry_id: Option<String>,
    /// The entry it merged into.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub into: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub supersedes: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub superseded_by: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub contradicts_but_kept: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pattern: Option<Resolution>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stance_by: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topic: Option<String>,
}

impl Outcome {
    pub fn new(index: u32, outcome: OutcomeKind) -> Self {
        Outcome {
            index,
            outcome,
            entry_id: None,
            into: None,
            reason: None,
            detail: None,
            supersedes: Vec::new(),
            superseded_by: None,
            contradicts_but_kept: Vec::new(),
            pattern: None,
            stance_by: None,
            notes: Vec::new(),
            topic: None,
        }
    }
}

/// What a job did.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Report {
    pub extractor: String,
    pub extractor_note: Option<String>,
    pub candidates: u32,
    pub kept: u32,
    pub merged: u32,
    pub dropped: u32,
    pub kept_as_history: u32,
    pub superseded: Vec<String>,
    pub outcomes: Vec<Outcome>,
}

impl Report {
    /// The report of a job's outcomes, counted by kind.
    pub fn of(
        extractor: String,
        extractor_note: Option<String>,
        superseded: Vec<String>,
        outcomes: Vec<Outcome>,
    ) -> Self {
        let count = |k: OutcomeKind| outcomes.iter().filter(|o| o.outcome == k).count() as u32;
        Report {
            extractor,
            extractor_note,
            candidates: outcomes.len() as u32,
            kept: count(OutcomeKind::Kept),
            merged: count(OutcomeKind::Merged),
            dropped: count(OutcomeKind::Dropped),
            kept_as_history: count(OutcomeKind::KeptAsHistory),
            superseded,
            outcomes,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_report_counts_its_outcomes_and_stores_only_what_applies() {
        let mut merged = Outcome::new(1, OutcomeKind::Merged);
        merged.into = Some("KE-0001".into());
        let outcomes = vec![Outcome::new(0, OutcomeKind::Dropped), merged, Outcome::new(2, OutcomeKind::KeptAsHistory)];
        let r = Report::of("rules".into(), None, vec![], outcomes);
        assert_eq!((r.candidates, r.kept, r.merged, r.dropped, r.kept_as_history), (3, 0, 1, 1, 1));
        let v = serde_json::to_value(&r).unwrap();
        assert_eq!(v["outcomes"][1], serde_json::json!({"index": 1, "outcome": "merged", "into": "KE-0001"}));
        assert_eq!(v["outcomes"][2]["outcome"], "kept-as-history");
        let back: Report = serde_json::from_value(v).unwrap();
        assert_eq!(back, r);
    }
}
