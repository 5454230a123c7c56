//! Path B (design 002 §5): the external tools the principal configures, and
//! the critic that checks a tool's result. A tool is configuration only (a
//! name, what it does, an HTTP endpoint, a timeout); the dispatcher calls
//! every tool the same way, so no tool name appears in the pipeline.

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// A tool's timeout when its configuration names none, and the bounds.
pub const DEFAULT_TIMEOUT_MS: u64 = 10_000;
pub const TIMEOUT_MS: std::ops::RangeInclusive<u64> = 100..=30_000;
/// At most this many tools are configured.
pub const MAX_TOOLS: usize = 32;
/// A tool's answer kept for the reply and the log, in characters.
pub const MAX_RESULT_CHARS: usize = 4_000;
/// Cosine between the message and a tool's description at or above which
/// the tool is relevant when triage named none (D-C19).
pub const RELEVANCE_COSINE: f32 = 0.35;
/// Tools computed by relevance, at most (triage's own cap).
pub const MAX_RELEVANT: usize = 3;

/// The reply the tool worker stores on its job (Path B). Its JSON is the
/// stored result and the `tool_result` event's payload.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolReply {
    pub text: String,
    pub topic: String,
    pub mode: crate::Mode,
    pub confidence: f64,
    pub exchange_id: String,
    pub thread_id: String,
    /// `model`, `rule-based` or `critic-escalation`.
    pub source: String,
    /// Each tool's result, and the critic's notes.
    pub tools: Vec<crate::generate::ActResult>,
}

/// A configured tool, as `PUT /tools/{name}` stores it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Tool {
    pub name: String,
    /// What the tool does, in one or two sentences: triage reads it, and
    /// relevance embeds it.
    pub description: String,
    /// The endpoint: `POST` with the message and its context as JSON.
    pub url: String,
    pub timeout_ms: u64,
    /// A consequential tool changes something outside Mneme (sends,
    /// books, buys): the critic escalates instead of retrying it.
    pub consequential: bool,
}

/// A tool name: lowercase letters, digits, `_` and `-`, starting with a
/// letter, at most 40; never an innate action's name.
pub fn valid_name(name: &str) -> bool {
    let b = name.as_bytes();
    !b.is_empty()
        && b.len() <= 40
        && b[0].is_ascii_lowercase()
        && b.iter().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'_' || *c == b'-')
        && !crate::triage::SKILLS.contains(&name)
}

/// The `host:port` of an `http(s)://` URL, or `None` when it is not one.
pub fn authority(url: &str) -> Option<String> {
    let rest = url.strip_prefix("http://").or_else(|| url.strip_prefix("https://"))?;
    let host = rest.split(['/', '?', '#']).next().unwrap_or("");
    if host.is_empty() || host.contains('@') || host.contains(char::is_whitespace) {
        return None;
    }
    let default = if url.starts_with("https://") { 443 } else { 80 };
    Some(if host.contains(':') { host.to_string() } else { format!("{host}:{default}") })
}

