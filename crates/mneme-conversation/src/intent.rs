//! Phase B, layer 1: the intent classifier. Pure heuristics, about 5 ms in
//! the design's budget and far less here; its output feeds triage and the
//! mode router. Rules and word lists follow the reference implementation
//! (chalie.md §2.11): the type is the first rule that matches, in order.

use std::sync::LazyLock;

use regex_lite::Regex;
use serde::{Deserialize, Serialize};

use crate::phrases::{is_cancel, is_greeting, is_positive_feedback, is_self_resolved};
use mneme_text::{token_count, words};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum IntentType {
    Empty,
    Greeting,
    Feedback,
    Command,
    Question,
    Continuation,
    Statement,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Complexity {
    Simple,
    Moderate,
    Complex,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Register {
    Casual,
    Formal,
    Neutral,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Intent {
    pub intent_type: IntentType,
    pub complexity: Complexity,
    pub confidence: f64,
    pub register: Register,
    pub is_cancel: bool,
    pub is_self_resolved: bool,
}

static NEGATIVE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)\b(wrong|incorrect|no that|doesn'?t work|confused|not what i|try again|not helpful)\b").unwrap()
});
static COMMAND_VERB: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(concat!(
        r"(?i)\b(search\w*|find\w*|look up|check\w*|research\w*|browse\w*|fetch\w*|google\w*|investigate\w*|",
        r"look into|get me|show me|tell me about|explain|summarize|analyze|compare|calculate|list|describe|translate|convert)\b"
    ))
    .unwrap()
});
static WH_WORD: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?i)\b(what|where|when|who|why|how|which|whose|whom)\b").unwrap());
static CONJUNCTION: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?i)\b(and|also|plus|additionally|furthermore|then)\b").unwrap());

const CASUAL: &[&str] = &[
    "hey", "u", "pls", "thx", "lol", "yo", "sup", "nah", "gonna", "wanna", "kinda", "sorta", "idk", "nope", "yep",
    "yup", "bruh", "dude", "omg", "btw",
];
const FORMAL: &[&str] = &["please", "kindly", "inquire", "regarding", "sincerely", "respectfully", "appreciate"];
const FORMAL_PHRASES: &[&str] = &["could you", "would you", "i would like"];

impl Intent {
    /// The same classification at another context warmth: only the +0.1
    /// for warmth over 0.5 depends on it, and the confidence before that
    /// bonus stays within 0.3–0.8, so no clamp interferes. Lets the pipeline
    /// classify once, before Phase A, and adjust after it.
    pub fn with_warmth(mut self, warmth: f64) -> Intent {
        if warmth > 0.5 {
            self.confidence = ((self.confidence + 0.1).clamp(0.1, 1.0) * 100.0).round() / 100.0;
        }
        self
    }
}

/// Whether the message asks for something: a question mark, a question
/// word or a command verb ("translate", "explain", "compare"…).
pub fn asks(text: &str) -> bool {
    text.contains('?') || WH_WORD.is_match(text) || COMMAND_VERB.is_match(text)
}

/// Classifies one message. `warmth` is Phase A's context warmth (0–1).
pub fn classify(text: &str, warmth: f64) -> Intent {
    let tokens = token_count(text);
    let is_self_resolved = is_self_resolved(text);
    let is_cancel = !is_self_resolved && is_cancel(text);
    let has_q = text.contains('?');
    let intent_type = if text.trim().is_empty() {
        IntentType::Empty
    } else if is_greeting(text) {
        IntentType::Greeting
    } else if is_positive_feedback(text) || NEGATIVE.is_match(text) {
        IntentType::Feedback
    } else if is_cancel || (COMMAND_VERB.is_match(text) && !has_q) {
        IntentType::Command
    } else if has_q || WH_WORD.is_match(text) {
        IntentType::Question
    } else if tokens < 5 {
        IntentType::Continuation
    } else {
        IntentType::Statement
    };
    let complexity = if tokens > 30 {
        Complexity::Complex
    } else if tokens > 15 || CONJUNCTION.is_match(text) {
        Complexity::Moderate
    } else {
        Complexity::Simple
    };
    let mut confidence: f64 = 0.5;
    if matches!(intent_type, IntentType::Greeting | IntentType::Feedback | IntentType::Empty) {
        confidence += 0.3;
    }
    if intent_type == IntentType::Question {
        confidence += 0.1;
    }
    if warmth > 0.5 {
        confidence += 0.1;
    }
    if tokens < 3 {
        confidence -= 0.1;
    }
    if tokens > 50 {
        confidence -= 0.1;
    }
    let confidence = (confidence.clamp(0.1, 1.0) * 100.0).round() / 100.0;
    Intent { intent_type, complexity, confidence, register: register(text), is_cancel, is_self_resolved }
}

