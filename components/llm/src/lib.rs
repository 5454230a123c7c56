//! The `llm` stage component (`mneme:llm`): sends chat completions to the
//! OpenAI-compatible endpoint named by the variables `llm_url` (a base URL
//! ending in `/v1`), `llm_api_key`, `llm_model` and `llm_light_model`; or,
//! with `llm_backend = "spin"`, to Spin's own `llm` interface (`infer`,
//! with the chat flattened into one prompt), which the platform serves.
//! Request and response formats are `mneme-llm`'s; this is the I/O.
//! With no model configured, every call fails fast with
//! `model-unavailable` so the caller takes its labelled rule-based fallback.
//! `llm_url` alone configures a model: with `llm_model` empty, the first
//! model the endpoint lists is used (D-C33).

spin_sdk::wit_bindgen::generate!({
    path: ["../../wit/types", "../../wit/llm"],
    world: "mneme:llm/stage-llm",
    runtime_path: "::spin_sdk::wit_bindgen::rt",
    with: {
        "mneme:types/types@0.1.0": mneme_types::mneme::types::types,
    },
    generate_all,
});

use std::time::{Duration, Instant};

use exports::mneme::llm::llm::{Completion, CompletionRequest, Guest, ModelStatus, Tier};
use futures::StreamExt;
use futures::future::{Either, select};
use mneme_llm::{ChatRequest, Message, Role};
use mneme_llm::{StreamEvent, StreamParser};
use mneme_types::{ErrorCode, StageError};
use spin_sdk::http::body::IncomingBodyExt;
use spin_sdk::wit_bindgen::rt::async_support::{FutureReader, StreamReader, StreamWriter};

struct Stage;

fn error(code: ErrorCode, message: impl Into<String>) -> StageError {
    StageError::new(code, message)
}

async fn var(name: &str) -> Option<String> {
    spin_sdk::variables::get(name).await.ok().filter(|v| !v.trim().is_empty())
}

struct Config {
    url: Option<String>,
    key: Option<String>,
    /// `llm_model`, or the endpoint's first listed model when that is
    /// empty; empty when neither names one.
    primary: String,
    light: String,
    /// `llm_backend = "spin"`: Spin's `llm` interface instead of HTTP.
    spin: bool,
    /// Why no model could be found at `url`, when `llm_model` is empty.
    unnamed: Option<String>,
}

impl Config {
    /// An endpoint is enough: its model is named or asked for. Spin's own
    /// interface has no list to ask, so it needs `llm_model`.
    fn configured(&self) -> bool {
        if self.spin { !self.primary.is_empty() } else { self.url.is_some() }
    }
}

/// Where completions go, without the model: all a health probe needs.
struct Endpoint {
    url: Option<String>,
    key: Option<String>,
    spin: bool,
}

async fn endpoint() -> Endpoint {
    let spin = var("llm_backend").await.is_some_and(|b| b.trim().eq_ignore_ascii_case("spin"));
    Endpoint { url: var("llm_url").await, key: var("llm_api_key").await, spin }
}

/// The configuration; with `llm_model` empty, the model the endpoint lists,
/// asked within `deadline_ms` (the caller's own deadline, so a silent
/// endpoint cannot hold a 500 ms triage for seconds) and never longer than
/// [`LIST_TIMEOUT_MS`].
async fn config(deadline_ms: u32) -> Config {
    let Endpoint { url, key, spin } = endpoint().await;
    let (primary, unnamed) = match (var("llm_model").await, &url) {
        (Some(named), _) => (named, None),
        (None, Some(url)) if !spin => match listed_model(url, key.as_deref(), deadline_ms).await {
            Ok(found) => (found, None),
            Err(why) => (String::new(), Some(why)),
        },
        (None, _) => (String::new(), None),
    };
    let light = var("llm_light_model").await.unwrap_or_else(|| primary.clone());
    Config { url, key, primary, light, spin, unnamed }
}

/// How long an instance keeps the model an endpoint listed, and how long
/// it keeps a failure to find one before asking again.
const LISTED_KEPT: Duration = Duration::from_secs(60);
const UNLISTED_KEPT: Duration = Duration::from_secs(5);

