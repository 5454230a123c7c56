//! The I/O of the knowledge stage (`mneme:knowledge`): ingest jobs, the
//! prepare/apply halves of extraction (the entry component calls the model
//! between them), reading entries, and retrieval. The rules are
//! `mneme-knowledge`'s; this module reads and writes around them.
//!
//! A job's life: `enqueue` (202 to the caller) → `claim` (a lease, so two
//! workers never process one job) → the entry extracts candidates (model or
//! rules) → `prepare` (validation, embeddings, the patterns engine, the most
//! similar active entries) → the entry judges stances (model or rules) →
//! `apply` (one transaction: merges, inserts with sequential ids,
//! supersedes, patterns, the outcome, `done`). A crash anywhere before the
//! commit of `apply` leaves the job to be claimed again when its lease ends.

use crate::search;
use crate::{Fail, Result, Stores, bytes_f32, embed_many, f32_bytes, in_list, json_text, random_hex};
use mneme_knowledge::entry::{self, Confidence, Entry, KnowledgeType, SourceType, Stability};
use mneme_knowledge::fusion::{self, Mode};
use mneme_knowledge::governor::{self, Action, Neighbour, Stance};
use mneme_knowledge::patterns::{self, Resolution};
use mneme_knowledge::rank;
use mneme_knowledge::validate::{self, Candidate, Dropped};
use mneme_knowledge::{mirror, text};
use mneme_store::{Row, Sql, Value};
use mneme_text::cosine;
use mneme_time::calendar::utc_timestamp;
use serde::{Deserialize, Serialize};
use serde_json::{Value as J, json};

/// The search-index corpus of active knowledge entries.
pub const CORPUS: &str = "knowledge";
/// A job is tried this many times (lease expiries included) before it fails.
pub const MAX_ATTEMPTS: i64 = 3;
/// A job given back waits this long times its attempts before the next try.
pub const RETRY_BACKOFF_MS: i64 = 3_000;

const ENTRY_COLUMNS: &str = "seq, id, type, topic, position, reasoning, reasoning_pattern, confidence, stability, \
    tier, tags, source_type, source_channel, source_date, source_url, corroboration_count, last_corroborated_at, \
    superseded_by, created_at, extractor";

fn bad_row(what: &str) -> Fail {
    Fail::new("internal", format!("a stored entry has an invalid {what}"))
}

fn entry_from(r: &Row) -> Result<Entry> {
    Ok(Entry {
        id: r.text("id")?,
        kind: KnowledgeType::parse(&r.text("type")?).ok_or_else(|| bad_row("type"))?,
        topic: r.text("topic")?,
        position: r.text("position")?,
        reasoning: r.text("reasoning")?,
        reasoning_pattern: r.opt_text("reasoning_pattern")?,
        confidence: Confidence::parse(&r.text("confidence")?).ok_or_else(|| bad_row("confidence"))?,
        stability: Stability::parse(&r.text("stability")?).ok_or_else(|| bad_row("stability"))?,
        tier: r.text("tier")?,
        tags: serde_json::from_str(&r.text("tags")?).map_err(|_| bad_row("tags"))?,
        source_type: SourceType::parse(&r.text("source_type")?).ok_or_else(|| bad_row("source_type"))?,
        source_channel: r.opt_text("source_channel")?,
        source_date: r.text("source_date")?,
        source_url: r.opt_text("source_url")?,
        corroboration_count: r.i64("corroboration_count")?,
        last_corroborated_at: r.opt_text("last_corroborated_at")?,
        superseded_by: r.opt_text("superseded_by")?,
        created_at: r.text("created_at")?,
        extractor: r.text("extractor")?,
    })
}

/// Entries by id (any state).
async fn entries_by_id(sql: &Sql, ids: &[String]) -> Result<Vec<Entry>> {
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let params: Vec<Value> = ids.iter().map(|i| Value::from(i.as_str())).collect();
    let rows = sql
        .query(
            &format!("SELECT {ENTRY_COLUMNS} FROM knowledge_entries WHERE id IN ({})", in_list(1, ids.len())),
            &params,
        )
        .await?;
    rows.iter().map(entry_from).collect()
}

/// The text an entry is found by: its topic, then position, reasoning and tags.
fn search_text(e: &Entry) -> (String, String) {
    (e.topic.clone(), format!("{}\n{}\n{}", e.position, e.reasoning, e.tags.join(" ")))
}

/// What the retrieval embedding sees.
fn retrieval_text(topic: &str, position: &str, reasoning: &str) -> String {
    format!("{topic}. {position} {reasoning}")
}

/// What near-duplicate and contradiction checks compare: the claim itself.
fn identity_text(topic: &str, position: &str) -> String {
    format!("{topic}. {position}")
}

// ---------------------------------------------------------------- ingest

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Source {
    pub source_type: SourceType,
    pub source_channel: Option<String>,
    pub source_date: String,
    pub source_url: Option<String>,
    pub text: String,
}

#[derive(Debug, Deserialize)]
pub struct EnqueueRequest {
    #[serde(flatten)]
    pub source: Source,
    pub now_ms: u64,
}

