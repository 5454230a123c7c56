//! Routing and replies when no model is configured (D-C32).
//!
//! The router's rules are the seed's and stay so; they lean to CLARIFY in a
//! cold context because, with a model, a question asked into an empty
//! memory is best met with a question back. With no model that question
//! is dishonest: "What is the capital of Portugal?" is perfectly clear,
//! and what is missing is a model, not detail. So with no model a CLARIFY
//! that the message does not need becomes RESPOND, whose rule-based reply
//! says what Mneme cannot do without a model and what it still can, and a
//! message that really is unclear ("do the thing", "change it") is
//! CLARIFY whatever the scores said.
//!
//! A message is unclear when it names nothing: after the function words
//! and the words that only point ("thing", "stuff", "that one", "it",
//! "again") are taken away, no word is left to act or answer on.

use crate::Mode;

/// Words that point at something without naming it, or ask for an
/// unspecified change: a message made only of these (and function words)
/// cannot be answered without knowing what it refers to.
const POINTING: &[&str] = &[
    "thing",
    "things",
    "thingy",
    "stuff",
    "something",
    "anything",
    "everything",
    "whatever",
    "same",
    "other",
    "another",
    "again",
    "this",
    "that",
    "those",
    "these",
    "there",
    "here",
    "them",
    "it",
    "one",
    "ones",
    "change",
    "changes",
    "update",
    "handle",
    "sort",
    "fix",
    "redo",
    "undo",
    "make",
    "makes",
    "mean",
    "meant",
    "want",
    "need",
    "like",
    "done",
    "bit",
    "part",
    "rest",
    "better",
    "worse",
    "earlier",
    "before",
    "previous",
    "last",
    "next",
    "said",
    "else",
];

/// Short function words that never name anything.
const FUNCTION: &[&str] = &[
    "a", "an", "the", "do", "does", "did", "to", "of", "in", "on", "at", "is", "are", "was", "be", "i", "you", "me",
    "my", "we", "us", "can", "could", "would", "will", "so", "and", "or", "but", "if", "as", "with", "for", "how",
    "why", "who", "which", "when", "where", "not", "no", "yes", "all", "any", "up", "out", "go", "get", "got", "now",
    "too", "very", "hmm", "huh", "um", "uh", "er", "eh", "ok", "k", "oh", "ah", "right", "sure", "yeah", "yep",
    "what's", "that's", "it's", "let's", "don't", "didn't", "can't", "should", "have", "has", "had", "from", "by",
    "into", "what", "about", "some", "more", "less", "just", "really", "okay", "maybe", "please", "over", "well",
    "then",
];

/// Whether the message names nothing to answer or act on (see the module
/// comment): only function and pointing words, with something pointed at
/// ("do it", "that one") or too short to ask anything ("why?", "and
/// then?"). "What can you do?" points at nothing and is clear; a number
/// ("what is 2+2?") is content. An empty message is not unclear: it is
/// ignored upstream.
pub fn is_unclear(text: &str) -> bool {
    let words = mneme_text::words(text);
    let content = |w: &String| {
        w.chars().any(|c| c.is_ascii_digit())
            || !(POINTING.contains(&w.as_str()) || FUNCTION.contains(&w.as_str()) || w.chars().count() < 2)
    };
    !words.is_empty()
        && !words.iter().any(content)
        && (words.len() <= 2 || words.iter().any(|w| POINTING.contains(&w.as_str())))
}

/// Words that only acknowledge ("ok", "sure", "got it").
const ACKNOWLEDGING: &[&str] = &[
    "ok",
    "okay",
    "k",
    "kk",
    "alright",
    "right",
    "sure",
    "yes",
    "yeah",
    "yep",
    "cool",
    "fine",
    "got",
    "it",
    "i",
    "see",
    "understood",
    "noted",
];

/// The mode to reply in with no model configured, given the router's
/// pick: ACKNOWLEDGE for a bare "ok"; CLARIFY exactly when the message is
/// unclear; the router's CLARIFY on a clear message, and its ACKNOWLEDGE
/// of a message that asks for something (a praise word inside "translate
/// 'good evening'"), become RESPOND; other picks stand.
pub fn settle(routed: Mode, text: &str) -> Mode {
    let words = mneme_text::words(text);
    match routed {
        Mode::Ignore | Mode::Cancel | Mode::Act => routed,
        _ if !words.is_empty() && words.iter().all(|w| ACKNOWLEDGING.contains(&w.as_str())) => Mode::Acknowledge,
        _ if is_unclear(text) => Mode::Clarify,
        Mode::Clarify => Mode::Respond,
        Mode::Acknowledge if crate::intent::asks(text) => Mode::Respond,
        other => other,
    }
}

