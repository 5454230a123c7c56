//! Memory consolidation (002 §6): the three queues the commit fills,
//! drained with claims and leases. `claim` hands a worker one job and what
//! its model call needs; `apply` writes the result and marks the job done
//! under the claim, in one transaction, so a crash or a lost lease writes
//! nothing twice (D-B4).

use mneme_background::consolidate::{
    self as rules, Chunk, ConceptDraft, EpisodeBrief, EpisodeDraft, Exchange, Semantic, semantic_due,
};
use mneme_store::{Sql, Stores, Value};
use serde::Deserialize;
use serde_json::{Value as J, json};

use crate::commit::{CHUNKER_QUEUE, EPISODIC_QUEUE, SEMANTIC_QUEUE, enqueue};
use crate::{Fail, Result, as_store_error, embed_many, f32_bytes, in_list, json_text, random_hex, records, search};

/// A job is failed after this many claims.
pub const MAX_ATTEMPTS: i64 = 3;
/// A retried job waits this long per attempt.
pub const RETRY_BACKOFF_MS: i64 = 30_000;
/// The search-index corpus of episodes.
pub const CORPUS: &str = "episode";
/// Concept names a semantic job shows the model, strongest first.
const KNOWN_CONCEPTS: i64 = 50;

#[derive(Debug, Deserialize)]
pub struct ClaimRequest {
    pub now_ms: u64,
    pub lease_ms: u64,
}

/// Claims the oldest job of the three queues that is queued, or running
/// with its lease run out, and loads what its model call reads.
pub async fn claim(r: ClaimRequest) -> Result<J> {
    let stores = Stores::open().await?;
    let sql = &stores.sql;
    let queues = [CHUNKER_QUEUE, EPISODIC_QUEUE, SEMANTIC_QUEUE];
    let give_up = "'gave up: the job did not finish in ' || attempts || ' attempts'";
    let Some(row) = claim_job(sql, &queues, r.now_ms, r.lease_ms, MAX_ATTEMPTS, give_up).await? else {
        return Ok(json!({"job": null}));
    };
    let (id, queue, token) = (row.i64("id")?, row.text("queue")?, row.text("claim")?);
    let payload: J = serde_json::from_str(&row.text("payload")?).unwrap_or(J::Null);
    let input = match queue.as_str() {
        CHUNKER_QUEUE => chunker_input(sql, &payload).await?,
        EPISODIC_QUEUE => episode_input(sql, &payload).await?,
        _ => semantic_input(sql).await?,
    };
    Ok(json!({
        "job": {"id": id, "queue": queue, "claim": token, "attempts": row.i64("attempts")?},
        "input": input,
    }))
}

/// Claim attempts when another worker wins the race for a row.
const CLAIM_TRIES: usize = 3;

/// Claims the oldest job of `queues` in the `jobs` table that is queued, or
/// running with its lease out, under a fresh claim token and lease; first
/// fails the jobs whose lease ran out `max_attempts` times, with
/// `give_up_sql` (an SQL expression) as their result. The row has `id`,
/// `queue`, `payload`, `attempts` and `claim`.
pub async fn claim_job(
    sql: &Sql,
    queues: &[&str],
    now_ms: u64,
    lease_ms: u64,
    max_attempts: i64,
    give_up_sql: &str,
) -> Result<Option<mneme_store::Row>> {
    let now = now_ms as i64;
    let n = queues.len();
    let mut params: Vec<Value> = vec![now.into(), max_attempts.into()];
    params.extend(queues.iter().map(|q| Value::from(*q)));
    sql.execute(
        &format!(
            "UPDATE jobs SET status = 'failed', claim = NULL, updated_ms = $1, result = {give_up_sql}
             WHERE queue IN ({}) AND status = 'running' AND lease_until_ms < $1 AND attempts >= $2",
            in_list(3, n)
        ),
        &params,
    )
    .await?;
    let token = random_hex(8);
    let mut params: Vec<Value> = vec![token.as_str().into(), (now + lease_ms as i64).into(), now.into()];
    params.extend(queues.iter().map(|q| Value::from(*q)));
    // On PostgreSQL a worker that loses the race for a row gets nothing
    // back though other jobs wait: it tries again, a few times.
    for _ in 0..CLAIM_TRIES {
        let rows = sql
            .query(
                &format!(
                    "UPDATE jobs SET status = 'running', claim = $1, lease_until_ms = $2, attempts = attempts + 1, updated_ms = $3
                     WHERE id = (SELECT id FROM jobs WHERE queue IN ({0}) AND status IN ('queued', 'running')
                                 AND lease_until_ms < $3 ORDER BY id LIMIT 1)
                       AND status IN ('queued', 'running') AND lease_until_ms < $3
                     RETURNING id, queue, payload, attempts, claim",
                    in_list(4, n)
                ),
                &params,
            )
            .await?;
        if let Some(row) = rows.into_iter().next() {
            return Ok(Some(row));
        }
        let mut count: Vec<Value> = vec![now.into()];
        count.extend(queues.iter().map(|q| Value::from(*q)));
        let waiting = sql
            .query(
                &format!(
                    "SELECT count(*) AS n FROM jobs WHERE queue IN ({}) AND status IN ('queued', 'running')
                     AND lease_until_ms < $1",
                    in_list(2, n)
                ),
                &count,
            )
            .await?;
        if waiting.first().map(|r| r.i64("n")).transpose()?.unwrap_or(0) == 0 {
            break;
        }
    }
    Ok(None)
}

