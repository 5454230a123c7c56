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

use crate::phrases::{is_cancel, is_greeting, is_self_resolved};
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
///
/// The message is read clause by clause (split at `,` `;` `.` `!` `:` and
/// dashes). It is an acknowledgement when every clause is thanks, praise,
/// a greeting or their filler ("cheers, that helped", "great, thank you so
/// much for all that"); a cancellation when one clause cancels and the rest
/// only explain or thank ("nvm, scratch that", "stop, I don't need it
/// anymore"). Any clause with something else in it (a question word,
/// "but", a subject) sends the message on to triage, so "thanks, but why
/// did it fail" is not waved off.
pub fn filter(text: &str) -> Option<SocialMode> {
    if text.trim().is_empty() {
        return Some(SocialMode::Ignore);
    }
    let n = words(text).len();
    let question = text.contains('?');
    if is_greeting(text) && !(question && n > 3) && greeting_only(text) {
        return Some(SocialMode::Acknowledge);
    }
    let clauses = clauses(text);
    if !question && n <= 12 {
        let kinds: Vec<Clause> = clauses.iter().map(|c| clause_kind(c)).collect();
        if kinds.contains(&Clause::Cancel) && kinds.iter().all(|k| *k != Clause::Other) {
            return Some(SocialMode::Cancel);
        }
        if kinds.contains(&Clause::Thanks)
            && kinds.iter().all(|k| matches!(k, Clause::Thanks | Clause::Greeting | Clause::Interjection))
        {
            return Some(SocialMode::Acknowledge);
        }
    }
    if is_self_resolved(text) && !question {
        return Some(SocialMode::Ignore);
    }
    if is_cancel(text) && !question && n <= 6 {
        return Some(SocialMode::Cancel);
    }
    None
}

/// What one clause of a message is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Clause {
    Greeting,
    Thanks,
    Cancel,
    /// Says why a cancellation ("I don't need it anymore") and nothing else.
    Reason,
    /// "ok", "oh", "alright": goes with thanks or a cancellation.
    Interjection,
    Other,
}

fn clauses(text: &str) -> Vec<Vec<String>> {
    text.split([',', ';', '.', '!', ':', '—', '–'])
        .flat_map(|c| c.split(" - "))
        .map(words)
        .filter(|w| !w.is_empty())
        .collect()
}

/// Words that may stand beside thanks or praise without making a request.
const THANKS_FILLER: &[&str] = &[
    "so",
    "very",
    "much",
    "a",
    "lot",
    "again",
    "for",
    "that",
    "this",
    "it",
    "the",
    "help",
    "your",
    "all",
    "everything",
    "really",
    "indeed",
    "mate",
    "man",
    "buddy",
    "friend",
    "then",
    "now",
    "just",
    "was",
    "is",
    "that's",
    "it's",
    "you",
    "you're",
    "i",
    "appreciate",
    "appreciated",
    "ok",
    "okay",
    "oh",
    "ah",
    "well",
    "yes",
    "yeah",
    "yep",
    "sure",
    "right",
    "alright",
    "many",
    "good",
    "to",
    "know",
    "me",
    "out",
    "big",
    "huge",
    "bunch",
    "heaps",
    "kind",
    "of",
    "works",
    "worked",
    "helped",
    "helps",
    "done",
    "job",
    "one",
    "stuff",
    "sense",
    "makes",
    "made",
    "sounds",
    "looks",
    "clear",
    "clearer",
    "will",
    "do",
    "noted",
    "understood",
    "got",
    "there",
];
/// Words that carry the thanks or praise itself.
const THANKS_CORE: &[&str] = &[
    "thanks",
    "thank",
    "thx",
    "ty",
    "ta",
    "cheers",
    "appreciate",
    "appreciated",
    "great",
    "perfect",
    "awesome",
    "brilliant",
    "lovely",
    "excellent",
    "wonderful",
    "fantastic",
    "amazing",
    "super",
    "nice",
    "cool",
    "sweet",
    "helpful",
    "useful",
    "helped",
    "helps",
    "works",
    "worked",
    "understood",
    "noted",
    "legend",
    "exactly",
    "correct",
    "good",
    "sense",
    "clear",
    "clearer",
    "got",
];
/// Clauses of these alone go with thanks or a cancellation.
const INTERJECTIONS: &[&str] =
    &["ok", "okay", "k", "oh", "ah", "alright", "right", "yes", "yeah", "yep", "sure", "well", "so"];