/// Queues a transcript. The same transcript (by content hash) queues
/// nothing new: the answer names the existing job (a failed one is queued
/// again).
pub async fn enqueue(r: EnqueueRequest) -> Result<J> {
    let stores = Stores::open().await?;
    let sql = &stores.sql;
    let hash = text::content_hash(&r.source.text);
    let id = format!("kj-{}", random_hex(8));
    let now = r.now_ms as i64;
    let inserted = sql
        .execute(
            "INSERT INTO knowledge_jobs (id, content_hash, status, request, attempts, lease_until_ms, created_ms, updated_ms)
             VALUES ($1, $2, 'queued', $3, 0, 0, $4, $4) ON CONFLICT (content_hash) DO NOTHING",
            &[id.as_str().into(), hash.as_str().into(), json_text(&r.source).into(), now.into()],
        )
        .await?;
    if inserted == 1 {
        return Ok(json!({"job_id": id, "status": "queued", "duplicate": false}));
    }
    let requeued = sql
        .execute(
            "UPDATE knowledge_jobs SET status = 'queued', attempts = 0, error = NULL, claim = NULL, lease_until_ms = 0, updated_ms = $2
             WHERE content_hash = $1 AND status = 'failed'",
            &[hash.as_str().into(), now.into()],
        )
        .await?;
    let rows = sql.query("SELECT id, status FROM knowledge_jobs WHERE content_hash = $1", &[hash.into()]).await?;
    let row = rows.first().ok_or_else(|| Fail::new("internal", "the job vanished"))?;
    Ok(json!({"job_id": row.text("id")?, "status": row.text("status")?, "duplicate": true, "requeued": requeued == 1}))
}

#[derive(Debug, Deserialize)]
pub struct IdRequest {
    pub id: String,
}

/// A job's status and, once done, the outcome per candidate.
pub async fn job(r: IdRequest) -> Result<J> {
    let stores = Stores::open().await?;
    let rows = stores
        .sql
        .query(
            "SELECT id, status, request, outcome, error, attempts, created_ms, updated_ms FROM knowledge_jobs WHERE id = $1",
            &[r.id.as_str().into()],
        )
        .await?;
    let Some(row) = rows.first() else {
        return Err(Fail::new("not-found", format!("no knowledge job `{}`", r.id)));
    };
    let request: J = serde_json::from_str(&row.text("request")?).unwrap_or(J::Null);
    let outcome: J = row.opt_text("outcome")?.and_then(|o| serde_json::from_str(&o).ok()).unwrap_or(J::Null);
    let mut v = json!({
        "id": row.text("id")?,
        "status": row.text("status")?,
        "attempts": row.i64("attempts")?,
        "created_at": utc_timestamp(row.i64("created_ms")? as u64),
        "updated_at": utc_timestamp(row.i64("updated_ms")? as u64),
        "source": {
            "source_type": request["source_type"], "source_channel": request["source_channel"],
            "source_date": request["source_date"], "source_url": request["source_url"],
            "chars": request["text"].as_str().map_or(0, |t| t.chars().count()),
        },
        "error": row.opt_text("error")?,
    });
    if let J::Object(o) = outcome {
        for (k, x) in o {
            v[k] = x;
        }
    }
    Ok(v)
}

#[derive(Debug, Deserialize)]
pub struct ClaimRequest {
    pub now_ms: u64,
    pub lease_ms: u64,
}

/// Takes the oldest queued job (or one whose lease ran out) under a fresh
/// lease. `{job: null}` when there is nothing to do.
pub async fn claim(r: ClaimRequest) -> Result<J> {
    let stores = Stores::open().await?;
    let sql = &stores.sql;
    let now = r.now_ms as i64;
    sql.execute(
        "UPDATE knowledge_jobs SET status = 'failed', claim = NULL, updated_ms = $1,
                error = 'gave up: the job did not finish in ' || attempts || ' attempts'
         WHERE status = 'running' AND lease_until_ms < $1 AND attempts >= $2",
        &[now.into(), MAX_ATTEMPTS.into()],
    )
    .await?;
    let token = random_hex(8);
    let rows = sql
        .query(
            "UPDATE knowledge_jobs SET status = 'running', claim = $1, lease_until_ms = $2, attempts = attempts + 1, updated_ms = $3
             WHERE id = (SELECT id FROM knowledge_jobs
                         WHERE (status = 'queued' OR status = 'running') AND lease_until_ms < $3
                         ORDER BY created_ms, id LIMIT 1)
               AND (status = 'queued' OR status = 'running') AND lease_until_ms < $3
             RETURNING id, request, attempts",
            &[token.as_str().into(), (now + r.lease_ms as i64).into(), now.into()],
        )
        .await?;
    let Some(row) = rows.first() else { return Ok(json!({"job": null})) };
    let request: J = serde_json::from_str(&row.text("request")?).map_err(|e| Fail::new("internal", e.to_string()))?;
    let known = sql
        .query("SELECT slug, description FROM reasoning_patterns ORDER BY observations DESC, slug LIMIT 60", &[])
        .await?;
    let patterns: Vec<(String, String)> =
        known.iter().map(|p| Ok((p.text("slug")?, p.text("description")?))).collect::<Result<_>>()?;
    Ok(json!({
        "job": {"id": row.text("id")?, "claim": token, "attempts": row.i64("attempts")?, "source": request},
        "patterns": patterns,
    }))
}