/// The exchange, or null when it was forgotten since.
async fn chunker_input(sql: &Sql, p: &J) -> Result<J> {
    let id = p["exchange_id"].as_str().unwrap_or_default();
    let rows = sql.query("SELECT topic, prompt, response FROM exchanges WHERE id = $1", &[id.into()]).await?;
    let Some(r) = rows.first() else { return Ok(J::Null) };
    Ok(
        json!({"exchange_id": id, "topic": r.text("topic")?, "prompt": r.text("prompt")?, "response": r.text("response")?}),
    )
}

/// The window's exchanges, oldest first (social exits excluded), and the
/// topic most of them are on.
async fn episode_input(sql: &Sql, p: &J) -> Result<J> {
    let thread = p["thread_id"].as_str().unwrap_or_default();
    let rows = sql
        .query(
            "SELECT id, topic, prompt, response FROM exchanges WHERE thread_id = $1 AND created_ms > $2 AND created_ms <= $3
             AND reply_source <> 'social' ORDER BY created_ms, id LIMIT 40",
            &[thread.into(), p["since_ms"].as_i64().unwrap_or(0).into(), p["until_ms"].as_i64().unwrap_or(0).into()],
        )
        .await?;
    let ex: Vec<Exchange> = rows
        .iter()
        .map(|r| {
            Ok(Exchange {
                id: r.text("id")?,
                topic: r.text("topic")?,
                prompt: r.text("prompt")?,
                response: r.text("response")?,
            })
        })
        .collect::<Result<_>>()?;
    if ex.is_empty() {
        return Ok(J::Null);
    }
    let mut counts: Vec<(&str, usize)> = Vec::new();
    for e in &ex {
        match counts.iter_mut().find(|(t, _)| *t == e.topic) {
            Some((_, n)) => *n += 1,
            None => counts.push((&e.topic, 1)),
        }
    }
    let topic = counts.iter().max_by_key(|(_, n)| *n).map(|(t, _)| t.to_string()).unwrap_or_default();
    Ok(json!({"thread_id": thread, "topic": topic, "exchanges": ex}))
}

/// The oldest episodes still waiting for semantic consolidation, and the
/// names of the strongest known concepts.
async fn semantic_input(sql: &Sql) -> Result<J> {
    let rows = sql
        .query(
            "SELECT id, topic, gist, intent, outcome FROM episodes WHERE semantic_status = 'pending' ORDER BY created_ms, id LIMIT $1",
            &[(rules::SEMANTIC_BATCH as i64).into()],
        )
        .await?;
    let eps: Vec<EpisodeBrief> = rows
        .iter()
        .map(|r| {
            let intent: J = serde_json::from_str(&r.text("intent")?).unwrap_or(J::Null);
            Ok(EpisodeBrief {
                id: r.text("id")?,
                topic: r.text("topic")?,
                gist: r.text("gist")?,
                intent: intent["direction"].as_str().unwrap_or_default().to_string(),
                outcome: r.text("outcome")?,
            })
        })
        .collect::<Result<_>>()?;
    if eps.is_empty() {
        return Ok(J::Null);
    }
    let known: Vec<String> = sql
        .query("SELECT name FROM semantic_concepts ORDER BY strength DESC, name LIMIT $1", &[KNOWN_CONCEPTS.into()])
        .await?
        .iter()
        .map(|r| r.text("name"))
        .collect::<std::result::Result<_, _>>()?;
    Ok(json!({"episodes": eps, "known": known}))
}

