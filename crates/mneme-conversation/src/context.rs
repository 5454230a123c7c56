//! Phase A, the deterministic parts of context assembly: the design's
//! context-warmth and memory-confidence formulas (design 002 §2 steps 6–7),
//! with the component definitions the design leaves open taken from the
//! reference implementation (D-C4), topic streaks, focus inference, the
//! 2700 s silence gap and message salience.

use serde::{Deserialize, Serialize};

/// Working memory keeps this many turns (user + assistant message pairs).
pub const WM_MAX_TURNS: usize = 4;
/// Working memory expires this long after its last append.
pub const WM_TTL_MS: u64 = 24 * 3600 * 1000;
/// Gists live this long ("attention span"), refreshed when read.
pub const GIST_TTL_MS: u64 = 30 * 60 * 1000;
/// Facts live this long.
pub const FACT_TTL_MS: u64 = 24 * 3600 * 1000;
/// Topic streaks and inferred focus sessions live this long.
pub const STREAK_TTL_MS: u64 = 2 * 3600 * 1000;
/// A silence longer than this (seconds) marks a return.
pub const SILENCE_GAP_S: u64 = 2700;
/// A topic streak of this many exchanges infers a focus session.
pub const FOCUS_INFER_STREAK: u32 = 5;
/// Below this cosine to the focus, a message counts as a distraction.
pub const DISTRACTION_COSINE: f64 = 0.35;
/// FOK (feeling of knowing) is a count clamped to 0–5.
pub const FOK_MAX: f64 = 5.0;

fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

/// The three parts of context warmth.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Warmth {
    pub wm_score: f64,
    pub gist_score: f64,
    pub world_score: f64,
    pub warmth: f64,
}

/// `warmth = (wm_score + gist_score + world_score) / 3` with
/// `wm_score = min(turns/4, 1)`, `gist_score = min(gists/5, 1)` (cold-start
/// gists excluded by the caller) and `world_score = 1` when there is world
/// state, else 0.
pub fn warmth(wm_turns: usize, gists: usize, world_present: bool) -> Warmth {
    let wm_score = (wm_turns as f64 / WM_MAX_TURNS as f64).min(1.0);
    let gist_score = (gists as f64 / 5.0).min(1.0);
    let world_score = if world_present { 1.0 } else { 0.0 };
    Warmth { wm_score, gist_score, world_score, warmth: round3((wm_score + gist_score + world_score) / 3.0) }
}

/// FOK normalised to 0–1 (`min(1, fok/5)`).
pub fn fok_score(fok: f64) -> f64 {
    (fok / FOK_MAX).clamp(0.0, 1.0)
}

/// `density = min(1, (gists + facts) / 6)`.
pub fn density(gists: usize, facts: usize) -> f64 {
    ((gists + facts) as f64 / 6.0).min(1.0)
}

/// `conf = 0.4·fok + 0.4·warmth + 0.2·density`, times 0.7 on a new topic;
/// `fok` is the raw 0–5 value, normalised here. Rounded to 3 decimals.
pub fn memory_confidence(fok: f64, warmth: f64, density: f64, is_new_topic: bool) -> f64 {
    let mut conf = 0.4 * fok_score(fok) + 0.4 * warmth + 0.2 * density;
    if is_new_topic {
        conf *= 0.7;
    }
    round3(conf.clamp(0.0, 1.0))
}

/// The gap in seconds when the principal returns after more than 2700 s of
/// silence; `None` on a first message or a shorter gap. Call it before the
/// thread's last activity is updated.
pub fn returning_from_silence(last_activity_ms: Option<u64>, now_ms: u64) -> Option<u64> {
    // Compared in milliseconds: 2700.5 s is over 2700 s.
    let gap_ms = now_ms.saturating_sub(last_activity_ms?);
    (gap_ms > SILENCE_GAP_S * 1000).then_some(gap_ms / 1000)
}

/// A thread's run of consecutive exchanges on one topic.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Streak {
    pub topic: String,
    pub count: u32,
}

/// The streak after a message on `topic`: +1 on the same topic, else 1.
pub fn next_streak(prev: Option<&Streak>, topic: &str) -> Streak {
    match prev {
        Some(s) if s.topic == topic => Streak { topic: topic.into(), count: s.count + 1 },
        _ => Streak { topic: topic.into(), count: 1 },
    }
}

/// Where a focus session came from; an explicit one is never overwritten.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FocusSource {
    Explicit,
    Inferred,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Focus {
    pub description: String,
    pub topic: String,
    pub source: FocusSource,
}

/// Infers "Deep work on: <topic>" once the streak reaches 5, unless an
/// explicit focus is set. Returns the focus to store, if it changes.
pub fn infer_focus(current: Option<&Focus>, streak: &Streak) -> Option<Focus> {
    if current.is_some_and(|f| f.source == FocusSource::Explicit) || streak.count < FOCUS_INFER_STREAK {
        return None;
    }
    if current.is_some_and(|f| f.topic == streak.topic) {
        return None;
    }
    Some(Focus {
        description: format!("Deep work on: {}", streak.topic),
        topic: streak.topic.clone(),
        source: FocusSource::Inferred,
    })
}

