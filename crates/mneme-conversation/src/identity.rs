//! Phase A step 1, the IIP hook (Immediate Identity Promotion): "call me X",
//! "my name is X" and four more phrasings store the principal's name at once,
//! before any model call. Phrases, the name shape and the stopwords follow
//! the reference implementation (chalie.md §2.2).

use std::sync::LazyLock;

use regex::Regex;

/// Confidence of a name the principal stated outright.
pub const NAME_CONFIDENCE: f64 = 0.95;

static IIP: LazyLock<Regex> = LazyLock::new(|| {
    let name = r"(\p{L}[\p{L}'’-]{0,39}(?:\s+\p{L}[\p{L}'’-]{0,39})?)";
    Regex::new(&format!(r"(?i)\b(?:you can call me|call me|my name is|i go by|i'?m known as|refer to me as)\s+{name}"))
        .unwrap()
});

const STOP: &[&str] = &[
    "a",
    "an",
    "the",
    "i",
    "me",
    "my",
    "we",
    "you",
    "your",
    "he",
    "she",
    "they",
    "it",
    "this",
    "that",
    "here",
    "there",
    "done",
    "fine",
    "good",
    "okay",
    "ok",
    "sure",
    "yes",
    "no",
    "maybe",
    "later",
    "anything",
    "something",
    "nothing",
    "everything",
];

/// The name the principal asked to be called, if the message states one.
pub fn stated_name(text: &str) -> Option<String> {
    let caps = IIP.captures(text)?;
    let raw = caps.get(1)?.as_str();
    // A second token that is a stopword ("call me Sam please") is not part of the name.
    let mut tokens: Vec<&str> = raw.split_whitespace().collect();
    if tokens.len() == 2 && STOP.contains(&tokens[1].to_lowercase().as_str()) {
        tokens.pop();
    }
    let candidate = tokens.join(" ");
    if candidate.chars().count() < 2 || STOP.contains(&candidate.to_lowercase().as_str()) {
        return None;
    }
    if STOP.contains(&tokens[0].to_lowercase().as_str()) {
        return None;
    }
    let all_lower = candidate.chars().all(|c| !c.is_uppercase());
    Some(if all_lower { tokens.iter().map(|t| title(t)).collect::<Vec<_>>().join(" ") } else { candidate })
}

fn title(word: &str) -> String {
    let mut c = word.chars();
    match c.next() {
        Some(f) => f.to_uppercase().chain(c).collect(),
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::stated_name;

    #[test]
    fn phrases_capture_and_case() {
        let cases = [
            ("call me sam", Some("Sam")),
            ("Hi, my name is Ada Lovelace", Some("Ada Lovelace")),
            ("i go by mcdonald", Some("Mcdonald")),
            ("you can call me McDonald", Some("McDonald")),
            ("I'm known as O'Brien", Some("O'Brien")),
            ("im known as zoë", Some("Zoë")),
            ("please refer to me as Dr", Some("Dr")),
            ("call me later", None),
            ("call me maybe", None),
            ("my name is x", None),
            ("call me 42", None),
            ("what is my name", None),
        ];
        for (text, want) in cases {
            assert_eq!(stated_name(text).as_deref(), want, "{text}");
        }
    }

    #[test]
    fn overlong_tokens_are_cut_at_forty_characters() {
        let long = "a".repeat(60);
        let got = stated_name(&format!("call me B{long}")).unwrap();
        assert_eq!(got.chars().count(), 40);
    }
}
