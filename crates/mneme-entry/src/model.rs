//! A model call as the entries make it: messages in the `llm` stage's
//! shape, and the time the call spent waiting on the model (D-C24).

use crate::StageError;
use crate::mneme::llm::llm::{ChatMessage, Completion, CompletionRequest, Tier};
use mneme_conversation::generate;
use std::time::Instant;

/// Prompt messages in the `llm` stage's shape.
pub fn messages(v: Vec<mneme_llm::Message>) -> Vec<ChatMessage> {
    v.into_iter()
        .map(|m| ChatMessage {
            role: match m.role {
                mneme_llm::Role::System => "system",
                mneme_llm::Role::User => "user",
                mneme_llm::Role::Assistant => "assistant",
            }
            .into(),
            content: m.content,
        })
        .collect()
}

/// A system prompt and one user message.
pub fn system_user(system: &str, user: String) -> Vec<ChatMessage> {
    vec![
        ChatMessage { role: "system".into(), content: system.trim().into() },
        ChatMessage { role: "user".into(), content: user },
    ]
}

/// The time one model call spent waiting on the model, in µs: what the
/// llm stage measured around the wire, or, for a call that failed, the
/// whole call (it failed waiting, or at once).
pub fn wait_us(answer: &Result<Completion, StageError>, call: Instant) -> u64 {
    match answer {
        Ok(c) => c.wait_us,
        Err(_) => call.elapsed().as_micros() as u64,
    }
}

/// The call that writes a reply (002 §4c): the primary model, plain text,
/// at generation's temperature and timeout.
pub fn reply_request(messages: Vec<ChatMessage>) -> CompletionRequest {
    CompletionRequest {
        tier: Tier::Primary,
        messages,
        max_tokens: Some(800),
        temperature: Some(generate::TEMPERATURE),
        json: false,
        schema: None,
        timeout_ms: generate::TIMEOUT_MS,
    }
}

use crate::mneme::llm::llm as stage;
use crate::mneme::store::store::{self as store_stage, ModelFallback, ModelUse, ModelUseKey};
use mneme_types::ErrorCode;
pub use mneme_types::ModelPath;

/// What one request or job spent on the model, per path, and the
/// fallbacks it took; written once, at its end ([`Ledger::flush`]), so the
/// principal sees it on `/status` (#49 items 2 and 5).
#[derive(Debug, Default)]
pub struct Ledger {
    uses: Vec<ModelUse>,
    fallbacks: Vec<ModelFallback>,
}

/// Why a path's labelled rules answered instead of the model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fallback {
    /// `model-unavailable`, `model-timeout`, `model-error`, `malformed` or
    /// `empty`.
    pub reason: String,
    pub detail: String,
}

impl std::fmt::Display for Fallback {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.detail.is_empty() {
            write!(f, "{}", self.reason)
        } else {
            write!(f, "{}: {}", self.reason, self.detail)
        }
    }
}

impl Fallback {
    fn of(e: &StageError) -> Self {
        Fallback { reason: e.code.name().to_string(), detail: e.message.clone() }
    }
}

impl Ledger {
    fn row(&mut self, path: ModelPath) -> &mut ModelUse {
        let at = self.uses.iter().position(|u| matches!(&u.key, ModelUseKey::Path(p) if *p == path));
        let at = at.unwrap_or_else(|| {
            self.uses.push(ModelUse {
                key: ModelUseKey::Path(path),
                units: 0,
                calls: 0,
                answered: 0,
                retries: 0,
                fallbacks: 0,
                prompt_tokens: 0,
                cached_tokens: 0,
                completion_tokens: 0,
                wait_ms: 0,
            });
            self.uses.len() - 1
        });
        &mut self.uses[at]
    }

    /// One call on `path` and what it cost. A call to no configured model
    /// is no call: nothing is counted.
    pub fn call(&mut self, path: ModelPath, answer: &Result<Completion, StageError>, started: Instant) {
        if matches!(answer, Err(e) if e.code == ErrorCode::ModelUnavailable) {
            return;
        }
        let waited = wait_us(answer, started) / 1000;
        let row = self.row(path);
        row.units += 1;
        row.calls += 1;
        row.wait_ms += waited;
        if let Ok(c) = answer {
            row.prompt_tokens += u64::from(c.prompt_tokens);
            row.cached_tokens += u64::from(c.cached_tokens);
            row.completion_tokens += u64::from(c.completion_tokens);
        }
    }

    /// The last call on `path` gave an answer that was used.
    pub fn answered(&mut self, path: ModelPath) {
        self.row(path).answered += 1;
    }

    /// `path` asked again after a malformed or empty answer.
    pub fn retried(&mut self, path: ModelPath) {
        self.row(path).retries += 1;
    }

    /// `path`'s labelled rules answered instead of the model, at `now_ms`.
    /// With no model configured there is nothing to record: every path runs
    /// on its rules, and `/status` says why.
    pub fn fell_back(&mut self, path: ModelPath, why: &Fallback, now_ms: u64) {
        if why.reason == ErrorCode::ModelUnavailable.name() {
            return;
        }
        self.row(path).fallbacks += 1;
        self.fallbacks.push(ModelFallback {
            path,
            at_ms: now_ms,
            reason: why.reason.clone(),
            detail: why.detail.chars().take(300).collect(),
        });
        eprintln!("model: {} fell back to its rules ({why})", path.as_str());
    }

