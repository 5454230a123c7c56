//! Reading the principal's memory: a thread's recent exchanges, keyword
//! search, the proactive event log behind `GET /events` and the job queue.

use mneme_store::{Stores, Value};
use mneme_substrate::{Fail, Result, records};
use mneme_types::memory::{
    Event, ExchangeHit, ExchangeView, FactHit, GistHit, Job, MemoryHit, RecentExchanges, TraitHit,
};

/// The latest exchanges of a thread (of the most recently active thread
/// when none is named), oldest first.
pub async fn recent(thread_id: Option<String>, limit: u32) -> Result<RecentExchanges> {
    let stores = Stores::open().await?;
    let thread = match thread_id {
        Some(t) => Some(t),
        None => stores
            .sql
            .query("SELECT id FROM threads ORDER BY last_activity_ms DESC LIMIT 1", &[])
            .await?
            .first()
            .map(|r| r.text("id"))
            .transpose()?,
    };
    let Some(thread) = thread else { return Ok(RecentExchanges { thread_id: None, exchanges: Vec::new() }) };
    let rows = stores
        .sql
        .query(
            "SELECT id, prompt, response, topic, mode, confidence, reply_source, created_ms FROM exchanges WHERE thread_id = $1 ORDER BY created_ms DESC, id DESC LIMIT $2",
            &[thread.as_str().into(), Value::Int(limit.clamp(1, 100) as i64)],
        )
        .await?;
    let mut exchanges: Vec<ExchangeView> = rows
        .iter()
        .map(|r| {
            Ok(ExchangeView {
                id: r.text("id")?,
                prompt: r.text("prompt")?,
                response: r.text("response")?,
                topic: r.text("topic")?,
                mode: r.text("mode")?,
                confidence: r.f64("confidence")?,
                reply_source: r.text("reply_source")?,
                timestamp: r.i64("created_ms")?,
            })
        })
        .collect::<std::result::Result<_, mneme_store::StoreError>>()?;
    exchanges.reverse();
    Ok(RecentExchanges { thread_id: Some(thread), exchanges })
}

/// Keyword search over exchanges, facts, gists and traits; a hit scores the
/// share of the query's keywords it contains.
pub async fn search(q: &str, limit: u32, now_ms: u64) -> Result<Vec<MemoryHit>> {
    let stores = Stores::open().await?;
    let mut keys = mneme_conversation::generate::keywords(q);
    if keys.is_empty() {
        keys = q.split_whitespace().map(str::to_lowercase).filter(|w| w.chars().count() >= 2).take(6).collect();
    }
    if keys.is_empty() {
        return Err(Fail::invalid("the query has no searchable words"));
    }
    let score = |text: &str| {
        let l = text.to_lowercase();
        keys.iter().filter(|k| l.contains(k.as_str())).count() as f64 / keys.len() as f64
    };
    let mut hits: Vec<MemoryHit> = Vec::new();
    let mut seen = std::collections::BTreeSet::new();
    for k in &keys {
        let like = format!("%{}%", k.replace(['%', '_'], ""));
        let rows = stores
            .sql
            .query(
                "SELECT id, thread_id, prompt, response, topic, created_ms FROM exchanges WHERE lower(prompt) LIKE $1 OR lower(response) LIKE $1 ORDER BY created_ms DESC LIMIT 50",
                &[like.into()],
            )
            .await?;
        for r in &rows {
            let id = r.text("id")?;
            if seen.insert(id.clone()) {
                let (p, resp) = (r.text("prompt")?, r.text("response")?);
                let score = score(&format!("{p} {resp}"));
                hits.push(MemoryHit::Exchange(ExchangeHit {
                    id,
                    thread_id: r.text("thread_id")?,
                    topic: r.text("topic")?,
                    text: p,
                    response: resp,
                    at_ms: r.i64("created_ms")?,
                    score,
                }));
            }
        }
    }
    for key in stores.kv.keys("fact_index:").await? {
        let topic = key.trim_start_matches("fact_index:");
        for f in records::facts(&stores.kv, topic, now_ms).await? {
            let s = score(&format!("{} {}", f.key, f.value));
            if s > 0.0 {
                hits.push(MemoryHit::Fact(FactHit {
                    topic: topic.to_string(),
                    key: f.key,
                    text: f.value,
                    confidence: f.confidence,
                    at_ms: f.updated_ms as i64,
                    score: s,
                }));
            }
        }
    }
    for key in stores.kv.keys("gist_index:").await? {
        let topic = key.trim_start_matches("gist_index:");
        for g in records::gists(&stores.kv, topic, now_ms).await? {
            let s = score(&g.content);
            if s > 0.0 {
                hits.push(MemoryHit::Gist(GistHit {
                    topic: topic.to_string(),
                    id: g.id,
                    text: g.content,
                    at_ms: g.created_ms as i64,
                    score: s,
                }));
            }
        }
    }
    for r in &stores.sql.query("SELECT key, value, updated_ms FROM user_traits", &[]).await? {
        let (k, v) = (r.text("key")?, r.text("value")?);
        let s = score(&format!("{k} {v}"));
        if s > 0.0 {
            hits.push(MemoryHit::UserTrait(TraitHit { key: k, text: v, at_ms: r.i64("updated_ms")?, score: s }));
        }
    }
    hits.sort_by(|a, b| rank(b).0.total_cmp(&rank(a).0).then(rank(b).1.cmp(&rank(a).1)));
    hits.truncate(limit.clamp(1, 100) as usize);
    Ok(hits)
}