#[derive(Debug, Deserialize)]
pub struct ApplyRequest {
    pub job_id: i64,
    pub claim: String,
    pub queue: String,
    /// What produced the output: the model's name, or the rules' label.
    pub source: String,
    /// The claimed input, as `claim` returned it.
    pub input: J,
    /// The parsed output: a chunk, an episode draft or a semantic extraction;
    /// null when the input was gone.
    pub output: J,
    pub now_ms: u64,
}

fn parse<T: serde::de::DeserializeOwned>(v: &J, what: &str) -> Result<T> {
    serde_json::from_value(v.clone()).map_err(|e| Fail::invalid(format!("{what}: {e}")))
}

/// Writes a job's result and marks it done, under its claim. A claim that
/// is gone (the lease ran out and another worker took the job) is a
/// `conflict` and nothing is written.
pub async fn apply(r: ApplyRequest) -> Result<J> {
    let stores = Stores::open().await?;
    if r.output.is_null() || r.input.is_null() {
        let summary = json!({"skipped": "its source was forgotten before it ran"});
        finish(&stores.sql, &r, &summary).await?;
        return Ok(summary);
    }
    match r.queue.as_str() {
        CHUNKER_QUEUE => {
            let chunk: Chunk = parse(&r.output, "chunk")?;
            held(&stores.sql, &r).await?;
            // Forgotten since the claim: nothing to keep.
            let exchange = r.input["exchange_id"].as_str().unwrap_or_default();
            if !exists(&stores.sql, &[exchange]).await? {
                let summary = json!({"skipped": "its exchange was forgotten before it ran"});
                finish(&stores.sql, &r, &summary).await?;
                return Ok(summary);
            }
            // Gists and facts live in the key-value store, outside the
            // transaction; both stores dedup, so a rerun after a crash here
            // changes nothing (D-B4).
            let topic = r.input["topic"].as_str().unwrap_or(mneme_conversation::topic::GENERAL_TOPIC);
            let mut outcomes = Vec::new();
            for g in &chunk.gists {
                let o = records::store_gist(
                    &stores.kv,
                    topic,
                    &g.content,
                    &g.kind,
                    g.confidence,
                    rules::CHUNKER_MIN_CONFIDENCE,
                    r.now_ms,
                )
                .await?;
                outcomes.push(json!({"type": g.kind, "outcome": o}));
            }
            let mut facts = 0;
            for f in &chunk.facts {
                if records::store_fact(&stores.kv, topic, &f.key, &f.value, f.confidence, "memory_chunker", r.now_ms)
                    .await?
                {
                    facts += 1;
                }
            }
            let summary = json!({"topic": topic, "gists": outcomes, "facts": facts, "source": r.source});
            finish(&stores.sql, &r, &summary).await?;
            Ok(summary)
        }
        EPISODIC_QUEUE => {
            let draft: EpisodeDraft = parse(&r.output, "episode")?;
            let embedding = embed_many(&[draft.embedding_text()])?.pop().unwrap_or_default();
            let summary = stores
                .sql
                .transaction(async |sql: &Sql| store_episode(sql, &r, &draft, &embedding).await.map_err(as_store_error))
                .await?;
            Ok(summary)
        }
        SEMANTIC_QUEUE => {
            let s: Semantic = parse(&r.output, "semantic extraction")?;
            let texts: Vec<String> = s.concepts.iter().map(|c| format!("{}: {}", c.name, c.definition)).collect();
            let embeddings = embed_many(&texts)?;
            let summary = stores
                .sql
                .transaction(async |sql: &Sql| store_semantic(sql, &r, &s, &embeddings).await.map_err(as_store_error))
                .await?;
            Ok(summary)
        }
        other => Err(Fail::invalid(format!("no consolidation queue named `{other}`"))),
    }
}

