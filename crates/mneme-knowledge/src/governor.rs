//! Merge, promotion and supersede (001, "corroboration_count",
//! "superseded_by"). The model, when there is one, only labels stances; the
//! decision is this module's deterministic rule.

use crate::entry::{Confidence, Entry, KnowledgeType, promoted};
use crate::text;
use mneme_time::calendar::parse_date;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Default near-duplicate threshold: same type and cosine at or above this
/// merges (variable `knowledge_merge_threshold`; D-K2).
pub const MERGE_COSINE_DEFAULT: f32 = 0.85;

/// How many of the most similar active entries get a stance judgement.
pub const STANCE_NEIGHBOURS: usize = 3;

/// Below this cosine two entries are not about the same thing, so they can
/// neither merge nor contradict.
pub const STANCE_MIN_COSINE: f32 = 0.5;

pub const STANCE_PROMPT: &str = include_str!("../../../prompts/knowledge-stance.md");

/// The JSON Schema of a stance answer (D-L2): one label per earlier entry.
pub fn stance_schema() -> String {
    serde_json::json!({
        "type": "object",
        "properties": {
            "stances": {
                "type": "array",
                "maxItems": 20,
                "items": {
                    "type": "object",
                    "properties": {
                        "id": {"type": "string", "maxLength": 40},
                        "stance": {"enum": ["agree", "contradict", "refine", "unrelated"]},
                    },
                    "required": ["id", "stance"],
                    "additionalProperties": false,
                },
            },
        },
        "required": ["stances"],
        "additionalProperties": false,
    })
    .to_string()
}

/// How an earlier entry relates to a new statement.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Stance {
    Agree,
    Contradict,
    Refine,
    Unrelated,
}

impl Stance {
    pub fn parse(s: &str) -> Option<Self> {
        match s.trim().to_ascii_lowercase().as_str() {
            "agree" => Some(Stance::Agree),
            "contradict" | "contradicts" => Some(Stance::Contradict),
            "refine" | "refines" => Some(Stance::Refine),
            "unrelated" => Some(Stance::Unrelated),
            _ => None,
        }
    }
}

/// The rule-based stance, used with no model or when the model left an
/// entry unlabelled: opposite polarity over mostly the same words is a
/// contradiction.
pub fn rule_stance(new_position: &str, old_position: &str, cos: f32, merge_threshold: f32) -> Stance {
    if cos < STANCE_MIN_COSINE {
        return Stance::Unrelated;
    }
    let shared = text::overlap(new_position, old_position);
    if shared >= 0.5 && text::affirms(new_position) != text::affirms(old_position) {
        Stance::Contradict
    } else if cos >= merge_threshold {
        Stance::Agree
    } else if shared >= 0.5 {
        Stance::Refine
    } else {
        Stance::Unrelated
    }
}

/// The stance request's user message.
pub fn stance_message(position: &str, reasoning: &str, earlier: &[(String, String)]) -> String {
    let mut m = format!("New statement: {position}\nBecause: {reasoning}\n\nEarlier entries:\n");
    for (id, pos) in earlier {
        m.push_str(&format!("- {id}: {pos}\n"));
    }
    m
}

/// The labels in a stance answer, by entry id; unreadable ones are absent.
pub fn parse_stances(answer: &str) -> Vec<(String, Stance)> {
    let Ok(v) = mneme_llm::extract_json(answer) else { return Vec::new() };
    let list = match &v {
        Value::Array(a) => a.clone(),
        Value::Object(o) => o.get("stances").and_then(Value::as_array).cloned().unwrap_or_default(),
        _ => Vec::new(),
    };
    list.iter()
        .filter_map(|s| Some((s.get("id")?.as_str()?.to_string(), Stance::parse(s.get("stance")?.as_str()?)?)))
        .collect()
}

/// One of the most similar active entries, with its judged stance.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Neighbour {
    pub id: String,
    #[serde(rename = "type")]
    pub kind: KnowledgeType,
    pub cosine: f32,
    pub confidence: Confidence,
    pub source_date: String,
    pub stance: Stance,
}

