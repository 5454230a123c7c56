//! Path C, step 5: generation. The prompt is the soul, the identity core
//! and the mode's prompt (design 002 §4) with the assembled context and
//! working memory's turns, ordered for the endpoint's prefix cache (see
//! [`messages`]). Replies are plain text so
//! they can stream token by token (D-C10). With no model, or when the model
//! fails, the reply is built by rules from what memory holds and says so.

use serde::{Deserialize, Serialize};

use crate::context::Assembled;
use crate::mode::Mode;

pub const SOUL: &str = include_str!("../../../prompts/soul.md");
pub const IDENTITY_CORE: &str = include_str!("../../../prompts/identity-core.md");
pub const RESPOND: &str = include_str!("../../../prompts/frontal-cortex-respond.md");
pub const CLARIFY: &str = include_str!("../../../prompts/frontal-cortex-clarify.md");
pub const ACKNOWLEDGE: &str = include_str!("../../../prompts/frontal-cortex-acknowledge.md");

/// Temperature of generation.
pub const TEMPERATURE: f32 = 0.5;
/// How long one generation call may take, streamed or not: the design
/// streams `still_working` at 20 s and gives up at 30 s (D-F19).
pub const TIMEOUT_MS: u32 = 30_000;

/// Where a reply came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ReplySource {
    Model,
    RuleBased,
    /// A social exit: deterministic, no model involved by design.
    Social,
}

/// One result of the ACT loop, as generation and logs see it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ActResult {
    pub action_type: String,
    /// `success`, `error` or `timeout`.
    pub status: String,
    pub result: String,
    pub execution_time_ms: u64,
    pub confidence: f64,
}

/// The chat messages for generating a reply in `mode`, stable part first
/// so an endpoint that caches a prompt's prefix serves it again (#49 item
/// 5): the soul and the identity core as the first system message (the
/// same for every reply), working memory's turns (the same as the last
/// reply's, one exchange longer), then a second system message with the
/// mode's prompt and the assembled context, and the message last.
pub fn messages(mode: Mode, ctx: &Assembled, text: &str, act: &[ActResult]) -> Vec<mneme_llm::Message> {
    use mneme_llm::{Message, Role};
    let mode_prompt = match mode {
        Mode::Clarify => CLARIFY,
        Mode::Acknowledge => ACKNOWLEDGE,
        _ => RESPOND,
    };
    let mut out = vec![Message::new(Role::System, format!("{}\n{}", SOUL.trim(), IDENTITY_CORE.trim()))];
    for t in &ctx.turns {
        if t.content.is_empty() {
            continue;
        }
        let role = if t.role == "assistant" { Role::Assistant } else { Role::User };
        out.push(Message::new(role, t.content.clone()));
    }
    let mut now = mode_prompt.trim().to_string();
    now.push_str(&context_section(ctx, act));
    out.push(Message::new(Role::System, now));
    out.push(Message::new(Role::User, text));
    out
}

fn context_section(ctx: &Assembled, act: &[ActResult]) -> String {
    let mut s = String::from("\n\n## Context\n");
    if let Some(n) = &ctx.name {
        s.push_str(&format!("- The principal's name: {n}\n"));
    }
    s.push_str(&format!("- Topic: {}{}\n", ctx.topic, if ctx.is_new_topic { " (new)" } else { "" }));
    if let Some(gap) = ctx.returning_from_silence {
        s.push_str(&format!("- The principal is back after {} minutes away; greet them warmly.\n", gap / 60));
    }
    if let Some(f) = &ctx.focus {
        s.push_str(&format!("- Focus: {}\n", f.description));
    }
    if !ctx.world_state.is_empty() {
        s.push_str(&format!("\n## World state\n{}\n", ctx.world_state.trim()));
    }
    if !ctx.facts.is_empty() {
        s.push_str("\n## Facts\n");
        for f in &ctx.facts {
            s.push_str(&format!("- {}: {} (confidence {:.2})\n", f.key, f.value, f.confidence));
        }
    }
    if !ctx.gists.is_empty() {
        s.push_str("\n## Gists\n");
        for g in &ctx.gists {
            s.push_str(&format!("- [{}] {}\n", g.kind, g.content));
        }
    }
    if !ctx.memories.is_empty() {
        s.push_str("\n## Memories\n");
        for m in &ctx.memories {
            s.push_str(&format!("- {m}\n"));
        }
    }
    if !act.is_empty() {
        s.push_str("\n## Results of the actions you ran for this message\n");
        for r in act {
            s.push_str(&format!("- {} ({}): {}\n", r.action_type, r.status, r.result));
        }
    }
    s
}