/// Fails with `conflict` unless the worker still holds the job.
async fn held(sql: &Sql, r: &ApplyRequest) -> Result<()> {
    let rows = sql
        .query(
            "SELECT id FROM jobs WHERE id = $1 AND claim = $2 AND status = 'running'",
            &[r.job_id.into(), r.claim.as_str().into()],
        )
        .await?;
    if rows.is_empty() {
        return Err(Fail::new("lease-lost", format!("job {} is no longer this worker's", r.job_id)));
    }
    Ok(())
}

/// Whether every exchange still exists. Inside a transaction the no-op
/// update locks their rows (PostgreSQL), so a concurrent forget waits for
/// the episode and then deletes it with them.
async fn exists(sql: &Sql, ids: &[&str]) -> Result<bool> {
    if ids.is_empty() {
        return Ok(false);
    }
    let params: Vec<Value> = ids.iter().map(|i| Value::from(*i)).collect();
    let n =
        sql.execute(&format!("UPDATE exchanges SET id = id WHERE id IN ({})", in_list(1, ids.len())), &params).await?;
    Ok(n as usize == ids.len())
}

/// Marks the job done under its claim; `conflict` when the claim is gone.
async fn finish(sql: &Sql, r: &ApplyRequest, summary: &J) -> Result<()> {
    let n = sql
        .execute(
            "UPDATE jobs SET status = 'done', claim = NULL, result = $3, updated_ms = $4 WHERE id = $1 AND claim = $2 AND status = 'running'",
            &[r.job_id.into(), r.claim.as_str().into(), summary.to_string().into(), (r.now_ms as i64).into()],
        )
        .await?;
    if n == 0 {
        return Err(Fail::new("lease-lost", format!("job {} is no longer this worker's", r.job_id)));
    }
    Ok(())
}

async fn store_episode(sql: &Sql, r: &ApplyRequest, d: &EpisodeDraft, embedding: &[f32]) -> Result<J> {
    let id = format!("ep-{}", random_hex(8));
    let exchanges: Vec<Exchange> = parse(&r.input["exchanges"], "the episode's exchanges")?;
    let ids: Vec<&str> = exchanges.iter().map(|e| e.id.as_str()).collect();
    let thread = r.input["thread_id"].as_str().unwrap_or_default();
    let topic = r.input["topic"].as_str().unwrap_or_default();
    let salience = d.factors.stored();
    if !exists(sql, &ids).await? {
        let summary = json!({"skipped": "an exchange of it was forgotten before it ran"});
        finish(sql, r, &summary).await?;
        return Ok(summary);
    }
    let summary = json!({"episode_id": id, "salience": salience, "exchanges": ids.len(), "source": r.source});
    finish(sql, r, &summary).await?;
    sql.execute(
        "INSERT INTO episodes (id, job_id, thread_id, topic, exchange_ids, intent, context, action, emotion, outcome, gist,
                               salience, salience_factors, open_loops, embedding, source, created_ms)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17)",
        &[
            id.as_str().into(),
            r.job_id.into(),
            thread.into(),
            topic.into(),
            json_text(&ids).into(),
            d.intent.to_string().into(),
            d.context.to_string().into(),
            d.action.as_str().into(),
            d.emotion.to_string().into(),
            d.outcome.as_str().into(),
            d.gist.as_str().into(),
            salience.into(),
            json_text(&d.factors).into(),
            json_text(&d.open_loops).into(),
            f32_bytes(embedding).into(),
            r.source.as_str().into(),
            (r.now_ms as i64).into(),
        ],
    )
    .await?;
    let title = format!("Episode: {}", topic.replace('-', " "));
    let mut body = d.gist.clone();
    for part in [&d.outcome, &d.action] {
        if !part.is_empty() {
            body.push_str(". ");
            body.push_str(part);
        }
    }
    if !d.open_loops.is_empty() {
        body.push_str(". Open: ");
        body.push_str(&d.open_loops.join("; "));
    }
    let meta = json!({"thread_id": thread, "topic": topic, "salience": salience});
    search::put(
        sql,
        &search::NewItem { corpus: CORPUS, ref_id: &id, title: &title, body: &body, meta: &meta },
        embedding,
        r.now_ms,
    )
    .await?;
    // The episodic worker queues semantic consolidation (002 §9).
    let rows = sql
        .query(
            "SELECT (SELECT count(*) FROM episodes WHERE semantic_status = 'pending') AS waiting,
                    (SELECT CAST(avg(salience) AS DOUBLE PRECISION) FROM episodes WHERE semantic_status = 'pending' AND id <> $1) AS mean,
                    (SELECT max(created_ms) FROM jobs WHERE queue = $2) AS last_queued,
                    (SELECT count(*) FROM jobs WHERE queue = $2 AND status IN ('queued', 'running')) AS open",
            &[id.as_str().into(), SEMANTIC_QUEUE.into()],
        )
        .await?;
    let row = rows.first().ok_or_else(|| Fail::new("internal", "the trigger query returned no row"))?;
    let waiting = row.i64("waiting")?;
    let mean = row.opt_f64("mean")?.map(|m| m / 10.0);
    let last = row.opt_i64("last_queued")?.map(|t| t as u64);
    let open = row.i64("open")? > 0;
    let queued = semantic_due(waiting, salience as f64 / 10.0, mean, last, open, r.now_ms);
    if queued {
        enqueue(sql, SEMANTIC_QUEUE, None, &json!({"waiting": waiting}).to_string(), r.now_ms).await?;
    }
    let mut summary = summary;
    summary["semantic_queued"] = json!(queued);
    Ok(summary)
}