/// What happens to a valid candidate.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "action", rename_all = "kebab-case")]
pub enum Action {
    /// A near-duplicate of an active entry: corroborate it.
    Merge { into: String, cosine: f32 },
    /// A new entry. `supersedes`: older entries it replaces.
    /// `superseded_by`: a newer entry already says the opposite, so it is
    /// stored as history. `kept_both`: contradictions the rule did not act on.
    Insert { supersedes: Vec<String>, superseded_by: Option<String>, kept_both: Vec<String> },
}

/// Whether date `a` is on or after date `b` (an unparseable date counts
/// as oldest).
fn on_or_after(a: &str, b: &str) -> bool {
    parse_date(a).unwrap_or(i64::MIN) >= parse_date(b).unwrap_or(i64::MIN)
}

/// The deterministic rule (D-K5):
/// 1. a contradiction (stance `contradict`, cosine ≥ 0.5) never merges; the
///    older of the two by source_date is superseded by the newer, except
///    that a low-confidence newer statement supersedes nothing;
/// 2. otherwise the most similar same-type entry at or above the merge
///    threshold absorbs the candidate;
/// 3. otherwise the candidate is a new entry.
pub fn decide(
    kind: KnowledgeType,
    confidence: Confidence,
    source_date: &str,
    neighbours: &[Neighbour],
    merge_threshold: f32,
) -> Action {
    let contradicted: Vec<&Neighbour> =
        neighbours.iter().filter(|n| n.stance == Stance::Contradict && n.cosine >= STANCE_MIN_COSINE).collect();
    if !contradicted.is_empty() {
        let (mut supersedes, mut kept_both, mut superseded_by) = (Vec::new(), Vec::new(), None);
        for n in contradicted {
            if on_or_after(source_date, &n.source_date) {
                if confidence == Confidence::Low {
                    kept_both.push(n.id.clone());
                } else {
                    supersedes.push(n.id.clone());
                }
            } else if n.confidence != Confidence::Low && superseded_by.is_none() {
                superseded_by = Some(n.id.clone());
            } else {
                kept_both.push(n.id.clone());
            }
        }
        return Action::Insert { supersedes, superseded_by, kept_both };
    }
    let target = neighbours
        .iter()
        .filter(|n| n.kind == kind && n.cosine >= merge_threshold)
        .max_by(|a, b| a.cosine.total_cmp(&b.cosine));
    match target {
        Some(n) => Action::Merge { into: n.id.clone(), cosine: n.cosine },
        None => Action::Insert { supersedes: Vec::new(), superseded_by: None, kept_both: Vec::new() },
    }
}