/// Message salience: 0.5, +0.2 over 100 characters (else +0.1 over 50),
/// +0.15 for a question mark, +0.15 for an urgency word; at most 1.
pub fn salience(text: &str) -> f64 {
    let chars = text.chars().count();
    let mut s: f64 = 0.5;
    if chars > 100 {
        s += 0.2;
    } else if chars > 50 {
        s += 0.1;
    }
    if text.contains('?') {
        s += 0.15;
    }
    let urgent = ["urgent", "asap", "immediately", "help", "error", "bug", "broken", "crash"];
    if mneme_text::words(text).iter().any(|w| urgent.contains(&w.as_str())) {
        s += 0.15;
    }
    round3(s.min(1.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn warmth_components_saturate() {
        assert_eq!(warmth(0, 0, false).warmth, 0.0);
        assert_eq!(warmth(2, 0, false).wm_score, 0.5);
        assert_eq!(warmth(4, 5, true).warmth, 1.0);
        assert_eq!(warmth(9, 12, true).warmth, 1.0);
        assert_eq!(warmth(4, 0, false).warmth, 0.333);
    }

    #[test]
    fn memory_confidence_formula_and_new_topic_penalty() {
        // 0.4·(5/5) + 0.4·0.5 + 0.2·1 = 0.8
        assert_eq!(memory_confidence(5.0, 0.5, density(3, 3), false), 0.8);
        assert_eq!(memory_confidence(5.0, 0.5, density(3, 3), true), 0.56);
        // FOK above the 0–5 range cannot push confidence past 1.
        assert_eq!(memory_confidence(50.0, 1.0, 1.0, false), 1.0);
        assert_eq!(memory_confidence(0.0, 0.0, 0.0, false), 0.0);
        assert_eq!(density(1, 2), 0.5);
    }

    #[test]
    fn silence_gap_is_strictly_more_than_2700_seconds() {
        assert_eq!(returning_from_silence(None, 10_000_000), None);
        assert_eq!(returning_from_silence(Some(0), 2_700_000), None);
        assert_eq!(returning_from_silence(Some(0), 2_700_001), Some(2700));
        assert_eq!(returning_from_silence(Some(5), 2_700_005), None);
        assert_eq!(returning_from_silence(Some(0), 2_701_000), Some(2701));
    }

    #[test]
    fn streak_and_focus_inference() {
        let mut s = next_streak(None, "rust");
        for _ in 0..3 {
            s = next_streak(Some(&s), "rust");
        }
        assert_eq!(s.count, 4);
        assert_eq!(infer_focus(None, &s), None);
        s = next_streak(Some(&s), "rust");
        let f = infer_focus(None, &s).expect("focus at 5");
        assert_eq!(f.description, "Deep work on: rust");
        assert_eq!(infer_focus(Some(&f), &s), None, "already focused on it");
        let explicit = Focus { description: "taxes".into(), topic: "tax".into(), source: FocusSource::Explicit };
        assert_eq!(infer_focus(Some(&explicit), &s), None);
        assert_eq!(next_streak(Some(&s), "cooking").count, 1);
    }

    #[test]
    fn salience_rules() {
        assert_eq!(salience("ok"), 0.5);
        assert_eq!(salience("is it broken?"), 0.8);
        assert_eq!(salience(&"x".repeat(101)), 0.7);
        assert_eq!(salience(&format!("{}? help", "x".repeat(120))), 1.0);
    }
}

/// One working-memory entry.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Turn {
    /// `user` or `assistant`.
    pub role: String,
    pub content: String,
    pub at_ms: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Gist {
    pub content: String,
    #[serde(rename = "type")]
    pub kind: String,
    /// 0–10.
    pub confidence: u8,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Fact {
    pub key: String,
    pub value: String,
    /// 0–1.
    pub confidence: f64,
}

/// What Phase A hands to the rest of the pipeline.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Assembled {
    pub thread_id: String,
    /// The principal's name, from identity (IIP or earlier).
    pub name: Option<String>,
    /// Set when this very message stated the name.
    pub name_stated: bool,
    pub turns: Vec<Turn>,
    pub wm_turns: usize,
    pub gists: Vec<Gist>,
    pub facts: Vec<Fact>,
    /// Episodes and concepts consolidation built that bear on the message.
    #[serde(default)]
    pub memories: Vec<String>,
    pub world_state: String,
    pub fok: f64,
    pub warmth: f64,
    pub density: f64,
    pub memory_confidence: f64,
    pub topic: String,
    /// The topic of the thread's previous message, if any.
    pub previous_topic: Option<String>,
    pub is_new_topic: bool,
    pub topic_confidence: f64,
    pub streak: u32,
    pub focus: Option<Focus>,
    pub distracted: bool,
    pub returning_from_silence: Option<u64>,
    pub previous_mode: Option<crate::mode::Mode>,
    pub previous_tools: Vec<String>,
    pub recent_router_confidences: Vec<f64>,
    pub session_exchange_count: u32,
    pub salience: f64,
    /// Milliseconds Phase A took.
    pub took_ms: u64,
    /// Of which, computing the message's embedding (a model inference), in µs.
    pub embed_us: u64,
}