/// The first model `url` lists (`GET {url}/models`), asked at most once a
/// minute per instance and per address. A lookup cut short by a caller's
/// deadline below [`LIST_TIMEOUT_MS`] is not kept: the endpoint may only be
/// slower than that caller could wait, and the next caller may wait longer.
async fn listed_model(url: &str, key: Option<&str>, deadline_ms: u32) -> Result<String, String> {
    type Kept = Option<(Instant, String, Result<String, String>)>;
    thread_local! {
        static LISTED: std::cell::RefCell<Kept> = const { std::cell::RefCell::new(None) };
    }
    let kept = LISTED.with_borrow(|l| {
        l.clone().filter(|(at, asked, found)| {
            asked == url && at.elapsed() < if found.is_ok() { LISTED_KEPT } else { UNLISTED_KEPT }
        })
    });
    if let Some((_, _, found)) = kept {
        return found;
    }
    let deadline_ms = deadline_ms.min(LIST_TIMEOUT_MS);
    let (found, keep) = match ask_models(url, key, deadline_ms).await {
        Err(e) if e.code == ErrorCode::ModelTimeout => (
            Err(format!("the endpoint did not list its models within {deadline_ms} ms")),
            deadline_ms == LIST_TIMEOUT_MS,
        ),
        Err(e) => (Err(format!("asking the endpoint for its models: {}", e.message)), true),
        Ok((status, _)) if !status.is_success() => {
            (Err(format!("the endpoint answered {status} when asked for its models")), true)
        }
        Ok((_, bytes)) => (mneme_llm::first_listed_model(&bytes).map_err(|e| e.to_string()), true),
    };
    if keep {
        LISTED.set(Some((Instant::now(), url.to_string(), found.clone())));
    }
    found
}

/// `GET {url}/models` with the key, its status and body within
/// `timeout_ms`: what the health probe and the model-list lookup ask.
async fn ask_models(
    url: &str,
    key: Option<&str>,
    timeout_ms: u32,
) -> Result<(spin_sdk::http::StatusCode, Vec<u8>), StageError> {
    let mut req = spin_sdk::http::Request::get(mneme_llm::models_url(url));
    if let Some(key) = key {
        req = req.header("authorization", format!("Bearer {key}"));
    }
    let req = req.body(String::new()).map_err(|e| error(ErrorCode::ModelError, e.to_string()))?;
    let call = async {
        let resp = spin_sdk::http::send(req)
            .await
            .map_err(|e| error(ErrorCode::ModelError, format!("model endpoint: {e:?}")))?;
        let status = resp.status();
        Ok::<_, StageError>((status, read_capped(resp.into_body().stream()).await?))
    };
    match select(Box::pin(call), Box::pin(sleep_ms(timeout_ms))).await {
        Either::Left((answer, _)) => answer,
        Either::Right(_) => Err(error(ErrorCode::ModelTimeout, format!("no answer within {timeout_ms} ms"))),
    }
}

/// The longest the endpoint has to list its models.
const LIST_TIMEOUT_MS: u32 = 3_000;

/// One completion through Spin's `llm` interface. The call is the
/// platform's and returns whole: no streaming, and the platform's own
/// timeouts (D-C20).
fn spin_infer(c: &Config, req: &CompletionRequest) -> Result<Completion, StageError> {
    let model = match req.tier {
        Tier::Primary => c.primary.clone(),
        Tier::Light => c.light.clone(),
    };
    let messages: Vec<Message> = req.messages.iter().map(|m| Message::new(role(&m.role), m.content.clone())).collect();
    let prompt = mneme_llm::flatten_prompt(&messages, req.json);
    let started = Instant::now();
    let options = spin_sdk::llm::InferencingParams {
        max_tokens: req.max_tokens.unwrap_or(800),
        temperature: req.temperature.unwrap_or(0.8),
        ..Default::default()
    };
    let r = spin_sdk::llm::infer_with_options(spin_sdk::llm::InferencingModel::Other(&model), &prompt, options)
        .map_err(|e| error(ErrorCode::ModelError, format!("Spin llm interface: {e:?}")))?;
    let waited = started.elapsed();
    Ok(Completion {
        text: mneme_llm::storable(&r.text),
        model,
        prompt_tokens: r.usage.prompt_token_count,
        cached_tokens: 0,
        completion_tokens: r.usage.generated_token_count,
        took_ms: waited.as_millis() as u32,
        wait_us: waited.as_micros() as u64,
    })
}

