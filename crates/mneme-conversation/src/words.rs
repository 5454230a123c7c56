//! Tokenising the way the message-flow rules count words.

/// Lower-cased words: runs of letters, digits and apostrophes.
pub fn words(text: &str) -> Vec<String> {
    text.split(|c: char| !(c.is_alphanumeric() || c == '\'' || c == '’'))
        .filter(|w| !w.is_empty())
        .map(|w| w.to_lowercase().replace('’', "'"))
        .collect()
}

/// Whitespace-separated tokens, as the intent classifier counts them.
pub fn token_count(text: &str) -> usize {
    text.split_whitespace().count()
}
