//! Memory consolidation (002 §6): the three queues the commit fills,
//! drained with claims and leases. [`claim`] hands a worker one job and
//! what its model call needs; [`apply`] writes the result and marks the job
//! done under the claim, in one transaction, so a crash or a lost lease
//! writes nothing twice (D-B4).

use mneme_background::consolidate::{
    self as rules, Chunk, ConceptDraft, EpisodeBrief, EpisodeDraft, Exchange, Semantic, semantic_due,
};
use mneme_store::{Sql, Stores, Value};
use mneme_substrate::graph::CORPUS;
use mneme_substrate::jobs::{CHUNKER_QUEUE, EPISODIC_QUEUE, SEMANTIC_QUEUE, claim_job, enqueue};
use mneme_substrate::schedule::{self, Queue};
use mneme_substrate::{
    Fail, Result, as_store_error, embed_many, f32_bytes, in_list, json_text, random_hex, records, search,
};
use mneme_types::GivenBack;
use mneme_types::consolidation::{
    ChunkInput, ChunkSummary, ConsolidationJob, ConsolidationSummary, EpisodeInput, EpisodeSummary, GistStored,
    JobInput, JobOutput, SemanticInput, SemanticSummary,
};
use serde_json::{Value as J, json};

/// A job is failed after this many claims.
pub const MAX_ATTEMPTS: i64 = 3;
/// A retried job waits this long per attempt.
pub const RETRY_BACKOFF_MS: i64 = 30_000;
/// Concept names a semantic job shows the model, strongest first.
const KNOWN_CONCEPTS: i64 = 50;

/// Claims the oldest job of the three queues that is queued, or running
/// with its lease run out, and loads what its model call reads.
pub async fn claim(now_ms: u64, lease_ms: u64) -> Result<Option<ConsolidationJob>> {
    let stores = Stores::open().await?;
    let sql = &stores.sql;
    let queues = [CHUNKER_QUEUE, EPISODIC_QUEUE, SEMANTIC_QUEUE];
    let give_up = "'gave up: the job did not finish in ' || attempts || ' attempts'";
    let Some(row) = claim_job(sql, &queues, now_ms, lease_ms, MAX_ATTEMPTS, give_up).await? else {
        return Ok(None);
    };
    let (id, queue, claim) = (row.i64("id")?, row.text("queue")?, row.text("claim")?);
    let payload: J = serde_json::from_str(&row.text("payload")?).unwrap_or(J::Null);
    let input = match queue.as_str() {
        CHUNKER_QUEUE => JobInput::Chunk(chunker_input(sql, &payload).await?),
        EPISODIC_QUEUE => JobInput::Episode(episode_input(sql, &payload).await?),
        _ => JobInput::Semantic(semantic_input(sql).await?),
    };
    Ok(Some(ConsolidationJob { id, claim, attempts: row.i64("attempts")?, input }))
}

/// The exchange, or none when it was forgotten since.
async fn chunker_input(sql: &Sql, p: &J) -> Result<Option<ChunkInput>> {
    let id = p["exchange_id"].as_str().unwrap_or_default();
    let rows = sql.query("SELECT topic, prompt, response FROM exchanges WHERE id = $1", &[id.into()]).await?;
    let Some(r) = rows.first() else { return Ok(None) };
    Ok(Some(ChunkInput {
        exchange_id: id.to_string(),
        topic: r.text("topic")?,
        prompt: r.text("prompt")?,
        response: r.text("response")?,
    }))
}

/// The window's exchanges, oldest first (social exits excluded), and the
/// topic most of them are on.
async fn episode_input(sql: &Sql, p: &J) -> Result<Option<EpisodeInput>> {
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
        return Ok(None);
    }
    let mut counts: Vec<(&str, usize)> = Vec::new();
    for e in &ex {
        match counts.iter_mut().find(|(t, _)| *t == e.topic) {
            Some((_, n)) => *n += 1,
            None => counts.push((&e.topic, 1)),
        }
    }
    let topic = counts.iter().max_by_key(|(_, n)| *n).map(|(t, _)| t.to_string()).unwrap_or_default();
    Ok(Some(EpisodeInput { thread_id: thread.to_string(), topic, exchanges: ex.into_iter().map(Into::into).collect() }))
}