#[derive(Debug, Deserialize)]
pub struct FailRequest {
    pub job_id: String,
    pub claim: String,
    pub error: String,
    pub retry: bool,
    pub now_ms: u64,
}

/// Gives a claimed job back: queued again to retry after a backoff (while
/// attempts remain), or failed with the error.
pub async fn fail(r: FailRequest) -> Result<J> {
    let sql = mneme_store::open_sql().await?;
    let queue = crate::schedule::Queue { table: "knowledge_jobs", error_column: "error", backoff_ms: RETRY_BACKOFF_MS };
    let status = crate::schedule::give_back(
        &sql,
        &queue,
        (r.job_id.as_str().into(), &r.claim),
        r.error.as_str().into(),
        // No retry: no attempt count is low enough to queue again.
        if r.retry { MAX_ATTEMPTS } else { 0 },
        r.now_ms as i64,
    )
    .await?;
    match status {
        Some(status) => Ok(json!({"status": status})),
        None => Err(Fail::new("lease-lost", "the job is no longer claimed by this worker")),
    }
}

// ---------------------------------------------------------------- prepare

/// One of the most similar active entries, as the stance judgement sees it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct NeighbourView {
    pub id: String,
    #[serde(rename = "type")]
    pub kind: KnowledgeType,
    pub cosine: f32,
    pub confidence: Confidence,
    pub source_date: String,
    pub position: String,
    /// Filled in by the stance judgement (model or rules).
    #[serde(default)]
    pub stance: Option<Stance>,
}

/// A candidate after `prepare`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Prepared {
    pub index: usize,
    pub dropped: Option<Dropped>,
    pub candidate: Option<Candidate>,
    #[serde(default)]
    pub identity: Vec<f32>,
    #[serde(default)]
    pub retrieval: Vec<f32>,
    pub pattern: Option<Resolution>,
    #[serde(default)]
    pub hint_embedding: Vec<f32>,
    #[serde(default)]
    pub neighbours: Vec<NeighbourView>,
    /// Who judged the stances: `model`, `rules`, or `rules (…)` when the
    /// model failed.
    #[serde(default)]
    pub stance_by: Option<String>,
}

#[derive(Debug, Deserialize)]
pub struct PrepareRequest {
    pub candidates: Vec<J>,
    pub merge_threshold: f32,
}

/// Validates, embeds and resolves patterns for each candidate, and finds the
/// most similar active entries that the stance judgement must label.
pub async fn prepare(r: PrepareRequest) -> Result<J> {
    let stores = Stores::open().await?;
    let sql = &stores.sql;
    let mut out: Vec<Prepared> = Vec::new();
    let mut texts = Vec::new();
    for (index, raw) in r.candidates.iter().enumerate() {
        let (candidate, dropped) = match validate::validate(raw) {
            Ok(c) => {
                texts.push(identity_text(&c.topic, &c.position));
                texts.push(retrieval_text(&c.topic, &c.position, &c.reasoning));
                (Some(c), None)
            }
            Err(d) => (None, Some(d)),
        };
        out.push(Prepared {
            index,
            dropped,
            candidate,
            identity: Vec::new(),
            retrieval: Vec::new(),
            pattern: None,
            hint_embedding: Vec::new(),
            neighbours: Vec::new(),
            stance_by: None,
        });
    }
    let mut embeddings = embed_many(&texts)?.into_iter();
    let pattern_rows = sql.query("SELECT slug, centroid FROM reasoning_patterns", &[]).await?;
    let pattern_list: Vec<(String, Vec<f32>)> =
        pattern_rows.iter().map(|p| Ok((p.text("slug")?, bytes_f32(&p.blob("centroid")?)))).collect::<Result<_>>()?;
    let known: Vec<String> = pattern_list.iter().map(|p| p.0.clone()).collect();
    for p in out.iter_mut() {
        let Some(c) = &p.candidate else { continue };
        p.identity = embeddings.next().unwrap_or_default();
        p.retrieval = embeddings.next().unwrap_or_default();
        p.pattern = Some(match patterns::resolve_direct(c.pattern_hint.as_deref(), c.style_only, &known) {
            Some(res) => res,
            None => {
                let hint = patterns::clean_hint(c.pattern_hint.as_deref()).unwrap_or_default().to_string();
                p.hint_embedding = embed_many(&[patterns::describe(&hint)])?.pop().unwrap_or_default();
                patterns::resolve_embedded(&hint, &p.hint_embedding, &pattern_list)
            }
        });
        p.neighbours = neighbours(sql, c, &p.identity, &p.retrieval, r.merge_threshold).await?;
    }
    Ok(json!({"items": out}))
}

