//! Phase B, layer 2 steps 2b–2c: the cognitive triage call and the
//! self-evaluation that checks it. The model gets 500 ms; on a timeout, an
//! error or output that does not parse, the heuristic below decides instead,
//! and self-evaluation runs on either result.

use std::sync::LazyLock;

use regex_lite::Regex;
use serde::{Deserialize, Serialize};

use crate::mode::Mode;

/// The triage model's budget (the design's, for a fast hosted model; a
/// deployment sets `llm_light_timeout_ms` for a slower one, D-L5).
pub const TIMEOUT_MS: u32 = 500;
/// The start of `fallback_reason` when the rules settled triage without
/// asking the model (D-L5).
pub const SETTLED: &str = "settled by rules: ";
/// The self-evaluation override for a pointer with nothing to point at.
pub const UNRESOLVED: &str = "clarify_unresolved_reference";
/// The triage prompt (design: `cognitive-triage.md`).
pub const PROMPT: &str = include_str!("../../../prompts/cognitive-triage.md");
/// Innate skills, the only skill names triage may return.
pub const SKILLS: [&str; 8] =
    ["recall", "memorize", "introspect", "associate", "schedule", "list", "focus", "persistent_task"];
/// Always available in ACT, ahead of the contextual skills.
pub const PRIMITIVES: [&str; 3] = ["recall", "memorize", "introspect"];
/// At most this many contextual skills, and this many tools.
pub const MAX_CONTEXTUAL: usize = 3;

/// The JSON Schema of the triage answer (D-L2, D-L5): the mode, the
/// skills and the tools. The design's three confidences are left out: a
/// CPU model writes each field token by token, and these tripled a
/// triage's length for no better route (BENCHMARKS, "A real model"); the
/// parse gives them their defaults.
pub fn schema() -> String {
    serde_json::json!({
        "type": "object",
        "properties": {
            "mode": {"enum": ["RESPOND", "CLARIFY", "ACT"]},
            "skills": {"type": "array", "items": {"enum": SKILLS}, "maxItems": MAX_CONTEXTUAL},
            "tools": {"type": "array", "items": {"type": "string", "maxLength": 60}, "maxItems": MAX_CONTEXTUAL},
        },
        "required": ["mode", "skills", "tools"],
        "additionalProperties": false,
    })
    .to_string()
}

/// Where a triaged message goes next.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Branch {
    Respond,
    Clarify,
    Act,
}

/// One recent turn, as the triage prompt sees it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Turn {
    pub role: String,
    pub content: String,
}

/// What triage looks at.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Input {
    pub text: String,
    pub previous_mode: Option<Mode>,
    pub previous_tools: Vec<String>,
    /// The last two turns of working memory.
    pub recent_turns: Vec<Turn>,
    pub warmth: f64,
    pub memory_confidence: f64,
    pub gist_count: usize,
    pub fact_count: usize,
    /// External tools the principal has configured (name, one-line summary).
    pub tools: Vec<(String, String)>,
}

/// The triage model's answer, before self-evaluation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Raw {
    pub mode: Mode,
    pub branch: Branch,
    pub tools: Vec<String>,
    pub skills: Vec<String>,
    pub confidence_internal: f64,
    pub confidence_tool_need: f64,
    pub freshness_risk: f64,
    pub reasoning: String,
}

/// How the triage decision was reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Source {
    Model,
    /// The model timed out, failed, answered nonsense or is not configured.
    Heuristic,
}

/// The final triage decision.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Triage {
    pub branch: Branch,
    pub mode: Mode,
    pub tools: Vec<String>,
    pub skills: Vec<String>,
    pub confidence_internal: f64,
    pub confidence_tool_need: f64,
    pub freshness_risk: f64,
    pub decision_entropy: f64,
    pub reasoning: String,
    pub source: Source,
    /// Why the heuristic was used (`model-timeout`, `malformed`, …).
    pub fallback_reason: Option<String>,
    /// Self-evaluation rules that changed the decision, in order.
    pub overrides: Vec<String>,
}