/// A merge: corroboration_count + 1, tags unioned, source_date bumped to
/// the newer date, last_corroborated_at written, and confidence promoted
/// at the third corroboration.
pub fn merge(entry: &mut Entry, tags: &[String], source_date: &str, now: &str) {
    entry.corroboration_count += 1;
    for t in tags {
        if !entry.tags.contains(t) {
            entry.tags.push(t.clone());
        }
    }
    if !on_or_after(&entry.source_date, source_date) {
        entry.source_date = source_date.to_string();
    }
    entry.last_corroborated_at = Some(now.to_string());
    entry.confidence = promoted(entry.confidence, entry.corroboration_count);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::entry::{SourceType, Stability};

    fn n(id: &str, kind: KnowledgeType, cos: f32, date: &str, stance: Stance) -> Neighbour {
        Neighbour { id: id.into(), kind, cosine: cos, confidence: Confidence::Medium, source_date: date.into(), stance }
    }

    const D: KnowledgeType = KnowledgeType::Decision;
    const NONE: Action = Action::Insert { supersedes: Vec::new(), superseded_by: None, kept_both: Vec::new() };

    #[test]
    fn merges_at_the_threshold_and_not_below() {
        let at = [n("KE-0001", D, 0.85, "2026-01-01", Stance::Agree)];
        assert_eq!(
            decide(D, Confidence::Medium, "2026-02-01", &at, 0.85),
            Action::Merge { into: "KE-0001".into(), cosine: 0.85 }
        );
        let below = [n("KE-0001", D, 0.8499, "2026-01-01", Stance::Agree)];
        assert_eq!(decide(D, Confidence::Medium, "2026-02-01", &below, 0.85), NONE);
    }

    #[test]
    fn only_the_same_type_merges() {
        let other = [n("KE-0001", KnowledgeType::Standard, 0.97, "2026-01-01", Stance::Agree)];
        assert_eq!(decide(D, Confidence::Medium, "2026-02-01", &other, 0.85), NONE);
    }

    #[test]
    fn a_contradiction_supersedes_the_older_entry() {
        let nb = [n("KE-0001", D, 0.93, "2026-01-01", Stance::Contradict)];
        let a = decide(D, Confidence::Medium, "2026-02-01", &nb, 0.85);
        assert_eq!(a, Action::Insert { supersedes: vec!["KE-0001".into()], superseded_by: None, kept_both: vec![] });
        // An older transcript ingested later is stored as history.
        let a = decide(D, Confidence::Medium, "2025-06-01", &nb, 0.85);
        assert_eq!(a, Action::Insert { supersedes: vec![], superseded_by: Some("KE-0001".into()), kept_both: vec![] });
        // The same day: the later statement wins.
        let a = decide(D, Confidence::High, "2026-01-01", &nb, 0.85);
        assert_eq!(a, Action::Insert { supersedes: vec!["KE-0001".into()], superseded_by: None, kept_both: vec![] });
    }

    #[test]
    fn a_low_confidence_contradiction_supersedes_nothing() {
        let nb = [n("KE-0001", D, 0.9, "2026-01-01", Stance::Contradict)];
        let a = decide(D, Confidence::Low, "2026-02-01", &nb, 0.85);
        assert_eq!(a, Action::Insert { supersedes: vec![], superseded_by: None, kept_both: vec!["KE-0001".into()] });
    }

    #[test]
    fn a_weak_contradiction_label_is_ignored() {
        let nb = [n("KE-0001", D, 0.3, "2026-01-01", Stance::Contradict)];
        assert_eq!(decide(D, Confidence::High, "2026-02-01", &nb, 0.85), NONE);
    }

    #[test]
    fn rule_stances() {
        assert_eq!(rule_stance("Never deploy on Fridays", "Always deploy on Fridays", 0.9, 0.85), Stance::Contradict);
        assert_eq!(rule_stance("Deploy on Fridays", "Deploy on Fridays freely", 0.95, 0.85), Stance::Agree);
        assert_eq!(rule_stance("Deploy on Fridays", "Cats are great", 0.1, 0.85), Stance::Unrelated);
        assert_eq!(rule_stance("We deploy small batches", "We deploy small batches daily", 0.7, 0.85), Stance::Refine);
    }

    #[test]
    fn stance_answers_parse() {
        let s = parse_stances(
            r#"{"stances": [{"id": "KE-0001", "stance": "Contradict"}, {"id": "KE-0002", "stance": "meh"}]}"#,
        );
        assert_eq!(s, vec![("KE-0001".to_string(), Stance::Contradict)]);
        assert!(parse_stances("nope").is_empty());
    }

    fn entry() -> Entry {
        Entry {
            id: "KE-0001".into(),
            kind: D,
            topic: "t".into(),
            position: "p".into(),
            reasoning: "r".into(),
            reasoning_pattern: None,
            confidence: Confidence::Low,
            stability: Stability::Stable,
            tier: "public".into(),
            tags: vec!["a".into()],
            source_type: SourceType::Chat,
            source_channel: None,
            source_date: "2026-03-01".into(),
            source_url: None,
            corroboration_count: 1,
            last_corroborated_at: None,
            superseded_by: None,
            created_at: "2026-03-01T00:00:00Z".into(),
            extractor: "rules".into(),
        }
    }

    #[test]
    fn merging_counts_unions_bumps_and_promotes_at_three() {
        let mut e = entry();
        merge(&mut e, &["b".into(), "a".into()], "2026-01-01", "2026-11-22T00:00:00Z");
        assert_eq!((e.corroboration_count, e.confidence), (2, Confidence::Low));
        assert_eq!(e.tags, ["a", "b"]);
        assert_eq!(e.source_date, "2026-03-01", "an older date does not move it back");
        assert_eq!(e.last_corroborated_at.as_deref(), Some("2026-11-22T00:00:00Z"));
        merge(&mut e, &[], "2026-06-01", "2026-11-23T00:00:00Z");
        assert_eq!((e.corroboration_count, e.confidence), (3, Confidence::High));
        assert_eq!(e.source_date, "2026-06-01");
    }
}
