//! Words and similarity, once. Every rule that counts, matches or compares
//! words tokenises them with [`words`], so "don't" and "don’t" are the same
//! word everywhere; every rule that compares two embeddings uses
//! [`cosine`]. The stopword lists differ by purpose and live side by side
//! in [`stopwords`], each named for the rule that uses it.

pub mod stopwords;

/// Lower-cased words: runs of letters, digits and inner apostrophes, with
/// the typographic apostrophe (’) read as `'` and apostrophes at either end
/// of a word dropped ("'quoted'" is `quoted`, "don’t" is `don't`).
pub fn words(text: &str) -> Vec<String> {
    text.split(|c: char| !(c.is_alphanumeric() || c == '\'' || c == '’'))
        .map(|w| w.trim_matches(['\'', '’']))
        .filter(|w| !w.is_empty())
        .map(|w| w.to_lowercase().replace('’', "'"))
        .collect()
}

/// Whitespace-separated tokens, as the intent classifier counts them.
pub fn token_count(text: &str) -> usize {
    text.split_whitespace().count()
}

/// Words that say what a text is about, in order, without repeats: words
/// of two characters or more not in [`stopwords::CONTENT`].
pub fn content_words(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for w in words(text) {
        if w.len() > 1 && !stopwords::CONTENT.contains(&w.as_str()) && !out.contains(&w) {
            out.push(w);
        }
    }
    out
}

/// Jaccard similarity of two texts' sets of [`words`]; two texts without
/// words are identical.
pub fn jaccard(a: &str, b: &str) -> f64 {
    let a: std::collections::BTreeSet<String> = words(a).into_iter().collect();
    let b: std::collections::BTreeSet<String> = words(b).into_iter().collect();
    if a.is_empty() && b.is_empty() {
        return 1.0;
    }
    a.intersection(&b).count() as f64 / a.union(&b).count() as f64
}

/// Cosine similarity of two embeddings, summed in f64; 0 when either is
/// empty or all zeros, or when their lengths differ (vectors from two
/// different models are not comparable).
pub fn cosine(a: &[f32], b: &[f32]) -> f64 {
    if a.len() != b.len() || a.is_empty() {
        return 0.0;
    }
    let (mut dot, mut na, mut nb) = (0.0f64, 0.0f64, 0.0f64);
    for (x, y) in a.iter().zip(b) {
        let (x, y) = (f64::from(*x), f64::from(*y));
        dot += x * y;
        na += x * x;
        nb += y * y;
    }
    if na == 0.0 || nb == 0.0 { 0.0 } else { dot / (na.sqrt() * nb.sqrt()) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_read_apostrophes_one_way() {
        let cases: &[(&str, &[&str])] = &[
            ("Don't stop", &["don't", "stop"]),
            ("Don’t stop", &["don't", "stop"]),
            ("'quoted' words", &["quoted", "words"]),
            ("rock'n'roll, 2026!", &["rock'n'roll", "2026"]),
            ("  ' ’ ", &[]),
            ("Ça va? Très bien", &["ça", "va", "très", "bien"]),
        ];
        for (text, want) in cases {
            assert_eq!(words(text), *want, "{text:?}");
        }
    }

    #[test]
    fn content_words_drop_function_words_and_repeats() {
        assert_eq!(content_words("I think the budget, the BUDGET, is a priority"), ["budget", "priority"]);
        assert!(content_words("it is what it is").is_empty());
    }

    #[test]
    fn jaccard_of_word_sets() {
        assert_eq!(jaccard("", ""), 1.0);
        assert_eq!(jaccard("a b", "b c"), 1.0 / 3.0);
        assert_eq!(jaccard("Don’t go", "don't GO"), 1.0);
    }

    #[test]
    fn cosine_edge_cases() {
        assert_eq!(cosine(&[], &[]), 0.0);
        assert_eq!(cosine(&[0.0, 0.0], &[1.0, 0.0]), 0.0);
        assert_eq!(cosine(&[1.0], &[1.0, 0.0]), 0.0, "different lengths");
        assert_eq!(cosine(&[1.0, 0.0], &[0.0, 1.0]), 0.0);
        assert!((cosine(&[1.0, 1.0], &[2.0, 2.0]) - 1.0).abs() < 1e-12);
        assert!((cosine(&[1.0, 0.0], &[1.0, 1.0]) - std::f64::consts::FRAC_1_SQRT_2).abs() < 1e-12);
    }

    #[test]
    fn each_stopword_list_is_lower_case_and_unique() {
        for (name, list) in [
            ("CONTENT", stopwords::CONTENT),
            ("TOPIC_NAME", stopwords::TOPIC_NAME),
            ("NOT_A_NAME", stopwords::NOT_A_NAME),
            ("RECALL_SKIP", stopwords::RECALL_SKIP),
        ] {
            let mut seen = std::collections::BTreeSet::new();
            for w in list {
                assert_eq!(*w, w.to_lowercase(), "{name}: {w}");
                assert!(seen.insert(*w), "{name} lists {w} twice");
                assert_eq!(words(w), [*w], "{name}: {w} is one word as words() reads it");
            }
        }
    }
}