/// The user message of the triage call: the message as it is, after the
/// last turns of the conversation and the principal's tools when there are
/// any (D-L5). The model read the design's JSON of signals (warmth, memory
/// confidence, counts at zero in a new thread) as a reason to clarify
/// nearly everything; the signals stay the router's.
pub fn user_message(input: &Input) -> String {
    let mut m = String::new();
    if !input.recent_turns.is_empty() {
        m.push_str("Earlier in this conversation:\n");
        for t in &input.recent_turns {
            let who = if t.role == "assistant" { "Assistant" } else { "Person" };
            let line: String = t.content.chars().take(300).collect();
            m.push_str(&format!("{who}: {line}\n"));
        }
        m.push('\n');
    }
    if !input.tools.is_empty() {
        m.push_str("Their tools:\n");
        for (name, summary) in &input.tools {
            m.push_str(&format!("- {name}: {summary}\n"));
        }
        m.push('\n');
    }
    if !m.is_empty() {
        m.push_str("Message: ");
    }
    m.push_str(&input.text);
    m
}

#[derive(Deserialize)]
struct Wire {
    #[serde(default)]
    branch: Option<String>,
    #[serde(default)]
    mode: Option<String>,
    #[serde(default)]
    tools: Vec<serde_json::Value>,
    #[serde(default)]
    skills: Vec<serde_json::Value>,
    #[serde(default)]
    confidence_internal: Option<f64>,
    #[serde(default)]
    confidence_tool_need: Option<f64>,
    #[serde(default)]
    freshness_risk: Option<f64>,
    #[serde(default)]
    reasoning: Option<String>,
}

/// Parses the model's answer. A missing or unknown branch and mode, or no
/// JSON at all, is an error: the caller falls back to [`heuristic`].
pub fn parse(text: &str) -> Result<Raw, String> {
    let w: Wire = mneme_llm::extract_json_as(text).map_err(|e| e.to_string())?;
    let mode = match w.mode.as_deref() {
        Some(m) => Some(Mode::parse(m).ok_or_else(|| format!("unknown mode `{m}`"))?),
        None => None,
    };
    let branch = match w.branch.as_deref() {
        Some(b) => Some(match b.trim().to_ascii_lowercase().as_str() {
            "respond" => Branch::Respond,
            "clarify" => Branch::Clarify,
            "act" => Branch::Act,
            other => return Err(format!("unknown branch `{other}`")),
        }),
        None => None,
    };
    let (mode, branch) = match (mode, branch) {
        (Some(m), Some(b)) => (m, b),
        (Some(m), None) => (m, branch_of(m)),
        (None, Some(b)) => (mode_of(b), b),
        (None, None) => return Err("the answer names neither a branch nor a mode".into()),
    };
    let names = |v: Vec<serde_json::Value>| v.into_iter().filter_map(|x| x.as_str().map(str::to_string)).collect();
    Ok(Raw {
        mode,
        branch,
        tools: names(w.tools),
        skills: names(w.skills),
        confidence_internal: w.confidence_internal.unwrap_or(0.5),
        confidence_tool_need: w.confidence_tool_need.unwrap_or(0.0),
        freshness_risk: w.freshness_risk.unwrap_or(0.0),
        reasoning: w.reasoning.unwrap_or_default(),
    })
}

fn branch_of(mode: Mode) -> Branch {
    match mode {
        Mode::Act => Branch::Act,
        Mode::Clarify => Branch::Clarify,
        _ => Branch::Respond,
    }
}

fn mode_of(branch: Branch) -> Mode {
    match branch {
        Branch::Act => Mode::Act,
        Branch::Clarify => Mode::Clarify,
        Branch::Respond => Mode::Respond,
    }
}

fn re(p: &str) -> Regex {
    Regex::new(p).unwrap()
}