/// Words that may stand beside a cancellation.
const CANCEL_FILLER: &[&str] = &[
    "ok", "okay", "oh", "ah", "actually", "then", "please", "just", "now", "that", "this", "it", "the", "whole",
    "thing", "idea", "all", "of", "request", "search", "sorry", "my", "bad", "thanks", "anyway", "again",
];
/// Words of a reason given for cancelling ("I don't need it anymore").
const REASON: &[&str] = &[
    "i",
    "don't",
    "dont",
    "do",
    "not",
    "need",
    "it",
    "that",
    "this",
    "anymore",
    "any",
    "more",
    "longer",
    "no",
    "needed",
    "necessary",
    "want",
    "changed",
    "my",
    "mind",
    "after",
    "all",
    "actually",
    "have",
    "already",
    "it's",
    "its",
    "fine",
    "now",
    "then",
    "relevant",
    "matter",
    "doesn't",
    "won't",
    "be",
];

fn cancel_phrase(c: &[String]) -> bool {
    let has = |w: &str| c.iter().any(|x| x == w);
    let pair = |a: &str, b: &str| c.windows(2).any(|p| p[0] == a && p[1] == b);
    has("nvm")
        || has("nevermind")
        || pair("never", "mind")
        || pair("scratch", "that")
        || pair("scratch", "it")
        || pair("forget", "it")
        || pair("forget", "that")
        || pair("forget", "about")
        || pair("ignore", "that")
        || pair("ignore", "it")
        || pair("ignore", "this")
        || pair("drop", "it")
        || pair("leave", "it")
        || pair("don't", "bother")
        || pair("no", "need")
        || has("stop")
        || has("cancel")
        || pair("not", "needed")
}

/// The words that a cancellation phrase itself uses, beside the filler.
const CANCEL_WORDS: &[&str] = &[
    "nvm",
    "nevermind",
    "never",
    "mind",
    "scratch",
    "forget",
    "about",
    "ignore",
    "drop",
    "leave",
    "don't",
    "bother",
    "no",
    "need",
    "stop",
    "cancel",
    "not",
    "needed",
];

fn clause_kind(c: &[String]) -> Clause {
    let text = c.join(" ");
    if is_greeting(&text) && c.len() <= 3 {
        return Clause::Greeting;
    }
    let all_in = |sets: &[&[&str]]| c.iter().all(|w| sets.iter().any(|s| s.contains(&w.as_str())));
    if all_in(&[INTERJECTIONS]) {
        return Clause::Interjection;
    }
    if cancel_phrase(c)
        && !c.iter().any(|w| crate::phrases::CANCEL_OBJECTS.iter().any(|o| w == o || w.strip_suffix('s') == Some(o)))
        && all_in(&[CANCEL_WORDS, CANCEL_FILLER, REASON])
    {
        return Clause::Cancel;
    }
    if c.iter().any(|w| THANKS_CORE.contains(&w.as_str())) && all_in(&[THANKS_CORE, THANKS_FILLER]) {
        return Clause::Thanks;
    }
    if all_in(&[REASON]) {
        return Clause::Reason;
    }
    Clause::Other
}

