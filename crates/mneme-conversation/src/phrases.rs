//! The social phrases a message can carry: a greeting, positive feedback,
//! a cancellation, a problem the principal solved themselves. The intent
//! classifier (layer 1) and the social filter (step 2a) both read them, so
//! they live here rather than in either. Patterns follow the reference
//! implementation (chalie.md §2.11, §2.12).

use std::sync::LazyLock;

use regex_lite::Regex;

static GREETING: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)^\s*(hey|hi|hello|yo|sup|what'?s up|howdy|hiya|heya|greetings|good (morning|afternoon|evening))\b")
        .unwrap()
});
static POSITIVE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)\b(thanks|thank you|great|perfect|awesome|exactly|that works|correct|good|nice|helpful|got it|understood)\b")
        .unwrap()
});
static CANCEL: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?i)\b(never ?mind|ignore that|stop (searching|looking|checking)|forget (it|about it|that)|don'?t bother)\b",
    )
    .unwrap()
});
/// "cancel", unless it names something to cancel (a reminder, a task…), which
/// is a request for the scheduler, not a social exit.
static CANCEL_WORD: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"(?i)\bcancel\b").unwrap());
/// What "cancel" can name when it asks for something to be cancelled,
/// not for the conversation to stop: "cancel my reminder", "cancel my
/// Netflix subscription". Each also in the plural.
pub const CANCEL_OBJECTS: &[&str] = &[
    "reminder",
    "alarm",
    "schedule",
    "task",
    "notification",
    "event",
    "recurring",
    "appointment",
    "meeting",
    "subscription",
    "membership",
    "order",
    "booking",
    "reservation",
    "plan",
    "account",
];
static CANCEL_OBJECT: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(&format!(r"(?i)\bcancel\s+(?:[\w'’-]+\s+){{0,3}}({})s?\b", CANCEL_OBJECTS.join("|"))).unwrap()
});
static SELF_RESOLVED: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?i)\b((found|figured|sorted|solved|got) (it|that|this)( (out|now|myself))?|all good|no worries|no need)\b",
    )
    .unwrap()
});

/// Whether `text` opens with a greeting.
pub fn is_greeting(text: &str) -> bool {
    GREETING.is_match(text)
}

/// Whether `text` contains a positive-feedback word.
pub fn is_positive_feedback(text: &str) -> bool {
    POSITIVE.is_match(text)
}

/// Whether `text` cancels what is under way (and names nothing to cancel).
pub fn is_cancel(text: &str) -> bool {
    CANCEL.is_match(text) || (CANCEL_WORD.is_match(text) && !CANCEL_OBJECT.is_match(text))
}

/// Whether `text` says the principal solved it themselves.
pub fn is_self_resolved(text: &str) -> bool {
    SELF_RESOLVED.is_match(text)
}
