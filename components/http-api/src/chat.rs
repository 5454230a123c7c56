//! `POST /chat`: the message flow of design 002, wired across the stages.
//!
//! Validation happens before the stream opens (a 400 JSON error); then the
//! response is `text/event-stream` and the pipeline runs in a spawned task
//! that sends its frames through a channel. A writer task forwards them and
//! adds the keepalive comment (15 s), `status: still_working` (20 s) and the
//! hard timeout (360 s). Order: screen (intent, social filter) → Phase A →
//! Path A (social exit) or triage → Path B (tool work queued for the worker
//! behind `/tick/tools`, its reply awaited) or Path C (router → ACT loop →
//! generation) → Phase D commit → `message` → `done`.

use std::time::{Duration, Instant};

use futures::channel::mpsc;
use futures::future::{Either, select};
use futures::{SinkExt, StreamExt};
use mneme_conversation::act::{self, Action, Limits, LoopState, Termination};
use mneme_conversation::context::Assembled;
use mneme_conversation::generate::{self, ActResult, ReplySource};
use mneme_conversation::intent::Intent;
use mneme_conversation::social::SocialMode;
use mneme_conversation::triage::{self as tri, Triage};
use mneme_conversation::{Mode, router as rt};
use mneme_http::{ApiError, new_id, parse_json_body, sse};
use serde::Deserialize;
use serde_json::{Value, json};
use spin_sdk::http::body::IncomingBodyExt;
use spin_sdk::http::{Request, StatusCode};

use crate::clock;
use crate::mneme::act::act as act_stage;
use crate::mneme::commit::commit;
use crate::mneme::context::context;
use crate::mneme::llm::llm::{self, ChatMessage, Completion, CompletionRequest, Tier};
use crate::mneme::router::router;
use crate::mneme::triage::triage;
use crate::mneme::types::types::StageError;
use crate::{Reply, err, reply};

/// Longest accepted message, in characters.
pub const MAX_TEXT_CHARS: usize = 32_000;
/// Largest accepted `/chat` body.
pub const MAX_BODY_BYTES: usize = 256 * 1024;
const KEEPALIVE_MS: u64 = 15_000;
const STILL_WORKING_MS: u64 = 20_000;
const HARD_TIMEOUT_MS: u64 = 360_000;
/// Budget of one ACT planning call and of generation's first token.
const PLAN_TIMEOUT_MS: u32 = 10_000;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Body {
    text: Option<Value>,
    thread_id: Option<Value>,
    source: Option<Value>,
    /// Accepted and ignored (clients send it; attachments are not supported yet).
    #[allow(dead_code)]
    attachments: Option<Value>,
}

struct Message {
    text: String,
    thread_id: String,
    source: String,
}

fn bad(code: &str, message: impl Into<String>) -> ApiError {
    ApiError::new(StatusCode::BAD_REQUEST, code, message)
}

fn validate(bytes: &[u8]) -> Result<Message, ApiError> {
    if bytes.len() > MAX_BODY_BYTES {
        return Err(bad("body-too-large", format!("the body is over {MAX_BODY_BYTES} bytes")));
    }
    let b: Body = parse_json_body(bytes)?;
    let text = match b.text {
        Some(Value::String(t)) => t.trim().to_string(),
        Some(_) => return Err(bad("invalid", "`text` must be a string")),
        None => return Err(bad("missing-text", "`text` is required")),
    };
    if text.is_empty() {
        return Err(bad("empty-text", "`text` is empty"));
    }
    if text.chars().count() > MAX_TEXT_CHARS {
        return Err(bad("text-too-long", format!("`text` is over {MAX_TEXT_CHARS} characters")));
    }
    let thread_id = match b.thread_id {
        None | Some(Value::Null) => "default".to_string(),
        Some(Value::String(t)) => {
            let ok =
                !t.is_empty() && t.len() <= 128 && t.chars().all(|c| c.is_ascii_alphanumeric() || "._:-".contains(c));
            if !ok {
                return Err(bad(
                    "invalid-thread-id",
                    "`thread_id` is 1–128 characters of letters, digits, `.`, `_`, `:` and `-`",
                ));
            }
            t
        }
        Some(_) => return Err(bad("invalid-thread-id", "`thread_id` must be a string")),
    };
    let source = match b.source {
        None | Some(Value::Null) => "text".to_string(),
        Some(Value::String(s)) if s == "text" || s == "voice" => s,
        Some(_) => return Err(bad("invalid-source", "`source` is `text` or `voice`")),
    };
    Ok(Message { text, thread_id, source })
}

