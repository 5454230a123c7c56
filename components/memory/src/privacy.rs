//! The principal's control of their memory: forgetting an exchange, a
//! fact or a topic (with the episodes and concepts built from them), the
//! readable memory view that ends the privacy export (`backup` writes the
//! rest), and deleting it all.

use mneme_store::sql::SqlKind;
use mneme_store::{Sql, Stores};
use mneme_substrate::jobs::CHUNKER_QUEUE;
use mneme_substrate::{Fail, Result, graph, records, search};
use mneme_types::memory::{Deleted, FactKey, ForgetScope, Forgotten, TopicForgotten};
use serde_json::{Map, Value as J, json};

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
                CHUNKER_QUEUE.into(),
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
        graph::forget_episode(sql, ep).await?;
        search::remove(sql, graph::CORPUS, ep).await?;
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
            graph::forget_concept(sql, &id).await?;
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
pub async fn forget(scope: ForgetScope) -> Result<Forgotten> {
    let stores = Stores::open().await?;
    let (sql, kv) = (&stores.sql, &stores.kv);
    match scope {
        ForgetScope::Exchange(id) => {
            let n = sql
                .transaction(async |sql: &Sql| {
                    delete_exchange_rows(sql, std::slice::from_ref(&id)).await.map_err(to_store)
                })
                .await?;
            if n == 0 {
                return Err(Fail::new("not-found", format!("no exchange {id}")));
            }
            Ok(Forgotten::Exchanges(n))
        }
        ForgetScope::Fact(FactKey { key, topic }) => {
            let topics: Vec<String> = match topic {
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
            Ok(Forgotten::Facts(n))
        }
        ForgetScope::Topic(topic) => {
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
                    graph::forget_topic(sql, &topic).await?;
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
            Ok(Forgotten::Topic(TopicForgotten { exchanges: n, memory_keys: keys, topic }))
        }
    }
}

fn to_store(f: Fail) -> mneme_store::StoreError {
    mneme_store::StoreError::new("forget", format!("{}: {}", f.code, f.message))
}

/// Tables `delete-all` empties: the principal's data (`mneme-backup`'s
/// list, which the export writes) and the search index built from it.
fn tables() -> impl Iterator<Item = &'static str> {
    mneme_backup::DATA_TABLES.iter().copied().chain(["search_index", "search_vectors", "vector_blocks"])
}
/// Key-value prefixes of the principal's memory.
pub const KV_PREFIXES: [&str; 9] =
    ["gist:", "gist_index:", "fact:", "fact_index:", "fok:", "topic_streak:", "focus:", "sse_pending:", "critic_rate:"];

/// The readable view of memory an export ends with (the facts, gists and
/// focus that are live, by topic and thread), as the principal reads it; a
/// restore reads the memory keys instead (`kv`).
pub async fn memory_view(stores: &Stores, now_ms: u64) -> Result<J> {
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
    for key in stores.kv.keys("focus:").await? {
        let thread = key.trim_start_matches("focus:").to_string();
        if let Some(f) = records::focus(&stores.kv, &thread, now_ms).await? {
            memory.entry("focus").or_insert_with(|| json!({}))[&thread] = json!(f);
        }
    }
    Ok(J::Object(memory))
}

/// Deletes everything: every table of the principal's data in one
/// transaction, then every memory key.
pub async fn delete_all() -> Result<Deleted> {
    let stores = Stores::open().await?;
    let rows = stores
        .sql
        .transaction(async |sql: &Sql| {
            // A writer of the index holds its corpus's lock until it
            // commits, so nothing it adds outlives the deletion half-counted.
            for corpus in search::CORPORA {
                search::lock(sql, corpus).await.map_err(to_store)?;
            }
            let mut n = 0;
            for t in tables() {
                n += sql.execute(&format!("DELETE FROM {t}"), &[]).await?;
            }
            // PostgreSQL's term and item counts index `search_index`
            // (D-K14, D-K15), as FTS5's tables do on SQLite, and the
            // centroids the vector index (D-K16): drawn from the
            // principal's data, so deleted with it, but not counted as the
            // principal's rows.
            if sql.kind() == SqlKind::Postgres {
                sql.execute("DELETE FROM search_terms", &[]).await?;
                sql.execute("DELETE FROM search_corpora", &[]).await?;
            }
            sql.execute("DELETE FROM vector_centroids", &[]).await?;
            // The timeline's counts of the entries (migration 0019).
            sql.execute("DELETE FROM knowledge_days", &[]).await?;
            sql.execute("DELETE FROM vector_training", &[]).await?;
            // What was restored here is gone with it: restoring the same
            // export again asks for an empty store again.
            sql.execute("DELETE FROM restores", &[]).await?;
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
    Ok(Deleted { rows, memory_keys: keys })
}