async fn store_semantic(sql: &Sql, r: &ApplyRequest, s: &Semantic, embeddings: &[Vec<f32>]) -> Result<J> {
    let batch: Vec<EpisodeBrief> = parse(&r.input["episodes"], "the batch's episodes")?;
    let ids: Vec<Value> = batch.iter().map(|e| Value::from(e.id.as_str())).collect();
    // Only the episodes this job turns from pending to done count: another
    // job that consolidated some of them first keeps its credit.
    let owned: Vec<String> = sql
        .query(
            &format!(
                "UPDATE episodes SET semantic_status = 'done' WHERE semantic_status = 'pending' AND id IN ({}) RETURNING id",
                in_list(1, ids.len())
            ),
            &ids,
        )
        .await?
        .iter()
        .map(|row| row.text("id"))
        .collect::<std::result::Result<_, _>>()?;
    let confidence = if r.source == mneme_background::cycle::RULES_LABEL { 0.5 } else { 0.8 };
    let now = r.now_ms as i64;
    let mut concept_ids: Vec<(String, String)> = Vec::new();
    let mut tally = Tally::default();
    for (c, e) in s.concepts.iter().zip(embeddings) {
        let from: Vec<&String> = c.episodes.iter().filter(|id| owned.contains(id)).collect();
        if from.is_empty() {
            continue;
        }
        let id = upsert_concept(sql, c, &from, e, confidence, now, &mut tally).await?;
        concept_ids.push((c.name.clone(), id));
    }
    let mut relations = 0;
    for rel in &s.relationships {
        let find = |n: &str| concept_ids.iter().find(|(name, _)| name == n).map(|(_, id)| id.clone());
        let (Some(a), Some(b)) = (find(&rel.source), find(&rel.target)) else { continue };
        let old = sql
            .query(
                "SELECT strength FROM semantic_relationships WHERE source_id = $1 AND target_id = $2 AND relationship_type = $3",
                &[a.as_str().into(), b.as_str().into(), rel.kind.as_str().into()],
            )
            .await?;
        let strength = match old.first() {
            Some(row) => rules::relation_reinforced(row.f64("strength")?, rel.strength),
            None => rel.strength,
        };
        sql.execute(
            "INSERT INTO semantic_relationships (source_id, target_id, relationship_type, strength, bidirectional, confidence, created_ms, updated_ms)
             VALUES ($1, $2, $3, $4, 1, $5, $6, $6)
             ON CONFLICT (source_id, target_id, relationship_type) DO UPDATE SET strength = excluded.strength, updated_ms = excluded.updated_ms",
            &[a.as_str().into(), b.as_str().into(), rel.kind.as_str().into(), strength.into(), confidence.into(), now.into()],
        )
        .await?;
        relations += 1;
    }
    let summary = json!({"episodes": owned.len(), "concepts_created": tally.created, "concepts_reinforced": tally.reinforced,
                         "relationships": relations, "source": r.source});
    finish(sql, r, &summary).await?;
    Ok(summary)
}

