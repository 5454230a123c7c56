//! Phase D (design 002 §6): the post-response commit, in one transaction so
//! a failure leaves nothing half-written: working memory, the exchange and
//! interaction_log rows, the thread's state, onboarding (spark_state) and the
//! encode event's jobs on the durable queue.

use mneme_conversation::context::Turn;
use mneme_store::{Piece, Sql, Value};
use mneme_types::conversation::{Committed, FinishedExchange};
use serde_json::json;

use mneme_substrate::{Fail, Result, json_text, wm};

use mneme_substrate::jobs::{CHUNKER_QUEUE, EPISODIC_QUEUE, enqueue};
/// An episode is due after this many exchanges on the thread…
pub const EPISODE_EXCHANGES: i64 = 5;
/// …or this many on a topic the principal just left…
pub const EPISODE_TOPIC_EXCHANGES: i64 = 3;
/// …or after this much inactivity (ms) with exchanges pending.
pub const EPISODE_INACTIVITY_MS: u64 = 600_000;

pub async fn commit(req: FinishedExchange) -> Result<Committed> {
    let sql = mneme_store::open_sql().await?;
    let written = sql
        .transaction(async |sql: &Sql| {
            commit_in(sql, &req).await.map_err(|f| match f.code.as_str() {
                "lease-lost" => mneme_store::StoreError::new("lease-lost", f.message),
                ALREADY_COMMITTED => mneme_store::StoreError::new(ALREADY_COMMITTED, f.message),
                _ => mneme_store::StoreError::new("commit", format!("{}: {}", f.code, f.message)),
            })
        })
        .await;
    let jobs = match written {
        // Idempotent by exchange: a worker that runs a job again after a
        // crash between its commit and its finish writes nothing twice.
        Err(e) if e.code == ALREADY_COMMITTED => Vec::new(),
        other => other?,
    };
    Ok(Committed { exchange_id: req.exchange_id, jobs })
}

/// The exchange was committed before; this transaction rolls back.
const ALREADY_COMMITTED: &str = "already-committed";

