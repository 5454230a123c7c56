//! The principal's view and control of their memory: recent exchanges,
//! search, forget, export, delete-all; the proactive event log behind
//! `GET /events`; and the job queues, for inspection.

use mneme_store::{Row, Sql, Stores, Value};
use mneme_time::Recurrence;
use serde::Deserialize;
use serde_json::{Map, Value as J, json};

use crate::events::{publish_with, publishing};
use crate::{Fail, Result, records};

fn row_json(r: &Row) -> J {
    let mut m = Map::new();
    for (k, v) in r.iter() {
        let j = match v {
            Value::Null => J::Null,
            Value::Int(i) => json!(i),
            Value::Real(f) => json!(f),
            Value::Text(t) => json!(t),
            Value::Blob(b) => json!(format!("<{} bytes>", b.len())),
        };
        m.insert(k.to_string(), j);
    }
    J::Object(m)
}

#[derive(Debug, Deserialize)]
pub struct RecentRequest {
    pub thread_id: Option<String>,
    pub limit: u32,
}

/// The latest exchanges of a thread (of the most recently active thread
/// when none is named), oldest first.
pub async fn recent(req: RecentRequest) -> Result<J> {
    let stores = Stores::open().await?;
    let thread = match req.thread_id {
        Some(t) => Some(t),
        None => stores
            .sql
            .query("SELECT id FROM threads ORDER BY last_activity_ms DESC LIMIT 1", &[])
            .await?
            .first()
            .map(|r| r.text("id"))
            .transpose()?,
    };
    let Some(thread) = thread else { return Ok(json!({"thread_id": null, "exchanges": []})) };
    let rows = stores
        .sql
        .query(
            "SELECT id, prompt, response, topic, mode, confidence, reply_source, created_ms FROM exchanges WHERE thread_id = $1 ORDER BY created_ms DESC, id DESC LIMIT $2",
            &[thread.as_str().into(), Value::Int(req.limit.clamp(1, 100) as i64)],
        )
        .await?;
    let mut ex: Vec<J> = rows
        .iter()
        .map(|r| {
            Ok(json!({
                "id": r.text("id")?, "prompt": r.text("prompt")?, "response": r.text("response")?, "topic": r.text("topic")?,
                "mode": r.text("mode")?, "confidence": r.f64("confidence")?, "reply_source": r.text("reply_source")?, "timestamp": r.i64("created_ms")?,
            }))
        })
        .collect::<std::result::Result<_, mneme_store::StoreError>>()?;
    ex.reverse();
    Ok(json!({"thread_id": thread, "exchanges": ex}))
}

#[derive(Debug, Deserialize)]
pub struct SearchRequest {
    pub q: String,
    pub limit: u32,
    pub now_ms: u64,
}

/// Keyword search over exchanges, facts, gists and traits; a hit scores the
/// share of the query's keywords it contains.
pub async fn search(req: SearchRequest) -> Result<J> {
    let stores = Stores::open().await?;
    let mut keys = mneme_conversation::generate::keywords(&req.q);
    if keys.is_empty() {
        keys = req.q.split_whitespace().map(str::to_lowercase).filter(|w| w.chars().count() >= 2).take(6).collect();
    }
    if keys.is_empty() {
        return Err(Fail::invalid("the query has no searchable words"));
    }
    let score = |text: &str| {
        let l = text.to_lowercase();
        keys.iter().filter(|k| l.contains(k.as_str())).count() as f64 / keys.len() as f64
    };
    let mut hits: Vec<J> = Vec::new();
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
                hits.push(json!({"kind": "exchange", "id": id, "thread_id": r.text("thread_id")?, "topic": r.text("topic")?,
                    "text": p, "response": resp, "at_ms": r.i64("created_ms")?, "score": score(&format!("{p} {resp}"))}));
            }
        }
    }
    for key in stores.kv.keys("fact_index:").await? {
        let topic = key.trim_start_matches("fact_index:");
        for f in records::facts(&stores.kv, topic, req.now_ms).await? {
            let s = score(&format!("{} {}", f.key, f.value));
            if s > 0.0 {
                hits.push(json!({"kind": "fact", "topic": topic, "key": f.key, "text": f.value, "confidence": f.confidence, "at_ms": f.updated_ms, "score": s}));
            }
        }
    }
    for key in stores.kv.keys("gist_index:").await? {
        let topic = key.trim_start_matches("gist_index:");
        for g in records::gists(&stores.kv, topic, req.now_ms).await? {
            let s = score(&g.content);
            if s > 0.0 {
                hits.push(json!({"kind": "gist", "topic": topic, "id": g.id, "text": g.content, "at_ms": g.created_ms, "score": s}));
            }
        }
    }
    for r in &stores.sql.query("SELECT key, value, updated_ms FROM user_traits", &[]).await? {
        let (k, v) = (r.text("key")?, r.text("value")?);
        let s = score(&format!("{k} {v}"));
        if s > 0.0 {
            hits.push(json!({"kind": "trait", "key": k, "text": v, "at_ms": r.i64("updated_ms")?, "score": s}));
        }
    }
    hits.sort_by(|a, b| {
        b["score"]
            .as_f64()
            .unwrap_or(0.0)
            .total_cmp(&a["score"].as_f64().unwrap_or(0.0))
            .then(b["at_ms"].as_i64().cmp(&a["at_ms"].as_i64()))
    });
    hits.truncate(req.limit.clamp(1, 100) as usize);
    Ok(json!({"query": req.q, "results": hits}))
}