fn role(r: &str) -> Role {
    match r {
        "system" => Role::System,
        "assistant" => Role::Assistant,
        _ => Role::User,
    }
}

impl Guest for Stage {
    async fn status(timeout_ms: u32) -> ModelStatus {
        let c = config(timeout_ms).await;
        ModelStatus { configured: c.configured(), primary: c.primary, light: c.light }
    }

    async fn probe(timeout_ms: u32) -> Result<u32, StageError> {
        thread_local! {
            // (when, outcome) of the last probe: an instance serving many
            // `/health` calls asks the endpoint at most every 5 s.
            static LAST: std::cell::RefCell<Option<(Instant, Result<u32, StageError>)>> = const { std::cell::RefCell::new(None) };
        }
        if let Some(kept) = LAST.with_borrow(|l| l.clone().filter(|(at, _)| at.elapsed() < PROBE_KEPT)) {
            return kept.1;
        }
        let outcome = probe_now(timeout_ms).await;
        LAST.set(Some((Instant::now(), outcome.clone())));
        outcome
    }

    async fn complete(req: CompletionRequest) -> Result<Completion, StageError> {
        // The caller's deadline counts from here: a model-list lookup in
        // `config` spends it too (#50 item 6).
        let started = Instant::now();
        let c = config(req.timeout_ms).await;
        if c.spin && c.configured() {
            return spin_infer(&c, &req);
        }
        let deadline_ms = req.timeout_ms;
        let first = left_of(deadline_ms, started)?;
        let (mut status, mut bytes, model) = send_once(&c, &req, first).await?;
        if req.schema.is_some() && mneme_llm::refuses_schema(status.as_u16(), &bytes) {
            // An endpoint without JSON Schema support: the same request,
            // asking only for a JSON object, in what is left of the time.
            let left = left_of(deadline_ms, started)?;
            let plain = CompletionRequest { schema: None, ..req.clone() };
            (status, bytes, _) = send_once(&c, &plain, left).await?;
        }
        // The whole answer is in: what follows is this stage's own work.
        let wait_us = started.elapsed().as_micros() as u64;
        if !status.is_success() {
            return Err(status_error(status, &bytes));
        }
        let answer = mneme_llm::parse_answer(&bytes).map_err(|e| error(ErrorCode::ModelError, e.to_string()))?;
        Ok(Completion {
            text: answer.text,
            model: if answer.model.is_empty() { model } else { answer.model },
            prompt_tokens: answer.usage.prompt_tokens,
            cached_tokens: answer.usage.cached_tokens,
            completion_tokens: answer.usage.completion_tokens,
            took_ms: started.elapsed().as_millis() as u32,
            wait_us,
        })
    }

    async fn complete_stream(
        req: CompletionRequest,
    ) -> (StreamReader<String>, FutureReader<Result<Completion, StageError>>) {
        let (mut deltas, deltas_rx) = wit_stream::new::<String>();
        let (outcome, outcome_rx) = wit_future::new::<Result<Completion, StageError>>(|| {
            Err(StageError::new(ErrorCode::ModelError, "the stream ended without an outcome"))
        });
        spin_sdk::wasip3::spawn(async move {
            let result = stream_into(&req, &mut deltas).await;
            drop(deltas);
            let _ = outcome.write(result).await;
        });
        (deltas_rx, outcome_rx)
    }
}

/// What is left of `deadline_ms` since `started`; none left is a timeout.
fn left_of(deadline_ms: u32, started: Instant) -> Result<u32, StageError> {
    match deadline_ms.saturating_sub(started.elapsed().as_millis() as u32) {
        0 => Err(error(ErrorCode::ModelTimeout, format!("no answer within {deadline_ms} ms"))),
        left => Ok(left),
    }
}

/// One non-streamed request within `timeout_ms`: its status, its body and
/// the model it named.
async fn send_once(
    c: &Config,
    req: &CompletionRequest,
    timeout_ms: u32,
) -> Result<(spin_sdk::http::StatusCode, Vec<u8>, String), StageError> {
    let (http, model) = prepare(c, req, false)?;
    let call = async {
        let resp = spin_sdk::http::send(http)
            .await
            .map_err(|e| error(ErrorCode::ModelError, format!("model endpoint: {e:?}")))?;
        let status = resp.status();
        let bytes = read_capped(resp.into_body().stream()).await?;
        Ok::<_, StageError>((status, bytes))
    };
    match select(Box::pin(call), Box::pin(sleep_ms(timeout_ms))).await {
        Either::Left((answer, _)) => answer.map(|(s, b)| (s, b, model)),
        Either::Right(_) => Err(error(ErrorCode::ModelTimeout, format!("no answer within {timeout_ms} ms"))),
    }
}