pub async fn handle(req: Request) -> Reply {
    let now = clock::now_ms(req.headers()).await;
    let bytes = match req.into_body().bytes().await {
        Ok(b) => b,
        Err(e) => return err(bad("invalid-body", format!("the body could not be read: {e:?}"))),
    };
    let msg = match validate(&bytes) {
        Ok(m) => m,
        Err(e) => return err(e),
    };
    let request_id = new_id();
    let (frames, rx) = mpsc::unbounded::<Frame>();
    let (tx, body) = spin_sdk::http::body::stream::<String>();
    spin_sdk::wasip3::spawn(writer(rx, tx));
    let rid = request_id.clone();
    spin_sdk::wasip3::spawn(async move {
        let mut out = Out { frames };
        out.raw(sse::retry(3000));
        out.event("status", json!({"stage": "processing"}));
        let started = clock::system_ms();
        match pipeline(&mut out, &msg, &rid, now).await {
            Ok((model_us, steps)) => {
                let d = clock::system_ms().saturating_sub(started);
                // Milliseconds to the µs: the time spent waiting on models.
                let model_ms = model_us as f64 / 1000.0;
                out.event("done", json!({"duration_ms": d, "model_ms": model_ms, "steps": steps}));
            }
            Err(e) => {
                out.event("error", json!({"message": format!("{}: {}", e.code, e.message), "recoverable": e.code.contains("unavailable")}));
                out.event("done", json!({"duration_ms": clock::system_ms().saturating_sub(started)}));
            }
        }
        out.close();
    });
    reply(
        spin_sdk::http::Response::builder()
            .status(200)
            .header("content-type", "text/event-stream")
            .header("cache-control", "no-cache")
            .header("x-accel-buffering", "no")
            .header("x-request-id", request_id)
            .body(body)
            .expect("static parts"),
    )
}

enum Frame {
    Raw(String),
    Status(String),
    /// Answers whether the client is still reading (see [`Out::confirm`]).
    Confirm(futures::channel::oneshot::Sender<()>),
    Close,
}

/// The pipeline's side of the stream.
struct Out {
    frames: mpsc::UnboundedSender<Frame>,
}

impl Out {
    fn raw(&mut self, s: String) {
        let _ = self.frames.unbounded_send(Frame::Raw(s));
    }
    fn event(&mut self, name: &str, data: Value) {
        let f = sse::event(name, &data.to_string());
        let _ = self.frames.unbounded_send(if name == "status" { Frame::Status(f) } else { Frame::Raw(f) });
    }
    fn close(&mut self) {
        let _ = self.frames.unbounded_send(Frame::Close);
    }
    /// The client went away (the writer stopped).
    fn gone(&self) -> bool {
        self.frames.is_closed()
    }
    /// Whether the client is still reading once everything sent so far is
    /// out. A socket the client closed still takes the first write after
    /// the close (the reset comes back afterwards), so the writer sends two
    /// comments, [`CONFIRM_GAP_MS`] apart, after what came before; the
    /// answer is yes only if both went out.
    async fn confirm(&mut self) -> bool {
        let (ack, acked) = futures::channel::oneshot::channel();
        if self.frames.unbounded_send(Frame::Confirm(ack)).is_err() {
            return false;
        }
        acked.await.is_ok()
    }
}

