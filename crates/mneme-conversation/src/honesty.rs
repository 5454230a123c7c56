//! A reply may say an action was done only if the action's record exists
//! (#49 item 2, D-L3). A model writes "I'll remind you at 9" as easily when
//! no reminder was set as when one was; this reads what a reply claims to
//! have done, sets each claim against the actions that ran for the message
//! and succeeded, and rewrites a reply that claims more than was done:
//! the sentences that claim it go, and a labelled sentence says what was
//! (not) done and why.
//!
//! What counts as a claim is narrow on purpose: a first-person statement
//! that an action is done or will be done by Mneme ("I've set a reminder",
//! "I'll remind you", "added to your list", "I've booked"). An offer ("I can
//! remind you if you like"), a question, or a report of what the principal
//! did is no claim. Remembering is not checked: the commit writes the
//! exchange and queues its gists and facts before the reply is sent, so
//! "I'll remember that" is true whenever there is a reply at all.

use std::sync::LazyLock;

use regex_lite::Regex;

/// What a reply can claim to have done.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Claim {
    /// A reminder set, scheduled or cancelled.
    Reminder,
    /// Something added to, removed from or checked on a list.
    List,
    /// A background task created or cancelled.
    Task,
    /// A focus session started or ended.
    Focus,
    /// Something no innate action can do: a booking, an email or message,
    /// an order, a payment, a call.
    External,
}

impl Claim {
    /// The action whose success backs the claim, and the verbs
    /// (`params.action`) that change something (none listed: any). An
    /// external deed is backed only by one of the principal's own tools
    /// (Path B), which Done names `tool`.
    fn backed_by(self) -> (&'static str, &'static [&'static str]) {
        match self {
            Claim::Reminder => ("schedule", &["create", "cancel"]),
            Claim::List => ("list", &["add", "remove", "check", "uncheck", "clear"]),
            Claim::Task => ("persistent_task", &["create", "cancel"]),
            Claim::Focus => ("focus", &["set", "clear"]),
            Claim::External => (TOOL, &[]),
        }
    }

    fn noun(self) -> &'static str {
        match self {
            Claim::Reminder => "a reminder",
            Claim::List => "your list",
            Claim::Task => "a background task",
            Claim::Focus => "a focus session",
            Claim::External => "that",
        }
    }
}

/// The kind of a [`Done`] that is one of the principal's tools.
pub const TOOL: &str = "tool";

/// One action that ran for the message: its kind, the verb it was given
/// (`params.action`, when it has one), and whether it succeeded; with what
/// it answered.
#[derive(Debug, Clone, PartialEq)]
pub struct Done {
    pub kind: String,
    pub verb: Option<String>,
    pub ok: bool,
    pub result: String,
}

fn re(p: &str) -> Regex {
    Regex::new(p).expect("a valid pattern")
}

/// First person, done or about to be done: "I've", "I have", "I'll", "I
/// will", "I'm going to", "I just", "I went ahead and".
const DOING: &str = r"\bi\s*(?:'ve|’ve|\s+have|'ll|’ll|\s+will|'m\s+going\s+to|’m\s+going\s+to|\s+am\s+going\s+to|\s+just|\s+went\s+ahead\s+and|\s+also|\s+now)?\s+(?:also\s+|now\s+|just\s+|gone\s+ahead\s+and\s+|make\s+sure\s+to\s+)?";

/// The start of a sentence that reports a deed with no subject, after an
/// optional "Done", "Actions taken" or "Action taken for this message" and a
/// colon or dash.
const LEAD: &str = r"^\s*(?:(?:done|ok|okay|sure)\s*[:,.!—–-]\s*)?";

/// [`LEAD`] with its lead word required.
const LED: &str = r"^\s*(?:done|ok|okay|sure)\s*[:,.!—–-]\s*";