/// How many concepts one apply created and reinforced.
#[derive(Default)]
struct Tally {
    created: u32,
    reinforced: u32,
}

async fn upsert_concept(
    sql: &Sql,
    c: &ConceptDraft,
    from: &[&String],
    embedding: &[f32],
    confidence: f64,
    now: i64,
    tally: &mut Tally,
) -> Result<String> {
    let existing = sql
        .query(
            "SELECT id, strength, source_episodes, confidence FROM semantic_concepts WHERE name = $1",
            &[c.name.as_str().into()],
        )
        .await?;
    if let Some(row) = existing.first() {
        let id = row.text("id")?;
        let mut sources: Vec<String> = serde_json::from_str(&row.text("source_episodes")?).unwrap_or_default();
        let fresh: Vec<&&String> = from.iter().filter(|e| !sources.contains(e)).collect();
        sources.extend(fresh.iter().map(|e| (**e).clone()));
        let strength = rules::reinforced(row.f64("strength")?, fresh.len());
        sql.execute(
            "UPDATE semantic_concepts SET strength = $2, confidence = $3, consolidation_count = consolidation_count + 1,
             source_episodes = $4, last_reinforced_ms = $5, updated_ms = $5 WHERE id = $1",
            &[id.as_str().into(), strength.into(), row.f64("confidence")?.max(confidence).into(), json_text(&sources).into(), now.into()],
        )
        .await?;
        tally.reinforced += 1;
        return Ok(id);
    }
    let id = format!("c-{}", random_hex(8));
    let strength =
        (rules::CONCEPT_START + rules::CONCEPT_REINFORCE * (from.len() as f64 - 1.0)).min(rules::CONCEPT_MAX);
    sql.execute(
        "INSERT INTO semantic_concepts (id, name, concept_type, definition, domain, abstraction_level, strength, confidence,
                                        source_episodes, embedding, last_reinforced_ms, created_ms, updated_ms)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $11, $11)",
        &[
            id.as_str().into(),
            c.name.as_str().into(),
            c.kind.as_str().into(),
            c.definition.as_str().into(),
            c.domain.as_str().into(),
            i64::from(c.abstraction_level).into(),
            strength.into(),
            confidence.into(),
            json_text(from).into(),
            f32_bytes(embedding).into(),
            now.into(),
        ],
    )
    .await?;
    tally.created += 1;
    Ok(id)
}

#[derive(Debug, Deserialize)]
pub struct FailRequest {
    pub job_id: i64,
    pub claim: String,
    pub error: String,
    pub retry: bool,
    pub now_ms: u64,
}

/// Gives a claimed job back: queued again after a backoff while attempts
/// remain (and `retry`), else failed with the error.
pub async fn fail(r: FailRequest) -> Result<J> {
    let sql = mneme_store::open_sql().await?;
    let queue = crate::schedule::Queue { table: "jobs", error_column: "result", backoff_ms: RETRY_BACKOFF_MS };
    let status = crate::schedule::give_back(
        &sql,
        &queue,
        (r.job_id.into(), &r.claim),
        json!({"error": r.error}).to_string().into(),
        if r.retry { MAX_ATTEMPTS } else { 0 },
        r.now_ms as i64,
    )
    .await?;
    Ok(json!({"status": status}))
}

/// Jobs still waiting or running on the consolidation queues.
pub async fn pending(sql: &Sql) -> Result<i64> {
    let rows = sql
        .query(
            "SELECT count(*) AS n FROM jobs WHERE queue IN ($1, $2, $3) AND status IN ('queued', 'running')",
            &[CHUNKER_QUEUE.into(), EPISODIC_QUEUE.into(), SEMANTIC_QUEUE.into()],
        )
        .await?;
    Ok(rows.first().map(|r| r.i64("n")).transpose()?.unwrap_or(0))
}

/// Concepts compared with a seed by embedding when no name matches.
const SEED_CANDIDATES: i64 = 2_000;
/// A seed names a concept whose embedding is at least this close.
pub const SEED_COSINE: f32 = 0.6;

