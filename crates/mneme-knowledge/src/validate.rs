//! Validation of an extracted candidate (001, "type", "reasoning", "topic",
//! "confidence", "stability"). A candidate that breaks a rule is dropped with
//! the reason; nothing is coerced into shape except the two documented
//! defaults.

use crate::entry::{Confidence, KnowledgeType, Stability};
use crate::text;
use serde::Serialize;
use serde_json::Value;

/// Longest topic kept (a title, not a paragraph).
pub const MAX_TOPIC_CHARS: usize = 160;
pub const MAX_POSITION_CHARS: usize = 2_000;
pub const MAX_REASONING_CHARS: usize = 4_000;
pub const MAX_TAGS: usize = 12;

/// A candidate that passed validation.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub struct Candidate {
    #[serde(rename = "type")]
    pub kind: KnowledgeType,
    pub topic: String,
    pub position: String,
    pub reasoning: String,
    /// What the extractor tagged as the reasoning pattern: a slug or free
    /// text, for the patterns engine to resolve.
    pub pattern_hint: Option<String>,
    /// Whether the extractor judged the observation to be pure
    /// communication style (then the pattern is null).
    pub style_only: bool,
    pub confidence: Confidence,
    pub stability: Stability,
    pub tags: Vec<String>,
    /// What validation filled in (a default, a derived topic).
    pub notes: Vec<String>,
}

/// Why a candidate was dropped.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub struct Dropped {
    pub reason: String,
    pub detail: String,
}

fn drop(reason: &str, detail: impl Into<String>) -> Dropped {
    Dropped { reason: reason.into(), detail: detail.into() }
}

fn str_field<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v.get(key).and_then(Value::as_str).map(str::trim).filter(|s| !s.is_empty())
}

fn clip(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_string();
    }
    let cut: String = s.chars().take(max).collect();
    match cut.rfind(' ') {
        Some(i) if i > max / 2 => format!("{}…", cut[..i].trim_end()),
        _ => format!("{cut}…"),
    }
}

/// Whether a topic says the opposite of its position: both take a stance
/// on the same thing (half the topic's content words or more appear in the
/// position) with opposite polarity.
pub fn topic_contradicts(topic: &str, position: &str) -> bool {
    text::has_stance(topic) && text::overlap(topic, position) >= 0.5 && text::affirms(topic) != text::affirms(position)
}

/// Validates one candidate as the extractor wrote it.
pub fn validate(v: &Value) -> Result<Candidate, Dropped> {
    if !v.is_object() {
        return Err(drop("not-an-object", "a candidate must be a JSON object"));
    }
    let kind = match v.get("type") {
        Some(Value::String(s)) => KnowledgeType::parse(s).ok_or_else(|| {
            drop("off-list-type", format!("`{s}` is not one of framework, decision, standard, philosophy, reaction"))
        })?,
        Some(other) if !other.is_null() => return Err(drop("off-list-type", format!("`{other}` is not a type"))),
        _ => return Err(drop("no-type", "the candidate has no type")),
    };
    let position = str_field(v, "position").ok_or_else(|| drop("no-position", "the candidate states no position"))?;
    let reasoning = str_field(v, "reasoning")
        .ok_or_else(|| drop("no-reasoning", "no WHY: an entry without reasoning is rejected"))?;
    let mut notes = Vec::new();
    let topic = match str_field(v, "topic") {
        Some(t) => t.to_string(),
        None => {
            notes.push("topic derived from the position".to_string());
            derive_topic(position)
        }
    };
    if topic_contradicts(&topic, position) {
        return Err(drop("topic-contradicts-position", format!("topic `{topic}` says the opposite of its position")));
    }
    let confidence = match str_field(v, "confidence").map(|s| (s, Confidence::parse(s))) {
        Some((_, Some(c))) => c,
        Some((s, None)) => {
            notes.push(format!("confidence `{s}` is not high/medium/low: defaulted to medium"));
            Confidence::DEFAULT
        }
        None => {
            notes.push("confidence unspecified: defaulted to medium".into());
            Confidence::DEFAULT
        }
    };
    let stability = match str_field(v, "stability").map(|s| (s, Stability::parse(s))) {
        Some((_, Some(s))) => s,
        Some((s, None)) => {
            notes.push(format!("stability `{s}` is not evergreen/stable/evolving: defaulted to stable"));
            Stability::DEFAULT
        }
        None => {
            notes.push("stability unspecified: defaulted to stable".into());
            Stability::DEFAULT
        }
    };
    let mut tags: Vec<String> = Vec::new();
    if let Some(list) = v.get("tags").and_then(Value::as_array) {
        for t in list.iter().filter_map(Value::as_str) {
            let t = t.trim().trim_start_matches('#').to_lowercase();
            if !t.is_empty() && t.chars().count() <= 40 && !tags.contains(&t) && tags.len() < MAX_TAGS {
                tags.push(t);
            }
        }
    }
    let pattern_hint = str_field(v, "reasoning_pattern").map(str::to_string);
    let style_only = v.get("communication_style_only").and_then(Value::as_bool).unwrap_or(false);
    Ok(Candidate {
        kind,
        topic: clip(&topic, MAX_TOPIC_CHARS),
        position: clip(position, MAX_POSITION_CHARS),
        reasoning: clip(reasoning, MAX_REASONING_CHARS),
        pattern_hint,
        style_only,
        confidence,
        stability,
        tags,
        notes,
    })
}