/// The most similar active entries by the claim's embedding: the top
/// [`governor::STANCE_NEIGHBOURS`] at cosine ≥ 0.5, plus the best same-type
/// entry when it is a merge candidate outside them.
async fn neighbours(
    sql: &Sql,
    c: &Candidate,
    identity: &[f32],
    retrieval: &[f32],
    merge_threshold: f32,
) -> Result<Vec<NeighbourView>> {
    let query = format!("{} {}", c.topic, c.position);
    let found = search::candidates(sql, &[CORPUS], &query, retrieval, Mode::Hybrid).await?;
    let ids: Vec<String> =
        found.fused.iter().take(fusion::pool(10)).filter_map(|f| found.get(f.0).map(|x| x.0.clone())).collect();
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let params: Vec<Value> = ids.iter().map(|i| Value::from(i.as_str())).collect();
    let rows = sql
        .query(
            &format!(
                "SELECT id, type, confidence, source_date, position, embedding FROM knowledge_entries
                 WHERE superseded_by IS NULL AND id IN ({})",
                in_list(1, ids.len())
            ),
            &params,
        )
        .await?;
    let mut all: Vec<NeighbourView> = Vec::new();
    for row in &rows {
        let cos = cosine(identity, &bytes_f32(&row.blob("embedding")?)) as f32;
        if cos < governor::STANCE_MIN_COSINE {
            continue;
        }
        all.push(NeighbourView {
            id: row.text("id")?,
            kind: KnowledgeType::parse(&row.text("type")?).ok_or_else(|| bad_row("type"))?,
            cosine: cos,
            confidence: Confidence::parse(&row.text("confidence")?).ok_or_else(|| bad_row("confidence"))?,
            source_date: row.text("source_date")?,
            position: row.text("position")?,
            stance: None,
        });
    }
    all.sort_by(|a, b| b.cosine.total_cmp(&a.cosine).then(a.id.cmp(&b.id)));
    let same_type = all.iter().position(|n| n.kind == c.kind && n.cosine >= merge_threshold);
    let mut keep: Vec<NeighbourView> = all.iter().take(governor::STANCE_NEIGHBOURS).cloned().collect();
    if let Some(i) = same_type.filter(|&i| i >= governor::STANCE_NEIGHBOURS) {
        keep.push(all[i].clone());
    }
    Ok(keep)
}

// ---------------------------------------------------------------- apply

#[derive(Debug, Deserialize)]
pub struct ApplyRequest {
    pub job_id: String,
    pub claim: String,
    /// `rules`, or the model's name.
    pub extractor: String,
    /// Why the rules extracted when a model is configured but failed.
    pub extractor_note: Option<String>,
    pub items: Vec<Prepared>,
    pub merge_threshold: f32,
    pub now_ms: u64,
}

/// What became of one candidate.
#[derive(Debug, Serialize)]
struct Outcome {
    index: usize,
    /// `kept`, `dropped`, `merged` or `kept-as-history`.
    outcome: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    entry_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    into: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    detail: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    supersedes: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    superseded_by: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    contradicts_but_kept: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pattern: Option<Resolution>,
    #[serde(skip_serializing_if = "Option::is_none")]
    stance_by: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    notes: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    topic: Option<String>,
}

impl Outcome {
    fn new(index: usize, outcome: &'static str) -> Self {
        Outcome {
            index,
            outcome,
            entry_id: None,
            into: None,
            reason: None,
            detail: None,
            supersedes: Vec::new(),
            superseded_by: None,
            contradicts_but_kept: Vec::new(),
            pattern: None,
            stance_by: None,
            notes: Vec::new(),
            topic: None,
        }
    }
}

/// An entry written earlier in the same apply, so a transcript that states
/// a position twice corroborates it instead of duplicating it.
struct Fresh {
    id: String,
    kind: KnowledgeType,
    identity: Vec<f32>,
    position: String,
    confidence: Confidence,
    source_date: String,
}

/// Writes the outcome of a job in one transaction.
pub async fn apply(r: ApplyRequest) -> Result<J> {
    let stores = Stores::open().await?;
    let sql = &stores.sql;
    let now_ms = r.now_ms;
    let now = utc_timestamp(now_ms);
    let result = sql
        .transaction(async |sql: &Sql| {
            let job = sql
                .query(
                    "SELECT request FROM knowledge_jobs WHERE id = $1 AND claim = $2 AND status = 'running'",
                    &[r.job_id.as_str().into(), r.claim.as_str().into()],
                )
                .await?;
            let Some(job) = job.first() else {
                return Err(mneme_store::StoreError::new("lease-lost", "the job is no longer claimed by this worker"));
            };
            let source: Source = serde_json::from_str(&job.text("request")?)
                .map_err(|e| mneme_store::StoreError::new("internal", e.to_string()))?;
            let mut outcomes = Vec::new();
            let mut fresh: Vec<Fresh> = Vec::new();
            let mut superseded: Vec<String> = Vec::new();
            for item in &r.items {
                let o = apply_one(sql, &r, &source, item, &now, &mut fresh, &mut superseded)
                    .await
                    .map_err(|f| mneme_store::StoreError::new("internal", f.message))?;
                outcomes.push(o);
            }
            let count = |k: &str| outcomes.iter().filter(|o| o.outcome == k).count();
            let summary = json!({
                "extractor": r.extractor,
                "extractor_note": r.extractor_note,
                "candidates": outcomes.len(),
                "kept": count("kept"),
                "merged": count("merged"),
                "dropped": count("dropped"),
                "kept_as_history": count("kept-as-history"),
                "superseded": superseded,
                "outcomes": outcomes,
            });
            sql.execute(
                "UPDATE knowledge_jobs SET status = 'done', outcome = $2, error = NULL, claim = NULL, updated_ms = $3
                 WHERE id = $1",
                &[r.job_id.as_str().into(), summary.to_string().into(), (now_ms as i64).into()],
            )
            .await?;
            Ok(summary)
        })
        .await;
    match result {
        Ok(v) => Ok(v),
        Err(e) => Err(Fail::from(e)),
    }
}