/// The concepts a list of seeds stands for: a concept named by the seed or
/// by one of its keywords; a seed that names none takes its nearest
/// concept by embedding (at least 0.6). Returns `(id, name)`.
pub async fn concept_seeds(sql: &Sql, seeds: &[String]) -> Result<Vec<(String, String)>> {
    let per_seed: Vec<(String, Vec<String>)> = seeds
        .iter()
        .map(|s| {
            let mut names = vec![rules::concept_name(s)];
            names.extend(mneme_conversation::generate::keywords(s));
            names.retain(|n| !n.is_empty());
            (s.clone(), names)
        })
        .collect();
    let mut names: Vec<&String> = per_seed.iter().flat_map(|(_, n)| n).collect();
    names.dedup();
    if names.is_empty() {
        return Ok(Vec::new());
    }
    let params: Vec<Value> = names.iter().map(|n| Value::from(n.as_str())).collect();
    let mut found: Vec<(String, String)> = sql
        .query(&format!("SELECT id, name FROM semantic_concepts WHERE name IN ({})", in_list(1, names.len())), &params)
        .await?
        .iter()
        .map(|r| Ok((r.text("id")?, r.text("name")?)))
        .collect::<Result<_>>()?;
    let unmatched: Vec<String> = per_seed
        .into_iter()
        .filter(|(_, n)| !n.iter().any(|n| found.iter().any(|(_, f)| f == n)))
        .map(|(s, _)| s)
        .collect();
    if unmatched.is_empty() {
        return Ok(found);
    }
    let rows = sql
        .query(
            "SELECT id, name, embedding FROM semantic_concepts ORDER BY strength DESC, id LIMIT $1",
            &[SEED_CANDIDATES.into()],
        )
        .await?;
    if rows.is_empty() {
        return Ok(found);
    }
    let concepts: Vec<(String, String, Vec<f32>)> = rows
        .iter()
        .map(|r| Ok((r.text("id")?, r.text("name")?, crate::bytes_f32(&r.blob("embedding")?))))
        .collect::<Result<_>>()?;
    for e in embed_many(&unmatched)? {
        let best = concepts
            .iter()
            .map(|(id, name, v)| (id, name, mneme_text::cosine(&e, v) as f32))
            .filter(|x| x.2 >= SEED_COSINE)
            .max_by(|a, b| a.2.total_cmp(&b.2));
        if let Some((id, name, _)) = best
            && !found.iter().any(|(f, _)| f == id)
        {
            found.push((id.clone(), name.clone()));
        }
    }
    Ok(found)
}

/// Edges read per hop of [`neighbourhood`], strongest first: a bound on
/// one walk however dense the graph grows.
pub const EDGES_PER_HOP: i64 = 2_000;

/// The relationships within `depth` hops of the seeds (by concept id), as
/// the edges spreading activation walks; without `weak`, only edges strong
/// enough to carry activation on their own (0.5 and up).
pub async fn neighbourhood(sql: &Sql, seeds: &[String], depth: u32, weak: bool) -> Result<Vec<rules::Edge>> {
    let mut edges: Vec<rules::Edge> = Vec::new();
    let mut have: std::collections::HashSet<(String, String)> = std::collections::HashSet::new();
    let mut frontier: Vec<String> = seeds.to_vec();
    let mut seen: std::collections::HashSet<String> = seeds.iter().cloned().collect();
    let floor = if weak { 0.0 } else { rules::WEAK_EDGE };
    for _ in 0..depth {
        if frontier.is_empty() {
            break;
        }
        let mut params: Vec<Value> = frontier.iter().map(|f| Value::from(f.as_str())).collect();
        let list = in_list(1, frontier.len());
        params.push(floor.into());
        params.push(EDGES_PER_HOP.into());
        let (f, l) = (frontier.len() + 1, frontier.len() + 2);
        let rows = sql
            .query(
                &format!(
                    "SELECT source_id, target_id, max(strength) AS strength FROM semantic_relationships
                     WHERE (source_id IN ({list}) OR target_id IN ({list})) AND strength >= ${f}
                     GROUP BY source_id, target_id ORDER BY max(strength) DESC, source_id, target_id LIMIT ${l}"
                ),
                &params,
            )
            .await?;
        let mut next = Vec::new();
        for r in &rows {
            let e = rules::Edge { a: r.text("source_id")?, b: r.text("target_id")?, strength: r.f64("strength")? };
            for end in [&e.a, &e.b] {
                if seen.insert(end.clone()) {
                    next.push(end.clone());
                }
            }
            if have.insert((e.a.clone(), e.b.clone())) {
                edges.push(e);
            }
        }
        frontier = next;
    }
    Ok(edges)
}