static SKILL_WORDS: LazyLock<Vec<(&'static str, Regex)>> = LazyLock::new(|| {
    vec![
        (
            "schedule",
            re(
                r"(?i)\b(remind me|(set|add|create|schedule) (me )?an? reminder|notify me|wake me|alarm for|nudge me|ping me|don'?t let me forget|(cancel|delete|remove|stop|clear)\b.{0,40}\breminders?|(what|which|any|show|list) (are )?(my |pending |upcoming )?reminders|reminders (do i have|are (there|pending|set))|(my|pending|upcoming) reminders)\b",
            ),
        ),
        (
            "list",
            re(
                r"(?i)\b((add|put) .{1,60} (to|on) (my|the) .{0,20}list|(on|in|to|from) my (shopping|to-?do|grocery|packing|reading) list|what'?s on my .{0,20}list|check off|cross off|tick off|remove .{1,40} from (my|the) .{0,20}list|show (me )?my .{0,20}lists?|my lists)\b",
            ),
        ),
        (
            "focus",
            re(
                r"(?i)\b((start|begin) (a )?focus session|focus session (on|for)|help me focus|i need to focus|(end|stop|clear) (my |the )?focus)\b",
            ),
        ),
        (
            "persistent_task",
            re(
                r"(?i)\b(background task|research .{1,60} over (the )?(next|coming)|keep working on|do a deep dive|dig into .{1,80}|how'?s the .{1,40}(research|task) going|task status)\b",
            ),
        ),
        (
            "recall",
            re(
                r"(?i)\b(what did i (tell|say to) you|did i (ever )?(tell|mention|say)|what (was|is) the name of (that|the) .{1,40}(i|we) (said|mentioned|talked|liked|loved)|remind me what i (said|told)|what have (i|we) (told|said|talked about)|what else have we talked about|what do you (remember|know) about my)\b",
            ),
        ),
        (
            "introspect",
            re(r"(?i)\b(what do you (actually )?(know|remember) about me|how much do you (actually )?know about me)\b"),
        ),
    ]
});
static MEMORIZE_WORDS: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(?i)^\s*(please\s+)?(remember|note|don'?t forget)( that)?\b|\bkeep in mind\b|\bfyi\b|\bjust so you know\b|\bfor (future )?reference\b",
    )
});
/// A word that points at something the message does not name: "fix
/// that", "send it to her", "the other one", "same as last time".
static POINTER: LazyLock<Regex> = LazyLock::new(|| {
    re(r"(?i)\b(it|that|this|those|these|them|her|him|there|the other one|the one|same as|as before|last time)\b")
});
/// A question asked outright: an interrogative or auxiliary first, or a
/// closing question mark.
static QUESTION: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(?i)^\s*(what|what's|whats|where|when|who|whom|whose|which|why|how|how's|is|are|was|were|do|does|did|can|could|should|would|will|shall|has|have|had)\b|\?\s*$",
    )
});
/// Asks the assistant to do something rather than to say something.
static REQUEST: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(?i)\b(can|could|would|will) you (please )?(add|set|put|remind|remember|note|save|start|stop|track|research|dig|look into|find out|keep|schedule|cancel|book|send|order|call|email|text|pay|turn)\b|\bhelp me\b|\bplease\b|\bi (want|need) you to\b",
    )
});
static COMMAND_WORDS: LazyLock<Regex> =
    LazyLock::new(|| re(r"(?i)\b(search|find|check|look up|google|open|visit|read this|browse)\b|https?://"));
static REALTIME_WORDS: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(?i)\b(who won|latest|current(ly)?|today|tonight|news|score|right now|now|recently|this week|price of|weather)\b",
    )
});
static FACTUAL_QUESTION: LazyLock<Regex> =
    LazyLock::new(|| re(r"(?i)\b(what|where|when|who|how much|how many|is it|are they|did they|does it)\b[^?]*\?"));
static URL: LazyLock<Regex> = LazyLock::new(|| re(r"(?i)\bhttps?://\S+"));

/// Whether `text` points at something it does not name ("fix that", "send
/// it to her", "how much?"): a short message (at most six words) with a
/// pointer word and at most two content words besides it. Asked with no
/// conversation before it, nothing resolves the pointer.
pub fn unresolved_reference(text: &str) -> bool {
    let words = mneme_text::words(text);
    if words.is_empty() || words.len() > 6 {
        return false;
    }
    let content = mneme_text::content_words(&POINTER.replace_all(text, " ")).len();
    (POINTER.is_match(text) && content <= 2) || (words.len() <= 2 && QUESTION.is_match(text) && content <= 1)
}