/// Cleans a model reply: drops reasoning blocks, and unwraps a JSON
/// `{"response": …}` for models that answer in JSON regardless.
pub fn clean(raw: &str) -> String {
    let text = mneme_llm::strip_reasoning(raw);
    let trimmed = text.trim();
    if trimmed.starts_with('{')
        && let Ok(v) = mneme_llm::extract_json(trimmed)
        && let Some(r) = v.get("response").and_then(|r| r.as_str())
    {
        return r.trim().to_string();
    }
    trimmed.to_string()
}

/// The label every rule-based reply starts with.
pub fn fallback_label(reason: &str) -> String {
    match reason {
        "model-unavailable" => "[rule-based reply: no model is configured]".into(),
        other => format!("[rule-based reply: the model failed ({other})]"),
    }
}

/// The mode a reply takes when the model failed to write it (D-C34): a
/// question back about a clear message only made sense with a model to ask
/// it, so a clear message gets RESPOND's honest answer instead; with no
/// model at all the mode was settled before (D-C32).
pub fn settle_after_failure(mode: Mode, text: &str, reason: &str) -> Mode {
    if mode == Mode::Clarify && reason != "model-unavailable" && !crate::nomodel::is_unclear(text) {
        Mode::Respond
    } else {
        mode
    }
}

/// A reply built by rules (D-C11): for RESPOND, what was done for the
/// message (each action's own words; a failed one says why), else what
/// memory holds on it (facts, gists and earlier turns that share its
/// words); with no model configured and nothing to show, what Mneme needs
/// and what it can still do (D-C32). For CLARIFY, one question; for
/// ACKNOWLEDGE, a fixed acknowledgement.
pub fn fallback(mode: Mode, ctx: &Assembled, text: &str, act: &[ActResult], reason: &str) -> String {
    let label = fallback_label(reason);
    let no_model = reason == "model-unavailable";
    match mode {
        Mode::Acknowledge => format!("{label} Noted."),
        Mode::Clarify => {
            let keys = keywords(text);
            if keys.is_empty() || no_model {
                format!("{label} Could you say a little more about what you need? I can't tell yet what it refers to.")
            } else {
                format!("{label} Could you say more about what you mean by \"{}\"?", keys.join(" "))
            }
        }
        _ => {
            let done: Vec<String> = act
                .iter()
                .filter(|r| r.action_type != "recall" && !r.result.is_empty())
                .map(|r| match (r.action_type.as_str(), r.status == "success") {
                    ("schedule", _) => r.result.clone(),
                    (kind, true) => format!("{kind}: {}", r.result),
                    (kind, false) => format!("{kind} did not run: {}", r.result),
                })
                .collect();
            if !done.is_empty() {
                return format!("{label} {}", done.join("\n"));
            }
            let mut lines: Vec<String> = Vec::new();
            for r in act.iter().filter(|r| {
                r.action_type == "recall" && r.status == "success" && !r.result.starts_with("nothing found")
            }) {
                lines.push(format!("recall: {}", r.result));
            }
            let keys = keywords(text);
            let relevant = |s: &str| {
                let l = s.to_lowercase();
                keys.iter().any(|k| l.contains(k.as_str()))
            };
            for f in ctx.facts.iter().filter(|f| relevant(&f.key) || relevant(&f.value)) {
                lines.push(format!("fact: {} = {}", f.key, f.value));
            }
            for g in ctx.gists.iter().filter(|g| relevant(&g.content)) {
                lines.push(format!("gist: {}", g.content));
            }
            for t in ctx.turns.iter().filter(|t| t.role == "user" && relevant(&t.content) && t.content != text) {
                lines.push(format!("you said earlier: {}", t.content));
            }
            lines.dedup();
            lines.truncate(5);
            match (lines.is_empty(), no_model) {
                (true, true) => format!("{label} {}", crate::nomodel::NEEDS_A_MODEL),
                (true, false) => format!("{label} {}", crate::nomodel::MODEL_FAILED),
                (false, true) => format!(
                    "{label} Here is what I have on this:\n- {}\n{}",
                    lines.join("\n- "),
                    crate::nomodel::A_MODEL_WOULD_ANSWER
                ),
                (false, false) => format!("{label} Here is what I have on this:\n- {}", lines.join("\n- ")),
            }
        }
    }
}