#[derive(Debug, Deserialize)]
pub struct ForgetRequest {
    pub scope: String,
    pub topic: Option<String>,
    pub key: Option<String>,
    pub id: Option<String>,
}

async fn delete_exchange_rows(sql: &Sql, ids: &[String]) -> Result<u64> {
    let mut n = 0;
    for id in ids {
        let rows =
            sql.query("SELECT thread_id, prompt, response FROM exchanges WHERE id = $1", &[id.as_str().into()]).await?;
        if let Some(r) = rows.first() {
            let thread = r.text("thread_id")?;
            for content in [r.text("prompt")?, r.text("response")?] {
                sql.execute(
                    "DELETE FROM working_memory WHERE thread_id = $1 AND content = $2",
                    &[thread.as_str().into(), content.into()],
                )
                .await?;
            }
        }
        for table in ["interaction_log", "triage_calibration", "routing_decisions", "cortex_iterations"] {
            sql.execute(&format!("DELETE FROM {table} WHERE exchange_id = $1"), &[id.as_str().into()]).await?;
        }
        n += sql.execute("DELETE FROM exchanges WHERE id = $1", &[id.as_str().into()]).await?;
        // A chunker job not run yet keeps only the id it will find gone.
        sql.execute(
            "UPDATE jobs SET payload = $1 WHERE queue = $2 AND payload LIKE $3",
            &[
                json!({"exchange_id": id}).to_string().into(),
                crate::commit::CHUNKER_QUEUE.into(),
                format!("%\"exchange_id\":\"{}\"%", id.replace(['%', '_'], "")).into(),
            ],
        )
        .await?;
        forget_episodes_of(sql, id).await?;
    }
    Ok(n)
}

/// Forgets the episodes built from an exchange, their search entries, and
/// every concept drawn from them (with its relationships): a concept's
/// name and definition may carry what was forgotten. Its other episodes go
/// back to waiting, so the next semantic job draws their concepts again.
async fn forget_episodes_of(sql: &Sql, exchange_id: &str) -> Result<()> {
    let like = format!("%\"{}\"%", exchange_id.replace(['%', '_'], ""));
    let gone: Vec<String> = sql
        .query("SELECT id FROM episodes WHERE exchange_ids LIKE $1", &[like.into()])
        .await?
        .iter()
        .map(|r| r.text("id"))
        .collect::<std::result::Result<_, _>>()?;
    for ep in &gone {
        sql.execute("DELETE FROM episodes WHERE id = $1", &[ep.as_str().into()]).await?;
        crate::drift::forget_episode(sql, ep).await?;
        crate::search::remove(sql, crate::consolidate::CORPUS, ep).await?;
        let concepts = sql
            .query(
                "SELECT id, source_episodes FROM semantic_concepts WHERE source_episodes LIKE $1",
                &[format!("%\"{ep}\"%").into()],
            )
            .await?;
        for c in &concepts {
            let id = c.text("id")?;
            let sources: Vec<String> = serde_json::from_str(&c.text("source_episodes")?).unwrap_or_default();
            sql.execute(
                "DELETE FROM semantic_relationships WHERE source_id = $1 OR target_id = $1",
                &[id.as_str().into()],
            )
            .await?;
            sql.execute("DELETE FROM semantic_concepts WHERE id = $1", &[id.as_str().into()]).await?;
            crate::drift::forget_concept(sql, &id).await?;
            for other in sources.iter().filter(|s| *s != ep) {
                sql.execute("UPDATE episodes SET semantic_status = 'pending' WHERE id = $1", &[other.as_str().into()])
                    .await?;
            }
        }
    }
    Ok(())
}

