//! Path B (design 002 §5): the tool registry, the durable `tool-queue`, its
//! hand-over between the waiting `/chat` stream and `/events`, and the
//! generic call of a tool with its own timeout.

use std::time::Duration;

use futures::StreamExt;
use futures::future::{Either, select};
use mneme_conversation::generate::ActResult;
use mneme_conversation::intent::Intent;
use mneme_conversation::tools::{self as rules, Tool, ToolReply};
use mneme_store::{Sql, StoreError, Stores, Value};
use serde_json::{Value as J, json};
use spin_sdk::http::body::IncomingBodyExt;

use mneme_substrate::{Fail, Result, bytes_f32, embed, f32_bytes};
use mneme_types::conversation::{ClaimedToolJob, CorrectionRate, Delivery, JobClaim, RelevantTool, Taken, ToolOutcome};

/// The queue Path B's jobs wait on.
pub const QUEUE: &str = mneme_background::TOOL_QUEUE;
/// How long `sse_pending:{request_id}` tells `/chat` a worker will answer.
pub const PENDING_TTL_MS: u64 = 600_000;
/// A job whose lease ran out this many times is failed.
pub const MAX_ATTEMPTS: i64 = 2;

pub fn pending_key(request_id: &str) -> String {
    format!("sse_pending:{request_id}")
}

fn tool_from(row: &mneme_store::Row) -> std::result::Result<Tool, StoreError> {
    serde_json::from_str(&row.text("config")?).map_err(|e| StoreError::new("decode", format!("tools.config: {e}")))
}

// ---------------------------------------------------------------- registry

/// Adds or replaces a tool (its description embedded for relevance).
/// `allowed_host` is the `host:port` the app may call tools on (the
/// `tool_host` variable).
pub async fn put(name: &str, config: &J, allowed_host: &str, now_ms: u64) -> Result<Tool> {
    let tool = rules::parse(name, config, allowed_host).map_err(Fail::invalid)?;
    let embedding = embed(&tool.description)?;
    let stores = Stores::open().await?;
    let config = serde_json::to_string(&tool).map_err(|e| Fail::new("internal", e.to_string()))?;
    let (name, max) = (tool.name.clone(), rules::MAX_TOOLS as i64);
    stores
        .sql
        .transaction(async |sql: &Sql| {
            // Count and insert as one step: concurrent PUTs must not both see
            // room for one more. SQLite's transaction holds the write lock
            // already; on Postgres this lock makes writers of `tools` queue.
            if sql.kind() == mneme_store::sql::SqlKind::Postgres {
                sql.execute("LOCK TABLE tools IN SHARE ROW EXCLUSIVE MODE", &[]).await?;
            }
            let n = sql.query("SELECT count(*) AS n FROM tools WHERE name <> $1", &[name.as_str().into()]).await?;
            if n.first().map(|r| r.i64("n")).transpose()?.unwrap_or(0) >= max {
                return Err(StoreError::new("conflict", format!("at most {max} tools; delete one first")));
            }
            sql.execute(
                "INSERT INTO tools (name, config, embedding, updated_ms) VALUES ($1, $2, $3, $4)
                 ON CONFLICT (name) DO UPDATE SET config = excluded.config, embedding = excluded.embedding,
                     updated_ms = excluded.updated_ms",
                &[name.as_str().into(), config.into(), Value::Blob(f32_bytes(&embedding)), Value::Int(now_ms as i64)],
            )
            .await?;
            Ok(())
        })
        .await?;
    Ok(tool)
}

/// Every configured tool, by name.
pub async fn list() -> Result<Vec<Tool>> {
    let stores = Stores::open().await?;
    let rows = stores.sql.query("SELECT config FROM tools ORDER BY name", &[]).await?;
    Ok(rows.iter().map(tool_from).collect::<std::result::Result<Vec<_>, _>>()?)
}

/// Removes the tool `name`; `not-found` when there is none.
pub async fn delete(name: &str) -> Result<()> {
    let stores = Stores::open().await?;
    let n = stores.sql.execute("DELETE FROM tools WHERE name = $1", &[name.into()]).await?;
    if n == 0 {
        return Err(Fail::new("not-found", format!("no tool `{name}` is configured")));
    }
    Ok(())
}