async fn apply_one(
    sql: &Sql,
    r: &ApplyRequest,
    source: &Source,
    item: &Prepared,
    now: &str,
    fresh: &mut Vec<Fresh>,
    superseded: &mut Vec<String>,
) -> Result<Outcome> {
    let Some(c) = &item.candidate else {
        let mut o = Outcome::new(item.index, "dropped");
        if let Some(d) = &item.dropped {
            o.reason = Some(d.reason.clone());
            o.detail = Some(d.detail.clone());
        }
        return Ok(o);
    };
    let mut o = Outcome::new(item.index, "kept");
    o.topic = Some(c.topic.clone());
    o.notes = c.notes.clone();
    o.stance_by = item.stance_by.clone();
    // Neighbours still active now, with their judged stances…
    let ids: Vec<String> = item.neighbours.iter().map(|n| n.id.clone()).collect();
    let active: Vec<String> =
        entries_by_id(sql, &ids).await?.into_iter().filter(|e| e.superseded_by.is_none()).map(|e| e.id).collect();
    let mut nb: Vec<Neighbour> = item
        .neighbours
        .iter()
        .filter(|n| active.contains(&n.id))
        .map(|n| Neighbour {
            id: n.id.clone(),
            kind: n.kind,
            cosine: n.cosine,
            confidence: n.confidence,
            source_date: n.source_date.clone(),
            stance: n
                .stance
                .unwrap_or_else(|| governor::rule_stance(&c.position, &n.position, n.cosine, r.merge_threshold)),
        })
        .collect();
    // …and entries this job wrote a moment ago (rule stances).
    for f in fresh.iter().filter(|f| !superseded.contains(&f.id)) {
        let cos = cosine(&item.identity, &f.identity) as f32;
        if cos >= governor::STANCE_MIN_COSINE && !nb.iter().any(|n| n.id == f.id) {
            nb.push(Neighbour {
                id: f.id.clone(),
                kind: f.kind,
                cosine: cos,
                confidence: f.confidence,
                source_date: f.source_date.clone(),
                stance: governor::rule_stance(&c.position, &f.position, cos, r.merge_threshold),
            });
        }
    }
    let pattern_slug = match &item.pattern {
        Some(p) => record_pattern(sql, p, &item.hint_embedding, r.now_ms).await?,
        None => None,
    };
    o.pattern = item.pattern.clone();
    match governor::decide(c.kind, c.confidence, &source.source_date, &nb, r.merge_threshold) {
        Action::Merge { into, .. } => {
            let mut e = entries_by_id(sql, std::slice::from_ref(&into))
                .await?
                .pop()
                .ok_or_else(|| Fail::new("internal", "merge target vanished"))?;
            governor::merge(&mut e, &c.tags, &source.source_date, now);
            if e.reasoning_pattern.is_none() {
                e.reasoning_pattern = pattern_slug;
            }
            sql.execute(
                "UPDATE knowledge_entries SET corroboration_count = $2, tags = $3, source_date = $4,
                        last_corroborated_at = $5, confidence = $6, reasoning_pattern = $7 WHERE id = $1",
                &[
                    e.id.as_str().into(),
                    e.corroboration_count.into(),
                    json_text(&e.tags).into(),
                    e.source_date.as_str().into(),
                    e.last_corroborated_at.clone().into(),
                    e.confidence.as_str().into(),
                    e.reasoning_pattern.clone().into(),
                ],
            )
            .await?;
            let (title, body) = search_text(&e);
            search::retext(sql, CORPUS, &e.id, &title, &body).await?;
            o.outcome = "merged";
            o.into = Some(into);
        }
        Action::Insert { supersedes, superseded_by, kept_both } => {
            let n = sql
                .query("UPDATE knowledge_counter SET n = n + 1 WHERE name = 'entry' RETURNING n", &[])
                .await?
                .first()
                .ok_or_else(|| Fail::new("internal", "the entry counter is missing"))?
                .i64("n")?;
            let e = Entry {
                id: entry::entry_id(n),
                kind: c.kind,
                topic: c.topic.clone(),
                position: c.position.clone(),
                reasoning: c.reasoning.clone(),
                reasoning_pattern: pattern_slug,
                confidence: c.confidence,
                stability: c.stability,
                tier: entry::TIER.into(),
                tags: c.tags.clone(),
                source_type: source.source_type,
                source_channel: source.source_channel.clone(),
                source_date: source.source_date.clone(),
                source_url: source.source_url.clone(),
                corroboration_count: 1,
                last_corroborated_at: None,
                superseded_by: superseded_by.clone(),
                created_at: now.to_string(),
                extractor: r.extractor.clone(),
            };
            sql.execute(
                &format!(
                    "INSERT INTO knowledge_entries ({ENTRY_COLUMNS}, job_id, embedding, created_ms)
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23)"
                ),
                &[
                    n.into(),
                    e.id.as_str().into(),
                    e.kind.as_str().into(),
                    e.topic.as_str().into(),
                    e.position.as_str().into(),
                    e.reasoning.as_str().into(),
                    e.reasoning_pattern.clone().into(),
                    e.confidence.as_str().into(),
                    e.stability.as_str().into(),
                    e.tier.as_str().into(),
                    json_text(&e.tags).into(),
                    e.source_type.as_str().into(),
                    e.source_channel.clone().into(),
                    e.source_date.as_str().into(),
                    e.source_url.clone().into(),
                    1i64.into(),
                    Value::Null,
                    e.superseded_by.clone().into(),
                    e.created_at.as_str().into(),
                    e.extractor.as_str().into(),
                    r.job_id.as_str().into(),
                    f32_bytes(&item.identity).into(),
                    (r.now_ms as i64).into(),
                ],
            )
            .await?;
            if superseded_by.is_none() {
                let (title, body) = search_text(&e);
                let meta = json!({"type": e.kind.as_str()});
                let new = search::NewItem { corpus: CORPUS, ref_id: &e.id, title: &title, body: &body, meta: &meta };
                search::put(sql, &new, &item.retrieval, r.now_ms).await?;
            }
            for old in &supersedes {
                let changed = sql
                    .execute(
                        "UPDATE knowledge_entries SET superseded_by = $2 WHERE id = $1 AND superseded_by IS NULL",
                        &[old.as_str().into(), e.id.as_str().into()],
                    )
                    .await?;
                if changed == 1 {
                    search::remove(sql, CORPUS, old).await?;
                    superseded.push(old.clone());
                }
            }
            o.outcome = if superseded_by.is_some() { "kept-as-history" } else { "kept" };
            o.entry_id = Some(e.id.clone());
            o.supersedes = supersedes;
            o.superseded_by = superseded_by;
            o.contradicts_but_kept = kept_both;
            fresh.push(Fresh {
                id: e.id,
                kind: e.kind,
                identity: item.identity.clone(),
                position: e.position,
                confidence: e.confidence,
                source_date: e.source_date,
            });
        }
    }
    Ok(o)
}

