//! Topic classification without a model (D-C5): the message's embedding is
//! compared with each topic's rolling mean embedding; the thread's recent
//! topic gets a +0.15 boost; the boundary rule opens a new topic when the
//! best similarity stays under 0.55. A new topic is named from 2–4 of the
//! message's keywords.

use serde::{Deserialize, Serialize};

use mneme_text::cosine;

/// Name of the topic before any message has been classified.
pub const GENERAL_TOPIC: &str = "general";

/// Similarity bonus of the topic the thread was last on.
pub const RECENT_BOOST: f64 = 0.15;
/// Below this (boosted) similarity, the message opens a new topic.
pub const NEW_TOPIC_BELOW: f64 = 0.55;
/// The rolling mean counts at most this many messages, so a topic can drift.
pub const ROLLING_CAP: u32 = 20;

/// A known topic as the classifier sees it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Topic {
    pub name: String,
    pub embedding: Vec<f32>,
    pub messages: u32,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Classification {
    pub topic: String,
    pub similarity: f64,
    pub is_new_topic: bool,
}

/// Picks the topic for a message embedding. `recent` is the thread's
/// current topic, if any; `fallback_name` names a new topic.
pub fn classify(embedding: &[f32], topics: &[Topic], recent: Option<&str>, fallback_name: &str) -> Classification {
    let best = topics
        .iter()
        .map(|t| {
            let boost = if Some(t.name.as_str()) == recent { RECENT_BOOST } else { 0.0 };
            (t, cosine(embedding, &t.embedding) + boost)
        })
        .max_by(|a, b| a.1.total_cmp(&b.1));
    match best {
        Some((t, sim)) if sim >= NEW_TOPIC_BELOW => {
            Classification { topic: t.name.clone(), similarity: round3(sim.min(1.0)), is_new_topic: false }
        }
        other => Classification {
            topic: unique_name(fallback_name, topics),
            similarity: round3(other.map_or(0.0, |(_, s)| s.min(1.0))),
            is_new_topic: true,
        },
    }
}

fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

fn unique_name(base: &str, topics: &[Topic]) -> String {
    if !topics.iter().any(|t| t.name == base) {
        return base.to_string();
    }
    (2..).map(|n| format!("{base}-{n}")).find(|c| !topics.iter().any(|t| &t.name == c)).unwrap()
}

/// Folds a message into a topic's rolling mean, then re-normalises.
pub fn fold(topic: &mut Topic, embedding: &[f32]) {
    let n = topic.messages.min(ROLLING_CAP - 1) as f32;
    if topic.embedding.len() != embedding.len() {
        topic.embedding = embedding.to_vec();
    } else {
        for (m, x) in topic.embedding.iter_mut().zip(embedding) {
            *m = (*m * n + x) / (n + 1.0);
        }
    }
    let norm = topic.embedding.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm > 0.0 {
        topic.embedding.iter_mut().for_each(|x| *x /= norm);
    }
    topic.messages += 1;
}

/// A topic name from the message: its first 1–4 keywords (non-stopwords
/// of 3+ letters), joined by hyphens; `topic-<ts>` when there are none.
pub fn name_from(text: &str, now_ms: u64) -> String {
    let mut picked: Vec<String> = Vec::new();
    for w in mneme_text::words(text) {
        let w = w.trim_matches('\'').to_string();
        if w.chars().count() >= 3
            && !mneme_text::stopwords::TOPIC_NAME.contains(&w.as_str())
            && w.chars().any(char::is_alphabetic)
            && !picked.contains(&w)
        {
            picked.push(w);
            if picked.len() == 4 {
                break;
            }
        }
    }
    if picked.is_empty() { format!("topic-{}", now_ms / 1000) } else { picked.join("-") }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn topic(name: &str, e: &[f32]) -> Topic {
        Topic { name: name.into(), embedding: e.to_vec(), messages: 1 }
    }

    #[test]
    fn boundary_at_055_and_recent_boost() {
        let topics = [topic("a", &[1.0, 0.0]), topic("b", &[0.0, 1.0])];
        // cos = 0.6 to a → stays on a.
        let c = classify(&[0.6, 0.8], &topics[..1], None, "new");
        assert!(!c.is_new_topic && c.topic == "a");
        // cos = 0.5 to a → new topic...
        let c = classify(&[0.5, 0.866], &topics[..1], None, "new");
        assert!(c.is_new_topic && c.topic == "new");
        // ...unless a is the recent topic (0.5 + 0.15 ≥ 0.55).
        let c = classify(&[0.5, 0.866], &topics[..1], Some("a"), "new");
        assert!(!c.is_new_topic && c.topic == "a");
        // Best of several.
        let c = classify(&[0.1, 0.99], &topics, None, "new");
        assert_eq!(c.topic, "b");
        // No topics at all.
        assert!(classify(&[1.0, 0.0], &[], None, "x").is_new_topic);
        // A new name never collides with a known one.
        assert_eq!(classify(&[0.0, -1.0], &topics, None, "a").topic, "a-2");
    }

    #[test]
    fn fold_keeps_a_unit_mean() {
        let mut t = topic("a", &[1.0, 0.0]);
        fold(&mut t, &[0.0, 1.0]);
        let norm: f32 = t.embedding.iter().map(|x| x * x).sum::<f32>().sqrt();
        assert!((norm - 1.0).abs() < 1e-5);
        assert!((t.embedding[0] - t.embedding[1]).abs() < 1e-5);
        assert_eq!(t.messages, 2);
    }

    #[test]
    fn names_from_keywords() {
        assert_eq!(
            name_from("How do I tune PostgreSQL autovacuum settings?", 5000),
            "tune-postgresql-autovacuum-settings"
        );
        assert_eq!(name_from("the marathon training plan", 1), "marathon-training-plan");
        assert_eq!(name_from("What is photosynthesis?", 1), "photosynthesis");
        assert_eq!(name_from("hi there", 7000), "topic-7");
    }
}