/// Concept names by id.
pub async fn concept_names(sql: &Sql, ids: &[String]) -> Result<Vec<(String, String)>> {
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let params: Vec<Value> = ids.iter().map(|i| Value::from(i.as_str())).collect();
    sql.query(&format!("SELECT id, name FROM semantic_concepts WHERE id IN ({})", in_list(1, ids.len())), &params)
        .await?
        .iter()
        .map(|r| Ok((r.text("id")?, r.text("name")?)))
        .collect()
}

/// Episodes whose embedding is at least this close to a message reach its
/// context.
pub const CONTEXT_EPISODE_COSINE: f32 = 0.45;

/// What consolidation built that bears on a message, for its context (the
/// design's episodes for the frontal cortex, concepts for context
/// assembly): the 2 closest episodes by embedding (at least 0.45) and the
/// concepts the message names.
pub async fn memories(sql: &Sql, text: &str, embedding: &[f32]) -> Result<Vec<String>> {
    let found = search::candidates(sql, &[CORPUS], text, embedding, mneme_knowledge::fusion::Mode::Vector).await?;
    let mut close: Vec<(String, f32)> =
        found.found.values().filter(|(_, c)| *c >= CONTEXT_EPISODE_COSINE).cloned().collect();
    close.sort_by(|a, b| b.1.total_cmp(&a.1));
    close.truncate(2);
    let mut out = Vec::new();
    if !close.is_empty() {
        let params: Vec<Value> = close.iter().map(|(id, _)| Value::from(id.as_str())).collect();
        let rows = sql
            .query(
                &format!(
                    "SELECT id, gist, outcome, open_loops FROM episodes WHERE id IN ({})",
                    in_list(1, close.len())
                ),
                &params,
            )
            .await?;
        for (id, _) in &close {
            let Some(r) = rows.iter().find(|r| r.text("id").is_ok_and(|i| &i == id)) else { continue };
            let mut line = format!("[episode] {}", r.text("gist")?);
            let outcome = r.text("outcome")?;
            if !outcome.is_empty() {
                line.push_str(&format!(" Outcome: {outcome}."));
            }
            let open: Vec<String> = serde_json::from_str(&r.text("open_loops")?).unwrap_or_default();
            if !open.is_empty() {
                line.push_str(&format!(" Still open: {}.", open.join("; ")));
            }
            out.push(line);
        }
    }
    for (name, definition, _) in named_concepts(sql, text, 3).await? {
        out.push(format!("[concept] {name}: {definition}"));
    }
    Ok(out)
}

/// Words of a text looked at for concept names (at most 8,000 runs, well
/// inside both backends' parameter limits).
const NAMED_WORDS: usize = 2_000;

/// The concepts a text names as whole words, strongest first: `(name,
/// definition, strength)`. Recall and the context read them. One indexed
/// lookup of the text's 1–4-word runs, not a scan of every concept.
pub async fn named_concepts(sql: &Sql, text: &str, limit: i64) -> Result<Vec<(String, String, f64)>> {
    let words = mneme_text::words(text);
    let words = &words[..words.len().min(NAMED_WORDS)];
    let mut runs: std::collections::BTreeSet<String> = std::collections::BTreeSet::new();
    for n in 1..=rules::CONCEPT_NAME_WORDS {
        for w in words.windows(n) {
            let run = w.join(" ");
            if run.chars().count() >= 3 {
                runs.insert(run);
            }
        }
    }
    if runs.is_empty() {
        return Ok(Vec::new());
    }
    let mut params: Vec<Value> = runs.iter().map(|r| Value::from(r.as_str())).collect();
    params.push(limit.into());
    let rows = sql
        .query(
            &format!(
                "SELECT name, definition, strength FROM semantic_concepts WHERE name IN ({}) \
                 ORDER BY strength DESC, name LIMIT ${}",
                in_list(1, runs.len()),
                runs.len() + 1
            ),
            &params,
        )
        .await?;
    rows.iter().map(|r| Ok((r.text("name")?, r.text("definition")?, r.f64("strength")?))).collect()
}