/// Accumulates an observation onto its pattern (minting it when new);
/// returns the slug the entry carries.
async fn record_pattern(sql: &Sql, p: &Resolution, hint_embedding: &[f32], now_ms: u64) -> Result<Option<String>> {
    let now = now_ms as i64;
    let bump = async |slug: &str, embedding: Option<&[f32]>| -> Result<()> {
        let rows =
            sql.query("SELECT centroid, observations FROM reasoning_patterns WHERE slug = $1", &[slug.into()]).await?;
        let Some(row) = rows.first() else { return Ok(()) };
        let n = row.i64("observations")?;
        let centroid = match embedding {
            Some(e) if !e.is_empty() => patterns::centroid_with(&bytes_f32(&row.blob("centroid")?), n, e),
            _ => bytes_f32(&row.blob("centroid")?),
        };
        let status = if n + 1 >= patterns::ESTABLISHED_OBSERVATIONS { "established" } else { "provisional" };
        sql.execute(
            "UPDATE reasoning_patterns SET observations = $2, centroid = $3, status = $4, updated_ms = $5 WHERE slug = $1",
            &[slug.into(), (n + 1).into(), f32_bytes(&centroid).into(), status.into(), now.into()],
        )
        .await?;
        Ok(())
    };
    match p {
        Resolution::Null { .. } => Ok(None),
        Resolution::Known { slug } => {
            bump(slug, None).await?;
            Ok(Some(slug.clone()))
        }
        Resolution::Matched { slug, .. } => {
            bump(slug, Some(hint_embedding)).await?;
            Ok(Some(slug.clone()))
        }
        Resolution::Minted { slug, description } => {
            let inserted = sql
                .execute(
                    "INSERT INTO reasoning_patterns (slug, description, centroid, observations, status, created_ms, updated_ms)
                     VALUES ($1, $2, $3, 1, 'provisional', $4, $4) ON CONFLICT (slug) DO NOTHING",
                    &[slug.as_str().into(), description.as_str().into(), f32_bytes(hint_embedding).into(), now.into()],
                )
                .await?;
            if inserted == 0 {
                bump(slug, Some(hint_embedding)).await?;
            }
            Ok(Some(slug.clone()))
        }
    }
}

// ---------------------------------------------------------------- reading

#[derive(Debug, Deserialize)]
pub struct ListRequest {
    pub limit: u32,
    pub offset: u32,
    #[serde(rename = "type")]
    pub kind: Option<String>,
    pub pattern: Option<String>,
    #[serde(default)]
    pub include_superseded: bool,
}