async fn commit_in(sql: &Sql, r: &FinishedExchange) -> Result<Vec<String>> {
    let now = Value::Int(r.now_ms as i64);
    let (mut held, mut fresh, mut prior) = (true, 0, None);
    let user_payload = json!({"text": r.text, "source": r.source}).to_string();
    let reply_payload =
        json!({"text": r.reply, "reply_source": r.reply_source, "request_id": r.request_id}).to_string();
    let turns = [
        Turn { role: "user".into(), content: r.text.clone(), at_ms: r.now_ms },
        Turn { role: "assistant".into(), content: r.reply.clone(), at_ms: r.now_ms },
    ];
    // The writes touch different tables, so they go out together; one that
    // finds the exchange already written rolls them all back (below).
    let mut pieces: Vec<Piece<'_>> = vec![
        Box::pin(async {
            fresh = sql
                .execute(
                    "INSERT INTO exchanges (id, thread_id, request_id, source, prompt, response, topic, mode, confidence, reply_source, created_ms, duration_ms) \
                     VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11,$12) ON CONFLICT (id) DO NOTHING",
                    &[
                        r.exchange_id.as_str().into(),
                        r.thread_id.as_str().into(),
                        r.request_id.as_str().into(),
                        r.source.as_str().into(),
                        r.text.as_str().into(),
                        r.reply.as_str().into(),
                        r.topic.as_str().into(),
                        r.mode.as_str().into(),
                        r.confidence.into(),
                        r.reply_source.as_str().into(),
                        now.clone(),
                        Value::Int(r.duration_ms as i64),
                    ],
                )
                .await?;
            Ok(())
        }),
        Box::pin(wm::append(sql, &r.thread_id, &turns)),
        Box::pin(wm::trim(sql, &r.thread_id, turns.len(), r.now_ms)),
        Box::pin(async {
            if !r.fast_path {
                prior = sql
                    .query("SELECT last_activity_ms FROM threads WHERE id = $1", &[r.thread_id.as_str().into()])
                    .await?
                    .first()
                    .map(|row| row.i64("last_activity_ms"))
                    .transpose()?;
            }
            sql.execute(
                "INSERT INTO threads (id, created_ms, last_activity_ms, exchange_count, previous_mode, previous_tools) \
                 VALUES ($1, $2, $2, 1, $3, $4) ON CONFLICT (id) DO UPDATE SET last_activity_ms = excluded.last_activity_ms, \
                 exchange_count = threads.exchange_count + 1, previous_mode = excluded.previous_mode, previous_tools = excluded.previous_tools",
                &[r.thread_id.as_str().into(), now.clone(), r.mode.as_str().into(), json_text(&r.tools).into()],
            )
            .await?;
            Ok(())
        }),
        // Both interaction_log events in one statement.
        Box::pin(async {
            sql.execute(
                "INSERT INTO interaction_log (event_type, thread_id, exchange_id, topic, source, mode, confidence, generation_ms, payload, created_ms) \
                 VALUES ('user_input', $1, $2, $3, $4, NULL, NULL, NULL, $5, $9), ('system_response', $1, $2, $3, $4, $6, $7, $8, $10, $9)",
                &[
                    r.thread_id.as_str().into(),
                    r.exchange_id.as_str().into(),
                    r.topic.as_str().into(),
                    r.source.as_str().into(),
                    user_payload.into(),
                    r.mode.as_str().into(),
                    r.confidence.into(),
                    r.generation_ms.map(|g| g as i64).into(),
                    now.clone(),
                    reply_payload.into(),
                ],
            )
            .await?;
            Ok(())
        }),
    ];
    // Every commit locks the thread's row before spark_state's, so two
    // commits never wait on each other in a cycle: a social exit issues the
    // thread's upsert first, and a full commit, whose thread upsert waits
    // for the read before it, writes spark_state only after the group.
    if r.fast_path {
        pieces.push(Box::pin(spark(sql, &now)));
    }
    if let Some(j) = &r.job {
        pieces.push(Box::pin(async {
            held = !sql
                .query(
                    "SELECT 1 AS one FROM jobs WHERE id = $1 AND claim = $2 AND status = 'running'",
                    &[j.id.into(), j.claim.as_str().into()],
                )
                .await?
                .is_empty();
            Ok(())
        }));
    }
    sql.all(pieces).await?;
    if !held {
        let id = r.job.as_ref().map_or(0, |j| j.id);
        return Err(Fail::new("lease-lost", format!("tool job {id} is no longer this worker's")));
    }
    if fresh == 0 {
        return Err(Fail::new(ALREADY_COMMITTED, format!("exchange {} is already committed", r.exchange_id)));
    }
    if r.fast_path {
        return Ok(Vec::new());
    }

    // The encode event: the chunker job for this exchange and an episode
    // when the session calls for one. The episode worker queues semantic
    // consolidation (002 §9).
    let mut jobs = vec![CHUNKER_QUEUE.to_string()];
    let payload = json!({"exchange_id": r.exchange_id, "thread_id": r.thread_id, "topic": r.topic, "prompt": r.text, "response": r.reply}).to_string();
    let mut counts = Vec::new();
    sql.all::<Fail>(vec![
        Box::pin(async { Ok(spark(sql, &now).await?) }),
        Box::pin(async {
            enqueue(sql, CHUNKER_QUEUE, Some(&r.thread_id), &payload, r.now_ms).await?;
            Ok(())
        }),
        // Exchanges since the thread's last episode, in one round trip.
        Box::pin(async {
            counts = sql
                .query(
                    "SELECT COALESCE((SELECT max(created_ms) FROM jobs WHERE queue = $2 AND ref = $1), 0) AS last_episode, \
                     (SELECT count(*) FROM exchanges WHERE thread_id = $1 AND reply_source <> 'social' AND created_ms > \
                      COALESCE((SELECT max(created_ms) FROM jobs WHERE queue = $2 AND ref = $1), 0)) AS since",
                    &[r.thread_id.as_str().into(), EPISODIC_QUEUE.into()],
                )
                .await?;
            Ok(())
        }),
    ])
    .await?;
    let row =
        counts.first().ok_or_else(|| mneme_substrate::Fail::new("internal", "the episode query returned no row"))?;
    let last_episode = row.i64("last_episode")?;
    let since = row.i64("since")?;
    let mut due = since >= EPISODE_EXCHANGES
        || prior.is_some_and(|p| r.now_ms.saturating_sub(p as u64) >= EPISODE_INACTIVITY_MS && since > 1);
    if let Some(prev) = r.previous_topic.as_deref().filter(|p| *p != r.topic) {
        let on_prev = sql
            .query(
                "SELECT count(*) AS n FROM exchanges WHERE thread_id = $1 AND topic = $2 AND created_ms > $3",
                &[r.thread_id.as_str().into(), prev.into(), Value::Int(last_episode)],
            )
            .await?
            .first()
            .map(|row| row.i64("n"))
            .transpose()?
            .unwrap_or(0);
        due |= on_prev >= EPISODE_TOPIC_EXCHANGES;
    }
    if due {
        let p = json!({"thread_id": r.thread_id, "since_ms": last_episode, "until_ms": r.now_ms, "topic": r.topic})
            .to_string();
        enqueue(sql, EPISODIC_QUEUE, Some(&r.thread_id), &p, r.now_ms).await?;
        jobs.push(EPISODIC_QUEUE.into());
    }
    Ok(jobs)
}

/// Onboarding: one more exchange in `spark_state`.
async fn spark(sql: &Sql, now: &Value) -> std::result::Result<(), mneme_store::StoreError> {
    sql.execute(
        "INSERT INTO spark_state (id, exchange_count, first_ms, last_ms) VALUES (1, 1, $1, $1) \
         ON CONFLICT (id) DO UPDATE SET exchange_count = spark_state.exchange_count + 1, last_ms = excluded.last_ms",
        std::slice::from_ref(now),
    )
    .await?;
    Ok(())
}
