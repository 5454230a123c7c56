//! The key-value records of the conversation path: gists (`gist:{topic}:…`,
//! 30 min, refreshed on read), facts (`fact:{topic}:{key}`, 24 h), FOK
//! (`fok:{topic}`), the topic streak (`topic_streak:{thread}`, 2 h) and the
//! focus session (`focus:{thread}`). Each value carries its own expiry, checked
//! against the pipeline's clock, and the store's TTL removes it physically
//! (D-C12): so tests can move the clock and production still cleans up.

use mneme_conversation::context::{FACT_TTL_MS, Fact, Focus, GIST_TTL_MS, STREAK_TTL_MS, Streak};
use mneme_store::Kv;
use serde::{Deserialize, Serialize, de::DeserializeOwned};

use crate::Result;

/// Newest gists returned per topic.
pub const MAX_GISTS: usize = 8;
/// Default minimum confidence (0–10) for storing a gist.
pub const GIST_MIN_CONFIDENCE: u8 = 7;
/// Word-Jaccard similarity at which two gists are duplicates.
pub const GIST_DUP_JACCARD: f64 = 0.7;
/// Gists kept per type and topic.
pub const GIST_PER_TYPE: usize = 2;
/// Facts kept per topic.
pub const MAX_FACTS: usize = 50;

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Stamped<T> {
    value: T,
    expires_ms: u64,
}

async fn get_live<T: DeserializeOwned>(kv: &Kv, key: &str, now_ms: u64) -> Result<Option<T>> {
    let Some(bytes) = kv.get(key).await? else { return Ok(None) };
    match serde_json::from_slice::<Stamped<T>>(&bytes) {
        Ok(s) if s.expires_ms > now_ms => Ok(Some(s.value)),
        _ => Ok(None),
    }
}

async fn put<T: Serialize>(kv: &Kv, key: &str, value: &T, now_ms: u64, ttl_ms: u64) -> Result<()> {
    let stamped = Stamped { value, expires_ms: now_ms + ttl_ms };
    let bytes = serde_json::to_vec(&stamped).expect("serialisable record");
    // The physical TTL runs on the store's own clock; never shorter than
    // the logical one, so the logical check decides.
    let physical = ttl_ms.max(1) + now_ms.saturating_sub(mneme_time::clock::system_ms());
    kv.set(key, &bytes, Some(physical)).await?;
    Ok(())
}

/// A stored gist.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StoredGist {
    pub id: String,
    pub content: String,
    #[serde(rename = "type")]
    pub kind: String,
    pub confidence: u8,
    pub created_ms: u64,
}

/// The topic's live gists, newest first (at most 8); reading refreshes
/// their TTL ("touch on read").
pub async fn gists(kv: &Kv, topic: &str, now_ms: u64) -> Result<Vec<StoredGist>> {
    let index = format!("gist_index:{topic}");
    let mut ids = kv.zrange_by_score(&index, f64::NEG_INFINITY, f64::INFINITY).await?;
    ids.reverse();
    let mut out = Vec::new();
    for (id, _) in ids {
        let key = format!("gist:{topic}:{id}");
        match get_live::<StoredGist>(kv, &key, now_ms).await? {
            Some(g) => {
                if out.len() < MAX_GISTS {
                    put(kv, &key, &g, now_ms, GIST_TTL_MS).await?;
                    out.push(g);
                }
            }
            None => {
                kv.zrem(&index, &id).await?;
            }
        }
    }
    Ok(out)
}

use mneme_text::jaccard;

/// What happened to a gist offered for storage.
pub use mneme_types::consolidation::GistOutcome;

/// Stores a gist under the rules: confidence at least `min_confidence`
/// (any confidence on a topic with no gists), a duplicate (word Jaccard ≥
/// 0.7) replaces the old one only with higher confidence, and each type
/// keeps its 2 most confident gists.
pub async fn store_gist(
    kv: &Kv,
    topic: &str,
    content: &str,
    kind: &str,
    confidence: u8,
    min_confidence: u8,
    now_ms: u64,
) -> Result<GistOutcome> {
    let existing = gists(kv, topic, now_ms).await?;
    let confidence = confidence.min(10);
    if !existing.is_empty() && confidence < min_confidence {
        return Ok(GistOutcome::LowConfidence);
    }
    if let Some(dup) = existing.iter().find(|g| jaccard(&g.content, content) >= GIST_DUP_JACCARD) {
        if confidence <= dup.confidence {
            return Ok(GistOutcome::Duplicate);
        }
        let g = StoredGist { content: content.into(), kind: kind.into(), confidence, ..dup.clone() };
        put(kv, &format!("gist:{topic}:{}", g.id), &g, now_ms, GIST_TTL_MS).await?;
        return Ok(GistOutcome::Replaced);
    }
    // The id is the content's hash: two workers storing the same gist at
    // once write one key (D-B4).
    let g = StoredGist {
        id: mneme_knowledge::text::content_hash(content)[..12].to_string(),
        content: content.into(),
        kind: kind.into(),
        confidence,
        created_ms: now_ms,
    };
    put(kv, &format!("gist:{topic}:{}", g.id), &g, now_ms, GIST_TTL_MS).await?;
    kv.zadd(&format!("gist_index:{topic}"), now_ms as f64, &g.id).await?;
    let mut same: Vec<&StoredGist> = existing.iter().filter(|e| e.kind == kind).collect();
    if same.len() + 1 > GIST_PER_TYPE {
        same.sort_by(|a, b| a.confidence.cmp(&b.confidence).then(a.created_ms.cmp(&b.created_ms)));
        for extra in same.iter().take(same.len() + 1 - GIST_PER_TYPE) {
            if extra.confidence <= confidence {
                kv.delete(&format!("gist:{topic}:{}", extra.id)).await?;
                kv.zrem(&format!("gist_index:{topic}"), &extra.id).await?;
            }
        }
    }
    Ok(GistOutcome::Stored)
}