/// A short title from a position: its first eight words, as written (so
/// a "never" stays in it and the title cannot contradict the position).
pub fn derive_topic(position: &str) -> String {
    let words: Vec<&str> = position.split_whitespace().collect();
    let mut t = words.iter().take(8).copied().collect::<Vec<_>>().join(" ");
    if words.len() > 8 {
        t.push('…');
    }
    t.trim_end_matches(['.', ',', ';', ':', '!', '?']).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn good() -> Value {
        json!({"type": "decision", "topic": "Postgres for the ledger", "position": "We use Postgres for the ledger",
               "reasoning": "it gives us transactions we can trust", "tags": ["Databases", "#ledger", "databases"]})
    }

    #[test]
    fn a_valid_candidate_gets_both_defaults() {
        let c = validate(&good()).unwrap();
        assert_eq!(c.kind, KnowledgeType::Decision);
        assert_eq!(c.confidence, Confidence::Medium);
        assert_eq!(c.stability, Stability::Stable);
        assert_eq!(c.tags, ["databases", "ledger"]);
        assert_eq!(c.notes.len(), 2);
    }

    #[test]
    fn an_off_list_type_is_dropped_not_coerced() {
        for t in [json!("belief"), json!("frameworks"), json!("Principle"), json!(3)] {
            let mut v = good();
            v["type"] = t.clone();
            assert_eq!(validate(&v).unwrap_err().reason, "off-list-type", "{t}");
        }
        let mut v = good();
        v.as_object_mut().unwrap().remove("type");
        assert_eq!(validate(&v).unwrap_err().reason, "no-type");
    }

    #[test]
    fn missing_reasoning_is_rejected() {
        for r in [Value::Null, json!(""), json!("   ")] {
            let mut v = good();
            v["reasoning"] = r;
            assert_eq!(validate(&v).unwrap_err().reason, "no-reasoning");
        }
    }

    #[test]
    fn a_topic_that_contradicts_its_position_is_rejected() {
        let mut v = good();
        v["topic"] = json!("Never use Postgres for the ledger");
        assert_eq!(validate(&v).unwrap_err().reason, "topic-contradicts-position");
        v["topic"] = json!("Ledger database");
        assert!(validate(&v).is_ok(), "a neutral title contradicts nothing");
        assert!(topic_contradicts("Always ship on Fridays", "Don't ship on Fridays"));
        assert!(!topic_contradicts("Shipping on Fridays", "Don't ship on Fridays"));
        // "for" inside a title is a preposition, not a side (a real model's
        // candidate, dropped before this, in the real-model tier).
        assert!(!topic_contradicts(
            "testing policy for bug fixes",
            "Every bug fix must ship with a test that reproduces the bug, or the same bug comes back if it is not tested."
        ));
        assert!(topic_contradicts("For bug fixes shipping with tests", "Bug fixes do not ship with tests"));
    }

    #[test]
    fn explicit_values_are_kept_and_odd_ones_defaulted_with_a_note() {
        let mut v = good();
        v["confidence"] = json!("HIGH");
        v["stability"] = json!("evolving");
        let c = validate(&v).unwrap();
        assert_eq!((c.confidence, c.stability), (Confidence::High, Stability::Evolving));
        v["confidence"] = json!("certain");
        let c = validate(&v).unwrap();
        assert_eq!(c.confidence, Confidence::Medium);
        assert!(c.notes[0].contains("certain"));
    }

    #[test]
    fn a_missing_topic_is_derived_from_the_position() {
        let mut v = good();
        v.as_object_mut().unwrap().remove("topic");
        assert_eq!(validate(&v).unwrap().topic, "We use Postgres for the ledger");
        assert_eq!(derive_topic("Never deploy on a Friday."), "Never deploy on a Friday");
    }
}