/// Forwards frames to the client, adding keepalives and `still_working`,
/// and ends the stream at the hard timeout.
async fn writer(mut rx: mpsc::UnboundedReceiver<Frame>, mut tx: impl futures::Sink<String> + Unpin) {
    let started = clock::system_ms();
    let (mut last_write, mut last_status) = (started, started);
    loop {
        let tick = spin_sdk::time::sleep(Duration::from_millis(1000));
        match select(rx.next(), Box::pin(tick)).await {
            Either::Left((Some(Frame::Close), _)) | Either::Left((None, _)) => break,
            Either::Left((Some(f), _)) => {
                let now = clock::system_ms();
                let s = match f {
                    Frame::Status(s) => {
                        last_status = now;
                        s
                    }
                    Frame::Raw(s) => s,
                    Frame::Confirm(ack) => {
                        for _ in 0..2 {
                            spin_sdk::time::sleep(Duration::from_millis(CONFIRM_GAP_MS)).await;
                            if tx.send(sse::comment("delivered")).await.is_err() {
                                return;
                            }
                        }
                        let _ = ack.send(());
                        last_write = clock::system_ms();
                        continue;
                    }
                    Frame::Close => unreachable!(),
                };
                if tx.send(s).await.is_err() {
                    return;
                }
                last_write = now;
            }
            Either::Right(_) => {
                let now = clock::system_ms();
                if now.saturating_sub(started) >= HARD_TIMEOUT_MS {
                    let e =
                        sse::event("error", &json!({"message": "Request timed out", "recoverable": true}).to_string());
                    let d = sse::event("done", &json!({"duration_ms": now - started}).to_string());
                    let _ = tx.send(e).await;
                    let _ = tx.send(d).await;
                    return;
                }
                if now.saturating_sub(last_status) >= STILL_WORKING_MS {
                    if tx.send(sse::event("status", &json!({"stage": "still_working"}).to_string())).await.is_err() {
                        return;
                    }
                    last_status = now;
                    last_write = now;
                } else if now.saturating_sub(last_write) >= KEEPALIVE_MS {
                    if tx.send(sse::comment("keepalive")).await.is_err() {
                        return;
                    }
                    last_write = now;
                }
            }
        }
    }
}

fn decode<T: serde::de::DeserializeOwned>(s: &str) -> Result<T, StageError> {
    serde_json::from_str(s).map_err(|e| StageError { code: "internal".into(), message: format!("stage answer: {e}") })
}