static CLAIMS: LazyLock<Vec<(Claim, Regex)>> = LazyLock::new(|| {
    let doing = |tail: &str| re(&format!("(?i){DOING}(?:{tail})"));
    vec![
        (
            Claim::Reminder,
            doing(
                r"stop\s+(?:sending|reminding)|no\s+longer\s+(?:send|remind)|remind(?:ed)?\s+(?:you|myself)|(?:set|create|created|schedule|scheduled|add|added|cancel|cancel+ed|remove|removed|delete|deleted)\s+(?:up\s+)?(?:a|the|your|that|this|an?\s+\w+)?\s*reminders?|scheduled\s+(?:it\s+|that\s+|this\s+)?(?:to|for)\b|scheduled\s+(?:a|an|the|your)\s+[^.!?\n]{1,40}?\s+(?:in|at|for|on|tomorrow|tonight)\b|ping\s+you|nudge\s+you",
            ),
        ),
        (
            Claim::Reminder,
            re(
                r"(?i)\breminders?\s+(?:is|are|has\s+been|have\s+been)\s+(?:now\s+)?(?:set|created|scheduled|cancel+ed|removed)\b|\breminder\s+set\b",
            ),
        ),
        (
            Claim::List,
            doing(r"(?:added|put|removed|taken|crossed|checked|ticked|cleared)\b[^.!?\n]{0,60}\b(?:list|lists)\b"),
        ),
        (
            Claim::List,
            re(
                r"(?i)\b(?:added|put)\s+[^.!?\n]{1,60}\s+(?:to|on)\s+your\s+[^.!?\n]{0,25}\blist\b|\b(?:is|are)\s+now\s+on\s+your\s+[^.!?\n]{0,25}\blist\b",
            ),
        ),
        (
            Claim::Task,
            doing(
                r"(?:created|started|set\s+up|opened|queued|cancel+ed)\s+(?:a|the|your)?\s*(?:new\s+)?(?:background|persistent|research)?\s*task|(?:research|look\s+into|work\s+on|dig\s+into)\s+(?:this|that|it)\s+in\s+the\s+background|(?:research|look\s+into|looked\s+into|dig\s+into|find\s+out)\b[^.!?\n]{0,100}\b(?:report\s+back|get\s+back\s+to\s+you)|(?:already\s+|successfully\s+)?(?:researched|compared|looked\s+into)\b[^.!?\n]{0,100}\b(?:shortlist|list\s+of|options|found)",
            ),
        ),
        (
            Claim::Focus,
            doing(r"(?:started|set|begun|begin|start|ended|stopped|cleared)\s+(?:a|the|your)?\s*focus\s+session"),
        ),
        (Claim::Focus, re(r"(?i)\bfocus\s+session\s+(?:is|has)\s+(?:now\s+)?(?:started|set|on|begun)\b")),
        (
            Claim::External,
            doing(
                r"(?:booked|book|reserved|reserve|sent|send|emailed|email|e-mailed|texted|text|messaged|message|ordered|order|purchased|bought|buy|paid|pay|called|call|phoned|phone|dialled|dialed|posted|post|published|publish|shared|share|transferred|transfer|moved|move|unsubscribed|unsubscribe)\b(?:\s+(?:you|a|an|the|your|my|them|him|her|it|that|this|some|more|to|for|on)\b)|(?:turned|turn|switched|switch)\s+(?:on|off)\b|(?:turned|turn|switched|switch)\s+(?:the|your|it|them)\b[^.!?\n]{0,40}\b(?:on|off)\b|initiate\w*\s+(?:the|a)\s+(?:process|payment|transfer)|(?:cancel+ed|cancel)\s+(?:your|the|my)\s+[^.!?\n]{0,30}\b(?:subscription|membership|order|booking|reservation|account)",
            ),
        ),
        (
            Claim::External,
            re(
                r"(?i)\b(?:your\s+)?(?:table|order|booking|reservation|email|message|payment)\s+(?:has\s+been|is|was)\s+(?:now\s+)?(?:booked|placed|sent|confirmed|made|reserved)\b",
            ),
        ),
        // A report with no subject, as a log line reads: "Sent it to her.",
        // "Done: added eggs to your list.", "Actions taken: booked the table."
        // "Set a reminder on your phone" is advice: the bare "set" counts
        // only after a lead such as "Done:".
        (
            Claim::Reminder,
            re(&format!(
                r"(?i){LEAD}(?:created|scheduled|cancel+ed)\s+(?:a|the|your)?\s*reminder|{LED}set\s+(?:a|the|your)?\s*reminder"
            )),
        ),
        (
            Claim::List,
            re(&format!(r"(?i){LEAD}(?:added|removed|crossed\s+off|checked\s+off)\b[^.!?\n]{{0,60}}\blist\b")),
        ),
        (
            Claim::External,
            re(&format!(
                r"(?i){LEAD}(?:sent|booked|reserved|emailed|texted|messaged|ordered|purchased|bought|paid|called|phoned)\b"
            )),
        ),
    ]
});