/// Checks a configuration sent to `PUT /tools/{name}`: the body's name (if
/// any) equals the path's, the URL is on `allowed_host` (the hosts the app
/// may call), the timeout is in range; fills the defaults.
pub fn parse(name: &str, config: &Value, allowed_host: &str) -> Result<Tool, String> {
    let Some(obj) = config.as_object() else { return Err("the configuration is a JSON object".into()) };
    for k in obj.keys() {
        if !["name", "description", "url", "timeout_ms", "consequential"].contains(&k.as_str()) {
            return Err(format!("unknown field `{k}`"));
        }
    }
    if !valid_name(name) {
        return Err(format!(
            "a tool name is 1 to 40 lowercase letters, digits, _ and -, starts with a letter and is not an innate action ({})",
            crate::triage::SKILLS.join(", ")
        ));
    }
    if let Some(n) = obj.get("name")
        && n.as_str() != Some(name)
    {
        return Err(format!("`name` must be `{name}`, the path's"));
    }
    let description = obj.get("description").and_then(Value::as_str).map(str::trim).unwrap_or_default();
    if description.chars().count() < 3 || description.chars().count() > 500 {
        return Err("`description` says what the tool does, in 3 to 500 characters".into());
    }
    let url = obj.get("url").and_then(Value::as_str).map(str::trim).unwrap_or_default();
    let Some(host) = authority(url) else { return Err("`url` is an http:// or https:// URL".into()) };
    if host != allowed_host {
        return Err(format!(
            "`url` is on {host}, but the app may only call tools on {allowed_host} (the `tool_host` variable)"
        ));
    }
    let timeout_ms = match obj.get("timeout_ms") {
        None | Some(Value::Null) => DEFAULT_TIMEOUT_MS,
        Some(v) => v
            .as_u64()
            .filter(|t| TIMEOUT_MS.contains(t))
            .ok_or_else(|| format!("`timeout_ms` is an integer from {} to {}", TIMEOUT_MS.start(), TIMEOUT_MS.end()))?,
    };
    let consequential = match obj.get("consequential") {
        None | Some(Value::Null) => true,
        Some(Value::Bool(b)) => *b,
        Some(_) => return Err("`consequential` is true or false".into()),
    };
    Ok(Tool { name: name.into(), description: description.into(), url: url.into(), timeout_ms, consequential })
}

/// The JSON a tool is sent: the message, its topic and intent, what the
/// context knew, and (on a critic's retry) the correction.
pub fn request_body(tool: &str, text: &str, topic: &str, intent: &Value, correction: Option<&str>) -> Value {
    let mut body = json!({"tool": tool, "text": text, "topic": topic, "intent": intent});
    if let Some(c) = correction {
        body["critic_correction"] = json!(c);
    }
    body
}

/// A tool's answer as text: `result` when the answer is a JSON object with
/// a string `result`, else the body as sent; cut to [`MAX_RESULT_CHARS`].
pub fn answer_text(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    let picked = match serde_json::from_str::<Value>(&text) {
        Ok(Value::Object(o)) => match o.get("result") {
            Some(Value::String(s)) => s.clone(),
            _ => text.trim().to_string(),
        },
        _ => text.trim().to_string(),
    };
    if picked.chars().count() > MAX_RESULT_CHARS {
        picked.chars().take(MAX_RESULT_CHARS).collect::<String>() + "…"
    } else {
        picked
    }
}

// ------------------------------------------------------------------ critic

/// The critic's starting threshold: an action at or above it is not checked.
pub const CRITIC_THRESHOLD: f64 = 0.9;
/// EMA weight of one evaluation in an action type's correction rate.
pub const CRITIC_ALPHA: f64 = 0.1;
/// A correction rate above this raises the threshold by the excess.
pub const CRITIC_RATE_FLOOR: f64 = 0.15;
/// Fatigue one evaluation adds.
pub const CRITIC_FATIGUE: f64 = 0.3;
/// Retries of a safe action after corrections, at most.
pub const CRITIC_MAX_RETRIES: usize = 2;

/// The threshold for an action type with this correction rate.
pub fn critic_threshold(rate: f64) -> f64 {
    if rate > CRITIC_RATE_FLOOR { (CRITIC_THRESHOLD + (rate - CRITIC_RATE_FLOOR)).min(1.0) } else { CRITIC_THRESHOLD }
}

/// The correction rate after one more evaluation.
pub fn next_rate(rate: f64, corrected: bool) -> f64 {
    (1.0 - CRITIC_ALPHA) * rate + CRITIC_ALPHA * if corrected { 1.0 } else { 0.0 }
}