/// What the principal reads when a question needs a model and none is
/// configured: what is missing, what still works, and the one variable to
/// set (the endpoint; the model it serves is asked for, D-C33).
pub const NEEDS_A_MODEL: &str = "I need a language model to answer that, and none is connected. \
Without one I can still remember what you tell me (\"remember that my sister is called Ana\"), \
set reminders (\"remind me tomorrow at 9 to call the dentist\"), find what you have told me or given me, \
keep lists, run recommendations and background tasks. To connect a model, set llm_url to the address \
of an OpenAI-compatible endpoint (for Ollama, http://127.0.0.1:11434/v1); the Status screen shows \
whether it answers.";

/// What the principal reads when a model is configured but did not
/// answer, and memory has nothing on the message (D-C34).
pub const MODEL_FAILED: &str = "The language model did not answer, so I cannot answer that now, and I have \
nothing in memory about it yet. The Status screen shows what went wrong with the model.";

/// The short line added when memory had something to show but a model
/// would be needed for a full answer.
pub const A_MODEL_WOULD_ANSWER: &str = "A model would answer this fully: set llm_url (see the Status screen).";

#[cfg(test)]
mod tests {
    use super::*;
    use crate::router::{self, ContextView, Weights};
    use crate::social::{self, SocialMode};
    use crate::{intent, triage};

    /// The whole no-model decision, as the chat flow takes it for a new
    /// principal (empty memory, no tools): the social filter, the triage
    /// heuristic, the router on a cold context, then [`settle`].
    fn route_without_a_model(text: &str) -> Mode {
        if let Some(s) = social::filter(text) {
            return match s {
                SocialMode::Acknowledge => Mode::Acknowledge,
                SocialMode::Cancel => Mode::Cancel,
                SocialMode::Ignore => Mode::Ignore,
            };
        }
        let input = triage::Input { text: text.into(), ..Default::default() };
        let raw = triage::heuristic(text, &[]);
        let t = triage::self_eval(raw, &input, triage::Source::Heuristic, Some("model-unavailable".into()));
        if t.mode == Mode::Act {
            return Mode::Act;
        }
        let intent = intent::classify(text, 0.0);
        let signals = router::signals(text, &ContextView::default(), &intent);
        let d = router::route(&signals, &Weights::default(), None, &[], true, &[]);
        settle(d.mode, text)
    }

