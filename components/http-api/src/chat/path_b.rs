//! Path B (002 §5, D-C19): triage chose to act with tools. The job goes on
//! `tool-queue` for the worker behind `/tick/tools`, and the stream waits
//! for its reply, or leaves it to `/events`.

use std::time::Duration;

use mneme_conversation::context::Assembled;
use mneme_conversation::intent::Intent;
use mneme_entry::tool_job::{ContextSnapshot, ToolJob};
use mneme_http::{new_id, sse};
use mneme_types::conversation::{Action, Iteration, Taken};
use serde_json::json;

use super::request::Exchange;
use super::stream::Out;
use crate::mneme::act::act as act_stage;
use mneme_entry::clock;
use mneme_types::StageError;

/// How often the stream looks for the tool worker's reply.
const TOOL_POLL_MS: u64 = 200;
/// Past the stream's wait by this much, a reply nobody took goes to
/// `/events` (the stream is gone).
const DELIVERY_MARGIN_MS: u64 = 10_000;

/// The configured tools, as triage reads them: `(name, description)`.
pub async fn configured_tools() -> Result<Vec<(String, String)>, StageError> {
    Ok(act_stage::list_tools().await?.into_iter().map(|t| (t.name, t.description)).collect())
}

/// The tools whose description is close to the message.
pub async fn relevant_tools(text: &str) -> Result<Vec<String>, StageError> {
    Ok(act_stage::relevant_tools(text.to_string()).await?.into_iter().map(|t| t.name).collect())
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
pub async fn path_b(
    out: &mut Out,
    ex: &Exchange<'_>,
    ctx: &Assembled,
    intent: &Intent,
    tools: &[String],
) -> Result<u64, StageError> {
    let (msg, request_id, exchange_id, now) = (ex.msg, ex.request_id, ex.id.as_str(), ex.now);
    let cycle_id = new_id();
    act_stage::log_iteration(Iteration {
        loop_id: cycle_id.clone(),
        exchange_id: exchange_id.to_string(),
        iteration_number: 0,
        actions: tools.iter().map(|t| Action { kind: t.clone(), params: "{}".into() }).collect(),
        results: Vec::new(),
        execution_time_ms: 0,
        cost: 0.0,
        fatigue: 0.0,
        mode: "ACT (Path B: tool work queued)".into(),
        termination_reason: None,
        now_ms: now,
    })
    .await?;
    let payload = ToolJob {
        cycle_id,
        request_id: request_id.to_string(),
        exchange_id: exchange_id.to_string(),
        thread_id: msg.thread_id.clone(),
        source: msg.source.clone(),
        text: msg.text.clone(),
        topic: ctx.topic.clone(),
        intent: intent.clone(),
        tools: tools.to_vec(),
        context_snapshot: ContextSnapshot {
            warmth: ctx.warmth,
            tool_hints: tools.to_vec(),
            exchange_id: exchange_id.to_string(),
        },
        context: ctx.clone(),
        now_ms: now,
    };
    let (started, wait) = (clock::system_ms(), tool_wait_ms().await);
    let payload = serde_json::to_string(&payload).map_err(|e| StageError::internal(format!("a tool job: {e}")))?;
    let job_id =
        act_stage::enqueue_tool_work(request_id.to_string(), payload, now, started + wait + DELIVERY_MARGIN_MS).await?;
    out.event("status", json!({"stage": "tools", "tools": tools, "job_id": job_id}));
    loop {
        // A client that went away cannot take the reply: /events will.
        let gone = out.gone();
        let give_up = clock::system_ms().saturating_sub(started) >= wait || gone;
        match act_stage::take_tool_reply(job_id, request_id.to_string(), give_up, gone).await? {
            Taken::Chat(Ok(r)) => {
                out.event(
                    "message",
                    json!({"text": r.text, "topic": r.topic, "mode": r.mode.as_str(), "confidence": r.confidence,
                           "exchange_id": r.exchange_id, "source": r.source}),
                );
                // The client may have gone just before the reply was taken
                // for it: then /events gets it after all.
                if !out.confirm().await {
                    act_stage::take_tool_reply(job_id, request_id.to_string(), true, true).await?;
                }
                break;
            }
            Taken::Chat(Err(why)) => {
                out.event(
                    "error",
                    json!({"message": format!("The tools could not finish: {why}."), "recoverable": true}),
                );
                break;
            }
            Taken::Gone => {
                out.event(
                    "error",
                    json!({"message": "The tool work was deleted before it finished; send the message again.", "recoverable": true}),
                );
                break;
            }
            Taken::Events => {
                out.event(
                    "status",
                    json!({"stage": "deferred", "job_id": job_id,
                           "detail": "the tools are still working; the reply will arrive on /events as a tool_result event"}),
                );
                break;
            }
            Taken::Pending => {
                // A comment each poll: a client that went away is noticed
                // within one poll, before the reply is taken for it.
                out.raw(sse::comment("waiting for the tools"));
                spin_sdk::time::sleep(Duration::from_millis(TOOL_POLL_MS)).await
            }
        }
    }
    Ok(clock::system_ms().saturating_sub(started))
}