/// A sentence that reports work as a log line does ("Actions taken: …",
/// "Results of the actions: …"), naming something other than nothing: a
/// claim, of the kind its words name.
fn reported(s: &str) -> Option<Claim> {
    static REPORT: LazyLock<Regex> = LazyLock::new(|| {
        re(r"(?i)^\s*(?:##\s*)?(?:actions?\s+taken|results?\s+of\s+the\s+actions?)\b[^:\n]*[:\n]\s*(.*)$")
    });
    static NOTHING: LazyLock<Regex> =
        LazyLock::new(|| re(r"(?i)^\s*[-*]?\s*(?:none|nothing|no\s+actions?|n/a)\b|^\s*$"));
    let rest = REPORT.captures(s)?.get(1)?.as_str();
    if NOTHING.is_match(rest) {
        return None;
    }
    let lower = rest.to_lowercase();
    Some(if lower.contains("remind") {
        Claim::Reminder
    } else if lower.contains("list") {
        Claim::List
    } else if lower.contains("focus") {
        Claim::Focus
    } else if lower.contains("task") || lower.contains("research") {
        Claim::Task
    } else if lower.contains("recall") || lower.contains("memor") || lower.contains("introspect") {
        return None;
    } else {
        Claim::External
    })
}

/// The claims a reply makes, each once, with the sentence that makes it.
pub fn claims(reply: &str) -> Vec<(Claim, String)> {
    let mut out: Vec<(Claim, String)> = Vec::new();
    for s in sentences(reply) {
        if let Some(claim) = reported(&s) {
            if !out.iter().any(|(c, _)| *c == claim) {
                out.push((claim, s.clone()));
            }
            continue;
        }
        if is_offer_or_question(&s) {
            continue;
        }
        for (claim, pattern) in CLAIMS.iter() {
            if pattern.is_match(&s) && !out.iter().any(|(c, _)| c == claim) {
                out.push((*claim, s.clone()));
            }
        }
    }
    out
}

/// "Can I…", "Shall I…", "Would you like me to…", "if you'd like, I can…",
/// "I can…": an offer; a sentence ending in `?`: a question. Neither says
/// anything was done.
fn is_offer_or_question(s: &str) -> bool {
    static OFFER: LazyLock<Regex> = LazyLock::new(|| {
        re(
            r"(?i)^\s*(?:can|could|shall|should|may)\s+i\b|\bwould\s+you\s+like\s+me\s+to\b|\bdo\s+you\s+want\s+me\s+to\b|\bi\s+(?:can|could|cannot|can't|can’t|won't|won’t|didn't|didn’t|did\s+not|haven't|haven’t|have\s+not|am\s+not|'m\s+not|wasn't|was\s+not|am\s+unable|'m\s+unable)\b|\bif\s+you(?:'d|’d|\s+would)\s+like\b|\bwant\s+me\s+to\b",
        )
    });
    s.trim_end().ends_with('?') || OFFER.is_match(s)
}

/// A reply's sentences, with their closing punctuation.
fn sentences(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let chars: Vec<char> = text.chars().collect();
    for (i, &c) in chars.iter().enumerate() {
        cur.push(c);
        let end = matches!(c, '.' | '!' | '?') && chars.get(i + 1).is_none_or(|n| n.is_whitespace()) || c == '\n';
        if end {
            if !cur.trim().is_empty() {
                out.push(cur.clone());
            }
            cur.clear();
        }
    }
    if !cur.trim().is_empty() {
        out.push(cur);
    }
    out
}

/// The claims of `reply` that no successful action in `done` backs.
pub fn unbacked(reply: &str, done: &[Done]) -> Vec<(Claim, String)> {
    claims(reply)
        .into_iter()
        .filter(|(claim, _)| {
            let (kind, verbs) = claim.backed_by();
            !done.iter().any(|d| {
                d.ok && d.kind == kind
                    && (verbs.is_empty()
                        || d.verb.as_deref().is_some_and(|v| verbs.contains(&v.to_ascii_lowercase().as_str())))
            })
        })
        .collect()
}

/// The label every correction starts with.
pub const LABEL: &str = "[corrected: the reply claimed an action that was not done]";

