//! Small text tools the rules share: words, content words, stance polarity,
//! slugs and the content hash that makes ingest idempotent.

use mneme_text::{content_words, words};
use sha2::{Digest, Sha256};

/// Words that turn a statement around.
const NEGATIONS: &[&str] = &[
    "not",
    "never",
    "no",
    "don't",
    "dont",
    "doesn't",
    "isn't",
    "aren't",
    "won't",
    "shouldn't",
    "can't",
    "cannot",
    "avoid",
    "against",
    "stop",
    "stopped",
    "without",
    "nobody",
    "nothing",
    "neither",
    "nor",
    "didn't",
    "wasn't",
];

/// The polarity of a statement: `false` when it says no (an odd number of
/// negations), `true` otherwise.
pub fn affirms(text: &str) -> bool {
    words(text).iter().filter(|w| NEGATIONS.contains(&w.as_str())).count() % 2 == 0
}

/// Whether a text has a stance marker at all (so a neutral title such as
/// "Code review" cannot contradict anything). "For", "pro" and "yes" take a
/// side only as a title's first word ("For microservices"); inside one they
/// are prepositions or names ("Testing policy for bug fixes").
pub fn has_stance(text: &str) -> bool {
    const MARKERS: &[&str] = &["always", "should", "must", "use", "prefer", "do"];
    const LEADING: &[&str] = &["pro", "for", "yes"];
    let w = words(text);
    !affirms(text)
        || w.iter().any(|w| MARKERS.contains(&w.as_str()))
        || w.first().is_some_and(|first| LEADING.contains(&first.as_str()))
}

/// How many of `a`'s content words `b` shares, over the smaller set.
pub fn overlap(a: &str, b: &str) -> f64 {
    let (a, b) = (content_words(a), content_words(b));
    let n = a.len().min(b.len());
    if n == 0 {
        return 0.0;
    }
    a.iter().filter(|w| b.contains(w)).count() as f64 / n as f64
}

/// A kebab-case slug of at most `max_words` words (`first-principles`).
pub fn slugify(text: &str, max_words: usize) -> String {
    words(text)
        .into_iter()
        .map(|w| w.replace('\'', ""))
        .filter(|w| !w.is_empty())
        .take(max_words)
        .collect::<Vec<_>>()
        .join("-")
}

/// Whether a string already is a slug (lowercase words joined by `-`).
pub fn is_slug(s: &str) -> bool {
    !s.is_empty()
        && s.split('-').all(|p| !p.is_empty() && p.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit()))
}

/// Whitespace collapsed and trimmed: two copies of a transcript that differ
/// only in line wrapping are the same transcript.
pub fn normalize(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The content hash of a transcript (sha-256 of its normalised text, hex).
pub fn content_hash(text: &str) -> String {
    Sha256::digest(normalize(text).as_bytes()).iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn polarity_counts_negations() {
        assert!(affirms("Always use feature flags"));
        assert!(!affirms("Never use feature flags"));
        assert!(!affirms("We should not ship on Fridays"));
        assert!(affirms("It's not that we never ship on Fridays"));
        assert!(!affirms("Avoid long meetings"));
    }

    #[test]
    fn slugs_and_hashes() {
        assert_eq!(slugify("First principles, then analogy!", 3), "first-principles-then");
        assert!(is_slug("first-principles"));
        assert!(!is_slug("First principles"));
        assert!(!is_slug("a--b"));
        assert_eq!(content_hash("a  b\nc"), content_hash(" a b c "));
        assert_ne!(content_hash("a b c"), content_hash("a b d"));
        assert_eq!(content_hash("").len(), 64);
    }

    #[test]
    fn overlap_of_content_words() {
        assert!((overlap("ship small batches", "small batches win") - 2.0 / 3.0).abs() < 1e-9);
    }
}
