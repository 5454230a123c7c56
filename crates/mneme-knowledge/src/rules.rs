//! The rule-based extractor: with no model configured, explicit phrasing
//! ("I believe…", "we decided … because …", "always/never …", "my rule of
//! thumb…", "great work on…") still yields candidates. They go through the
//! same validation as a model's, so a statement with no stated reason is
//! dropped for having no WHY, and every entry it makes is labelled `rules`.

use serde_json::{Value, json};

/// The extractor label on entries the rules produced.
pub const LABEL: &str = "rules";

/// Splits a transcript into sentences, without speaker prefixes
/// (`Alice:`, `[10:02] Bob:`).
pub fn sentences(transcript: &str) -> Vec<String> {
    said_by(transcript, None)
}

/// The sentences of the lines `principal` speaks, and of unlabelled lines
/// (a chat's own messages carry no label); every line's with no principal.
pub fn said_by(transcript: &str, principal: Option<&str>) -> Vec<String> {
    let mut out = Vec::new();
    for line in transcript.lines() {
        let (who, line) = speaker(line.trim());
        if let (Some(p), Some(w)) = (principal, who)
            && !same_name(p, w)
        {
            continue;
        }
        let mut cur = String::new();
        let chars: Vec<char> = line.chars().collect();
        for (i, &c) in chars.iter().enumerate() {
            cur.push(c);
            let end = matches!(c, '.' | '!' | '?') && chars.get(i + 1).is_none_or(|n| n.is_whitespace());
            if end {
                push_sentence(&mut out, &cur);
                cur.clear();
            }
        }
        push_sentence(&mut out, &cur);
    }
    out
}

fn push_sentence(out: &mut Vec<String>, s: &str) {
    let s = s.trim().trim_end_matches(['.', '!', '?']).trim();
    if s.split_whitespace().count() >= 3 {
        out.push(s.to_string());
    }
}

/// A line's speaker label (`Ana:`, `[10:02] Ana:`), if it has one, and
/// the rest of the line.
pub fn speaker(line: &str) -> (Option<&str>, &str) {
    let line = match line.strip_prefix('[').and_then(|r| r.split_once(']')) {
        Some((_, rest)) => rest.trim_start(),
        None => line,
    };
    match line.split_once(':') {
        Some((who, rest)) if !who.is_empty() && who.split_whitespace().count() <= 3 && !who.contains(['.', ',']) => {
            (Some(who.trim()), rest.trim_start())
        }
        _ => (None, line),
    }
}

/// Whether a speaker label names the principal: the same name, or their
/// first name alone ("Ana" for "Ana Silva", and the other way round).
fn same_name(principal: &str, label: &str) -> bool {
    let first = |s: &str| s.split_whitespace().next().unwrap_or_default().to_lowercase();
    principal.trim().eq_ignore_ascii_case(label.trim()) || first(principal) == first(label)
}

/// Splits a sentence at its stated reason: `(claim, Some(reason))`.
fn split_reason(s: &str) -> (String, Option<String>) {
    let lower = s.to_ascii_lowercase();
    for marker in [" because ", ", since ", " so that ", " given that "] {
        if let Some(i) = lower.find(marker) {
            let reason = s[i + marker.len()..].trim();
            if !reason.is_empty() {
                return (s[..i].trim().trim_end_matches(',').to_string(), Some(reason.to_string()));
            }
        }
    }
    (s.to_string(), None)
}

/// Whether a follow-up sentence gives the reason for the one before.
fn reason_sentence(s: &str) -> Option<String> {
    let lower = s.to_ascii_lowercase();
    for lead in ["because ", "that's why ", "that is why ", "the reason is ", "the reason being ", "since "] {
        if lower.starts_with(lead) {
            return Some(s[lead.len()..].trim().to_string());
        }
    }
    None
}

fn after<'a>(s: &'a str, lower: &str, lead: &str) -> Option<&'a str> {
    lower.find(lead).map(|i| s[i + lead.len()..].trim_start_matches(" that").trim())
}

/// What kind of judgement a sentence states, if it states one explicitly,
/// and the statement with its lead-in removed.
fn classify(s: &str) -> Option<(&'static str, String)> {
    let lower = s.to_ascii_lowercase();
    let words = mneme_text::words(&lower);
    let has = |w: &str| words.iter().any(|x| x == w);
    for lead in
        ["my rule of thumb is", "rule of thumb:", "the way i think about", "my framework for", "my mental model"]
    {
        if let Some(rest) = after(s, &lower, lead) {
            return Some(("framework", rest.to_string()));
        }
    }
    if lower.starts_with("whenever ") || lower.contains("i always ask") {
        return Some(("framework", s.to_string()));
    }
    for lead in
        ["we decided", "i decided", "we chose", "i chose", "we're going with", "we are going with", "we agreed to"]
    {
        if let Some(rest) = after(s, &lower, lead) {
            return Some(("decision", rest.trim_start_matches("to ").to_string()));
        }
    }
    for lead in ["i believe", "i firmly believe", "i'm convinced", "i am convinced", "my belief is"] {
        if let Some(rest) = after(s, &lower, lead) {
            return Some(("philosophy", rest.to_string()));
        }
    }
    const PRAISE: &[&str] = &["great job", "great work", "well done", "nicely done", "i love how", "impressed by"];
    const CRITICISM: &[&str] =
        &["this is sloppy", "not good enough", "i'm disappointed", "i am disappointed", "this is unacceptable"];
    if PRAISE.iter().chain(CRITICISM).any(|p| lower.contains(p)) {
        return Some(("reaction", s.to_string()));
    }
    if has("always") || has("never") {
        return Some(("standard", s.to_string()));
    }
    None
}