/// The configured tools with these names, in that order (unknown names are
/// left out: a tool deleted since triage named it).
pub async fn load(sql: &Sql, names: &[String]) -> Result<Vec<Tool>> {
    let rows = sql.query("SELECT config FROM tools ORDER BY name", &[]).await?;
    let all = rows.iter().map(tool_from).collect::<std::result::Result<Vec<_>, _>>()?;
    Ok(names.iter().filter_map(|n| all.iter().find(|t| &t.name == n).cloned()).collect())
}

/// Tools whose description is close to the message (cosine ≥
/// [`rules::RELEVANCE_COSINE`]), closest first, at most three.
pub async fn relevant(text: &str) -> Result<Vec<RelevantTool>> {
    let stores = Stores::open().await?;
    let rows = stores.sql.query("SELECT name, embedding FROM tools", &[]).await?;
    if rows.is_empty() {
        return Ok(Vec::new());
    }
    let q = embed(text)?;
    let mut scored: Vec<(f32, String)> = Vec::new();
    for row in &rows {
        let c = mneme_text::cosine(&q, &bytes_f32(&row.blob("embedding")?)) as f32;
        if c >= rules::RELEVANCE_COSINE {
            scored.push((c, row.text("name")?));
        }
    }
    scored.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    scored.truncate(rules::MAX_RELEVANT);
    Ok(scored.into_iter().map(|(cosine, name)| RelevantTool { name, cosine }).collect())
}

// ---------------------------------------------------------------- queue

/// Step 2 and 3 of Path B: the job on `tool-queue` (`payload` is its JSON
/// document), and `sse_pending:{request_id}` (600 s) naming it. After
/// `deliver_by_ms` (the stream's wait, and a margin) a finished reply no
/// stream took goes to `/events`. Answers the job's id.
pub async fn enqueue(request_id: &str, payload: &str, now_ms: u64, deliver_by_ms: u64) -> Result<i64> {
    let stores = Stores::open().await?;
    // The job and its deadline in one transaction: a job without a
    // deadline would never be swept.
    let id = stores
        .sql
        .transaction(async |sql: &Sql| {
            let id = mneme_substrate::jobs::enqueue(sql, QUEUE, Some(request_id), payload, now_ms)
                .await
                .map_err(mneme_substrate::as_store_error)?;
            sql.execute(
                "UPDATE jobs SET deliver_by_ms = $2 WHERE id = $1",
                &[id.into(), Value::Int(deliver_by_ms as i64)],
            )
            .await?;
            Ok(id)
        })
        .await?;
    stores.kv.set(&pending_key(request_id), id.to_string().as_bytes(), Some(PENDING_TTL_MS)).await?;
    Ok(id)
}

/// The oldest claimable tool job (queued, or running with its lease out),
/// if any. A job whose lease ran out [`MAX_ATTEMPTS`] times is failed
/// first.
pub async fn claim(now_ms: u64, lease_ms: u64) -> Result<Option<ClaimedToolJob>> {
    let stores = Stores::open().await?;
    expire(&stores.sql, now_ms).await?;
    let give_up = "'{\"error\": \"the tool worker did not finish\"}'";
    let Some(row) =
        mneme_substrate::jobs::claim_job(&stores.sql, &[QUEUE], now_ms, lease_ms, MAX_ATTEMPTS, give_up).await?
    else {
        return Ok(None);
    };
    Ok(Some(ClaimedToolJob {
        job: JobClaim { id: row.i64("id")?, claim: row.text("claim")? },
        attempts: row.i64("attempts")?,
        payload: row.text("payload")?,
    }))
}

/// Step 6: the reply stored on the job. When no stream will take it (the
/// stream gave up, or its wait is long over), it goes to `/events` as a
/// `tool_result` event, in the same transaction, so it is delivered
/// exactly once.
pub async fn finish(job_id: i64, claim: &str, reply: &ToolReply, now_ms: u64) -> Result<Delivery> {
    let result = serde_json::to_value(reply).map_err(|e| Fail::new("internal", format!("a tool reply: {e}")))?;
    end_job(job_id, claim, "done", &result, now_ms).await
}

/// A job the worker could not finish: failed with the error, which reaches
/// the principal like a reply would (the waiting stream, or `/events`).
pub async fn fail(job_id: i64, claim: &str, error: &str, now_ms: u64) -> Result<Delivery> {
    end_job(job_id, claim, "failed", &json!({"error": error}), now_ms).await
}

