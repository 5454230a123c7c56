//! The patterns engine (001, "reasoning_pattern — how the slug is
//! resolved"): a known slug is trusted; an unknown slug or free text is
//! matched to the nearest pattern by embedding at cosine ≥ 0.72, else a new
//! provisional pattern is minted; null when nothing applies or the
//! observation is pure communication style.

use crate::text;
use mneme_text::cosine;
use serde::{Deserialize, Serialize};

/// Nearest-pattern match threshold (001): at or above, the hint joins it.
pub const PATTERN_MATCH_COSINE: f32 = 0.72;

/// A minted pattern is provisional until this many observations cite it
/// (D-K4).
pub const ESTABLISHED_OBSERVATIONS: i64 = 3;

/// What the engine decided for one candidate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "resolution", rename_all = "kebab-case")]
pub enum Resolution {
    /// No pattern: no hint, or the observation is pure communication style.
    Null { reason: String },
    /// The extractor named a known slug: trusted as is.
    Known { slug: String },
    /// An unknown slug or free text matched an existing pattern.
    Matched { slug: String, cosine: f32 },
    /// Nothing was close enough: a new provisional pattern.
    Minted { slug: String, description: String },
}

impl Resolution {
    pub fn slug(&self) -> Option<&str> {
        match self {
            Resolution::Null { .. } => None,
            Resolution::Known { slug } | Resolution::Matched { slug, .. } | Resolution::Minted { slug, .. } => {
                Some(slug)
            }
        }
    }
}

/// Words that mark an observation about how the principal talks rather
/// than how they think.
const STYLE_WORDS: &[&str] = &[
    "tone",
    "style",
    "formatting",
    "format",
    "emoji",
    "emojis",
    "brevity",
    "concise",
    "terse",
    "verbose",
    "phrasing",
    "wording",
    "punctuation",
    "capitalization",
    "greeting",
    "greetings",
    "sign-off",
    "jargon",
];

/// Whether a pattern hint is about communication style only.
pub fn is_style(hint: &str) -> bool {
    mneme_text::words(hint).iter().any(|w| STYLE_WORDS.contains(&w.as_str()))
}

/// The hint with empty and null-ish values removed.
pub fn clean_hint(hint: Option<&str>) -> Option<&str> {
    let h = hint?.trim();
    (!h.is_empty() && !["null", "none", "n/a", "-"].contains(&h.to_ascii_lowercase().as_str())).then_some(h)
}

/// The first step, before any embedding: `Some` when the hint resolves
/// without one (null, or a known slug), `None` when it must be embedded.
pub fn resolve_direct(hint: Option<&str>, style_only: bool, known: &[String]) -> Option<Resolution> {
    if style_only {
        return Some(Resolution::Null { reason: "communication style only".into() });
    }
    let Some(h) = clean_hint(hint) else {
        return Some(Resolution::Null { reason: "no pattern signal".into() });
    };
    if is_style(h) {
        return Some(Resolution::Null { reason: "communication style only".into() });
    }
    known.iter().find(|s| s.as_str() == h).map(|s| Resolution::Known { slug: s.clone() })
}

/// The second step: the embedded hint against every pattern's centroid.
pub fn resolve_embedded(hint: &str, embedding: &[f32], patterns: &[(String, Vec<f32>)]) -> Resolution {
    let best = patterns.iter().map(|(slug, c)| (slug, cosine(embedding, c) as f32)).max_by(|a, b| a.1.total_cmp(&b.1));
    match best {
        Some((slug, cos)) if matches(cos) => Resolution::Matched { slug: slug.clone(), cosine: cos },
        _ => {
            let taken: Vec<&str> = patterns.iter().map(|(s, _)| s.as_str()).collect();
            Resolution::Minted { slug: unique_slug(hint, &taken), description: describe(hint) }
        }
    }
}