/// Forgets one exchange, one fact, or everything about a topic (its
/// exchanges and their logs, working-memory turns, gists, facts, FOK and
/// the topic itself), and the episodes built from those exchanges with
/// the concepts only they backed.
pub async fn forget(req: ForgetRequest) -> Result<J> {
    let stores = Stores::open().await?;
    let (sql, kv) = (&stores.sql, &stores.kv);
    match req.scope.as_str() {
        "exchange" => {
            let id = req.id.ok_or_else(|| Fail::invalid("scope `exchange` needs `id`"))?;
            let n = sql
                .transaction(async |sql: &Sql| {
                    delete_exchange_rows(sql, std::slice::from_ref(&id)).await.map_err(to_store)
                })
                .await?;
            if n == 0 {
                return Err(Fail::new("not-found", format!("no exchange {id}")));
            }
            Ok(json!({"forgotten": {"exchanges": n}}))
        }
        "fact" => {
            let key = req.key.ok_or_else(|| Fail::invalid("scope `fact` needs `key`"))?;
            let topics: Vec<String> = match req.topic {
                Some(t) => vec![t],
                None => kv
                    .keys("fact_index:")
                    .await?
                    .into_iter()
                    .map(|k| k.trim_start_matches("fact_index:").to_string())
                    .collect(),
            };
            let mut n = 0;
            for t in topics {
                if kv.zrem(&format!("fact_index:{t}"), &key).await? {
                    n += 1;
                }
                kv.delete(&format!("fact:{t}:{key}")).await?;
            }
            if n == 0 {
                return Err(Fail::new("not-found", format!("no fact `{key}`")));
            }
            Ok(json!({"forgotten": {"facts": n}}))
        }
        "topic" => {
            let topic = req.topic.ok_or_else(|| Fail::invalid("scope `topic` needs `topic`"))?;
            let ids: Vec<String> = sql
                .query("SELECT id FROM exchanges WHERE topic = $1", &[topic.as_str().into()])
                .await?
                .iter()
                .map(|r| r.text("id"))
                .collect::<std::result::Result<_, _>>()?;
            let n = sql
                .transaction(async |sql: &Sql| {
                    let n = delete_exchange_rows(sql, &ids).await.map_err(to_store)?;
                    sql.execute("DELETE FROM topics WHERE name = $1", &[topic.as_str().into()]).await?;
                    crate::drift::forget_topic(sql, &topic).await?;
                    Ok(n)
                })
                .await?;
            let mut keys = 0;
            for prefix in [format!("gist:{topic}:"), format!("fact:{topic}:")] {
                for k in kv.keys(&prefix).await? {
                    kv.delete(&k).await?;
                    keys += 1;
                }
            }
            for k in [format!("gist_index:{topic}"), format!("fact_index:{topic}"), format!("fok:{topic}")] {
                kv.delete(&k).await?;
            }
            Ok(json!({"forgotten": {"exchanges": n, "memory_keys": keys, "topic": topic}}))
        }
        other => Err(Fail::invalid(format!("unknown scope `{other}` (exchange, fact or topic)"))),
    }
}

fn to_store(f: Fail) -> mneme_store::StoreError {
    mneme_store::StoreError::new("forget", format!("{}: {}", f.code, f.message))
}