/// The oldest episodes still waiting for semantic consolidation, and the
/// names of the strongest known concepts.
async fn semantic_input(sql: &Sql) -> Result<Option<SemanticInput>> {
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
        return Ok(None);
    }
    let known: Vec<String> = sql
        .query("SELECT name FROM semantic_concepts ORDER BY strength DESC, name LIMIT $1", &[KNOWN_CONCEPTS.into()])
        .await?
        .iter()
        .map(|r| r.text("name"))
        .collect::<std::result::Result<_, _>>()?;
    Ok(Some(SemanticInput { episodes: eps.into_iter().map(Into::into).collect(), known }))
}

/// The job being applied: its id and claim, what produced its output, and
/// when.
pub struct Applying {
    pub job_id: i64,
    pub claim: String,
    pub source: String,
    pub now_ms: u64,
}

/// Writes a job's result and marks it done, under its claim. A claim that
/// is gone (the lease ran out and another worker took the job) is
/// `lease-lost` and nothing is written.
pub async fn apply(r: Applying, output: JobOutput) -> Result<ConsolidationSummary> {
    let stores = Stores::open().await?;
    match output {
        JobOutput::Gone => {
            let summary = ConsolidationSummary::Skipped("its source was forgotten before it ran".into());
            finish(&stores.sql, &r, &summary).await?;
            Ok(summary)
        }
        JobOutput::Chunk((input, chunk)) => {
            let chunk = Chunk::from(chunk);
            held(&stores.sql, &r).await?;
            // Forgotten since the claim: nothing to keep.
            if !exists(&stores.sql, &[input.exchange_id.as_str()]).await? {
                let summary = ConsolidationSummary::Skipped("its exchange was forgotten before it ran".into());
                finish(&stores.sql, &r, &summary).await?;
                return Ok(summary);
            }
            // Gists and facts live in the key-value store, outside the
            // transaction; both stores dedup, so a rerun after a crash here
            // changes nothing (D-B4).
            let topic = input.topic.as_str();
            let mut gists = Vec::new();
            for g in &chunk.gists {
                let outcome = records::store_gist(
                    &stores.kv,
                    topic,
                    &g.content,
                    &g.kind,
                    g.confidence,
                    rules::CHUNKER_MIN_CONFIDENCE,
                    r.now_ms,
                )
                .await?;
                gists.push(GistStored { kind: g.kind.clone(), outcome });
            }
            let mut facts = 0;
            for f in &chunk.facts {
                if records::store_fact(&stores.kv, topic, &f.key, &f.value, f.confidence, "memory_chunker", r.now_ms)
                    .await?
                {
                    facts += 1;
                }
            }
            let summary = ConsolidationSummary::Chunk(ChunkSummary {
                topic: topic.to_string(),
                gists,
                facts,
                source: r.source.clone(),
            });
            finish(&stores.sql, &r, &summary).await?;
            Ok(summary)
        }
        JobOutput::Episode((input, draft)) => {
            let draft = EpisodeDraft::from(draft);
            let embedding = embed_many(&[draft.embedding_text()])?.pop().unwrap_or_default();
            let summary = stores
                .sql
                .transaction(async |sql: &Sql| {
                    store_episode(sql, &r, &input, &draft, &embedding).await.map_err(as_store_error)
                })
                .await?;
            Ok(summary)
        }
        JobOutput::Semantic((input, s)) => {
            let s = Semantic::from(s);
            let texts: Vec<String> = s.concepts.iter().map(|c| format!("{}: {}", c.name, c.definition)).collect();
            let embeddings = embed_many(&texts)?;
            let batch: Vec<EpisodeBrief> = input.episodes.into_iter().map(Into::into).collect();
            let summary = stores
                .sql
                .transaction(async |sql: &Sql| {
                    store_semantic(sql, &r, &batch, &s, &embeddings).await.map_err(as_store_error)
                })
                .await?;
            Ok(summary)
        }
    }
}