/// `reply` without the sentences that make an unbacked claim, followed by
/// a labelled sentence per claim saying what was not done and why (the
/// failed action's own answer, when one ran). `None` when every claim is
/// backed.
pub fn correct(reply: &str, done: &[Done]) -> Option<String> {
    let wrong = unbacked(reply, done);
    if wrong.is_empty() {
        return None;
    }
    let kept: String = sentences(reply)
        .into_iter()
        .filter(|s| !wrong.iter().any(|(_, w)| w == s))
        .collect::<String>()
        .trim()
        .to_string();
    let mut notes = Vec::new();
    for (claim, _) in &wrong {
        let failed = done.iter().find(|d| !d.ok && d.kind == claim.backed_by().0).map(|d| d.result.trim().to_string());
        let note = match (claim, failed) {
            (Claim::External, _) => {
                "I did not do that: I cannot book, order, pay, call or send messages for you. I can set a reminder for you to do it.".to_string()
            }
            (c, Some(why)) if !why.is_empty() => format!("I did not set up {}: {why}.", c.noun()),
            (Claim::Reminder, _) => {
                "I did not set a reminder. Say when, for example \"remind me tomorrow at 9 to call the dentist\".".to_string()
            }
            (c, _) => format!("I did not change {}; nothing was saved for it.", c.noun()),
        };
        if !notes.contains(&note) {
            notes.push(note);
        }
    }
    let mut out = String::new();
    if !kept.is_empty() {
        out.push_str(&kept);
        out.push_str("\n\n");
    }
    out.push_str(LABEL);
    out.push(' ');
    out.push_str(&notes.join(" "));
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn done(kind: &str, verb: Option<&str>, ok: bool) -> Done {
        Done {
            kind: kind.into(),
            verb: verb.map(String::from),
            ok,
            result: if ok { "done" } else { "`due_at` is not ISO-8601: soon" }.into(),
        }
    }

    #[test]
    fn claims_are_first_person_statements_of_done_work() {
        let cases: &[(&str, &[Claim])] = &[
            ("Sure! I'll remind you to call the dentist at 9 tomorrow.", &[Claim::Reminder]),
            ("I've set a reminder for 9:00.", &[Claim::Reminder]),
            ("Reminder set: call the dentist.", &[Claim::Reminder]),
            ("Done — your reminder has been scheduled.", &[Claim::Reminder]),
            // evals/actions.jsonl a22, by the 1.5B model.
            ("I have scheduled to pay the electricity bill.", &[Claim::Reminder]),
            ("I've scheduled it for 9 tomorrow.", &[Claim::Reminder]),
            ("I've added milk and eggs to your shopping list.", &[Claim::List]),
            ("Milk is now on your shopping list.", &[Claim::List]),
            ("I've started a focus session on the report.", &[Claim::Focus]),
            ("I'll research this in the background and report back.", &[Claim::Task]),
            ("I've created a background task for it.", &[Claim::Task]),
            ("I've booked a table at Noma for Friday.", &[Claim::External]),
            ("I've sent the email to your boss.", &[Claim::External]),
            ("Your order has been placed.", &[Claim::External]),
            ("I'll call your mum now.", &[Claim::External]),
            ("I will stop sending you gym reminders.", &[Claim::Reminder]),
            ("Actions taken for this message: sent it to her", &[Claim::External]),
            ("Sent it to her.", &[Claim::External]),
            ("Done: added eggs to your shopping list.", &[Claim::List]),
            ("Done: set a reminder for 9.", &[Claim::Reminder]),
            (
                "Actions taken for this message:  - list (success): put 'call the plumber' on my to-do list",
                &[Claim::List],
            ),
            ("Actions taken for this message: set a reminder to transfer 200 euros", &[Claim::Reminder]),
            ("I will initiate the process of paying the electricity bill.", &[Claim::External]),
            ("I will turn off the lights in the living room.", &[Claim::External]),
            ("I've posted it on your LinkedIn.", &[Claim::External]),
            ("I have cancelled your Netflix subscription.", &[Claim::External]),
            // evals/actions.jsonl, by the 1.5B model (a19, a22, a21, a17, a16).
            ("I've scheduled a check of the oven in 16 minutes.", &[Claim::Reminder]),
            ("I've also reminded myself to water the plants in 334 minutes.", &[Claim::Reminder]),
            ("I will schedule a reminder to check the oven in 15 minutes.", &[Claim::Reminder]),
            ("I will call my mum and tell her I'll be late.", &[Claim::External]),
            (
                "I will look into whether a heat pump makes sense for our 1970s house and report back this week.",
                &[Claim::Task],
            ),
            (
                "I recall that I have already researched e-bikes under 2000 euros and have a shortlist of three.",
                &[Claim::Task],
            ),
            (
                "I have successfully researched e-bikes under 2000 euros and created a shortlist of three options.",
                &[Claim::Task],
            ),
        ];
        for (reply, want) in cases {
            let got: Vec<Claim> = claims(reply).into_iter().map(|(c, _)| c).collect();
            assert_eq!(&got, want, "{reply}");
        }
    }

    #[test]
    fn offers_questions_and_others_deeds_are_no_claims() {
        for reply in [
            "I can remind you tomorrow if you like.",
            "Would you like me to set a reminder?",
            "Shall I add it to your list?",
            "I cannot book tables, but I can set a reminder.",
            "I didn't set a reminder because you gave no time.",
            "You booked a table at Noma last week.",
            "The capital of Portugal is Lisbon.",
            "Remember to call the dentist.",
            "I'll remember that you live in Lisbon.",
            "Did you call your mum?",
            "I have a list of ideas for you: walking, reading.",
            "Set a reminder on your phone for 9.",
            "Book a table early: Fridays fill up.",
            "Call your mum tonight.",
            "Actions taken for this message: None",
            "Turn off the lights when you leave.",
            "I can't turn off your lights.",
            "I can schedule a reminder for you.",
            "You scheduled a check of the boiler for Monday.",
            "Could you look into it and report back?",
            "I would create a reminder, but you gave no time.",
        ] {
            assert_eq!(claims(reply), vec![], "{reply}");
        }
    }

    #[test]
    fn a_claim_is_backed_only_by_a_successful_action_that_changes_something() {
        let reply = "Sure! I'll remind you to call the dentist at 9 tomorrow.";
        assert!(unbacked(reply, &[done("schedule", Some("create"), true)]).is_empty());
        assert_eq!(unbacked(reply, &[]).len(), 1, "nothing ran");
        assert_eq!(unbacked(reply, &[done("schedule", Some("create"), false)]).len(), 1, "it failed");
        assert_eq!(unbacked(reply, &[done("schedule", Some("list"), true)]).len(), 1, "a listing sets nothing");
        assert_eq!(unbacked(reply, &[done("recall", None, true)]).len(), 1, "another action");
        assert!(unbacked("I've added eggs to your list.", &[done("list", Some("add"), true)]).is_empty());
        assert_eq!(unbacked("I've added eggs to your list.", &[done("list", Some("view"), true)]).len(), 1);
        assert_eq!(unbacked("I've booked the table.", &[done("schedule", Some("create"), true)]).len(), 1);
        assert!(unbacked("I've booked the table.", &[done(TOOL, None, true)]).is_empty(), "a booking tool ran");
        assert_eq!(unbacked("I've booked the table.", &[done(TOOL, None, false)]).len(), 1, "and failed");
    }

    #[test]
    fn a_wrong_claim_is_cut_and_the_truth_said_with_the_reason() {
        let reply = "Got it. I'll remind you to call the dentist at 9 tomorrow. Anything else?";
        let fixed = correct(reply, &[done("recall", None, true), done("schedule", Some("create"), false)]).unwrap();
        assert_eq!(
            fixed,
            format!("Got it. Anything else?\n\n{LABEL} I did not set up a reminder: `due_at` is not ISO-8601: soon.")
        );
        let fixed = correct(reply, &[]).unwrap();
        assert!(fixed.ends_with("\"remind me tomorrow at 9 to call the dentist\"."), "{fixed}");
        let booked = correct("I've booked a table at Noma for Friday at 8.", &[]).unwrap();
        assert!(booked.starts_with(LABEL), "nothing of the claim is kept: {booked}");
        assert!(booked.contains("I cannot book"), "{booked}");
        assert_eq!(correct("I'll remind you at 9.", &[done("schedule", Some("create"), true)]), None);
        assert_eq!(correct("The capital of Portugal is Lisbon.", &[]), None);
    }
}