/// Whether the critic looks at a result: only a success, and only below
/// the threshold.
pub fn critic_applies(status: &str, confidence: f64, threshold: f64) -> bool {
    status == "success" && confidence < threshold
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Verdict {
    pub verified: bool,
    /// `minor` or `major` when not verified.
    pub severity: Option<String>,
    pub issue: Option<String>,
    pub correction: Option<String>,
}

impl Verdict {
    pub fn verified() -> Self {
        Verdict { verified: true, severity: None, issue: None, correction: None }
    }
}

/// The JSON Schema of the critic's verdict (D-L2): `verified`, and when
/// it is false the severity, the issue and a correction (null when none).
pub fn critic_schema() -> String {
    serde_json::json!({
        "type": "object",
        "properties": {
            "verified": {"type": "boolean"},
            "severity": {"enum": ["minor", "major", null]},
            "issue": {"type": ["string", "null"]},
            "correction": {"type": ["string", "null"]},
        },
        "required": ["verified", "severity", "issue", "correction"],
        "additionalProperties": false,
    })
    .to_string()
}

/// Reads the critic's answer: JSON (fenced or not), then a text heuristic
/// ("incorrect", "wrong", "error", "mismatch" → not verified, minor); any
/// other answer, or none, counts as verified.
pub fn parse_verdict(answer: Option<&str>) -> Verdict {
    let Some(text) = answer else { return Verdict::verified() };
    if let Ok(v) = mneme_llm::extract_json(text) {
        let verified = v.get("verified").and_then(Value::as_bool).unwrap_or(true);
        if verified {
            return Verdict::verified();
        }
        let s = |k: &str| v.get(k).and_then(Value::as_str).map(str::trim).filter(|s| !s.is_empty()).map(String::from);
        let severity = s("severity").filter(|s| s == "minor" || s == "major").or(Some("minor".into()));
        return Verdict { verified: false, severity, issue: s("issue"), correction: s("correction") };
    }
    let lower = text.to_lowercase();
    if ["incorrect", "wrong", "error", "mismatch"].iter().any(|w| lower.contains(w)) {
        return Verdict {
            verified: false,
            severity: Some("minor".into()),
            issue: Some(text.trim().chars().take(300).collect()),
            correction: None,
        };
    }
    Verdict::verified()
}

/// What the worker does after a verdict.
#[derive(Debug, Clone, PartialEq)]
pub enum CriticStep {
    /// Keep the result.
    Keep,
    /// A safe tool: run it again with the correction (the failed attempt
    /// stays in the history).
    Retry(String),
    /// A consequential tool with a correction: note it, no retry.
    Note(String),
    /// A consequential tool with no correction: pause and ask the
    /// principal.
    Escalate(String),
    /// A safe tool whose retries ran out (an oscillation).
    GiveUp,
}

/// The rule for a verdict on `tool` after `retries` retries.
pub fn critic_step(verdict: &Verdict, consequential: bool, retries: usize) -> CriticStep {
    if verdict.verified {
        return CriticStep::Keep;
    }
    let issue = verdict.issue.clone().unwrap_or_else(|| "the result did not look right".into());
    match (consequential, &verdict.correction) {
        (false, Some(c)) if retries < CRITIC_MAX_RETRIES => CriticStep::Retry(c.clone()),
        (false, Some(_)) => CriticStep::GiveUp,
        (false, None) => CriticStep::Note(issue),
        (true, Some(c)) => CriticStep::Note(c.clone()),
        (true, None) => CriticStep::Escalate(issue),
    }
}

/// The escalation the principal reads when a consequential tool's result
/// failed the critic with no correction.
pub fn escalation(tool: &str, issue: &str) -> String {
    format!("I was about to rely on {tool} but paused — {issue}. Should I go ahead?")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(url: &str) -> Value {
        json!({"description": "Looks up train departures.", "url": url})
    }

    #[test]
    fn a_tool_is_checked_before_it_is_stored() {
        let t = parse("trains", &config("http://127.0.0.1:8091/trains"), "127.0.0.1:8091").unwrap();
        assert_eq!((t.timeout_ms, t.consequential), (DEFAULT_TIMEOUT_MS, true));
        let host = parse("trains", &config("http://evil.example/x"), "127.0.0.1:8091").unwrap_err();
        assert!(host.contains("tool_host"), "{host}");
        assert!(parse("recall", &config("http://127.0.0.1:8091/x"), "127.0.0.1:8091").is_err(), "innate");
        assert!(parse("Trains", &config("http://127.0.0.1:8091/x"), "127.0.0.1:8091").is_err());
        assert!(parse("trains", &config("ftp://127.0.0.1:8091/x"), "127.0.0.1:8091").is_err());
        let mut c = config("http://127.0.0.1:8091/x");
        c["timeout_ms"] = json!(99);
        assert!(parse("trains", &c, "127.0.0.1:8091").is_err());
        c["timeout_ms"] = json!(100);
        assert_eq!(parse("trains", &c, "127.0.0.1:8091").unwrap().timeout_ms, 100);
        c["timeout_ms"] = json!(30_001);
        assert!(parse("trains", &c, "127.0.0.1:8091").is_err());
        c["timeout_ms"] = json!(30_000);
        c["name"] = json!("buses");
        assert!(parse("trains", &c, "127.0.0.1:8091").unwrap_err().contains("path"));
        c["name"] = json!("trains");
        c["extra"] = json!(1);
        assert!(parse("trains", &c, "127.0.0.1:8091").unwrap_err().contains("extra"));
        assert_eq!(authority("https://api.example.com/v1").as_deref(), Some("api.example.com:443"));
        assert_eq!(authority("http://u:p@h/x"), None);
    }

    #[test]
    fn answers_are_read_as_text_and_cut() {
        assert_eq!(answer_text(br#"{"result": "9:40 from platform 2"}"#), "9:40 from platform 2");
        assert_eq!(answer_text(br#"{"departures": [1]}"#), r#"{"departures": [1]}"#);
        assert_eq!(answer_text(b"  plain text\n"), "plain text");
        let long = "x".repeat(MAX_RESULT_CHARS + 10);
        assert_eq!(answer_text(long.as_bytes()).chars().count(), MAX_RESULT_CHARS + 1);
    }

    #[test]
    fn the_critic_threshold_rises_with_corrections() {
        assert_eq!(critic_threshold(0.15), CRITIC_THRESHOLD);
        assert!((critic_threshold(0.25) - 1.0).abs() < 1e-9);
        assert!((critic_threshold(0.2) - 0.95).abs() < 1e-9);
        assert_eq!(critic_threshold(0.9), 1.0);
        assert!((next_rate(0.0, true) - 0.1).abs() < 1e-12);
        assert!((next_rate(0.5, false) - 0.45).abs() < 1e-12);
        assert!(critic_applies("success", 0.5, 0.9));
        assert!(!critic_applies("success", 0.9, 0.9));
        assert!(!critic_applies("timeout", 0.0, 0.9));
    }

    #[test]
    fn verdicts_parse_json_then_words_else_verified() {
        assert!(parse_verdict(None).verified);
        assert!(parse_verdict(Some("{\"verified\": true}")).verified);
        let v = parse_verdict(Some(
            "```json\n{\"verified\": false, \"severity\": \"major\", \"issue\": \"stale\", \"correction\": \"ask for today\"}\n```",
        ));
        assert_eq!(
            (v.verified, v.severity.as_deref(), v.correction.as_deref()),
            (false, Some("major"), Some("ask for today"))
        );
        let w = parse_verdict(Some("That looks wrong to me."));
        assert_eq!((w.verified, w.severity.as_deref()), (false, Some("minor")));
        assert!(parse_verdict(Some("Looks fine.")).verified);
    }

    #[test]
    fn safe_tools_retry_and_consequential_ones_escalate() {
        let bad = |c: Option<&str>| Verdict {
            verified: false,
            severity: Some("minor".into()),
            issue: Some("stale".into()),
            correction: c.map(String::from),
        };
        assert_eq!(critic_step(&Verdict::verified(), true, 0), CriticStep::Keep);
        assert_eq!(critic_step(&bad(Some("today")), false, 0), CriticStep::Retry("today".into()));
        assert_eq!(critic_step(&bad(Some("today")), false, 1), CriticStep::Retry("today".into()));
        assert_eq!(critic_step(&bad(Some("today")), false, 2), CriticStep::GiveUp);
        assert_eq!(critic_step(&bad(None), false, 0), CriticStep::Note("stale".into()));
        assert_eq!(critic_step(&bad(Some("today")), true, 0), CriticStep::Note("today".into()));
        assert_eq!(critic_step(&bad(None), true, 0), CriticStep::Escalate("stale".into()));
        assert!(escalation("trains", "stale").starts_with("I was about to rely on trains but paused"));
    }
}
