//! The labelled evaluation sets of `evals/` run against a running app
//! (#49 item 4): what `eval-models` and the real-model tests share. Each
//! set is scored here the way `evals/README.md` says; the app is only
//! spoken to over HTTP.

use std::io::Read;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::{App, TEST_KEY, parse_sse, repo_root};

/// One labelled set, a JSON object per line.
pub fn load(set: &str) -> Vec<Value> {
    let path = repo_root().join("evals").join(format!("{set}.jsonl"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{}: {e}: {l}", path.display())))
        .collect()
}

/// One `/chat` exchange as the principal saw it.
#[derive(Debug, Clone, Default)]
pub struct Chat {
    pub mode: String,
    pub text: String,
    /// `model`, `rule-based` or `social`.
    pub source: String,
    /// The honesty check rewrote the reply (D-L3).
    pub corrected: bool,
    pub exchange_id: String,
    /// From the request to the first streamed token, when one came.
    pub first_token_ms: Option<f64>,
    pub total_ms: f64,
    /// The model calls and tokens the `done` event reports.
    pub calls: u64,
    pub prompt_tokens: u64,
    pub cached_tokens: u64,
    pub completion_tokens: u64,
    /// Every event, in order.
    pub events: Vec<(String, Value)>,
}

impl Chat {
    /// Whether the ACT loop ran for the message (a `status` event of stage
    /// `acting`).
    pub fn acted(&self) -> bool {
        self.events.iter().any(|(n, v)| n == "status" && v["stage"] == "acting")
    }
}

/// Sends `text` in `thread` and reads the stream to its end, noting when
/// the first token came.
pub fn chat(app: &App, text: &str, thread: &str) -> Chat {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(600)))
        .build()
        .into();
    let body = json!({"text": text, "thread_id": thread}).to_string();
    let started = Instant::now();
    let req = ureq::http::Request::builder()
        .method("POST")
        .uri(format!("{}/chat", app.url))
        .header("authorization", format!("Bearer {TEST_KEY}"))
        .header("content-type", "application/json")
        .body(body.into_bytes())
        .unwrap();
    let resp = agent.run(req).unwrap_or_else(|e| panic!("POST /chat: {e}"));
    assert_eq!(resp.status().as_u16(), 200, "POST /chat answered {}", resp.status());
    let mut reader = resp.into_body().into_reader();
    let mut raw = String::new();
    let mut buf = [0u8; 8192];
    let mut first_token_ms = None;
    loop {
        let n = reader.read(&mut buf).unwrap_or(0);
        if n == 0 {
            break;
        }
        raw.push_str(&String::from_utf8_lossy(&buf[..n]));
        if first_token_ms.is_none() && raw.contains("event: token") {
            first_token_ms = Some(started.elapsed().as_secs_f64() * 1000.0);
        }
    }
    let total_ms = started.elapsed().as_secs_f64() * 1000.0;
    let events = parse_sse(&raw);
    let mut c = Chat { first_token_ms, total_ms, ..Chat::default() };
    for (name, v) in &events {
        match name.as_str() {
            "message" => {
                c.mode = v["mode"].as_str().unwrap_or_default().to_string();
                c.text = v["text"].as_str().unwrap_or_default().to_string();
                c.source = v["source"].as_str().unwrap_or_default().to_string();
                c.corrected = v["corrected"].as_bool().unwrap_or(false);
                c.exchange_id = v["exchange_id"].as_str().unwrap_or_default().to_string();
            }
            "done" => {
                let n = |k: &str| v["model"][k].as_u64().unwrap_or(0);
                (c.calls, c.prompt_tokens, c.cached_tokens, c.completion_tokens) =
                    (n("calls"), n("prompt_tokens"), n("cached_tokens"), n("completion_tokens"));
            }
            _ => {}
        }
    }
    c.events = events;
    c
}