/// A hit's score and time, by which hits are ordered.
fn rank(h: &MemoryHit) -> (f64, i64) {
    match h {
        MemoryHit::Exchange(x) => (x.score, x.at_ms),
        MemoryHit::Fact(x) => (x.score, x.at_ms),
        MemoryHit::Gist(x) => (x.score, x.at_ms),
        MemoryHit::UserTrait(x) => (x.score, x.at_ms),
    }
}

/// The id of the newest event, 0 when there is none.
pub async fn latest_event_id() -> Result<i64> {
    let sql = mneme_store::open_sql().await?;
    let rows = sql.query("SELECT COALESCE(MAX(id), 0) AS id FROM events", &[]).await?;
    Ok(rows.first().map(|r| r.i64("id")).transpose()?.unwrap_or(0))
}

/// Events oldest first: those after `after_id`, or the newest `limit`
/// since `since_ms` when no id is given. Reads SQL only.
pub async fn events_after(after_id: Option<i64>, since_ms: u64, limit: u32) -> Result<Vec<Event>> {
    let sql = mneme_store::open_sql().await?;
    let limit = Value::Int(limit.clamp(1, 500) as i64);
    let mut rows = match after_id {
        Some(id) => {
            sql.query(
                "SELECT id, type, payload, created_ms FROM events WHERE id > $1 ORDER BY id LIMIT $2",
                &[Value::Int(id), limit],
            )
            .await?
        }
        None => {
            let mut r = sql
                .query(
                    "SELECT id, type, payload, created_ms FROM events WHERE created_ms >= $1 ORDER BY id DESC LIMIT $2",
                    &[Value::Int(since_ms as i64), limit],
                )
                .await?;
            r.reverse();
            r
        }
    };
    let rows = std::mem::take(&mut rows);
    let events = rows
        .iter()
        .map(|r| {
            Ok(Event {
                id: r.i64("id")?,
                kind: r.text("type")?,
                payload: r.text("payload")?,
                created_ms: r.i64("created_ms")?,
            })
        })
        .collect::<std::result::Result<_, mneme_store::StoreError>>()?;
    Ok(events)
}

pub async fn jobs(queue: Option<String>, status: Option<String>, limit: u32) -> Result<Vec<Job>> {
    let stores = Stores::open().await?;
    let rows = stores
        .sql
        .query(
            "SELECT id, queue, ref, payload, status, attempts, created_ms, updated_ms FROM jobs \
             WHERE ($1 = '' OR queue = $1) AND ($2 = '' OR status = $2) ORDER BY id DESC LIMIT $3",
            &[
                queue.unwrap_or_default().into(),
                status.unwrap_or_default().into(),
                Value::Int(limit.clamp(1, 500) as i64),
            ],
        )
        .await?;
    let jobs = rows
        .iter()
        .map(|r| {
            Ok(Job {
                id: r.i64("id")?,
                queue: r.text("queue")?,
                reference: r.opt_text("ref")?,
                payload: r.text("payload")?,
                status: r.text("status")?,
                attempts: r.i64("attempts")?,
                created_ms: r.i64("created_ms")?,
                updated_ms: r.i64("updated_ms")?,
            })
        })
        .collect::<std::result::Result<_, mneme_store::StoreError>>()?;
    Ok(jobs)
}

/// How many jobs wait in each queue asked, in the order asked. One
/// `COUNT` over the `(queue, status, id)` index: it reads only the waiting
/// rows, however long the finished history grows.
pub async fn queue_depths(queues: &[String]) -> Result<Vec<(String, u64)>> {
    if queues.is_empty() {
        return Ok(Vec::new());
    }
    let stores = Stores::open().await?;
    let params: Vec<Value> = queues.iter().map(|q| Value::from(q.as_str())).collect();
    let rows = stores
        .sql
        .query(
            &format!(
                "SELECT queue, COUNT(*) AS n FROM jobs WHERE status = 'queued' AND queue IN ({}) GROUP BY queue",
                mneme_substrate::in_list(1, queues.len())
            ),
            &params,
        )
        .await?;
    let mut counted = std::collections::HashMap::new();
    for r in &rows {
        counted.insert(r.text("queue")?, r.i64("n")? as u64);
    }
    Ok(queues.iter().map(|q| (q.clone(), counted.get(q).copied().unwrap_or(0))).collect())
}