fn register(text: &str) -> Register {
    let w = words(text);
    let lower = text.to_lowercase();
    let casual = w.iter().filter(|t| CASUAL.contains(&t.as_str())).count();
    let formal = w.iter().filter(|t| FORMAL.contains(&t.as_str())).count()
        + FORMAL_PHRASES.iter().filter(|p| lower.contains(*p)).count();
    match casual.cmp(&formal) {
        std::cmp::Ordering::Greater => Register::Casual,
        std::cmp::Ordering::Less => Register::Formal,
        std::cmp::Ordering::Equal => Register::Neutral,
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn adjusting_warmth_later_equals_classifying_with_it() {
        let texts =
            ["", "hi", "thanks a lot", "what is this?", "find the file", "ok", "a b c d e f g h i j k l m n o p"];
        for t in texts {
            for w in [0.0, 0.5, 0.51, 1.0] {
                assert_eq!(super::classify(t, 0.0).with_warmth(w), super::classify(t, w), "{t:?} at {w}");
            }
        }
    }

    use super::*;

    #[test]
    fn intent_type_table() {
        let cases = [
            ("", IntentType::Empty),
            ("   ", IntentType::Empty),
            ("hey there", IntentType::Greeting),
            ("Good morning! how are you?", IntentType::Greeting),
            ("say hi to her", IntentType::Continuation),
            ("thanks, that works", IntentType::Feedback),
            ("that's wrong", IntentType::Feedback),
            ("never mind", IntentType::Command),
            ("search for flights to Lisbon", IntentType::Command),
            ("can you search for flights?", IntentType::Question),
            ("where did I park", IntentType::Question),
            ("and the other one", IntentType::Continuation),
            ("I moved to Lisbon last spring with my family", IntentType::Statement),
        ];
        for (text, want) in cases {
            assert_eq!(classify(text, 0.0).intent_type, want, "{text:?}");
        }
    }

    #[test]
    fn complexity_boundaries() {
        let n = |k: usize| vec!["word"; k].join(" ");
        assert_eq!(classify(&n(15), 0.0).complexity, Complexity::Simple, "15 tokens is not > 15");
        assert_eq!(classify(&n(16), 0.0).complexity, Complexity::Moderate);
        assert_eq!(classify(&n(30), 0.0).complexity, Complexity::Moderate, "30 tokens is not > 30");
        assert_eq!(classify(&n(31), 0.0).complexity, Complexity::Complex);
        assert_eq!(classify("cats and dogs", 0.0).complexity, Complexity::Moderate);
    }

    #[test]
    fn confidence_adjustments() {
        assert_eq!(classify("hello", 0.0).confidence, 0.7, "0.5 + 0.3 greeting − 0.1 short");
        assert_eq!(classify("where is my phone?", 0.6).confidence, 0.7, "0.5 + 0.1 question + 0.1 warm");
        assert_eq!(classify("where is my phone?", 0.5).confidence, 0.6, "warmth must exceed 0.5");
        let long = vec!["word"; 51].join(" ");
        assert_eq!(classify(&long, 0.0).confidence, 0.4);
    }

    #[test]
    fn register_by_markers() {
        assert_eq!(classify("yo dude idk", 0.0).register, Register::Casual);
        assert_eq!(classify("Could you kindly check this", 0.0).register, Register::Formal);
        assert_eq!(classify("the weather today", 0.0).register, Register::Neutral);
    }

    #[test]
    fn self_resolved_wins_over_cancel() {
        let i = classify("forget it, figured it out", 0.0);
        assert!(i.is_self_resolved && !i.is_cancel);
    }
}