/// Entries, newest first.
pub async fn list(r: ListRequest) -> Result<J> {
    let stores = Stores::open().await?;
    let mut filters = Vec::new();
    let mut params: Vec<Value> = Vec::new();
    if !r.include_superseded {
        filters.push("superseded_by IS NULL".to_string());
    }
    if let Some(k) = &r.kind {
        params.push(k.as_str().into());
        filters.push(format!("type = ${}", params.len()));
    }
    if let Some(p) = &r.pattern {
        params.push(p.as_str().into());
        filters.push(format!("reasoning_pattern = ${}", params.len()));
    }
    let filter = if filters.is_empty() { String::new() } else { format!("WHERE {}", filters.join(" AND ")) };
    let total = stores.sql.query(&format!("SELECT COUNT(*) AS n FROM knowledge_entries {filter}"), &params).await?;
    let total = total.first().map(|r| r.i64("n")).transpose()?.unwrap_or(0);
    let rows = stores
        .sql
        .query(
            &format!(
                "SELECT {ENTRY_COLUMNS} FROM knowledge_entries {filter} ORDER BY seq DESC LIMIT {} OFFSET {}",
                r.limit, r.offset
            ),
            &params,
        )
        .await?;
    let entries: Vec<Entry> = rows.iter().map(entry_from).collect::<Result<_>>()?;
    Ok(json!({"entries": entries, "total": total, "limit": r.limit, "offset": r.offset}))
}

async fn one(sql: &Sql, id: &str) -> Result<(Entry, Vec<String>)> {
    let e = entries_by_id(sql, &[id.to_string()])
        .await?
        .pop()
        .ok_or_else(|| Fail::new("not-found", format!("no knowledge entry `{id}`")))?;
    let older =
        sql.query("SELECT id FROM knowledge_entries WHERE superseded_by = $1 ORDER BY seq", &[id.into()]).await?;
    let supersedes = older.iter().map(|r| r.text("id").map_err(Fail::from)).collect::<Result<_>>()?;
    Ok((e, supersedes))
}

/// One entry with every field and the entries it replaced.
pub async fn get(r: IdRequest) -> Result<J> {
    let stores = Stores::open().await?;
    let (e, supersedes) = one(&stores.sql, &r.id).await?;
    let mut v = serde_json::to_value(&e).map_err(|x| Fail::new("internal", x.to_string()))?;
    v["supersedes"] = json!(supersedes);
    v["active"] = json!(e.superseded_by.is_none());
    Ok(v)
}

/// The entry's markdown mirror.
pub async fn markdown(r: IdRequest) -> Result<J> {
    let stores = Stores::open().await?;
    let (e, supersedes) = one(&stores.sql, &r.id).await?;
    Ok(json!({"path": mirror::path(&e.id), "markdown": mirror::render(&e, &supersedes)}))
}

/// Every entry's mirror, for the vault archive.
pub async fn vault() -> Result<J> {
    let stores = Stores::open().await?;
    let rows = stores
        .sql
        .query(&format!("SELECT {ENTRY_COLUMNS}, created_ms FROM knowledge_entries ORDER BY seq"), &[])
        .await?;
    let mut replaced: std::collections::HashMap<String, Vec<String>> = Default::default();
    let mut entries = Vec::new();
    for r in &rows {
        let e = entry_from(r)?;
        if let Some(by) = &e.superseded_by {
            replaced.entry(by.clone()).or_default().push(e.id.clone());
        }
        entries.push((e, r.i64("created_ms")?));
    }
    let files: Vec<J> = entries
        .iter()
        .map(|(e, ms)| {
            let older = replaced.get(&e.id).cloned().unwrap_or_default();
            json!({"path": mirror::path(&e.id), "content": mirror::render(e, &older), "mtime_secs": ms / 1000})
        })
        .collect();
    Ok(json!({"files": files}))
}

/// Reasoning patterns with how often each was observed.
pub async fn pattern_list() -> Result<J> {
    let stores = Stores::open().await?;
    let rows = stores
        .sql
        .query(
            "SELECT slug, description, observations, status, created_ms FROM reasoning_patterns ORDER BY observations DESC, slug",
            &[],
        )
        .await?;
    let patterns: Vec<J> = rows
        .iter()
        .map(|r| {
            Ok(json!({
                "slug": r.text("slug")?, "description": r.text("description")?,
                "observations": r.i64("observations")?, "status": r.text("status")?,
                "created_at": utc_timestamp(r.i64("created_ms")? as u64),
            }))
        })
        .collect::<Result<_>>()?;
    Ok(json!({"patterns": patterns}))
}

// ---------------------------------------------------------------- retrieval

#[derive(Debug, Deserialize)]
pub struct RetrieveRequest {
    pub query: String,
    pub k: usize,
    #[serde(default)]
    pub mode: Mode,
    pub now_ms: u64,
}

