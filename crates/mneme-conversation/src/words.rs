//! Tokenising the way the message-flow rules count words.

/// Lower-cased words: runs of letters, digits and apostrophes.
pub fn words(text: &str) -> Vec<String> {
    text.split(|c: char| !(c.is_alphanumeric() || c == '\'' || c == '’'))
        .filter(|w| !w.is_empty())
        .map(|w| w.to_lowercase().replace('’', "'"))
        .collect()
}

/// Jaccard similarity of two texts' sets of [`words`]; two empty texts are
/// identical. Gist dedup, task dedup and plan gates use it.
pub fn jaccard(a: &str, b: &str) -> f64 {
    let a: std::collections::BTreeSet<String> = words(a).into_iter().collect();
    let b: std::collections::BTreeSet<String> = words(b).into_iter().collect();
    if a.is_empty() && b.is_empty() {
        return 1.0;
    }
    a.intersection(&b).count() as f64 / a.union(&b).count() as f64
}

/// Whitespace-separated tokens, as the intent classifier counts them.
pub fn token_count(text: &str) -> usize {
    text.split_whitespace().count()
}