/// How long a probe's outcome is kept.
const PROBE_KEPT: Duration = Duration::from_secs(5);

/// The most of a model's answer read into memory.
const MAX_ANSWER_BYTES: usize = 4 << 20;

/// Asks the endpoint for its models: a server that answers is up. It does
/// not look up which model to use, which would ask the same thing twice and
/// could wait out `timeout_ms` twice.
async fn probe_now(timeout_ms: u32) -> Result<u32, StageError> {
    let c = endpoint().await;
    let Some(url) = c.url.filter(|_| !c.spin) else {
        return Err(error(ErrorCode::ModelUnavailable, "no model endpoint is configured"));
    };
    let started = Instant::now();
    let (status, _) = ask_models(&url, c.key.as_deref(), timeout_ms).await?;
    if status.is_server_error() {
        return Err(error(ErrorCode::ModelError, format!("model endpoint answered {status}")));
    }
    Ok(started.elapsed().as_millis() as u32)
}

/// Reads a body of at most [`MAX_ANSWER_BYTES`].
async fn read_capped<C: AsRef<[u8]>, E: std::fmt::Debug>(
    mut stream: impl futures::Stream<Item = Result<C, E>> + Unpin,
) -> Result<Vec<u8>, StageError> {
    let mut bytes = Vec::new();
    while let Some(chunk) = stream.next().await {
        bytes.extend_from_slice(
            chunk.map_err(|e| error(ErrorCode::ModelError, format!("model endpoint body: {e:?}")))?.as_ref(),
        );
        if bytes.len() > MAX_ANSWER_BYTES {
            return Err(error(ErrorCode::ModelError, format!("the model's answer ran past {MAX_ANSWER_BYTES} bytes")));
        }
    }
    Ok(bytes)
}

fn sleep_ms(ms: u32) -> impl std::future::Future<Output = ()> {
    spin_sdk::time::sleep(Duration::from_millis(u64::from(ms.max(1))))
}

fn status_error(status: spin_sdk::http::StatusCode, body: &[u8]) -> StageError {
    let snippet: String = String::from_utf8_lossy(body).chars().take(200).collect();
    error(ErrorCode::ModelError, format!("model endpoint answered {status}: {snippet}"))
}

/// Builds the HTTP request for a completion; fails fast with
/// `model-unavailable` when no model is configured.
fn prepare(
    c: &Config,
    req: &CompletionRequest,
    stream: bool,
) -> Result<(spin_sdk::http::Request<String>, String), StageError> {
    let Some(url) = c.url.as_deref() else {
        return Err(error(ErrorCode::ModelUnavailable, "no model is configured (set the Spin variable llm_url)"));
    };
    let model = match req.tier {
        Tier::Primary => c.primary.clone(),
        Tier::Light => c.light.clone(),
    };
    if model.is_empty() {
        let why = c.unnamed.clone().unwrap_or_else(|| "the endpoint named no model".into());
        return Err(error(ErrorCode::ModelError, format!("llm_model is empty and {why}: set llm_model")));
    }
    let messages = req.messages.iter().map(|m| Message::new(role(&m.role), m.content.clone())).collect();
    let schema = match &req.schema {
        Some(text) => Some(
            serde_json::from_str(text)
                .map_err(|e| error(ErrorCode::Invalid, format!("the answer's schema is not JSON: {e}")))?,
        ),
        None => None,
    };
    let body = ChatRequest {
        model: model.clone(),
        messages,
        max_tokens: req.max_tokens,
        temperature: req.temperature,
        json: req.json,
        schema,
        stream,
    }
    .body();
    let mut http = spin_sdk::http::Request::post(mneme_llm::completions_url(url))
        .header("content-type", "application/json")
        .header("content-length", body.len());
    if stream {
        http = http.header("accept", "text/event-stream");
    }
    if let Some(key) = &c.key {
        http = http.header("authorization", format!("Bearer {key}"));
    }
    let http = http.body(body).map_err(|e| error(ErrorCode::ModelError, e.to_string()))?;
    Ok((http, model))
}