    /// Model calls so far, and their prompt, cached and completion tokens.
    pub fn totals(&self) -> (u32, u64, u64, u64) {
        self.uses.iter().fold((0, 0, 0, 0), |(c, p, k, o), u| {
            (c + u.calls, p + u.prompt_tokens, k + u.cached_tokens, o + u.completion_tokens)
        })
    }

    /// Writes what was spent, adding one `message:<mode>` row when the
    /// ledger is a message's. A ledger with no call in it writes nothing: a
    /// social exit, or any message with no model configured, costs no
    /// store write (its zero is the design's, not a measurement). A failure
    /// to write is logged, never the caller's failure: the work it counts
    /// is done.
    pub async fn flush(mut self, message_mode: Option<&str>, now_ms: u64) {
        if self.uses.iter().all(|u| u.calls == 0 && u.fallbacks == 0) && self.fallbacks.is_empty() {
            return;
        }
        if let Some(mode) = message_mode {
            let (calls, prompt, cached, completion) = self.totals();
            let (retries, fallbacks, answered, wait) = self
                .uses
                .iter()
                .fold((0, 0, 0, 0), |a, u| (a.0 + u.retries, a.1 + u.fallbacks, a.2 + u.answered, a.3 + u.wait_ms));
            // The line is the message's cost on its trace: each line an app
            // writes is an event on the span open at the time, under Spin
            // and `mneme up` alike (D-L8, D-L10).
            eprintln!(
                "model: a {mode} message: {calls} calls, {prompt} prompt tokens ({cached} cached), \
                 {completion} completion tokens, {wait} ms waiting"
            );
            self.uses.push(ModelUse {
                key: ModelUseKey::Message(mode.to_string()),
                units: 1,
                calls,
                answered,
                retries,
                fallbacks,
                prompt_tokens: prompt,
                cached_tokens: cached,
                completion_tokens: completion,
                wait_ms: wait,
            });
        }
        if self.uses.is_empty() && self.fallbacks.is_empty() {
            return;
        }
        if let Err(e) = store_stage::record_model_use(self.uses, self.fallbacks, now_ms).await {
            eprintln!("model: the ledger was not written: {}: {}", e.code, e.message);
        }
    }
}

/// A model call whose answer is a JSON object of a known shape.
pub struct JsonAsk {
    pub path: ModelPath,
    pub tier: Tier,
    pub messages: Vec<ChatMessage>,
    /// The JSON Schema the answer must follow (D-L2).
    pub schema: String,
    pub max_tokens: u32,
    pub temperature: f32,
    pub timeout_ms: u32,
}

/// How many times a JSON call asks when the answer is malformed or empty:
/// once more (D-L2).
pub const JSON_ATTEMPTS: usize = 2;

/// What a JSON call came to: the parsed answer with the completion that
/// carried it, or why the caller takes its labelled rules instead.
pub type Asked<T> = Result<(T, Completion), Fallback>;

/// Asks for a JSON answer under its schema and reads it with `parse`. A
/// malformed or empty answer is asked for once more (D-L2); a timeout, an
/// error or no model is not (another wait would not help). Every call, the
/// retry and the fallback go to `ledger`; the fallback is the caller's to
/// take, with the reason this gives.
pub async fn ask_json<T>(
    ledger: &mut Ledger,
    ask: JsonAsk,
    now_ms: u64,
    parse: impl Fn(&str) -> Result<T, String>,
) -> Asked<T> {
    ask_json_tries(ledger, ask, now_ms, JSON_ATTEMPTS, parse).await
}

/// [`ask_json`] with its own number of asks at a readable answer (the
/// drift engine keeps the reference's three).
pub async fn ask_json_tries<T>(
    ledger: &mut Ledger,
    ask: JsonAsk,
    now_ms: u64,
    attempts: usize,
    parse: impl Fn(&str) -> Result<T, String>,
) -> Asked<T> {
    let request = CompletionRequest {
        tier: ask.tier,
        messages: ask.messages,
        max_tokens: Some(ask.max_tokens),
        temperature: Some(ask.temperature),
        json: true,
        schema: Some(ask.schema),
        timeout_ms: ask.timeout_ms,
    };
    let mut why = Fallback { reason: "empty".into(), detail: String::new() };
    for attempt in 0..attempts.max(1) {
        if attempt > 0 {
            ledger.retried(ask.path);
        }
        let started = Instant::now();
        let answer = stage::complete(request.clone()).await;
        ledger.call(ask.path, &answer, started);
        let completion = match answer {
            Ok(c) => c,
            Err(e) => {
                why = Fallback::of(&e);
                break;
            }
        };
        if completion.text.trim().is_empty() {
            why = Fallback { reason: "empty".into(), detail: "the model answered nothing".into() };
            continue;
        }
        match parse(&completion.text) {
            Ok(v) => {
                ledger.answered(ask.path);
                return Ok((v, completion));
            }
            Err(e) => {
                let seen: String = completion.text.chars().take(120).collect();
                why = Fallback { reason: "malformed".into(), detail: format!("{e} (the answer began: {seen})") };
            }
        }
    }
    ledger.fell_back(ask.path, &why, now_ms);
    Err(why)
}