    /// At least 60 messages of a first hour, each with the mode a person
    /// would expect with no model configured.
    const LABELLED: &[(&str, Mode)] = &[
        // Clear questions and requests: only a model can answer them.
        ("What is the capital of Portugal?", Mode::Respond),
        ("How does compound interest work?", Mode::Respond),
        ("Tell me a short story about a lighthouse keeper", Mode::Respond),
        ("Why is the sky blue?", Mode::Respond),
        ("Explain how vaccines train the immune system", Mode::Respond),
        ("Can you summarise the French Revolution in three sentences?", Mode::Respond),
        ("What's a good recipe for banana bread?", Mode::Respond),
        ("who wrote pride and prejudice", Mode::Respond),
        ("Translate 'good evening' into Italian", Mode::Respond),
        ("Write a haiku about autumn rain", Mode::Respond),
        ("how many ounces are in a pound", Mode::Respond),
        ("What should I cook for dinner tonight with leeks and potatoes?", Mode::Respond),
        ("Give me three ideas for a birthday present for my father", Mode::Respond),
        ("Is it better to run in the morning or the evening?", Mode::Respond),
        ("what did I say about my sister?", Mode::Act),
        ("Help me plan a weekend in Lisbon", Mode::Respond),
        ("Compare Rust and Go for a web server", Mode::Respond),
        ("What does the word ephemeral mean?", Mode::Respond),
        ("Draft an email to my landlord about the broken heating", Mode::Respond),
        ("When did the Berlin Wall fall?", Mode::Respond),
        ("I've been sleeping badly this week, any advice?", Mode::Respond),
        ("How do I change a bike tyre?", Mode::Respond),
        ("Which is bigger, Jupiter or Saturn?", Mode::Respond),
        ("Suggest a name for a grey kitten", Mode::Respond),
        ("what are the symptoms of dehydration", Mode::Respond),
        ("What can you do?", Mode::Respond),
        ("Who are you?", Mode::Respond),
        ("What is 2+2?", Mode::Respond),
        // Things to do: the ACT loop's skills run without a model.
        ("Remind me tomorrow at 9 to call the dentist", Mode::Act),
        ("remind me in 20 minutes to take the bread out", Mode::Act),
        ("Every Sunday evening remind me to water the plants", Mode::Act),
        ("what reminders do I have?", Mode::Act),
        ("remember that my sister is called Ana", Mode::Act),
        ("Remember that my passport expires in March", Mode::Act),
        ("add milk and eggs to my shopping list", Mode::Act),
        ("show my shopping list", Mode::Act),
        ("help me focus on the tax return", Mode::Act),
        ("keep working on the garden plan in the background task", Mode::Act),
        ("note that I prefer aisle seats", Mode::Act),
        ("set a reminder for next Monday to renew the insurance", Mode::Act),
        ("cancel my reminders", Mode::Act),
        // Social exits: no model call at all.
        ("hi", Mode::Acknowledge),
        ("hello there", Mode::Acknowledge),
        ("thanks!", Mode::Acknowledge),
        ("cheers, that helped", Mode::Acknowledge),
        ("ok", Mode::Acknowledge),
        ("good morning", Mode::Acknowledge),
        ("thank you so much", Mode::Acknowledge),
        ("got it", Mode::Acknowledge),
        ("I went for a long run this morning, felt great", Mode::Acknowledge),
        ("nvm, scratch that", Mode::Cancel),
        ("stop, I don't need it anymore", Mode::Cancel),
        ("ok never mind then", Mode::Cancel),
        ("forget it", Mode::Cancel),
        ("cancel that", Mode::Cancel),
        ("", Mode::Ignore),
        ("   ", Mode::Ignore),
        // Really unclear: a question back is the honest answer.
        ("do the thing", Mode::Clarify),
        ("change it", Mode::Clarify),
        ("what about that one?", Mode::Clarify),
        ("fix it", Mode::Clarify),
        ("the other one", Mode::Clarify),
        ("same again but better", Mode::Clarify),
        ("can you do that?", Mode::Clarify),
        ("why?", Mode::Clarify),
        ("and then?", Mode::Clarify),
        ("make it like before", Mode::Clarify),
        ("hmm, what about this", Mode::Clarify),
        ("do it again", Mode::Clarify),
    ];

    #[test]
    fn no_model_routing_on_a_labelled_first_hour() {
        assert!(LABELLED.len() >= 60);
        let mut per_mode: std::collections::BTreeMap<Mode, (usize, usize)> = Default::default();
        let mut wrong = Vec::new();
        for (text, want) in LABELLED {
            let got = route_without_a_model(text);
            let e = per_mode.entry(*want).or_default();
            e.1 += 1;
            if got == *want {
                e.0 += 1;
            } else {
                wrong.push(format!("{text:?}: expected {want:?}, got {got:?}"));
            }
        }
        let report: Vec<String> = per_mode
            .iter()
            .map(|(m, (ok, n))| format!("{m:?} {ok}/{n} ({:.0}%)", 100.0 * *ok as f64 / *n as f64))
            .collect();
        println!("no-model routing, per mode: {}", report.join(", "));
        assert!(wrong.is_empty(), "per mode: {}\nmisrouted:\n{}", report.join(", "), wrong.join("\n"));
    }

    #[test]
    fn settle_keeps_the_seed_routing_except_clarify() {
        assert_eq!(settle(Mode::Clarify, "What is the capital of Portugal?"), Mode::Respond);
        assert_eq!(settle(Mode::Respond, "do the thing"), Mode::Clarify);
        assert_eq!(settle(Mode::Acknowledge, "I went running today"), Mode::Acknowledge);
        assert_eq!(settle(Mode::Act, "do it"), Mode::Act);
        assert_eq!(settle(Mode::Ignore, ""), Mode::Ignore);
        assert!(!is_unclear(""), "empty is ignored upstream, not unclear");
    }
}