/// A greeting with nothing after it but more greeting, thanks or a short
/// "how are you" (a question of at most three words).
fn greeting_only(text: &str) -> bool {
    let c = clauses(text);
    c.len() <= 1
        || c.iter().skip(1).all(|c| c.len() <= 3 || matches!(clause_kind(c), Clause::Greeting | Clause::Thanks))
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
    fn long_thanks_is_not_short_feedback() {
        assert_eq!(filter("thank you so much for all of that, it really helped"), Some(Acknowledge), "11 words");
        assert_eq!(
            filter("thank you so much, that was really really helpful for me and for all of us"),
            None,
            "over twelve words goes on to triage"
        );
    }

    /// Issue #26 item 2: what people type to thank, to cancel, or to open
    /// a real question with a greeting or thanks: 94 phrasings.
    #[test]
    fn phrasings_people_type() {
        let ack = [
            "cheers, that helped",
            "cheers",
            "cheers mate",
            "thanks",
            "thanks!",
            "thank you",
            "thank you so much",
            "thanks a lot",
            "thanks again",
            "thx",
            "ty",
            "ta",
            "many thanks",
            "much appreciated",
            "appreciate it",
            "really appreciate it, thanks",
            "great, thanks",
            "great stuff",
            "perfect, thank you",
            "perfect",
            "awesome, that works",
            "that works, thanks",
            "that helped a lot",
            "that was helpful",
            "that's really useful, cheers",
            "nice one",
            "brilliant, thanks so much",
            "lovely, ta",
            "cool, got it",
            "got it, thanks",
            "ok thanks",
            "okay, thank you",
            "ok cool",
            "makes sense, thanks",
            "that makes sense now",
            "understood",
            "noted, thanks",
            "good to know, thanks",
            "sounds good",
            "excellent",
            "amazing, thank you!",
            "you're a legend",
            "thanks, that's exactly it",
            "hi",
            "hello there!",
            "hey, you ok?",
            "good morning",
        ];
        let cancel = [
            "nvm, scratch that",
            "nvm",
            "nevermind",
            "never mind",
            "ok never mind then",
            "never mind, thanks",
            "stop, I don't need it anymore",
            "stop",
            "please stop",
            "scratch that",
            "forget it",
            "forget about it, I don't need it",
            "ignore that",
            "ignore that, my bad",
            "actually, forget it",
            "cancel",
            "cancel that",
            "drop it",
            "don't bother",
            "no need anymore",
            "never mind, I changed my mind",
            "stop, not needed",
        ];
        let not_social = [
            "hi, can you explain how compound interest works?",
            "thanks, but why did it fail",
            "thanks, but why did it fail?",
            "hey, what is the capital of France?",
            "hello, I need to plan my week",
            "thanks for that but one more thing about the invoice",
            "great, now book the flight to Lisbon",
            "ok, remind me tomorrow at 9 to call the dentist",
            "cheers, can you also add the receipts",
            "thanks, and what about the second one?",
            "cancel my reminder for tomorrow",
            "cancel the appointments",
            "stop the recurring task",
            "never mind the report, send me the summary",
            "perfect, schedule it for Friday",
            "ok what next?",
            "good, now explain the second point",
            "thank you, how do I export the vault",
            "what is the weather in Lisbon?",
            "I need to plan my week",
            "stop sending me reminders about the gym",
        ];
        let ignore = ["figured it out myself", "no worries", "forget it, found it", "all good, sorted it"];
        let table = ack
            .iter()
            .map(|t| (*t, Some(Acknowledge)))
            .chain(cancel.iter().map(|t| (*t, Some(Cancel))))
            .chain(not_social.iter().map(|t| (*t, None)))
            .chain(ignore.iter().map(|t| (*t, Some(Ignore))));
        let wrong: Vec<String> = table
            .filter(|(t, want)| filter(t) != *want)
            .map(|(t, want)| format!("{t:?}: {:?}, want {want:?}", filter(t)))
            .collect();
        assert!(wrong.is_empty(), "{}", wrong.join("\n"));
        assert!(ack.len() + cancel.len() + not_social.len() + ignore.len() >= 80);
    }
}