/// Whether a cosine is close enough to join a pattern: at or above 0.72.
pub fn matches(cos: f32) -> bool {
    cos >= PATTERN_MATCH_COSINE
}

/// A slug for a new pattern, distinct from every existing one.
pub fn unique_slug(hint: &str, taken: &[&str]) -> String {
    let base = if text::is_slug(hint) { hint.to_string() } else { text::slugify(hint, 5) };
    let base = if base.is_empty() { "pattern".to_string() } else { base };
    if !taken.contains(&base.as_str()) {
        return base;
    }
    (2..).map(|n| format!("{base}-{n}")).find(|s| !taken.contains(&s.as_str())).expect("an unused suffix exists")
}

/// A readable description of a hint (`first-principles` → `first principles`).
pub fn describe(hint: &str) -> String {
    if text::is_slug(hint) { hint.replace('-', " ") } else { hint.trim().to_string() }
}

/// The centroid after one more observation joins it (a running mean).
pub fn centroid_with(centroid: &[f32], observations: i64, embedding: &[f32]) -> Vec<f32> {
    let n = observations.max(0) as f32;
    centroid.iter().zip(embedding).map(|(c, e)| (c * n + e) / (n + 1.0)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A unit vector at cosine `c` from `[1, 0]`.
    fn at(c: f32) -> Vec<f32> {
        vec![c, (1.0 - c * c).sqrt()]
    }

    #[test]
    fn a_known_slug_is_trusted_without_embedding() {
        let known = vec!["first-principles".to_string()];
        assert_eq!(
            resolve_direct(Some("first-principles"), false, &known),
            Some(Resolution::Known { slug: "first-principles".into() })
        );
        assert_eq!(resolve_direct(Some("second-order-effects"), false, &known), None);
        assert_eq!(resolve_direct(Some("reason from fundamentals"), false, &known), None);
    }

    #[test]
    fn null_when_nothing_applies_or_style_only() {
        for (hint, style) in [(None, false), (Some("null"), false), (Some("  "), false), (Some("x"), true)] {
            assert!(matches!(resolve_direct(hint, style, &[]), Some(Resolution::Null { .. })), "{hint:?}");
        }
        assert!(matches!(resolve_direct(Some("terse, emoji-free tone"), false, &[]), Some(Resolution::Null { .. })));
    }

    #[test]
    fn matching_is_inclusive_at_exactly_0_72() {
        let patterns = vec![("invert-the-problem".to_string(), vec![1.0, 0.0])];
        assert!(matches(0.72), "0.72 exactly joins the pattern");
        assert!(!matches(0.719_999_9));
        assert!(matches!(resolve_embedded("flip it", &at(0.7201), &patterns), Resolution::Matched { .. }));
        assert_eq!(
            resolve_embedded("flip it around", &at(0.7199), &patterns),
            Resolution::Minted { slug: "flip-it-around".into(), description: "flip it around".into() }
        );
    }

    #[test]
    fn the_nearest_pattern_wins() {
        let patterns = vec![("a".to_string(), at(0.8)), ("b".to_string(), at(0.95))];
        assert_eq!(resolve_embedded("q", &[1.0, 0.0], &patterns).slug(), Some("b"));
    }

    #[test]
    fn minted_slugs_never_collide() {
        assert_eq!(unique_slug("Pre-mortem the plan", &[]), "pre-mortem-the-plan");
        assert_eq!(unique_slug("premortem", &["premortem"]), "premortem-2");
        assert_eq!(unique_slug("premortem", &["premortem", "premortem-2"]), "premortem-3");
        assert_eq!(describe("pre-mortem"), "pre mortem");
    }

    #[test]
    fn centroids_are_running_means() {
        assert_eq!(centroid_with(&[1.0, 0.0], 1, &[0.0, 1.0]), vec![0.5, 0.5]);
        assert_eq!(centroid_with(&[1.0, 0.0], 3, &[0.0, 4.0]), vec![0.75, 1.0]);
    }
}
