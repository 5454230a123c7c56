//! Phase B, step 2a: the social filter. A short greeting or thanks, a cancel,
//! a problem the principal solved themselves, or an empty message exits the
//! pipeline here, with no model call at all (Path A, the social exit).
//!
//! Patterns follow the reference implementation (chalie.md §2.12). The
//! design keeps ACKNOWLEDGE here; the reference dropped the filter after
//! false positives such as "thanks, but what about …?", so the question
//! guards below are kept: a greeting that asks a question of more than
//! three words goes on to triage, and feedback over eight words is not
//! acknowledged as social.

use serde::{Deserialize, Serialize};

use crate::phrases::{is_cancel, is_greeting, is_positive_feedback, is_self_resolved};
use mneme_text::words;

/// The social exits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum SocialMode {
    Acknowledge,
    Cancel,
    Ignore,
}

/// The pre-check, run before topic classification: only CANCEL and IGNORE,
/// and only for a message of at most 6 words with no `?`, `,` or `;`.
pub fn pre_check(text: &str) -> Option<SocialMode> {
    if text.trim().is_empty() {
        return Some(SocialMode::Ignore);
    }
    if words(text).len() > 6 || text.contains(['?', ',', ';']) {
        return None;
    }
    if is_self_resolved(text) {
        Some(SocialMode::Ignore)
    } else if is_cancel(text) {
        Some(SocialMode::Cancel)
    } else {
        None
    }
}

/// Step 2a inside triage: the full social filter.
pub fn filter(text: &str) -> Option<SocialMode> {
    if text.trim().is_empty() {
        return Some(SocialMode::Ignore);
    }
    let n = words(text).len();
    let question = text.contains('?');
    if is_greeting(text) && !(question && n > 3) {
        return Some(SocialMode::Acknowledge);
    }
    if is_positive_feedback(text) && n <= 8 && !question {
        return Some(SocialMode::Acknowledge);
    }
    if is_self_resolved(text) {
        return Some(SocialMode::Ignore);
    }
    if is_cancel(text) {
        return Some(SocialMode::Cancel);
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use SocialMode::*;

    #[test]
    fn filter_table() {
        let cases: &[(&str, Option<SocialMode>)] = &[
            ("", Some(Ignore)),
            ("  \n", Some(Ignore)),
            ("hi", Some(Acknowledge)),
            ("hello there!", Some(Acknowledge)),
            ("hey, you ok?", Some(Acknowledge)),
            ("hey, how are you?", None),
            ("hey, what is the capital of France?", None),
            ("thanks!", Some(Acknowledge)),
            ("great, thank you so much for all that", Some(Acknowledge)),
            ("thanks, but what about the second one?", None),
            ("thanks for that but one more thing about the invoice", None),
            ("never mind", Some(Cancel)),
            ("nevermind, ignore that", Some(Cancel)),
            ("cancel", Some(Cancel)),
            ("cancel my reminder for tomorrow", None),
            ("cancel the appointments", None),
            ("figured it out myself", Some(Ignore)),
            ("no worries", Some(Ignore)),
            ("forget it, found it", Some(Ignore)),
            ("what is the weather in Lisbon?", None),
            ("I need to plan my week", None),
        ];
        for (text, want) in cases {
            assert_eq!(filter(text), *want, "{text:?}");
        }
    }

    #[test]
    fn pre_check_only_handles_short_plain_messages() {
        assert_eq!(pre_check("never mind"), Some(Cancel));
        assert_eq!(pre_check("ok never mind then stop it please now"), None, "7 words is over the 6-word limit");
        assert_eq!(pre_check("ok never mind then stop it"), Some(Cancel), "6 words is within the limit");
        assert_eq!(pre_check("never mind, thanks"), None, "a comma disqualifies");
        assert_eq!(pre_check("hi"), None, "greetings are not part of the pre-check");
        assert_eq!(pre_check(""), Some(Ignore));
    }

    #[test]
    fn positive_feedback_stops_at_eight_words() {
        assert_eq!(filter("thanks one two three four five six seven"), Some(Acknowledge), "8 words");
        assert_eq!(filter("thanks one two three four five six seven eight"), None, "9 words");
    }
}