/// Tables the principal's data lives in, in export order.
pub const TABLES: [&str; 34] = [
    "user_traits",
    "threads",
    "exchanges",
    "working_memory",
    "topics",
    "interaction_log",
    "triage_calibration",
    "routing_decisions",
    "cortex_iterations",
    "spark_state",
    "scheduled_items",
    "lists",
    "list_items",
    "persistent_tasks",
    "events",
    "jobs",
    "knowledge_entries",
    "knowledge_jobs",
    "reasoning_patterns",
    "search_index",
    "search_vectors",
    "vector_blocks",
    "rx_observations",
    "rx_recs",
    "rx_artifacts",
    "episodes",
    "semantic_concepts",
    "semantic_relationships",
    "drift_log",
    "drift_cooldowns",
    "curiosity_threads",
    "router_weights",
    "routing_adjustments",
    "routing_metrics",
];
/// Key-value prefixes of the principal's memory.
pub const KV_PREFIXES: [&str; 9] =
    ["gist:", "gist_index:", "fact:", "fact_index:", "fok:", "topic_streak:", "focus:", "sse_pending:", "critic_rate:"];

/// Everything stored about the principal, as JSON.
pub async fn export(now_ms: u64) -> Result<J> {
    let stores = Stores::open().await?;
    let mut tables = Map::new();
    for t in TABLES {
        let rows = stores.sql.query(&format!("SELECT * FROM {t}"), &[]).await?;
        tables.insert(t.into(), J::Array(rows.iter().map(row_json).collect()));
    }
    let mut memory = Map::new();
    for key in stores.kv.keys("fact_index:").await? {
        let topic = key.trim_start_matches("fact_index:").to_string();
        memory.entry("facts").or_insert_with(|| json!({}))[&topic] =
            json!(records::facts(&stores.kv, &topic, now_ms).await?);
    }
    for key in stores.kv.keys("gist_index:").await? {
        let topic = key.trim_start_matches("gist_index:").to_string();
        memory.entry("gists").or_insert_with(|| json!({}))[&topic] =
            json!(records::gists(&stores.kv, &topic, now_ms).await?);
    }
    Ok(json!({"exported_at_ms": now_ms, "tables": tables, "memory": memory}))
}

/// Deletes everything: every table of the principal's data in one
/// transaction, then every memory key.
pub async fn delete_all() -> Result<J> {
    let stores = Stores::open().await?;
    let rows = stores
        .sql
        .transaction(async |sql: &Sql| {
            let mut n = 0;
            for t in TABLES {
                n += sql.execute(&format!("DELETE FROM {t}"), &[]).await?;
            }
            Ok(n)
        })
        .await?;
    let mut keys = 0;
    for p in KV_PREFIXES {
        for k in stores.kv.keys(p).await? {
            stores.kv.delete(&k).await?;
            keys += 1;
        }
    }
    Ok(json!({"deleted": {"rows": rows, "memory_keys": keys}}))
}

#[derive(Debug, Deserialize)]
pub struct EventsRequest {
    /// Events after this id (a reconnect's `Last-Event-ID`)…
    pub after_id: Option<i64>,
    /// …or, on a first connection, the newest events since this time.
    #[serde(default)]
    pub since_ms: u64,
    pub limit: u32,
}

/// The id of the newest event, 0 when there is none.
pub async fn latest_event_id() -> Result<i64> {
    let sql = mneme_store::open_sql().await?;
    let rows = sql.query("SELECT COALESCE(MAX(id), 0) AS id FROM events", &[]).await?;
    Ok(rows.first().map(|r| r.i64("id")).transpose()?.unwrap_or(0))
}

/// Events oldest first: those after `after_id`, or the newest `limit`
/// since `since_ms` when no id is given. Reads SQL only.
pub async fn events_after(req: EventsRequest) -> Result<J> {
    let sql = mneme_store::open_sql().await?;
    let limit = Value::Int(req.limit.clamp(1, 500) as i64);
    let mut rows = match req.after_id {
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
                    &[Value::Int(req.since_ms as i64), limit],
                )
                .await?;
            r.reverse();
            r
        }
    };
    let rows = std::mem::take(&mut rows);
    let events: Vec<J> = rows
        .iter()
        .map(|r| {
            Ok(json!({"id": r.i64("id")?, "type": r.text("type")?, "payload": serde_json::from_str::<J>(&r.text("payload")?).unwrap_or(J::Null), "created_ms": r.i64("created_ms")?}))
        })
        .collect::<std::result::Result<_, mneme_store::StoreError>>()?;
    Ok(J::Array(events))
}

