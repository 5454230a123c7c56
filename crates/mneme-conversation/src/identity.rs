//! Phase A step 1, the IIP hook (Immediate Identity Promotion): "call me X",
//! "my name is X" and four more phrasings store the principal's name at once,
//! before any model call. Phrases, the name shape and the stopwords follow
//! the reference implementation (chalie.md §2.2). Matched by hand rather than
//! by regex: a Unicode-letter pattern costs milliseconds to compile, and
//! every request runs in a fresh instance.

use mneme_text::stopwords::NOT_A_NAME;

/// Confidence of a name the principal stated outright.
pub const NAME_CONFIDENCE: f64 = 0.95;

/// The trigger phrases, in order; the first that matches wins.
const PHRASES: [&str; 6] = ["call me", "my name is", "i go by", "you can call me", "i'm known as", "refer to me as"];

/// Where `phrase` (lower-case, ASCII) occurs in `text` at a word start and
/// is followed by whitespace: the byte offset just after it. "i'm" also
/// matches "im".
fn find_phrase(text: &str, phrase: &str) -> Option<usize> {
    let lower = text.to_ascii_lowercase();
    let variants: Vec<String> = if phrase.contains("i'm") {
        vec![phrase.to_string(), phrase.replace("i'm", "im"), phrase.replace("i'm", "i’m")]
    } else {
        vec![phrase.to_string()]
    };
    for v in variants {
        let mut from = 0;
        while let Some(i) = lower[from..].find(v.as_str()).map(|i| i + from) {
            let starts_word = lower[..i].chars().next_back().is_none_or(|c| !c.is_alphanumeric());
            let end = i + v.len();
            if starts_word && lower[end..].starts_with(char::is_whitespace) {
                return Some(end);
            }
            from = i + 1;
        }
    }
    None
}

/// One name token at the start of `s`: a letter, then at most 39 letters,
/// apostrophes or hyphens; `None` unless it starts with a letter.
fn name_token(s: &str) -> Option<&str> {
    let mut chars = s.char_indices();
    let (_, first) = chars.next()?;
    if !first.is_alphabetic() {
        return None;
    }
    let mut end = first.len_utf8();
    for (n, (i, c)) in chars.enumerate() {
        if n >= 39 || !(c.is_alphabetic() || c == '\'' || c == '’' || c == '-') {
            break;
        }
        end = i + c.len_utf8();
    }
    // A token runs into a digit or underscore: not a name.
    if s[end..].starts_with(|c: char| c.is_ascii_digit() || c == '_') {
        return None;
    }
    Some(&s[..end])
}

/// The name the principal asked to be called, if the message states one.
pub fn stated_name(text: &str) -> Option<String> {
    let after = PHRASES.iter().find_map(|p| find_phrase(text, p))?;
    let rest = text[after..].trim_start();
    let first = name_token(rest)?;
    let mut tokens = vec![first];
    let tail = &rest[first.len()..];
    let tail_trimmed = tail.trim_start();
    if tail_trimmed.len() < tail.len()
        && let Some(second) = name_token(tail_trimmed)
    {
        tokens.push(second);
    }
    // A second token that is a stopword ("call me Sam please") is not part of the name.
    if tokens.len() == 2 && NOT_A_NAME.contains(&tokens[1].to_lowercase().as_str()) {
        tokens.pop();
    }
    let candidate = tokens.join(" ");
    if candidate.chars().count() < 2 || NOT_A_NAME.contains(&candidate.to_lowercase().as_str()) {
        return None;
    }
    if NOT_A_NAME.contains(&tokens[0].to_lowercase().as_str()) {
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