fn msgs(v: Vec<mneme_llm::Message>) -> Vec<ChatMessage> {
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

fn system_user(system: &str, user: String) -> Vec<ChatMessage> {
    vec![
        ChatMessage { role: "system".into(), content: system.trim().into() },
        ChatMessage { role: "user".into(), content: user },
    ]
}

#[derive(Deserialize)]
struct Screen {
    intent: Intent,
    social: Option<SocialMode>,
}

/// Runs the pipeline; returns the milliseconds spent waiting on models.
/// Milliseconds per pipeline step, reported in the `done` event.
struct Steps {
    at: u64,
    list: serde_json::Map<String, Value>,
}

impl Steps {
    fn start() -> Self {
        Steps { at: clock::system_ms(), list: Default::default() }
    }
    fn mark(&mut self, name: &str) {
        let now = clock::system_ms();
        let prev = self.list.get(name).and_then(Value::as_u64).unwrap_or(0);
        self.list.insert(name.into(), json!(prev + now.saturating_sub(self.at)));
        self.at = now;
    }
}

/// Runs the pipeline; returns the milliseconds spent waiting on models and
/// the time of each step.
async fn pipeline(out: &mut Out, msg: &Message, request_id: &str, now: u64) -> Result<(u64, Value), StageError> {
    let mut steps = Steps::start();
    let r = pipeline_steps(out, msg, request_id, now, &mut steps).await?;
    Ok((r, Value::Object(steps.list)))
}

async fn pipeline_steps(
    out: &mut Out,
    msg: &Message,
    request_id: &str,
    now: u64,
    steps: &mut Steps,
) -> Result<u64, StageError> {
    let exchange_id = new_id();
    // µs spent waiting on a model (see `model_wait_us`).
    let mut model_us = 0u64;
    let started = clock::system_ms();

    // Phase B, layer 1 and step 2a, first: a social exit skips the embedding.
    // Intent is classified here once; Phase A's warmth adjusts it after.
    let screen: Screen = decode(&triage::screen(json!({"text": msg.text}).to_string()).await?)?;
    steps.mark("screen");
    let ctx: Assembled = decode(
        &context::assemble(
            json!({"thread_id": msg.thread_id, "text": msg.text, "now_ms": now, "light": screen.social.is_some()})
                .to_string(),
        )
        .await?,
    )?;

    steps.mark("context");
    if let Some(social) = screen.social {
        // Path A: the social exit, no model call at all.
        let (mode, text) = social_reply(social, &msg.text, &ctx);
        let confidence = screen.intent.confidence;
        let committed = commit_exchange(
            msg,
            request_id,
            &exchange_id,
            &ctx,
            mode,
            &text,
            confidence,
            "social",
            &[],
            now,
            started,
            None,
            true,
        )
        .await?;
        out.event("message", json!({"text": text, "topic": ctx.topic, "mode": mode, "confidence": confidence, "exchange_id": committed, "source": "social"}));
        steps.mark("commit");
        return Ok(0);
    }

    // Model time counts the embedding model as well as the language model.
    model_us += ctx.embed_us;
    out.event("status", json!({"stage": "thinking"}));
    let intent: Intent = screen.intent.clone().with_warmth(ctx.warmth);

    // Step 2b: the triage model, 500 ms, then the heuristic.
    let input = tri::Input {
        text: msg.text.clone(),
        previous_mode: ctx.previous_mode,
        previous_tools: ctx.previous_tools.clone(),
        recent_turns: ctx
            .turns
            .iter()
            .rev()
            .take(4)
            .rev()
            .map(|t| tri::Turn { role: t.role.clone(), content: t.content.clone() })
            .collect(),
        warmth: ctx.warmth,
        memory_confidence: ctx.memory_confidence,
        gist_count: ctx.gists.len(),
        fact_count: ctx.facts.len(),
        tools: configured_tools().await?,
    };
    let messages = system_user(tri::PROMPT, tri::user_message(&input));
    let t0 = clock::system_ms();
    let call = Instant::now();
    let answer = llm::complete(CompletionRequest {
        tier: Tier::Light,
        messages,
        max_tokens: Some(300),
        temperature: Some(0.1),
        json: true,
        timeout_ms: tri::TIMEOUT_MS,
    })
    .await;
    let took = clock::system_ms().saturating_sub(t0);
    model_us += model_wait_us(&answer, call);
    let (ans, error) = match answer {
        Ok(c) => (Some(c.text), None),
        Err(e) => (None, Some(e.code)),
    };
    let triaged: Triage = decode(
        &triage::decide(
            json!({"input": input, "answer": ans, "error": error, "took_ms": took, "exchange_id": exchange_id,
                    "thread_id": msg.thread_id, "topic": ctx.topic, "now_ms": now})
            .to_string(),
        )
        .await?,
    )?;

    steps.mark("triage");
    // Path B: triage chose to act with tools (named, or relevant to the
    // message when it named none but tools exist; D-C19).
    if triaged.mode == Mode::Act {
        // Relevance only when triage left nothing else to act with: a
        // contextual skill (a reminder, a list) is the message's own ask.
        let contextual = triaged.skills.iter().any(|s| !tri::PRIMITIVES.contains(&s.as_str()));
        let tools = if !triaged.tools.is_empty() {
            triaged.tools.clone()
        } else if !input.tools.is_empty() && !contextual {
            relevant_tools(&msg.text).await?
        } else {
            Vec::new()
        };
        if !tools.is_empty() {
            let waited = path_b(out, msg, request_id, &exchange_id, &ctx, &intent, &tools, now).await?;
            steps.mark("tool_work");
            return Ok(model_us + waited * 1000);
        }
    }

    // Path C: the mode router decides unless triage chose to act.
    let mut router_confidence = 1.0;
    let mut mode = if triaged.mode == Mode::Act {
        Mode::Act
    } else {
        let (m, c, us) = route(msg, &ctx, &intent, None, false, &exchange_id, now).await?;
        router_confidence = c;
        model_us += us;
        m
    };

    let mut act_results: Vec<ActResult> = Vec::new();
    if mode == Mode::Act {
        let (results, us) = act_loop(out, msg, &ctx, &triaged, &exchange_id, now).await?;
        model_us += us;
        act_results = results;
        // Re-route to a terminal mode: previous mode ACT, no tie-breaker.
        let (m, c, _) = route(msg, &ctx, &intent, Some(Mode::Act), true, &exchange_id, now).await?;
        router_confidence = c;
        mode = m;
        // Having acted, the reply reports what was done: any successful
        // action makes the terminal mode RESPOND (D-C8).
        let succeeded = act_results.iter().any(|r| r.status == "success");
        if mode == Mode::Act || (succeeded && mode != Mode::Respond) {
            mode = Mode::Respond;
        }
    }

    steps.mark("route_and_act");
    // Generation.
    let gen_started = clock::system_ms();
    let (text, source) = if mode == Mode::Ignore {
        (String::new(), ReplySource::Model)
    } else {
        generate(out, mode, &ctx, &msg.text, &act_results, &mut model_us).await
    };
    let generation_ms = clock::system_ms().saturating_sub(gen_started);
    let confidence = generate::confidence(ctx.memory_confidence, router_confidence, source);
    let source_label = match source {
        ReplySource::Model => "model",
        ReplySource::RuleBased => "rule-based",
        ReplySource::Social => "social",
    };
    steps.mark("generate");
    let committed = commit_exchange(
        msg,
        request_id,
        &exchange_id,
        &ctx,
        mode,
        &text,
        confidence,
        source_label,
        &triaged.tools,
        now,
        started,
        Some(generation_ms),
        false,
    )
    .await?;
    out.event(
        "message",
        json!({"text": text, "topic": ctx.topic, "mode": mode, "confidence": confidence, "exchange_id": committed, "source": source_label}),
    );
    steps.mark("commit");
    Ok(model_us)
}

/// The time one model call spent waiting on the model, in µs: what the
/// llm stage measured around the wire, or, for a call that failed, the
/// whole call (it failed waiting, or at once).
fn model_wait_us(answer: &Result<Completion, StageError>, call: Instant) -> u64 {
    match answer {
        Ok(c) => c.wait_us,
        Err(_) => call.elapsed().as_micros() as u64,
    }
}

/// The configured tools, as triage reads them: `(name, description)`.
async fn configured_tools() -> Result<Vec<(String, String)>, StageError> {
    let v: Value = decode(&act_stage::list_tools("{}".into()).await?)?;
    Ok(v["tools"]
        .as_array()
        .map(|ts| {
            ts.iter()
                .filter_map(|t| Some((t["name"].as_str()?.to_string(), t["description"].as_str()?.to_string())))
                .collect()
        })
        .unwrap_or_default())
}

/// The tools whose description is close to the message.
async fn relevant_tools(text: &str) -> Result<Vec<String>, StageError> {
    let v: Value = decode(&act_stage::relevant_tools(json!({"text": text}).to_string()).await?)?;
    Ok(v["tools"]
        .as_array()
        .map(|ts| ts.iter().filter_map(|t| t["name"].as_str().map(String::from)).collect())
        .unwrap_or_default())
}

/// How long the stream waits for the tool worker's reply before leaving
/// it to `/events` (variable `chat_tool_wait_ms`, default 60 s, at most
/// 300 s so the stream ends well before the hard timeout).
async fn tool_wait_ms() -> u64 {
    spin_sdk::variables::get("chat_tool_wait_ms")
        .await
        .ok()
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map_or(60_000, |ms| ms.min(300_000))
}

/// Path B (§5): the cycle record, the job on `tool-queue` with
/// `sse_pending:{request_id}`, then the wait for the tool worker's reply.
/// It reaches this stream when it is ready in time, else `/events` (a
/// `tool_result` event). Returns the time spent waiting.
#[allow(clippy::too_many_arguments)]
async fn path_b(
    out: &mut Out,
    msg: &Message,
    request_id: &str,
    exchange_id: &str,
    ctx: &Assembled,
    intent: &Intent,
    tools: &[String],
    now: u64,
) -> Result<u64, StageError> {
    let cycle_id = new_id();
    let queued: Vec<Value> = tools.iter().map(|t| json!({"type": t, "params": {}})).collect();
    act_stage::log_iteration(
        json!({"loop_id": cycle_id, "exchange_id": exchange_id, "iteration_number": 0, "actions": queued,
               "results": [], "execution_time_ms": 0, "cost": 0.0, "fatigue": 0.0,
               "mode": "ACT (Path B: tool work queued)", "termination_reason": null, "now_ms": now})
        .to_string(),
    )
    .await?;
    let payload = json!({
        "cycle_id": cycle_id, "request_id": request_id, "exchange_id": exchange_id, "thread_id": msg.thread_id,
        "source": msg.source, "text": msg.text, "topic": ctx.topic, "intent": intent, "tools": tools,
        "context_snapshot": {"warmth": ctx.warmth, "tool_hints": tools, "exchange_id": exchange_id},
        "context": ctx, "now_ms": now,
    });
    let (started, wait) = (clock::system_ms(), tool_wait_ms().await);
    let queued: Value = decode(
        &act_stage::enqueue_tool_work(
            json!({"request_id": request_id, "payload": payload, "now_ms": now,
                   "deliver_by_ms": started + wait + DELIVERY_MARGIN_MS})
            .to_string(),
        )
        .await?,
    )?;
    let Some(job_id) = queued["job_id"].as_i64() else {
        return Err(StageError { code: "internal".into(), message: "the tool job got no id".into() });
    };
    out.event("status", json!({"stage": "tools", "tools": tools, "job_id": job_id}));
    loop {
        // A client that went away cannot take the reply: /events will.
        let gone = out.gone();
        let give_up = clock::system_ms().saturating_sub(started) >= wait || gone;
        let taken: Value = decode(
            &act_stage::take_tool_reply(
                json!({"job_id": job_id, "request_id": request_id, "give_up": give_up, "gone": gone}).to_string(),
            )
            .await?,
        )?;
        match taken["state"].as_str() {
            Some("chat") => {
                let r = &taken["result"];
                if taken["status"] == "done" && r["text"].is_string() {
                    out.event(
                        "message",
                        json!({"text": r["text"], "topic": r["topic"], "mode": r["mode"], "confidence": r["confidence"],
                               "exchange_id": r["exchange_id"], "source": r["source"]}),
                    );
                    // The client may have gone just before the reply was
                    // taken for it: then /events gets it after all.
                    if !out.confirm().await {
                        act_stage::take_tool_reply(
                            json!({"job_id": job_id, "request_id": request_id, "give_up": true, "gone": true})
                                .to_string(),
                        )
                        .await?;
                    }
                } else {
                    let why = r["error"].as_str().unwrap_or("the tool worker failed");
                    out.event(
                        "error",
                        json!({"message": format!("The tools could not finish: {why}."), "recoverable": true}),
                    );
                }
                break;
            }
            Some("gone") => {
                out.event(
                    "error",
                    json!({"message": "The tool work was deleted before it finished; send the message again.", "recoverable": true}),
                );
                break;
            }
            Some("events") => {
                out.event(
                    "status",
                    json!({"stage": "deferred", "job_id": job_id,
                           "detail": "the tools are still working; the reply will arrive on /events as a tool_result event"}),
                );
                break;
            }
            _ => {
                // A comment each poll: a client that went away is noticed
                // within one poll, before the reply is taken for it.
                out.raw(sse::comment("waiting for the tools"));
                spin_sdk::time::sleep(Duration::from_millis(TOOL_POLL_MS)).await
            }
        }
    }
    Ok(clock::system_ms().saturating_sub(started))
}

/// The gap between the two comments that confirm a client still reads.
const CONFIRM_GAP_MS: u64 = 100;

/// How often the stream looks for the tool worker's reply.
const TOOL_POLL_MS: u64 = 200;
/// Past the stream's wait by this much, a reply nobody took goes to
/// `/events` (the stream is gone).
const DELIVERY_MARGIN_MS: u64 = 10_000;

/// The deterministic replies of the social exit (D-C7).
fn social_reply(social: SocialMode, text: &str, ctx: &Assembled) -> (Mode, String) {
    match social {
        SocialMode::Acknowledge => {
            let reply = if mneme_conversation::intent::is_greeting(text) {
                match &ctx.name {
                    Some(n) => format!("Hello, {n}."),
                    None => "Hello.".to_string(),
                }
            } else {
                "Glad that helped.".to_string()
            };
            (Mode::Acknowledge, reply)
        }
        SocialMode::Cancel => (Mode::Cancel, String::new()),
        SocialMode::Ignore => (Mode::Ignore, String::new()),
    }
}

/// Routes, asks the tie-breaker when the top two are within the margin, and
/// records the decision. Returns the mode, router confidence and model time.
async fn route(
    msg: &Message,
    ctx: &Assembled,
    intent: &Intent,
    previous: Option<Mode>,
    skip_tiebreaker: bool,
    exchange_id: &str,
    now: u64,
) -> Result<(Mode, f64, u64), StageError> {
    let t0 = clock::system_ms();
    let routed: Value = decode(
        &router::route(json!({"text": msg.text, "context": ctx, "intent": intent, "previous_mode": previous, "skip_tiebreaker": skip_tiebreaker})
                .to_string(),
        )
        .await?,
    )?;
    let mut model_us = 0;
    let mut answer = None;
    if let Some(m) = routed["tiebreak_message"].as_str() {
        let messages = system_user(rt::TIEBREAKER_PROMPT, m.to_string());
        let call = Instant::now();
        let asked = llm::complete(CompletionRequest {
            tier: Tier::Light,
            messages,
            max_tokens: Some(20),
            temperature: Some(0.0),
            json: true,
            timeout_ms: rt::TIEBREAKER_TIMEOUT_MS,
        })
        .await;
        model_us = model_wait_us(&asked, call);
        answer = asked.ok().map(|c| c.text);
    }
    let routing_ms = clock::system_ms().saturating_sub(t0).saturating_sub(model_us / 1000);
    let recorded: Value = decode(
        &router::record_decision(
            json!({"routed": routed, "tiebreak_answer": answer, "exchange_id": exchange_id, "thread_id": msg.thread_id,
                    "topic": ctx.topic, "routing_time_ms": routing_ms, "now_ms": now})
            .to_string(),
        )
        .await?,
    )?;
    let mode = serde_json::from_value::<Mode>(recorded["mode"].clone())
        .map_err(|e| StageError { code: "internal".into(), message: format!("router answer: {e}") })?;
    Ok((mode, recorded["router_confidence"].as_f64().unwrap_or(0.0), model_us))
}

/// The ACT loop: plan (model, or rules without one), check termination,
/// dispatch, grow fatigue, log the iteration.
async fn act_loop(
    out: &mut Out,
    msg: &Message,
    ctx: &Assembled,
    triaged: &Triage,
    exchange_id: &str,
    now: u64,
) -> Result<(Vec<ActResult>, u64), StageError> {
    let limits = Limits::default();
    let loop_id = new_id();
    let mut state = LoopState::default();
    let mut results: Vec<ActResult> = Vec::new();
    let mut model_us = 0;
    let mut rule_based = false;
    let loop_started = clock::system_ms();
    loop {
        let it_started = clock::system_ms();
        state.elapsed_ms = it_started.saturating_sub(loop_started);
        let plan: Vec<Action> = if rule_based {
            act::rule_plan(&msg.text, &triaged.skills, state.iteration, now)
        } else {
            let history = results
                .iter()
                .map(|r| format!("- {} ({}): {}", r.action_type, r.status, r.result))
                .collect::<Vec<_>>()
                .join("\n");
            let user = format!(
                "Message: {}\nSkills suggested by triage: {}\nActions already run:\n{}",
                msg.text,
                triaged.skills.join(", "),
                if history.is_empty() { "(none)".into() } else { history }
            );
            let messages = system_user(act::PROMPT, user);
            let call = Instant::now();
            let answer = llm::complete(CompletionRequest {
                tier: Tier::Primary,
                messages,
                max_tokens: Some(600),
                temperature: Some(0.2),
                json: true,
                timeout_ms: PLAN_TIMEOUT_MS,
            })
            .await;
            model_us += model_wait_us(&answer, call);
            match answer.map(|c| act::parse_plan(&c.text)) {
                Ok(Ok(p)) => p,
                Ok(Err(_)) | Err(_) if state.iteration == 0 => {
                    // No usable plan from the model: the rules plan instead (labelled in the log).
                    rule_based = true;
                    act::rule_plan(&msg.text, &triaged.skills, 0, now)
                }
                _ => Vec::new(),
            }
        };
        state.elapsed_ms = clock::system_ms().saturating_sub(loop_started);
        if let Some(reason) = state.check(&plan, &limits) {
            log_iteration(&loop_id, exchange_id, &state, &plan, &[], 0, 0.0, Some(reason), rule_based, now).await?;
            break;
        }
        out.event(
            "status",
            json!({"stage": "acting", "iteration": state.iteration + 1, "actions": plan.iter().map(|a| a.kind.clone()).collect::<Vec<_>>()}),
        );
        let dispatched: Vec<ActResult> = decode(
            &act_stage::dispatch(
                json!({"actions": plan, "thread_id": msg.thread_id, "topic": ctx.topic, "now_ms": now,
                        "per_action_timeout_ms": limits.per_action_timeout_ms})
                .to_string(),
            )
            .await?,
        )?;
        let took = clock::system_ms().saturating_sub(it_started);
        // Elapsed time is re-read from the clock before each check.
        let cost = state.record(&plan, 0, &limits);
        log_iteration(&loop_id, exchange_id, &state, &plan, &dispatched, took, cost, None, rule_based, now).await?;
        results.extend(dispatched);
    }
    Ok((results, model_us))
}

#[allow(clippy::too_many_arguments)]
async fn log_iteration(
    loop_id: &str,
    exchange_id: &str,
    state: &LoopState,
    plan: &[Action],
    results: &[ActResult],
    took_ms: u64,
    cost: f64,
    reason: Option<Termination>,
    rule_based: bool,
    now: u64,
) -> Result<(), StageError> {
    let termination = reason.and_then(|r| serde_json::to_value(r).ok()).and_then(|v| v.as_str().map(String::from));
    act_stage::log_iteration(json!({"loop_id": loop_id, "exchange_id": exchange_id, "iteration_number": state.iteration, "actions": plan,
                "results": results, "execution_time_ms": took_ms, "cost": cost, "fatigue": state.fatigue,
                "mode": if rule_based { "ACT (rule-based plan)" } else { "ACT" }, "termination_reason": termination, "now_ms": now})
        .to_string(),
    )
    .await
    .map(|_| ())
}

/// Generates the reply, streaming tokens; falls back to the rules.
async fn generate(
    out: &mut Out,
    mode: Mode,
    ctx: &Assembled,
    text: &str,
    act: &[ActResult],
    model_us: &mut u64,
) -> (String, ReplySource) {
    let messages = msgs(generate::messages(mode, ctx, text, act));
    let call = Instant::now();
    let (mut deltas, outcome) = llm::complete_stream(CompletionRequest {
        tier: Tier::Primary,
        messages,
        max_tokens: Some(800),
        temperature: Some(generate::TEMPERATURE),
        json: false,
        timeout_ms: generate::TIMEOUT_MS,
    })
    .await;
    let mut streamed = String::new();
    while let Some(d) = deltas.next().await {
        if !d.is_empty() {
            out.event("token", json!({"text": d}));
            streamed.push_str(&d);
        }
    }
    let result = outcome.await;
    *model_us += model_wait_us(&result, call);
    match result {
        Ok(c) => {
            let cleaned = generate::clean(&c.text);
            if cleaned.is_empty() {
                (generate::fallback(mode, ctx, text, act, "empty answer"), ReplySource::RuleBased)
            } else {
                (cleaned, ReplySource::Model)
            }
        }
        Err(e) if !streamed.trim().is_empty() => {
            out.event("error", json!({"message": format!("the model stopped early ({}); the reply may be incomplete", e.code), "recoverable": true}));
            (generate::clean(&streamed), ReplySource::Model)
        }
        Err(e) => (generate::fallback(mode, ctx, text, act, &e.code), ReplySource::RuleBased),
    }
}

#[allow(clippy::too_many_arguments)]
async fn commit_exchange(
    msg: &Message,
    request_id: &str,
    exchange_id: &str,
    ctx: &Assembled,
    mode: Mode,
    reply: &str,
    confidence: f64,
    reply_source: &str,
    tools: &[String],
    now: u64,
    started: u64,
    generation_ms: Option<u64>,
    fast_path: bool,
) -> Result<String, StageError> {
    let r: Value = decode(
        &commit::commit(json!({"exchange_id": exchange_id, "request_id": request_id, "thread_id": msg.thread_id, "source": msg.source,
                    "text": msg.text, "reply": reply, "mode": mode, "confidence": confidence, "reply_source": reply_source,
                    "topic": ctx.topic, "previous_topic": ctx.previous_topic, "tools": tools, "now_ms": now,
                    "duration_ms": clock::system_ms().saturating_sub(started), "generation_ms": generation_ms, "fast_path": fast_path})
            .to_string(),
        )
        .await?,
    )?;
    Ok(r["exchange_id"].as_str().unwrap_or(exchange_id).to_string())
}