/// `/retrieve`: active entries ranked by the seed's final score over the
/// fused candidates; both scores computed here, never stored.
pub async fn retrieve(r: RetrieveRequest) -> Result<J> {
    let stores = Stores::open().await?;
    let sql = &stores.sql;
    let t0 = mneme_time::clock::system_ms();
    let q = embed_many(std::slice::from_ref(&r.query))?.pop().unwrap_or_default();
    let embed_ms = mneme_time::clock::system_ms().saturating_sub(t0);
    let found = search::candidates(sql, &[CORPUS], &r.query, &q, r.mode).await?;
    let t1 = mneme_time::clock::system_ms();
    let pool: std::collections::HashMap<String, f32> = found
        .fused
        .iter()
        .take(fusion::pool(r.k))
        .filter_map(|f| found.get(f.0).map(|(id, cos)| (id.clone(), *cos)))
        .collect();
    let ids: Vec<String> = pool.keys().cloned().collect();
    let entries = entries_by_id(sql, &ids).await?;
    let mut results: Vec<(f64, f64, Entry)> = Vec::new();
    for e in entries.into_iter().filter(|e| e.superseded_by.is_none()) {
        let Some(cos) = pool.get(&e.id) else { continue };
        let relevance = rank::relevance(*cos);
        let fresh = rank::freshness(e.stability, &e.source_date, r.now_ms);
        let score = rank::final_score(relevance, e.kind, e.confidence, fresh);
        results.push((score, relevance, e));
    }
    results.sort_by(|a, b| b.0.total_cmp(&a.0).then(b.1.total_cmp(&a.1)).then(a.2.id.cmp(&b.2.id)));
    results.truncate(r.k);
    let results: Vec<J> = results
        .into_iter()
        .map(|(score, relevance, e)| {
            let mut v = serde_json::to_value(&e).unwrap_or(J::Null);
            v["relevance_score"] = json!(relevance);
            v["final_score"] = json!(score);
            v
        })
        .collect();
    Ok(json!({
        "results": results,
        "mode": r.mode,
        "took_ms": {"embed": embed_ms, "text": found.text_ms, "vector": found.vector_ms,
                    "rank": mneme_time::clock::system_ms().saturating_sub(t1)},
    }))
}

#[derive(Debug, Deserialize)]
pub struct SearchRequest {
    pub q: String,
    pub k: usize,
    #[serde(default)]
    pub mode: Mode,
    pub corpora: Vec<String>,
    /// Cache the query's embedding: set for the fixed queries of the rx
    /// pipeline's evidence step, never for a principal's own searches.
    #[serde(default)]
    pub cache_embedding: bool,
}

/// `/search`: the vault search over knowledge entries, documents and
/// episodes, in fused order.
pub async fn search(r: SearchRequest) -> Result<J> {
    let stores = Stores::open().await?;
    let sql = &stores.sql;
    let q = if r.cache_embedding {
        crate::query_embedding(&stores.kv, &r.q).await?
    } else {
        embed_many(std::slice::from_ref(&r.q))?.pop().unwrap_or_default()
    };
    let corpora: Vec<&str> = r.corpora.iter().map(String::as_str).collect();
    let found = search::candidates(sql, &corpora, &r.q, &q, r.mode).await?;
    let top: Vec<(i64, f64)> = found.fused.iter().take(r.k).copied().collect();
    let seqs: Vec<i64> = top.iter().map(|t| t.0).collect();
    let items = search::items(sql, &seqs).await?;
    let results: Vec<J> = top
        .iter()
        .filter_map(|(seq, score)| {
            let i = items.iter().find(|i| i.seq == *seq)?;
            let snippet: String = i.body.chars().take(280).collect();
            Some(json!({
                "corpus": i.corpus, "id": i.ref_id, "title": i.title, "snippet": snippet,
                "score": score, "relevance_score": rank::relevance(found.get(*seq).map_or(0.0, |f| f.1)),
                "source_url": i.meta.get("source_url"), "source_date": i.meta.get("source_date"),
                "created_at": utc_timestamp(i.created_ms as u64),
            }))
        })
        .collect();
    Ok(json!({"results": results, "mode": r.mode}))
}

#[derive(Debug, Deserialize)]
pub struct Document {
    pub id: Option<String>,
    pub title: Option<String>,
    pub text: String,
    pub source_url: Option<String>,
    pub source_date: Option<String>,
}

#[derive(Debug, Deserialize)]
pub struct DocumentsRequest {
    pub documents: Vec<Document>,
    pub now_ms: u64,
}

/// Adds (or replaces, by id) documents in the vault search.
pub async fn add_documents(r: DocumentsRequest) -> Result<J> {
    let stores = Stores::open().await?;
    let texts: Vec<String> = r
        .documents
        .iter()
        .map(|d| format!("{} {}", d.title.as_deref().unwrap_or(""), d.text).trim().to_string())
        .collect();
    let embeddings = embed_many(&texts)?;
    let ids: Vec<String> =
        r.documents.iter().map(|d| d.id.clone().unwrap_or_else(|| format!("doc-{}", random_hex(8)))).collect();
    let now = r.now_ms;
    stores
        .sql
        .transaction(async |sql: &Sql| {
            for ((d, e), id) in r.documents.iter().zip(&embeddings).zip(&ids) {
                let fail = |f: Fail| mneme_store::StoreError::new("internal", f.message);
                search::remove(sql, "document", id).await.map_err(fail)?;
                let title = d.title.clone().unwrap_or_else(|| validate::derive_topic(&d.text));
                let meta = json!({"source_url": d.source_url, "source_date": d.source_date});
                let new = search::NewItem { corpus: "document", ref_id: id, title: &title, body: &d.text, meta: &meta };
                search::put(sql, &new, e, now).await.map_err(fail)?;
            }
            Ok(())
        })
        .await?;
    Ok(json!({"ids": ids}))
}

/// Removes a document from the vault search.
pub async fn delete_document(r: IdRequest) -> Result<J> {
    let stores = Stores::open().await?;
    let n = search::remove(&stores.sql, "document", &r.id).await?;
    if n == 0 {
        return Err(Fail::new("not-found", format!("no document `{}`", r.id)));
    }
    Ok(json!({"deleted": r.id}))
}