/// Ends a job under the worker's claim with `status` and `result`, and
/// publishes the result when no stream will take it.
async fn end_job(job_id: i64, claim: &str, status: &str, result: &J, now_ms: u64) -> Result<Delivery> {
    let stores = Stores::open().await?;
    let out = mneme_substrate::events::publishing(&stores.sql, async |sql: &Sql| {
        let n = sql
            .execute(
                "UPDATE jobs SET status = $3, result = $4, claim = NULL, updated_ms = $5
                     WHERE id = $1 AND claim = $2 AND status = 'running'",
                &[job_id.into(), claim.into(), status.into(), result.to_string().into(), Value::Int(now_ms as i64)],
            )
            .await?;
        if n == 0 {
            return Err(StoreError::new("lease-lost", format!("tool job {job_id} is no longer this worker's")));
        }
        publish_if_unclaimed(sql, job_id, result, now_ms).await
    })
    .await?;
    Ok(out)
}

/// Fails the tool jobs whose lease ran out [`MAX_ATTEMPTS`] times, each
/// error delivered as a failed job's is; and sends to `/events` every
/// ended job's reply that no stream took by its deadline (the stream died
/// before it could).
async fn expire(sql: &Sql, now_ms: u64) -> Result<()> {
    // A read first: most ticks find nothing and take no write lock.
    let due = sql
        .query(
            "SELECT count(*) AS n FROM jobs WHERE queue = $1 AND (
                 (status = 'running' AND lease_until_ms < $2 AND attempts >= $3)
              OR (status IN ('done', 'failed') AND delivery IS NULL AND deliver_by_ms < $2))",
            &[QUEUE.into(), Value::Int(now_ms as i64), MAX_ATTEMPTS.into()],
        )
        .await?;
    if due.first().map(|r| r.i64("n")).transpose()?.unwrap_or(0) == 0 {
        return Ok(());
    }
    let error = json!({"error": "the tool worker did not finish"});
    mneme_substrate::events::publishing(sql, async |sql: &Sql| {
        let ended = sql
            .query(
                "SELECT id, result FROM jobs WHERE queue = $1 AND status IN ('done', 'failed')
                 AND delivery IS NULL AND deliver_by_ms < $2",
                &[QUEUE.into(), Value::Int(now_ms as i64)],
            )
            .await?;
        for row in &ended {
            let result: J = row.opt_text("result")?.and_then(|t| serde_json::from_str(&t).ok()).unwrap_or(J::Null);
            publish_if_unclaimed(sql, row.i64("id")?, &result, now_ms).await?;
        }
        let rows = sql
            .query(
                "UPDATE jobs SET status = 'failed', claim = NULL, updated_ms = $1, result = $4
                 WHERE queue = $2 AND status = 'running' AND lease_until_ms < $1 AND attempts >= $3 RETURNING id",
                &[Value::Int(now_ms as i64), QUEUE.into(), MAX_ATTEMPTS.into(), error.to_string().into()],
            )
            .await?;
        for row in &rows {
            publish_if_unclaimed(sql, row.i64("id")?, &error, now_ms).await?;
        }
        Ok(())
    })
    .await?;
    Ok(())
}

/// Inside the transaction that ends a job: when the stream gave up
/// (`delivery = events`) or its wait is over with nobody taking the reply,
/// marks it sent and publishes it as a `tool_result` event.
async fn publish_if_unclaimed(
    sql: &Sql,
    job_id: i64,
    result: &J,
    now_ms: u64,
) -> std::result::Result<Delivery, StoreError> {
    let sent = sql
        .query(
            "UPDATE jobs SET delivery = 'events-sent'
             WHERE id = $1 AND (delivery = 'events' OR (delivery IS NULL AND deliver_by_ms < $2)) RETURNING ref",
            &[job_id.into(), Value::Int(now_ms as i64)],
        )
        .await?;
    let Some(row) = sent.first() else { return Ok(Delivery::Chat) };
    let mut payload = result.clone();
    payload["request_id"] = json!(row.opt_text("ref")?);
    if let Some(e) = result["error"].as_str() {
        payload["text"] = json!(format!("The tools could not finish: {e}."));
    }
    mneme_substrate::events::publish_with(sql, "tool_result", &payload, now_ms).await?;
    Ok(Delivery::Events)
}