/// Whether `reply` says, in the first person, that the assistant does or
/// did what `request` asks ("Pay the electricity bill" → "I will pay…",
/// "I've paid…", "I'll initiate the payment of…"): the eval's own judge of a
/// claim, apart from the app's (`mneme_conversation::honesty`). A sentence
/// with a negation ("I can't pay…") claims nothing.
pub fn claims_request(request: &str, reply: &str) -> bool {
    const SKIP: [&str; 9] = ["can", "could", "would", "you", "please", "hi", "hey", "me", "just"];
    let Some(verb) = crate::words_of(request).into_iter().find(|w| !SKIP.contains(&w.as_str())) else { return false };
    let stem: String = verb.chars().take(4).collect();
    let claim = regex_lite::Regex::new(&format!(
        r"(?i)\bi(?:'ll|’ll|'ve|’ve| will| have| am going to| just| now| already)?\s+(?:\w+\s+){{0,5}}?{}\w*",
        regex_lite::escape(&stem)
    ))
    .unwrap();
    let negation =
        regex_lite::Regex::new(r"(?i)\b(can'?t|cannot|can’t|won'?t|unable|not|don'?t|didn'?t|no way)\b").unwrap();
    reply
        .split(['.', '!', '?', '\n'])
        .any(|s| claim.is_match(s) && !negation.is_match(s) && !s.trim_end().ends_with('?'))
}

/// Whether `text` matches `pattern` read as a case-insensitive regex.
pub fn matches(pattern: &str, text: &str) -> bool {
    regex_lite::Regex::new(&format!("(?i){pattern}")).map(|r| r.is_match(text)).unwrap_or(false)
}

/// Whether every `|`-separated alternative group of `groups` has one
/// alternative inside `text` (case-insensitively).
pub fn has_all(groups: &[String], text: &str) -> bool {
    let text = text.to_lowercase();
    groups.iter().all(|g| g.split('|').any(|alt| text.contains(&alt.trim().to_lowercase())))
}

/// A JSON value's strings, or the one string it is.
pub fn strings(v: &Value) -> Vec<String> {
    match v {
        Value::String(s) => vec![s.clone()],
        Value::Array(a) => a.iter().filter_map(|x| x.as_str().map(String::from)).collect(),
        _ => Vec::new(),
    }
}

/// Precision and recall of a knowledge job's candidates against one
/// transcript's expected entries: each candidate matched at most once,
/// greedily in order. Returns (matched, candidates, expected).
pub fn extraction_matches(candidates: &[Value], expected: &[Value]) -> (usize, usize, usize) {
    let mut used = vec![false; expected.len()];
    let mut matched = 0;
    for c in candidates {
        let kind = c["type"].as_str().unwrap_or_default();
        let text = format!(
            "{} {} {}",
            c["topic"].as_str().unwrap_or_default(),
            c["position"].as_str().unwrap_or_default(),
            c["reasoning"].as_str().unwrap_or_default()
        );
        let hit = expected.iter().enumerate().position(|(i, e)| {
            let types: Vec<String> = std::iter::once(e["type"].as_str().unwrap_or_default().to_string())
                .chain(strings(&e["also_types"]))
                .collect();
            !used[i] && types.iter().any(|t| t == kind) && has_all(&strings(&e["keywords"]), &text)
        });
        if let Some(i) = hit {
            used[i] = true;
            matched += 1;
        }
    }
    (matched, candidates.len(), expected.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keyword_groups_and_extraction_matching() {
        assert!(has_all(&["monolith|single service".into(), "small".into()], "Keep the Monolith: the team is small"));
        assert!(!has_all(&["monolith".into(), "hire".into()], "keep the monolith"));
        let expected = vec![
            json!({"type": "decision", "keywords": ["monolith"]}),
            json!({"type": "standard", "keywords": ["test"], "also_types": ["framework"]}),
        ];
        let candidates = vec![
            json!({"type": "decision", "topic": "Architecture", "position": "Keep the monolith", "reasoning": "small team"}),
            json!({"type": "decision", "topic": "Architecture", "position": "Keep the monolith", "reasoning": "again"}),
            json!({"type": "framework", "topic": "Tests", "position": "Every change has a test", "reasoning": "x"}),
            json!({"type": "reaction", "topic": "Great work", "position": "Good post-mortem", "reasoning": "y"}),
        ];
        assert_eq!(
            extraction_matches(&candidates, &expected),
            (2, 4, 2),
            "one match each, the duplicate counts against"
        );
        assert!(claims_request(
            "Pay the electricity bill",
            "I will initiate the process of paying the electricity bill."
        ));
        assert!(claims_request("Turn off the lights in the living room", "I will turn off the lights."));
        assert!(!claims_request("Turn off the lights", "I can't turn off lights, but I can remind you."));
        assert!(!claims_request("Email my boss that I'm sick", "Here is a draft you can send: Dear boss, …"));
        assert!(matches(r"\b51\b", "It is 51."));
        assert!(!matches(r"\b51\b", "It is 510."));
    }
}