#[derive(Debug, Deserialize)]
pub struct PublishRequest {
    #[serde(rename = "type")]
    pub kind: String,
    pub payload: J,
    pub now_ms: u64,
}

/// Appends a proactive event; returns its id.
pub async fn publish(req: PublishRequest) -> Result<J> {
    let stores = Stores::open().await?;
    Ok(publishing(&stores.sql, async |sql: &Sql| publish_with(sql, &req.kind, &req.payload, req.now_ms).await).await?)
}

#[derive(Debug, Deserialize)]
pub struct JobsRequest {
    pub queue: Option<String>,
    pub status: Option<String>,
    pub limit: u32,
}

pub async fn jobs(req: JobsRequest) -> Result<J> {
    let stores = Stores::open().await?;
    let rows = stores
        .sql
        .query(
            "SELECT id, queue, ref, payload, status, attempts, created_ms, updated_ms FROM jobs \
             WHERE ($1 = '' OR queue = $1) AND ($2 = '' OR status = $2) ORDER BY id DESC LIMIT $3",
            &[
                req.queue.unwrap_or_default().into(),
                req.status.unwrap_or_default().into(),
                Value::Int(req.limit.clamp(1, 500) as i64),
            ],
        )
        .await?;
    let jobs: Vec<J> = rows
        .iter()
        .map(|r| {
            let mut j = row_json(r);
            j["payload"] = serde_json::from_str(&r.text("payload")?).unwrap_or(J::Null);
            Ok(j)
        })
        .collect::<std::result::Result<_, mneme_store::StoreError>>()?;
    Ok(J::Array(jobs))
}

/// Fires every reminder due by `now_ms`: one `reminder` event each, then the
/// reminder is marked fired or moved to its next occurrence, all in one
/// transaction so a reminder fires exactly once even with two ticks at once.
/// A recurrence's next time is reckoned in the principal's zone, so a daily
/// 09:00 stays 09:00 across a daylight-saving change.
pub async fn fire_reminders(now_ms: u64) -> Result<J> {
    let zone = crate::principal_zone().await?;
    let stores = Stores::open().await?;
    let fired = publishing(&stores.sql, async |sql: &Sql| {
        let due = sql
            .query(
                "SELECT id, message, due_ms, recurrence, item_type FROM scheduled_items WHERE status = 'pending' AND due_ms <= $1 ORDER BY due_ms",
                &[Value::Int(now_ms as i64)],
            )
            .await?;
        let mut fired = 0;
        for r in &due {
            let id = r.text("id")?;
            let due_ms = r.i64("due_ms")?;
            let recurrence = r.opt_text("recurrence")?;
            let claimed = match recurrence.as_deref().and_then(Recurrence::parse) {
                Some(every) => {
                    let mut next = every.next(due_ms, &zone);
                    while next <= now_ms as i64 {
                        next = every.next(next, &zone);
                    }
                    sql.execute("UPDATE scheduled_items SET due_ms = $2 WHERE id = $1 AND status = 'pending' AND due_ms = $3", &[id.as_str().into(), Value::Int(next), Value::Int(due_ms)]).await?
                }
                None => sql.execute("UPDATE scheduled_items SET status = 'fired' WHERE id = $1 AND status = 'pending'", &[id.as_str().into()]).await?,
            };
            if claimed == 1 {
                let payload = json!({"reminder_id": id, "message": r.text("message")?, "due_ms": due_ms, "item_type": r.text("item_type")?, "recurrence": recurrence});
                publish_with(sql, "reminder", &payload, now_ms).await?;
                fired += 1;
            }
        }
        Ok(fired)
    })
    .await?;
    Ok(json!({"fired": fired}))
}