/// When the rules settle triage without the model (D-L5), why: a skill
/// command the heuristic read ("remind me…", "add … to my list"), or a
/// question asked outright that asks the assistant to do nothing, which
/// needs no skill (the model's own routing of such questions is no better
/// than this, measured) and, with no tools configured, no tool either.
/// `None`: the model decides, with the principal's tools before it.
pub fn settled_by_rules(text: &str, raw: &Raw, has_tools: bool) -> Option<&'static str> {
    if raw.mode == Mode::Act && !raw.skills.is_empty() {
        return Some("a skill command");
    }
    if !has_tools
        && QUESTION.is_match(text)
        && !REQUEST.is_match(text)
        && !POINTER.is_match(text)
        && raw.mode == Mode::Respond
    {
        return Some("a question that needs no skill");
    }
    None
}

/// The deterministic fallback: innate-skill phrasing ("remember that…",
/// "remind me…", "add … to my list"…) → ACT with that skill;
/// command or real-time words with tools configured → ACT (freshness 0.8);
/// anything else → RESPOND (freshness 0.2).
pub fn heuristic(text: &str, tools: &[(String, String)]) -> Raw {
    let mut skills: Vec<String> =
        SKILL_WORDS.iter().filter(|(_, r)| r.is_match(text)).map(|(s, _)| s.to_string()).collect();
    if MEMORIZE_WORDS.is_match(text) {
        skills.insert(0, "memorize".into());
    }
    if !skills.is_empty() {
        return Raw {
            mode: Mode::Act,
            branch: Branch::Act,
            tools: vec![],
            skills,
            confidence_internal: 0.6,
            confidence_tool_need: 0.7,
            freshness_risk: 0.2,
            reasoning: "innate-skill phrasing".into(),
        };
    }
    if !tools.is_empty() && (COMMAND_WORDS.is_match(text) || REALTIME_WORDS.is_match(text)) {
        return Raw {
            mode: Mode::Act,
            branch: Branch::Act,
            tools: vec![],
            skills: vec![],
            confidence_internal: 0.4,
            confidence_tool_need: 0.8,
            freshness_risk: 0.8,
            reasoning: "command or real-time wording with tools available".into(),
        };
    }
    Raw {
        mode: Mode::Respond,
        branch: Branch::Respond,
        tools: vec![],
        skills: vec![],
        confidence_internal: 0.6,
        confidence_tool_need: 0.2,
        freshness_risk: 0.2,
        reasoning: "no tool or skill wording".into(),
    }
}

fn clamp01(x: f64) -> f64 {
    if x.is_nan() { 0.0 } else { x.clamp(0.0, 1.0) }
}