/// Keywords of a message: words of 4+ letters that are not function words.
pub fn keywords(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for w in mneme_text::words(text) {
        if w.chars().count() >= 4 && !mneme_text::stopwords::RECALL_SKIP.contains(&w.as_str()) && !out.contains(&w) {
            out.push(w);
        }
    }
    out.truncate(6);
    out
}

/// A reply's confidence: the mean of memory confidence and the router's
/// confidence, capped at 0.3 for a rule-based reply.
pub fn confidence(memory_confidence: f64, router_confidence: f64, source: ReplySource) -> f64 {
    let c = ((memory_confidence + router_confidence.clamp(0.0, 1.0)) / 2.0).clamp(0.0, 1.0);
    let c = if source == ReplySource::RuleBased { c.min(0.3) } else { c };
    (c * 1000.0).round() / 1000.0
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::context::{Fact, Turn};

    fn ctx() -> Assembled {
        Assembled {
            topic: "tea".into(),
            name: Some("Sam".into()),
            facts: vec![Fact { key: "favourite_tea".into(), value: "oolong".into(), confidence: 0.7 }],
            turns: vec![
                Turn { role: "user".into(), content: "I drink oolong every morning".into(), at_ms: 1 },
                Turn { role: "assistant".into(), content: "Noted.".into(), at_ms: 2 },
            ],
            ..Default::default()
        }
    }

    #[test]
    fn prompt_is_soul_and_identity_then_turns_then_mode_and_context_then_the_message() {
        let m = messages(Mode::Clarify, &ctx(), "which tea?", &[]);
        // The stable part: the same first message whatever the mode or context.
        assert_eq!(m[0].content, format!("{}\n{}", SOUL.trim(), IDENTITY_CORE.trim()));
        assert_eq!(m[0].content, messages(Mode::Respond, &Assembled::default(), "hi", &[])[0].content);
        // Working memory's turns, then the mode and the context, then the message.
        assert_eq!(m.len(), 5);
        assert_eq!((m[1].role, m[2].role), (mneme_llm::Role::User, mneme_llm::Role::Assistant));
        let sys = &m[3].content;
        assert!(sys.starts_with("Mode: CLARIFY"), "{sys}");
        assert!(sys.contains("favourite_tea: oolong"));
        assert!(sys.contains("name: Sam"));
        assert!(!sys.contains("## Memories"), "no section without memories");
        let with = Assembled { memories: vec!["[episode] Tasted oolongs in Taipei.".into()], ..ctx() };
        let sys = &messages(Mode::Respond, &with, "which tea?", &[])[3].content;
        assert!(sys.contains("\n## Memories\n- [episode] Tasted oolongs in Taipei.\n"), "{sys}");
        assert_eq!(m[4].content, "which tea?");
    }

    #[test]
    fn clean_strips_reasoning_and_json_wrappers() {
        assert_eq!(clean("<think>hmm</think>\nHello there."), "Hello there.");
        assert_eq!(clean("{\"response\": \"Hi!\", \"confidence\": 0.9}"), "Hi!");
        assert_eq!(clean("  {not json} text "), "{not json} text");
    }

    #[test]
    fn fallback_is_labelled_and_extractive() {
        let r = fallback(Mode::Respond, &ctx(), "what tea do I drink, oolong?", &[], "model-unavailable");
        assert!(r.starts_with("[rule-based reply: no model is configured]"), "{r}");
        assert!(r.contains("favourite_tea = oolong"), "{r}");
        assert!(r.contains("you said earlier: I drink oolong every morning"), "{r}");
        let none = fallback(Mode::Respond, &Assembled::default(), "quantum chromodynamics", &[], "model-timeout");
        assert_eq!(
            none,
            format!("[rule-based reply: the model failed (model-timeout)] {}", crate::nomodel::MODEL_FAILED)
        );
        let c = fallback(Mode::Clarify, &Assembled::default(), "fix the thing with the build", &[], "model-timeout");
        assert!(c.ends_with("\"thing build\"?"), "{c}");
        let c = fallback(Mode::Clarify, &Assembled::default(), "do the thing", &[], "model-unavailable");
        assert!(!c.contains("\"thing\""), "no question about its own keywords: {c}");
    }

    #[test]
    fn a_failed_model_turns_a_question_back_about_a_clear_message_into_an_honest_answer() {
        let clear = "What is the capital of Portugal?";
        for reason in ["model-error", "model-timeout", "empty answer"] {
            assert_eq!(settle_after_failure(Mode::Clarify, clear, reason), Mode::Respond, "{reason}");
            assert_eq!(settle_after_failure(Mode::Clarify, "do the thing", reason), Mode::Clarify, "{reason}");
            for kept in [Mode::Respond, Mode::Acknowledge, Mode::Act] {
                assert_eq!(settle_after_failure(kept, clear, reason), kept, "{reason}");
            }
        }
        // With no model the mode was settled before generation (D-C32).
        assert_eq!(settle_after_failure(Mode::Clarify, clear, "model-unavailable"), Mode::Clarify);
        let r = fallback(Mode::Respond, &Assembled::default(), clear, &[], "model-error");
        assert!(
            r.starts_with("[rule-based reply: the model failed (model-error)] The language model did not answer"),
            "{r}"
        );
        assert!(r.contains("Status screen") && !r.contains("Could you say more"), "{r}");
    }

    #[test]
    fn with_no_model_a_question_memory_cannot_answer_says_what_is_missing() {
        let r = fallback(
            Mode::Respond,
            &Assembled::default(),
            "What is the capital of Portugal?",
            &[],
            "model-unavailable",
        );
        assert!(r.starts_with("[rule-based reply: no model is configured] I need a language model"), "{r}");
        for can in ["remember", "remind", "lists", "recommendations", "background tasks", "llm_url"] {
            assert!(r.contains(can), "says {can}: {r}");
        }
        let with_memory = fallback(Mode::Respond, &ctx(), "which oolong do I like?", &[], "model-unavailable");
        assert!(with_memory.contains("fact: favourite_tea = oolong"), "{with_memory}");
        assert!(with_memory.ends_with(crate::nomodel::A_MODEL_WOULD_ANSWER), "{with_memory}");
        let acted = [
            ActResult {
                action_type: "recall".into(),
                status: "success".into(),
                result: "nothing found for \"x\"".into(),
                execution_time_ms: 1,
                confidence: 0.4,
            },
            ActResult {
                action_type: "schedule".into(),
                status: "success".into(),
                result: "Reminder set: \"call the dentist\" for Fri 27 Nov 2026 at 09:00".into(),
                execution_time_ms: 1,
                confidence: 0.5,
            },
        ];
        let r = fallback(Mode::Respond, &Assembled::default(), "remind me", &acted, "model-unavailable");
        assert_eq!(
            r,
            "[rule-based reply: no model is configured] Reminder set: \"call the dentist\" for Fri 27 Nov 2026 at 09:00"
        );
    }

    #[test]
    fn confidence_blends_and_caps_rule_based() {
        assert_eq!(confidence(0.8, 0.6, ReplySource::Model), 0.7);
        assert_eq!(confidence(0.8, 0.6, ReplySource::RuleBased), 0.3);
        assert_eq!(confidence(0.2, 3.0, ReplySource::Model), 0.6);
    }
}