/// Fails with `lease-lost` unless the worker still holds the job.
async fn held(sql: &Sql, r: &Applying) -> Result<()> {
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

/// Marks the job done under its claim with its summary as the result;
/// `lease-lost` when the claim is gone.
async fn finish(sql: &Sql, r: &Applying, summary: &ConsolidationSummary) -> Result<()> {
    let n = sql
        .execute(
            "UPDATE jobs SET status = 'done', claim = NULL, result = $3, updated_ms = $4 WHERE id = $1 AND claim = $2 AND status = 'running'",
            &[r.job_id.into(), r.claim.as_str().into(), json_text(summary).into(), (r.now_ms as i64).into()],
        )
        .await?;
    if n == 0 {
        return Err(Fail::new("lease-lost", format!("job {} is no longer this worker's", r.job_id)));
    }
    Ok(())
}

async fn store_episode(
    sql: &Sql,
    r: &Applying,
    input: &EpisodeInput,
    d: &EpisodeDraft,
    embedding: &[f32],
) -> Result<ConsolidationSummary> {
    let id = format!("ep-{}", random_hex(8));
    let ids: Vec<&str> = input.exchanges.iter().map(|e| e.id.as_str()).collect();
    let (thread, topic) = (input.thread_id.as_str(), input.topic.as_str());
    let salience = d.factors.stored();
    if !exists(sql, &ids).await? {
        let summary = ConsolidationSummary::Skipped("an exchange of it was forgotten before it ran".into());
        finish(sql, r, &summary).await?;
        return Ok(summary);
    }
    held(sql, r).await?;
    let mut summary = EpisodeSummary {
        episode_id: id.clone(),
        salience: salience as u8,
        exchanges: ids.len() as u32,
        source: r.source.clone(),
        semantic_queued: false,
    };
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
        &search::NewItem {
            corpus: CORPUS,
            ref_id: &id,
            title: &title,
            body: &body,
            context: "",
            date: "",
            meta: &meta,
            place: search::Place::NONE,
        },
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
    summary.semantic_queued = semantic_due(waiting, salience as f64 / 10.0, mean, last, open, r.now_ms);
    if summary.semantic_queued {
        enqueue(sql, SEMANTIC_QUEUE, None, &json!({"waiting": waiting}).to_string(), r.now_ms).await?;
    }
    let summary = ConsolidationSummary::Episode(summary);
    finish(sql, r, &summary).await?;
    Ok(summary)
}

async fn store_semantic(
    sql: &Sql,
    r: &Applying,
    batch: &[EpisodeBrief],
    s: &Semantic,
    embeddings: &[Vec<f32>],
) -> Result<ConsolidationSummary> {
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
    let summary = ConsolidationSummary::Semantic(SemanticSummary {
        episodes: owned.len() as u32,
        concepts_created: tally.created,
        concepts_reinforced: tally.reinforced,
        relationships: relations,
        source: r.source.clone(),
    });
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

/// Gives a claimed job back: queued again after a backoff while attempts
/// remain (and `retry`), else failed with the error.
pub async fn fail(job_id: i64, claim: &str, error: &str, retry: bool, now_ms: u64) -> Result<Option<GivenBack>> {
    let sql = mneme_store::open_sql().await?;
    let queue = Queue { table: "jobs", error_column: "result", backoff_ms: RETRY_BACKOFF_MS };
    let status = schedule::give_back(
        &sql,
        &queue,
        (job_id.into(), claim),
        json!({"error": error}).to_string().into(),
        if retry { MAX_ATTEMPTS } else { 0 },
        now_ms as i64,
    )
    .await?;
    Ok(status)
}