/// A stored fact.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StoredFact {
    pub key: String,
    pub value: String,
    pub confidence: f64,
    pub source: String,
    pub created_ms: u64,
    pub updated_ms: u64,
}

/// The topic's live facts, newest first.
pub async fn facts(kv: &Kv, topic: &str, now_ms: u64) -> Result<Vec<StoredFact>> {
    let index = format!("fact_index:{topic}");
    let mut keys = kv.zrange_by_score(&index, f64::NEG_INFINITY, f64::INFINITY).await?;
    keys.reverse();
    let mut out = Vec::new();
    for (key, _) in keys {
        match get_live::<StoredFact>(kv, &format!("fact:{topic}:{key}"), now_ms).await? {
            Some(f) => out.push(f),
            None => {
                kv.zrem(&index, &key).await?;
            }
        }
    }
    Ok(out)
}

/// Stores a fact: an existing value is replaced only by a higher
/// confidence, or an equal one (the newer wins); at most 50 per topic,
/// the oldest evicted first. Returns whether it was written.
pub async fn store_fact(
    kv: &Kv,
    topic: &str,
    key: &str,
    value: &str,
    confidence: f64,
    source: &str,
    now_ms: u64,
) -> Result<bool> {
    let key = key.trim().to_lowercase().replace(char::is_whitespace, "_");
    let k = format!("fact:{topic}:{key}");
    let confidence = confidence.clamp(0.0, 1.0);
    let prior = get_live::<StoredFact>(kv, &k, now_ms).await?;
    if let Some(p) = &prior
        && p.confidence > confidence
    {
        return Ok(false);
    }
    let f = StoredFact {
        key: key.clone(),
        value: value.into(),
        confidence,
        source: source.into(),
        created_ms: prior.map_or(now_ms, |p| p.created_ms),
        updated_ms: now_ms,
    };
    put(kv, &k, &f, now_ms, FACT_TTL_MS).await?;
    let index = format!("fact_index:{topic}");
    kv.zadd(&index, now_ms as f64, &key).await?;
    let all = kv.zrange_by_score(&index, f64::NEG_INFINITY, f64::INFINITY).await?;
    if all.len() > MAX_FACTS {
        for (old, _) in all.iter().take(all.len() - MAX_FACTS) {
            kv.delete(&format!("fact:{topic}:{old}")).await?;
            kv.zrem(&index, old).await?;
        }
    }
    Ok(true)
}

/// Facts as the pipeline passes them on.
pub fn plain_facts(f: &[StoredFact]) -> Vec<Fact> {
    f.iter().map(|f| Fact { key: f.key.clone(), value: f.value.clone(), confidence: f.confidence }).collect()
}

/// FOK (0–5) for the topic; 0 when never written.
pub async fn fok(kv: &Kv, topic: &str) -> Result<f64> {
    Ok(kv.get(&format!("fok:{topic}")).await?.and_then(|b| String::from_utf8(b).ok()?.parse().ok()).unwrap_or(0.0))
}

pub async fn set_fok(kv: &Kv, topic: &str, fok: f64) -> Result<()> {
    kv.set(&format!("fok:{topic}"), fok.clamp(0.0, 5.0).to_string().as_bytes(), None).await?;
    Ok(())
}

pub async fn streak(kv: &Kv, thread_id: &str, now_ms: u64) -> Result<Option<Streak>> {
    get_live(kv, &format!("topic_streak:{thread_id}"), now_ms).await
}

pub async fn set_streak(kv: &Kv, thread_id: &str, s: &Streak, now_ms: u64) -> Result<()> {
    put(kv, &format!("topic_streak:{thread_id}"), s, now_ms, STREAK_TTL_MS).await
}

/// A focus session with the embedding of its description.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StoredFocus {
    pub focus: Focus,
    pub embedding: Vec<f32>,
}

pub async fn focus(kv: &Kv, thread_id: &str, now_ms: u64) -> Result<Option<StoredFocus>> {
    get_live(kv, &format!("focus:{thread_id}"), now_ms).await
}

pub async fn set_focus(kv: &Kv, thread_id: &str, f: &StoredFocus, now_ms: u64, ttl_ms: u64) -> Result<()> {
    put(kv, &format!("focus:{thread_id}"), f, now_ms, ttl_ms).await
}

pub async fn clear_focus(kv: &Kv, thread_id: &str) -> Result<()> {
    kv.delete(&format!("focus:{thread_id}")).await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn jaccard_on_words() {
        assert_eq!(super::jaccard("the cat sat", "the cat sat"), 1.0);
        assert_eq!(super::jaccard("a b", "c d"), 0.0);
        assert_eq!(super::jaccard("a b c", "a b d"), 0.5);
    }
}