/// Step 2c, the self-evaluation sanity check (D-C6): validates skill and tool
/// names, caps contextual skills and tools at 3, then applies, in order,
/// ACT-without-anything → RESPOND, the freshness failsafe (a factual question
/// with high freshness risk → ACT), a URL → ACT, and anti-oscillation.
pub fn self_eval(raw: Raw, input: &Input, source: Source, fallback_reason: Option<String>) -> Triage {
    let mut overrides = Vec::new();
    let mut contextual: Vec<String> = raw
        .skills
        .iter()
        .map(|s| s.trim().to_ascii_lowercase())
        .filter(|s| SKILLS.contains(&s.as_str()) && !PRIMITIVES.contains(&s.as_str()))
        .collect();
    contextual.sort();
    contextual.dedup();
    let named_primitive = raw.skills.iter().any(|s| PRIMITIVES.contains(&s.trim().to_ascii_lowercase().as_str()));
    if contextual.len() > MAX_CONTEXTUAL {
        contextual.truncate(MAX_CONTEXTUAL);
        overrides.push("contextual_skills_capped".into());
    }
    let known_tool = |t: &String| input.tools.iter().any(|(n, _)| n == t);
    let mut tools: Vec<String> = Vec::new();
    for t in raw.tools.iter().filter(|t| known_tool(t)) {
        if !tools.contains(t) {
            tools.push(t.clone());
        }
    }
    if tools.len() < raw.tools.len() {
        overrides.push("unknown_tools_dropped".into());
    }
    if tools.len() > MAX_CONTEXTUAL {
        tools.truncate(MAX_CONTEXTUAL);
        overrides.push("tools_capped".into());
    }
    let mut mode = raw.mode;
    let mut branch = raw.branch;
    let mut tool_need = clamp01(raw.confidence_tool_need);
    let internal = clamp01(raw.confidence_internal);
    let freshness = clamp01(raw.freshness_risk);
    let has_tools = !input.tools.is_empty();

    // Rule 1: ACT with nothing to do it with.
    if mode == Mode::Act && tools.is_empty() && contextual.is_empty() && !named_primitive && !has_tools {
        mode = Mode::Respond;
        branch = Branch::Respond;
        overrides.push("act_no_tools_available".into());
    }
    // A pointer with nothing to point at (D-L5): "fix that", "send it to
    // her" as the first message of a conversation is a question back.
    if input.recent_turns.is_empty() && unresolved_reference(&input.text) && mode != Mode::Clarify {
        mode = Mode::Clarify;
        branch = Branch::Clarify;
        overrides.push(UNRESOLVED.into());
    }
    // Rule 2: the freshness failsafe.
    if mode == Mode::Respond && freshness > 0.5 && FACTUAL_QUESTION.is_match(&input.text) && has_tools {
        mode = Mode::Act;
        branch = Branch::Act;
        overrides.push("act_failsafe".into());
    }
    // Rule 5 (applied before the anti-oscillation rule): a URL.
    if mode == Mode::Respond && URL.is_match(&input.text) && has_tools {
        mode = Mode::Act;
        branch = Branch::Act;
        overrides.push("act_url_detected".into());
    }
    // Rule 4: anti-oscillation, ACT straight after ACT with the same tools.
    if mode == Mode::Act && input.previous_mode == Some(Mode::Act) && !tools.is_empty() {
        let mut a = tools.clone();
        let mut b = input.previous_tools.clone();
        a.sort();
        b.sort();
        if a == b {
            tool_need *= 0.7;
            if tool_need < 0.4 {
                mode = Mode::Respond;
                branch = Branch::Respond;
                overrides.push("anti_oscillation_same_tool".into());
            }
        }
    }
    let skills = if mode == Mode::Act {
        PRIMITIVES.iter().map(|s| s.to_string()).chain(contextual).collect()
    } else {
        contextual
    };
    let tools = if mode == Mode::Act { tools } else { Vec::new() };
    Triage {
        branch,
        mode,
        tools,
        skills,
        confidence_internal: internal,
        confidence_tool_need: (tool_need * 1000.0).round() / 1000.0,
        freshness_risk: freshness,
        decision_entropy: ((internal - tool_need).abs() * 1000.0).round() / 1000.0,
        reasoning: raw.reasoning,
        source,
        fallback_reason,
        overrides,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input(text: &str, tools: bool) -> Input {
        Input {
            text: text.into(),
            tools: if tools { vec![("web_fetch".into(), "fetch a page".into())] } else { vec![] },
            ..Default::default()
        }
    }

    #[test]
    fn parse_accepts_fenced_and_partial_answers() {
        let r = parse("Sure!\n```json\n{\"mode\":\"act\",\"skills\":[\"schedule\"],\"confidence_internal\":0.4}\n```")
            .unwrap();
        assert_eq!((r.mode, r.branch), (Mode::Act, Branch::Act));
        assert_eq!(r.skills, vec!["schedule"]);
        let r = parse(r#"{"branch":"clarify"}"#).unwrap();
        assert_eq!(r.mode, Mode::Clarify);
        let r = parse(r#"{"branch":"respond","mode":"ACKNOWLEDGE"}"#).unwrap();
        assert_eq!((r.mode, r.branch), (Mode::Acknowledge, Branch::Respond));
    }

    #[test]
    fn parse_rejects_what_it_cannot_use() {
        assert!(parse("I think you should respond.").is_err());
        assert!(parse(r#"{"mode":"DANCE"}"#).is_err());
        assert!(parse(r#"{"branch":"social"}"#).is_err());
        assert!(parse(r#"{"tools":[]}"#).is_err());
    }

    #[test]
    fn heuristic_rules() {
        let h = heuristic("remind me to call mum at 6", &[]);
        assert_eq!((h.mode, h.skills.clone()), (Mode::Act, vec!["schedule".to_string()]));
        for asks in
            ["what reminders do I have?", "show my reminders", "any reminders pending?", "set me a reminder for 5pm"]
        {
            assert_eq!(heuristic(asks, &[]).skills, vec!["schedule"], "{asks}");
        }
        assert_eq!(heuristic("add milk to my shopping list", &[]).skills, vec!["list"]);
        assert_eq!(heuristic("remember that my tea is oolong", &[]).skills, vec!["memorize"]);
        let tools = vec![("web_fetch".to_string(), String::new())];
        let h = heuristic("who won the match today", &tools);
        assert_eq!((h.mode, h.freshness_risk), (Mode::Act, 0.8));
        let h = heuristic("who won the match today", &[]);
        assert_eq!((h.mode, h.freshness_risk), (Mode::Respond, 0.2));
        assert_eq!(heuristic("tell me a story about a fox", &[]).mode, Mode::Respond);
    }

    #[test]
    fn skills_are_validated_capped_and_primitives_prepended() {
        let raw = Raw {
            skills: vec![
                "schedule".into(),
                "teleport".into(),
                "list".into(),
                "focus".into(),
                "persistent_task".into(),
                "list".into(),
            ],
            ..heuristic("remind me", &[])
        };
        let t = self_eval(raw, &input("remind me", false), Source::Model, None);
        assert_eq!(t.skills, vec!["recall", "memorize", "introspect", "focus", "list", "persistent_task"]);
        assert!(t.overrides.contains(&"contextual_skills_capped".to_string()));
    }

    #[test]
    fn tools_are_validated_and_capped_at_three() {
        let mut inp = input("x", true);
        inp.tools = (0..5).map(|i| (format!("t{i}"), String::new())).collect();
        let raw = Raw {
            tools: vec!["t0".into(), "t1".into(), "nope".into(), "t2".into(), "t3".into()],
            ..heuristic("remind me", &[])
        };
        let t = self_eval(raw, &inp, Source::Model, None);
        assert_eq!(t.tools, vec!["t0", "t1", "t2"]);
        assert_eq!(t.overrides, vec!["unknown_tools_dropped", "tools_capped"]);
    }

    #[test]
    fn act_with_nothing_becomes_respond() {
        let raw = Raw { skills: vec![], ..heuristic("remind me", &[]) };
        let t = self_eval(raw.clone(), &input("do a thing", false), Source::Model, None);
        assert_eq!(t.mode, Mode::Respond);
        assert_eq!(t.overrides, vec!["act_no_tools_available"]);
        // Naming a primitive is enough to act on memory.
        let raw = Raw { skills: vec!["recall".into()], ..raw };
        assert_eq!(self_eval(raw, &input("what did I say?", false), Source::Model, None).mode, Mode::Act);
    }

    #[test]
    fn freshness_failsafe_boundary() {
        let raw = |f: f64| Raw { freshness_risk: f, ..heuristic("hello", &[]) };
        let q = "who is the current prime minister?";
        assert_eq!(self_eval(raw(0.5), &input(q, true), Source::Model, None).mode, Mode::Respond);
        let t = self_eval(raw(0.51), &input(q, true), Source::Model, None);
        assert_eq!((t.mode, t.overrides.clone()), (Mode::Act, vec!["act_failsafe".to_string()]));
        // Not a factual question, or no tools: unchanged.
        assert_eq!(self_eval(raw(0.9), &input("tell me more", true), Source::Model, None).mode, Mode::Respond);
        assert_eq!(self_eval(raw(0.9), &input(q, false), Source::Model, None).mode, Mode::Respond);
    }

    #[test]
    fn url_forces_act_when_a_tool_can_read_it() {
        let raw = heuristic("summarise", &[]);
        let t = self_eval(raw.clone(), &input("summarise https://example.org/post", true), Source::Model, None);
        assert_eq!(t.overrides, vec!["act_url_detected"]);
        assert_eq!(t.skills[..3], PRIMITIVES.map(String::from));
        assert_eq!(
            self_eval(raw, &input("summarise https://example.org", false), Source::Model, None).mode,
            Mode::Respond
        );
    }

    #[test]
    fn anti_oscillation_on_the_same_tools() {
        let mut inp = input("again", true);
        inp.previous_mode = Some(Mode::Act);
        inp.previous_tools = vec!["web_fetch".into()];
        let raw = |need: f64| Raw {
            tools: vec!["web_fetch".into()],
            confidence_tool_need: need,
            ..heuristic("remind me", &[])
        };
        // 0.57 × 0.7 = 0.399 < 0.4 → RESPOND; 0.58 × 0.7 = 0.406 stays ACT.
        assert_eq!(self_eval(raw(0.57), &inp, Source::Model, None).mode, Mode::Respond);
        let t = self_eval(raw(0.58), &inp, Source::Model, None);
        assert_eq!((t.mode, t.confidence_tool_need), (Mode::Act, 0.406));
    }

    #[test]
    fn confidences_are_clamped_and_entropy_computed() {
        let raw = Raw { confidence_internal: 1.7, confidence_tool_need: -2.0, ..heuristic("hello", &[]) };
        let t = self_eval(raw, &input("hello", false), Source::Heuristic, Some("model-timeout".into()));
        assert_eq!((t.confidence_internal, t.confidence_tool_need, t.decision_entropy), (1.0, 0.0, 1.0));
        assert_eq!(t.fallback_reason.as_deref(), Some("model-timeout"));
    }
}

#[cfg(test)]
mod rules_tests {
    use super::*;

    #[test]
    fn a_pointer_with_nothing_named_is_unresolved() {
        for t in [
            "can you fix that",
            "send it to her",
            "what about it?",
            "how much?",
            "is that normal?",
            "change it to the other one",
            "add it to the list",
            "same as last time please",
            "make it shorter",
        ] {
            assert!(unresolved_reference(t), "{t}");
        }
        for t in [
            "Why is the sky blue?",
            "add milk to my shopping list",
            "What is it like to live in Lisbon?",
            "Remind me tomorrow at 9 to call the dentist",
            "thanks!",
            "Is it going to rain in Porto this weekend?",
        ] {
            assert!(!unresolved_reference(t), "{t}");
        }
    }

    #[test]
    fn skill_phrasing_is_a_command_not_a_topic() {
        let skill = |t: &str| heuristic(t, &[]).skills;
        assert_eq!(skill("add oat milk, eggs and coffee filters to my shopping list"), vec!["list"]);
        assert_eq!(skill("whats on my grocery list"), vec!["list"]);
        assert_eq!(skill("My sister's birthday is on the 12th of May, don't let me forget"), vec!["schedule"]);
        assert_eq!(skill("What did I tell you about my landlord?"), vec!["recall"]);
        assert_eq!(skill("What do you remember about my tea?"), vec!["recall"]);
        assert_eq!(skill("fyi I switched to oat milk"), vec!["memorize"]);
        assert_eq!(skill("How much do you actually know about me so far?"), vec!["introspect"]);
        for topic in [
            "how do I make a shopping list app?",
            "Is running every day healthy?",
            "Does deep work actually make people more productive?",
            "what does 'remind' mean in French?",
            "I remember when we went to Porto",
        ] {
            assert!(skill(topic).is_empty(), "{topic}");
        }
    }

    #[test]
    fn the_rules_settle_commands_and_plain_questions_and_leave_the_rest_to_the_model() {
        let settled = |t: &str| settled_by_rules(t, &heuristic(t, &[]), false);
        assert_eq!(settled("Remind me tomorrow at 9 to call the dentist"), Some("a skill command"));
        assert_eq!(settled("Why is the sky blue?"), Some("a question that needs no skill"));
        assert_eq!(
            settled("What's the difference between baking soda and baking powder?"),
            Some("a question that needs no skill")
        );
        assert_eq!(settled("Can you dig into whether a heat pump makes sense for us?"), Some("a skill command"));
        assert_eq!(settled("Can you help me plan my week?"), None, "a request");
        assert_eq!(settled("I keep forgetting to water the plants"), None, "a statement");
        assert_eq!(settled("is that normal?"), None, "a pointer");
        let tools = vec![("trains".to_string(), "Train times".to_string())];
        assert_eq!(
            settled_by_rules(
                "When is the next train to Leeds?",
                &heuristic("When is the next train to Leeds?", &tools),
                true
            ),
            None,
            "with tools, the model weighs them"
        );
    }
}