/// Sends a streamed completion and forwards each text delta into `out`.
/// A non-streaming answer (an endpoint that ignores `stream`) is forwarded
/// as one delta.
async fn stream_into(req: &CompletionRequest, out: &mut StreamWriter<String>) -> Result<Completion, StageError> {
    let started = Instant::now();
    let c = config(req.timeout_ms).await;
    if c.spin && c.configured() {
        let done = spin_infer(&c, req)?;
        if !done.text.is_empty() {
            out.write_one(done.text.clone()).await;
        }
        return Ok(done);
    }
    let (http, model) = prepare(&c, req, true)?;
    let timeout_ms = req.timeout_ms;
    // The head within what the lookup left of the deadline; each chunk after
    // it within the whole of it.
    let head_ms = left_of(timeout_ms, started)?;
    let resp = match select(Box::pin(spin_sdk::http::send(http)), Box::pin(sleep_ms(head_ms))).await {
        Either::Left((r, _)) => r.map_err(|e| error(ErrorCode::ModelError, format!("model endpoint: {e:?}")))?,
        Either::Right(_) => return Err(error(ErrorCode::ModelTimeout, format!("no answer within {timeout_ms} ms"))),
    };
    // Time waiting on the model: until the head, then each wait for a chunk.
    let mut waited = started.elapsed();
    let status = resp.status();
    let is_sse = resp
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/event-stream"));
    if !status.is_success() || !is_sse {
        let read_started = Instant::now();
        let bytes = read_capped(resp.into_body().stream()).await?;
        waited += read_started.elapsed();
        if !status.is_success() {
            return Err(status_error(status, &bytes));
        }
        let a = mneme_llm::parse_answer(&bytes).map_err(|e| error(ErrorCode::ModelError, e.to_string()))?;
        if !a.text.is_empty() {
            out.write_one(a.text.clone()).await;
        }
        return Ok(Completion {
            text: a.text,
            model: if a.model.is_empty() { model } else { a.model },
            prompt_tokens: a.usage.prompt_tokens,
            cached_tokens: a.usage.cached_tokens,
            completion_tokens: a.usage.completion_tokens,
            took_ms: started.elapsed().as_millis() as u32,
            wait_us: waited.as_micros() as u64,
        });
    }
    let mut body = resp.into_body().stream();
    let mut parser = StreamParser::new();
    let mut text = String::new();
    let mut pieces = 0u32;
    let mut usage: Option<mneme_llm::Usage> = None;
    loop {
        let asked = Instant::now();
        let next = select(Box::pin(body.next()), Box::pin(sleep_ms(timeout_ms))).await;
        waited += asked.elapsed();
        let chunk = match next {
            Either::Left((Some(c), _)) => {
                c.map_err(|e| error(ErrorCode::ModelError, format!("model stream: {e:?}")))?
            }
            Either::Left((None, _)) => break,
            Either::Right(_) => {
                return Err(error(ErrorCode::ModelTimeout, format!("the stream stalled for {timeout_ms} ms")));
            }
        };
        for ev in parser.feed(&chunk) {
            match ev {
                StreamEvent::Delta(d) => {
                    text.push_str(&d);
                    pieces += 1;
                    if out.write_one(d).await.is_some() {
                        // The reader went away: stop paying for tokens.
                        return Err(error(ErrorCode::ModelError, "the caller stopped reading"));
                    }
                }
                StreamEvent::Usage(u) => usage = Some(u),
                StreamEvent::Error(e) => return Err(error(ErrorCode::ModelError, e)),
                StreamEvent::Done => {}
            }
        }
        if parser.is_done() {
            break;
        }
    }
    // An endpoint that reports no usage: the pieces streamed stand in for
    // the tokens generated, and the prompt's are unknown.
    let usage = usage.unwrap_or(mneme_llm::Usage { completion_tokens: pieces, ..Default::default() });
    Ok(Completion {
        text,
        model,
        prompt_tokens: usage.prompt_tokens,
        cached_tokens: usage.cached_tokens,
        completion_tokens: usage.completion_tokens,
        took_ms: started.elapsed().as_millis() as u32,
        wait_us: waited.as_micros() as u64,
    })
}

export!(Stage);