/// What the waiting stream asks of its tool job.
#[derive(Debug)]
pub struct TakeRequest {
    pub job_id: i64,
    pub request_id: String,
    /// The stream stops waiting: the reply goes to `/events` unless it is
    /// already here.
    pub give_up: bool,
    /// The client went away: the reply goes to `/events` even when it is
    /// already here, or was taken for the stream, since nobody would read
    /// it there.
    pub gone: bool,
}

/// The `/chat` side of the hand-over: `pending` while the worker runs;
/// `chat` with the reply (or why the tools failed) once it is the
/// stream's (it takes it); `events` when the stream gave up first; `gone`
/// when the job was deleted.
pub async fn take(r: TakeRequest) -> Result<Taken> {
    let stores = Stores::open().await?;
    let sql = &stores.sql;
    if r.gone {
        // One transaction: a reply already here is published now; one still
        // being worked on is marked so the worker publishes it when done.
        mneme_substrate::events::publishing(sql, async |sql: &Sql| {
            let rows = sql
                .query(
                    "UPDATE jobs SET delivery = 'events' WHERE id = $1 AND (delivery IS NULL OR delivery = 'chat')
                     RETURNING status, result",
                    &[r.job_id.into()],
                )
                .await?;
            if let Some(row) = rows.first()
                && matches!(row.text("status")?.as_str(), "done" | "failed")
            {
                let result: J = row.opt_text("result")?.and_then(|t| serde_json::from_str(&t).ok()).unwrap_or(J::Null);
                publish_if_unclaimed(sql, r.job_id, &result, mneme_time::clock::system_ms()).await?;
            }
            Ok(())
        })
        .await?;
        let _ = stores.kv.delete(&pending_key(&r.request_id)).await;
        return Ok(Taken::Events);
    }
    // One statement each, so a worker finishing at the same moment is
    // either seen as done (the stream delivers) or sees `events` (it does).
    let rows = if r.give_up {
        sql.query(
            "UPDATE jobs SET delivery = CASE WHEN status IN ('done', 'failed') THEN 'chat' ELSE 'events' END
             WHERE id = $1 AND delivery IS NULL RETURNING delivery, status, result",
            &[r.job_id.into()],
        )
        .await?
    } else {
        sql.query(
            "UPDATE jobs SET delivery = 'chat' WHERE id = $1 AND delivery IS NULL AND status IN ('done', 'failed')
             RETURNING delivery, status, result",
            &[r.job_id.into()],
        )
        .await?
    };
    let Some(row) = rows.first() else {
        // Not ours to take: still running, already sent to /events, or gone
        // (deleted with everything else).
        let found = sql.query("SELECT delivery FROM jobs WHERE id = $1", &[r.job_id.into()]).await?;
        let state = match found.first() {
            None => Taken::Gone,
            Some(f) if f.opt_text("delivery")?.is_some() => Taken::Events,
            Some(_) if r.give_up => Taken::Events,
            Some(_) => Taken::Pending,
        };
        if !matches!(state, Taken::Pending) {
            let _ = stores.kv.delete(&pending_key(&r.request_id)).await;
        }
        return Ok(state);
    };
    let delivery = row.text("delivery")?;
    // The stream is done waiting either way.
    let _ = stores.kv.delete(&pending_key(&r.request_id)).await;
    if delivery == "events" {
        return Ok(Taken::Events);
    }
    let result = row.opt_text("result")?.unwrap_or_default();
    Ok(Taken::Chat(reply_of(&row.text("status")?, &result)))
}

/// A finished job's stored result: the worker's reply when it is done,
/// else why it failed.
fn reply_of(status: &str, result: &str) -> std::result::Result<mneme_types::conversation::ToolReply, String> {
    let v: J = serde_json::from_str(result).unwrap_or(J::Null);
    if status == "done"
        && let Ok(reply) = serde_json::from_value::<ToolReply>(v.clone())
    {
        return Ok(reply.into());
    }
    Err(v["error"].as_str().unwrap_or("the tool worker failed").to_string())
}

// ---------------------------------------------------------------- calls