/// Candidates for the explicit judgements in a transcript, as JSON shaped
/// like the model's so they take the same validation.
pub fn extract(transcript: &str, principal: Option<&str>) -> Vec<Value> {
    let sents = said_by(transcript, principal);
    let mut out = Vec::new();
    for (i, s) in sents.iter().enumerate() {
        let Some((kind, statement)) = classify(s) else { continue };
        let (claim, reason) = split_reason(&statement);
        let reason = reason.or_else(|| sents.get(i + 1).and_then(|n| reason_sentence(n)));
        let claim = capitalise(claim.trim());
        if claim.split_whitespace().count() < 2 {
            continue;
        }
        let tags: Vec<String> = mneme_text::content_words(&claim).into_iter().take(3).collect();
        out.push(json!({
            "type": kind,
            "topic": crate::validate::derive_topic(&claim),
            "position": claim,
            "reasoning": reason.map(|r| capitalise(&r)),
            "tags": tags,
        }));
    }
    out
}

fn capitalise(s: &str) -> String {
    let mut c = s.chars();
    match c.next() {
        Some(f) => f.to_uppercase().collect::<String>() + c.as_str(),
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::validate::validate;

    fn kinds(t: &str) -> Vec<(String, String, Option<String>)> {
        extract(t, None)
            .into_iter()
            .map(|v| {
                (
                    v["type"].as_str().unwrap().into(),
                    v["position"].as_str().unwrap().into(),
                    v["reasoning"].as_str().map(Into::into),
                )
            })
            .collect()
    }

    #[test]
    fn each_explicit_phrasing_yields_its_type() {
        let t = "Alice: I believe small teams ship faster because coordination costs grow quadratically.\n\
                 Bob: We decided to move billing to Postgres because we need real transactions.\n\
                 Alice: Never deploy on a Friday, since nobody is around to fix it.\n\
                 Alice: My rule of thumb is to cut scope before adding people because Brooks was right.\n\
                 Alice: Great work on the migration because it shipped with zero downtime.";
        let k = kinds(t);
        let types: Vec<&str> = k.iter().map(|x| x.0.as_str()).collect();
        assert_eq!(types, ["philosophy", "decision", "standard", "framework", "reaction"]);
        assert_eq!(k[0].1, "Small teams ship faster");
        assert_eq!(k[0].2.as_deref(), Some("Coordination costs grow quadratically"));
        assert_eq!(k[1].1, "Move billing to Postgres");
        assert!(extract(t, None).iter().all(|v| validate(v).is_ok()));
    }

    #[test]
    fn a_reason_in_the_next_sentence_counts() {
        let k = kinds("I believe code review is a teaching tool. That's why juniors review seniors too.");
        assert_eq!(k[0].2.as_deref(), Some("Juniors review seniors too"));
    }

    #[test]
    fn a_statement_without_a_why_is_extracted_and_then_rejected() {
        let c = extract("I believe tabs are better than spaces.", None);
        assert_eq!(c.len(), 1);
        assert_eq!(validate(&c[0]).unwrap_err().reason, "no-reasoning");
    }

    #[test]
    fn small_talk_yields_nothing() {
        assert!(extract("Hi there! How was the weekend? Pretty good, we went hiking.", None).is_empty());
    }

    #[test]
    fn speaker_prefixes_and_timestamps_are_stripped() {
        assert_eq!(sentences("[10:02] Bob: we ship today. Then we rest!"), ["we ship today", "Then we rest"]);
    }

    #[test]
    fn with_a_principal_only_their_lines_and_unlabelled_ones_count() {
        let t = "Bob: We decided to move billing to Postgres because we need real transactions.\n\
                 Ana Silva: Never deploy on a Friday, since nobody is around to fix it.\n\
                 I believe small teams ship faster because coordination costs grow quadratically.";
        let by = |p: Option<&str>| -> Vec<String> {
            extract(t, p).iter().map(|v| v["type"].as_str().unwrap().to_string()).collect()
        };
        assert_eq!(by(None), ["decision", "standard", "philosophy"]);
        assert_eq!(by(Some("Ana")), ["standard", "philosophy"]);
        assert_eq!(by(Some("ana silva")), ["standard", "philosophy"]);
        assert_eq!(by(Some("Bob")), ["decision", "philosophy"]);
        assert_eq!(speaker("[10:02] Ana Silva: fine"), (Some("Ana Silva"), "fine"));
        assert_eq!(speaker("Note: this is not a speaker, really."), (Some("Note"), "this is not a speaker, really."));
        assert_eq!(speaker("no label here"), (None, "no label here"));
    }
}