/// Step 3: one tool, called the same way as every other (`POST` of
/// [`rules::request_body`]), under its own timeout. `(status, result)`
/// with status `success`, `error` or `timeout`.
pub async fn call(tool: &Tool, body: &J) -> (&'static str, String) {
    let req = match spin_sdk::http::Request::builder()
        .method("POST")
        .uri(tool.url.as_str())
        .header("content-type", "application/json")
        .header("accept", "application/json, text/plain")
        .body(body.to_string())
    {
        Ok(r) => r,
        Err(e) => return ("error", format!("{}: {e}", tool.name)),
    };
    // The answer's headers and body both fall under the timeout; reading
    // stops at MAX_ANSWER_BYTES.
    let exchange = async {
        let resp = spin_sdk::http::send(req).await.map_err(|e| format!("{} could not be reached: {e:?}", tool.name))?;
        let status = resp.status().as_u16();
        let mut stream = resp.into_body().stream();
        let mut bytes = Vec::new();
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(|e| format!("{}: reading the answer: {e:?}", tool.name))?;
            bytes.extend_from_slice(&chunk);
            if bytes.len() >= MAX_ANSWER_BYTES {
                bytes.truncate(MAX_ANSWER_BYTES);
                break;
            }
        }
        Ok::<_, String>((status, bytes))
    };
    let timeout = Box::pin(spin_sdk::time::sleep(Duration::from_millis(tool.timeout_ms)));
    let (status, bytes) = match select(Box::pin(exchange), timeout).await {
        Either::Left((Ok(answer), _)) => answer,
        Either::Left((Err(e), _)) => return ("error", e),
        Either::Right(_) => return ("timeout", format!("{} gave no answer within {} ms", tool.name, tool.timeout_ms)),
    };
    let text = rules::answer_text(&bytes);
    if (200..300).contains(&status) {
        ("success", text)
    } else {
        ("error", format!("{} answered {status}: {text}", tool.name))
    }
}

/// The most of a tool's answer that is read.
const MAX_ANSWER_BYTES: usize = 64 * 1024;

/// One call of a configured tool.
#[derive(Debug)]
pub struct CallRequest {
    pub name: String,
    pub text: String,
    pub topic: String,
    pub intent: Intent,
    pub correction: Option<String>,
}

/// The tool's outcome as an action result. A tool that is not configured is
/// an `error` result.
pub async fn call_named(r: CallRequest) -> Result<ToolOutcome> {
    let stores = Stores::open().await?;
    let Some(tool) = load(&stores.sql, std::slice::from_ref(&r.name)).await?.pop() else {
        let result = ActResult {
            action_type: r.name.clone(),
            status: "error".into(),
            result: format!("no tool `{}` is configured", r.name),
            execution_time_ms: 0,
            confidence: 0.0,
        };
        return Ok(ToolOutcome { result: result.into(), consequential: false });
    };
    let started = mneme_time::clock::system_ms();
    let intent = serde_json::to_value(&r.intent).map_err(|e| Fail::new("internal", format!("an intent: {e}")))?;
    let body = rules::request_body(&tool.name, &r.text, &r.topic, &intent, r.correction.as_deref());
    let (status, result) = call(&tool, &body).await;
    let result = ActResult {
        action_type: tool.name.clone(),
        status: status.into(),
        confidence: mneme_conversation::act::result_confidence(&tool.name, status, &result),
        result,
        execution_time_ms: mneme_time::clock::system_ms().saturating_sub(started),
    };
    Ok(ToolOutcome { result: result.into(), consequential: tool.consequential })
}

// ---------------------------------------------------------------- critic

fn rate_key(action_type: &str) -> String {
    format!("critic_rate:{action_type}")
}

/// The critic's correction rate for an action type (an EMA, α 0.1),
/// updated when `corrected` is given, and the threshold it sets.
pub async fn critic_rate(action_type: &str, corrected: Option<bool>) -> Result<CorrectionRate> {
    let stores = Stores::open().await?;
    let key = rate_key(action_type);
    let mut rate = stores
        .kv
        .get(&key)
        .await?
        .and_then(|b| String::from_utf8(b).ok())
        .and_then(|s| s.parse::<f64>().ok())
        .filter(|r| r.is_finite())
        .unwrap_or(0.0);
    if let Some(c) = corrected {
        rate = rules::next_rate(rate, c);
        stores.kv.set(&key, rate.to_string().as_bytes(), None).await?;
    }
    Ok(CorrectionRate { rate, threshold: rules::critic_threshold(rate) })
}
