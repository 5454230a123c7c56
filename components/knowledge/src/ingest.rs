//! Ingest jobs, and the prepare/apply halves of extraction (the tick entry
//! calls the model between them).
//!
//! A job's life: [`enqueue`] (202 to the caller) → [`claim`] (a lease, so
//! two workers never process one job) → the entry extracts candidates
//! (model or rules) → [`prepare`] (validation, embeddings, the patterns
//! engine, the most similar active entries) → the entry judges stances
//! (model or rules) → [`apply`] (one transaction: merges, inserts with
//! sequential ids, supersedes, patterns, the outcome, `done`). A crash
//! anywhere before the commit of `apply` leaves the job to be claimed again
//! when its lease ends.

use crate::entries::{CORPUS, ENTRY_COLUMNS, bad_row, entries_by_id, identity_text, retrieval_text, search_text};
use mneme_knowledge::entry::{self, Confidence, Entry, KnowledgeType};
use mneme_knowledge::fusion::{self, Mode};
use mneme_knowledge::governor::{self, Action, Neighbour, Stance};
use mneme_knowledge::job::{Outcome, OutcomeKind, Report, Source};
use mneme_knowledge::patterns::{self, Resolution};
use mneme_knowledge::text;
use mneme_knowledge::validate::{self, Candidate};
use mneme_store::{Row, Sql, Value};
use mneme_substrate::schedule::{self, Queue};
use mneme_substrate::{Fail, Result, Stores, bytes_f32, embed_many, f32_bytes, in_list, json_text, random_hex, search};
use mneme_text::cosine;
use mneme_time::calendar::utc_timestamp;
use mneme_types::GivenBack;
use mneme_types::knowledge::{
    Enqueued, IngestJob, JobStatus, JobView, JudgedJob, KnownPattern, NeighbourView, Prepared, SourceBrief,
};
use serde_json::{Value as J, json};

/// A job is tried this many times (lease expiries included) before it fails.
pub const MAX_ATTEMPTS: i64 = 3;
/// A job given back waits this long times its attempts before the next try.
pub const RETRY_BACKOFF_MS: i64 = 3_000;

/// Queues a transcript. The same transcript (by content hash) queues
/// nothing new: the answer names the existing job (a failed one is queued
/// again).
pub async fn enqueue(source: Source, now_ms: u64) -> Result<Enqueued> {
    let stores = Stores::open().await?;
    let sql = &stores.sql;
    let hash = text::content_hash(&source.text);
    let id = format!("kj-{}", random_hex(8));
    let now = now_ms as i64;
    let inserted = sql
        .execute(
            "INSERT INTO knowledge_jobs (id, content_hash, status, request, attempts, lease_until_ms, created_ms, updated_ms)
             VALUES ($1, $2, 'queued', $3, 0, 0, $4, $4) ON CONFLICT (content_hash) DO NOTHING",
            &[id.as_str().into(), hash.as_str().into(), json_text(&source).into(), now.into()],
        )
        .await?;
    if inserted == 1 {
        return Ok(Enqueued { job_id: id, status: JobStatus::Queued, duplicate: false, requeued: false });
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
    Ok(Enqueued { job_id: row.text("id")?, status: status(row)?, duplicate: true, requeued: requeued == 1 })
}

/// A job's status and, once done, the outcome per candidate.
pub async fn job(id: &str) -> Result<JobView> {
    let stores = Stores::open().await?;
    let rows = stores
        .sql
        .query(
            "SELECT id, status, request, outcome, error, attempts, created_ms, updated_ms FROM knowledge_jobs WHERE id = $1",
            &[id.into()],
        )
        .await?;
    let Some(row) = rows.first() else {
        return Err(Fail::new("not-found", format!("no knowledge job `{id}`")));
    };
    let request: Source = serde_json::from_str(&row.text("request")?)
        .map_err(|e| Fail::new("decode", format!("knowledge_jobs.request: {e}")))?;
    let outcome = match row.opt_text("outcome")? {
        Some(o) => Some(
            serde_json::from_str::<Report>(&o)
                .map_err(|e| Fail::new("decode", format!("knowledge_jobs.outcome: {e}")))?
                .into(),
        ),
        None => None,
    };
    Ok(JobView {
        id: row.text("id")?,
        status: status(row)?,
        attempts: row.i64("attempts")?,
        created_at: utc_timestamp(row.i64("created_ms")? as u64),
        updated_at: utc_timestamp(row.i64("updated_ms")? as u64),
        source: SourceBrief {
            source_type: request.source_type.into(),
            source_channel: request.source_channel,
            source_date: request.source_date,
            source_url: request.source_url,
            principal: request.principal,
            chars: request.text.chars().count() as u32,
        },
        error: row.opt_text("error")?,
        outcome,
    })
}

fn status(row: &Row) -> Result<JobStatus> {
    let s = row.text("status")?;
    JobStatus::parse(&s).ok_or_else(|| Fail::new("decode", format!("knowledge_jobs.status `{s}`")))
}

/// Takes the oldest queued job (or one whose lease ran out) under a fresh
/// lease. `{job: null}` when there is nothing to do.
pub async fn claim(now_ms: u64, lease_ms: u64) -> Result<Option<IngestJob>> {
    let stores = Stores::open().await?;
    let sql = &stores.sql;
    let now = now_ms as i64;
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
            &[token.as_str().into(), (now + lease_ms as i64).into(), now.into()],
        )
        .await?;
    let Some(row) = rows.first() else { return Ok(None) };
    let request: Source = serde_json::from_str(&row.text("request")?)
        .map_err(|e| Fail::new("decode", format!("knowledge_jobs.request: {e}")))?;
    let known = sql
        .query("SELECT slug, description FROM reasoning_patterns ORDER BY observations DESC, slug LIMIT 60", &[])
        .await?;
    let patterns: Vec<KnownPattern> = known
        .iter()
        .map(|p| Ok(KnownPattern { slug: p.text("slug")?, description: p.text("description")? }))
        .collect::<Result<_>>()?;
    Ok(Some(IngestJob {
        id: row.text("id")?,
        claim: token,
        attempts: row.i64("attempts")?,
        source: request.into(),
        patterns,
    }))
}

/// Gives a claimed job back: queued again to retry after a backoff (while
/// attempts remain), or failed with the error.
pub async fn fail(job_id: &str, claim: &str, error: &str, retry: bool, now_ms: u64) -> Result<GivenBack> {
    let sql = mneme_store::open_sql().await?;
    let queue = Queue { table: "knowledge_jobs", error_column: "error", backoff_ms: RETRY_BACKOFF_MS };
    let status = schedule::give_back(
        &sql,
        &queue,
        (job_id.into(), claim),
        error.into(),
        // No retry: no attempt count is low enough to queue again.
        if retry { MAX_ATTEMPTS } else { 0 },
        now_ms as i64,
    )
    .await?;
    status.ok_or_else(|| Fail::new("lease-lost", "the job is no longer claimed by this worker"))
}

// ---------------------------------------------------------------- prepare

/// Validates, embeds and resolves patterns for each candidate, and finds the
/// most similar active entries that the stance judgement must label.
pub async fn prepare(candidates: &[String], merge_threshold: f32) -> Result<Vec<Prepared>> {
    let stores = Stores::open().await?;
    let sql = &stores.sql;
    let mut out: Vec<Prepared> = Vec::new();
    let mut texts = Vec::new();
    for (index, raw) in candidates.iter().enumerate() {
        // A candidate that is not even JSON fails validation like any other.
        let raw: J = serde_json::from_str(raw).unwrap_or(J::Null);
        let (candidate, dropped) = match validate::validate(&raw) {
            Ok(c) => {
                texts.push(identity_text(&c.topic, &c.position));
                texts.push(retrieval_text(&c.topic, &c.position, &c.reasoning));
                (Some(c), None)
            }
            Err(d) => (None, Some(d)),
        };
        out.push(Prepared {
            index: index as u32,
            dropped: dropped.map(Into::into),
            candidate: candidate.map(Into::into),
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
        let Some(c) = p.candidate.clone().map(Candidate::from) else { continue };
        p.identity = embeddings.next().unwrap_or_default();
        p.retrieval = embeddings.next().unwrap_or_default();
        let resolution = match patterns::resolve_direct(c.pattern_hint.as_deref(), c.style_only, &known) {
            Some(res) => res,
            None => {
                let hint = patterns::clean_hint(c.pattern_hint.as_deref()).unwrap_or_default().to_string();
                p.hint_embedding = embed_many(&[patterns::describe(&hint)])?.pop().unwrap_or_default();
                patterns::resolve_embedded(&hint, &p.hint_embedding, &pattern_list)
            }
        };
        p.pattern = Some(resolution.into());
    }
    // Each claim's neighbour search is a few reads with ranking in between:
    // `LANES` searches run at once, each lane on its own connection and
    // taking the next claim when it is done, so one lane's statements run
    // while another ranks what it read (D-K25). They read the same rows in
    // any order, so the neighbours are those of one search after another.
    let claims: Vec<(usize, Candidate)> =
        out.iter().enumerate().filter_map(|(i, p)| p.candidate.clone().map(|c| (i, Candidate::from(c)))).collect();
    let next = std::cell::Cell::new(0);
    let lane = async |own: Option<&Sql>| -> Result<Vec<(usize, Vec<NeighbourView>)>> {
        let opened;
        let sql = match own {
            Some(sql) => sql,
            // A second connection only helps: when none can be had (a full
            // pool, a store gone quiet), the first lane takes every claim,
            // and meets the store's trouble itself if it is one.
            None if next.get() >= claims.len() => return Ok(Vec::new()),
            None => match mneme_store::open_sql().await {
                Ok(sql) => {
                    opened = sql;
                    &opened
                }
                Err(_) => return Ok(Vec::new()),
            },
        };
        let mut found = Vec::new();
        while let Some((i, c)) = claims.get(next.replace(next.get() + 1)) {
            found.push((*i, neighbours(sql, c, &out[*i].identity, &out[*i].retrieval, merge_threshold).await?));
        }
        Ok(found)
    };
    let lanes = (0..LANES.min(claims.len())).map(|l| lane((l == 0).then_some(sql)));
    for (i, n) in futures::future::try_join_all(lanes).await?.into_iter().flatten() {
        out[i].neighbours = n;
    }
    Ok(out)
}

/// Claims whose neighbour searches run at once in [`prepare`] (D-K25): two
/// keep a statement in flight while the other lane ranks, on a connection
/// each.
const LANES: usize = 2;

/// The most similar active entries by the claim's embedding: the top
/// [`governor::STANCE_NEIGHBOURS`] at cosine ≥ 0.5, plus the best same-type
/// entry when it is a merge candidate outside them. The candidates come
/// from the same hybrid search as `/retrieve`, with a claim's
/// [`search::Reach::NEIGHBOURS`]: 4 lists of a trained corpus instead of 32
/// (D-K17), 8 when its full text finds nothing (D-K27), the best 40 of
/// them by Hamming distance re-scored (D-K24) but 200 of a flat scan
/// (D-K28), full text ranked by its rare terms alone (D-K21), and none
/// when the claim has no rare term (D-K26).
async fn neighbours(
    sql: &Sql,
    c: &Candidate,
    identity: &[f32],
    retrieval: &[f32],
    merge_threshold: f32,
) -> Result<Vec<NeighbourView>> {
    let query = format!("{} {}", c.topic, c.position);
    let found =
        search::candidates_within(sql, &[CORPUS], &query, retrieval, Mode::Hybrid, search::Reach::NEIGHBOURS).await?;
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
            kind: KnowledgeType::parse(&row.text("type")?).ok_or_else(|| bad_row("type"))?.into(),
            cosine: cos,
            confidence: Confidence::parse(&row.text("confidence")?).ok_or_else(|| bad_row("confidence"))?.into(),
            source_date: row.text("source_date")?,
            position: row.text("position")?,
            stance: None,
        });
    }
    all.sort_by(|a, b| b.cosine.total_cmp(&a.cosine).then(a.id.cmp(&b.id)));
    let same_type = all.iter().position(|n| KnowledgeType::from(n.kind) == c.kind && n.cosine >= merge_threshold);
    let mut keep: Vec<NeighbourView> = all.iter().take(governor::STANCE_NEIGHBOURS).cloned().collect();
    if let Some(i) = same_type.filter(|&i| i >= governor::STANCE_NEIGHBOURS) {
        keep.push(all[i].clone());
    }
    Ok(keep)
}

// ---------------------------------------------------------------- apply

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
pub async fn apply(r: JudgedJob) -> Result<Report> {
    let stores = Stores::open().await?;
    let sql = &stores.sql;
    let now_ms = r.now_ms;
    let now = utc_timestamp(now_ms);
    let result = sql
        .transaction(async |sql: &Sql| {
            // Before any row lock: a merge rewrites an entry's text under
            // this lock, an insert takes the counter's row first (D-K15).
            search::lock(sql, CORPUS).await.map_err(mneme_substrate::as_store_error)?;
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
            let report = Report::of(r.extractor.clone(), r.extractor_note.clone(), superseded, outcomes);
            sql.execute(
                "UPDATE knowledge_jobs SET status = 'done', outcome = $2, error = NULL, claim = NULL, updated_ms = $3
                 WHERE id = $1",
                &[r.job_id.as_str().into(), json_text(&report).into(), (now_ms as i64).into()],
            )
            .await?;
            Ok(report)
        })
        .await;
    match result {
        Ok(v) => Ok(v),
        Err(e) => Err(Fail::from(e)),
    }
}

async fn apply_one(
    sql: &Sql,
    r: &JudgedJob,
    source: &Source,
    item: &Prepared,
    now: &str,
    fresh: &mut Vec<Fresh>,
    superseded: &mut Vec<String>,
) -> Result<Outcome> {
    let Some(c) = item.candidate.clone().map(Candidate::from) else {
        let mut o = Outcome::new(item.index, OutcomeKind::Dropped);
        if let Some(d) = &item.dropped {
            o.reason = Some(d.reason.clone());
            o.detail = Some(d.detail.clone());
        }
        return Ok(o);
    };
    let c = &c;
    let mut o = Outcome::new(item.index, OutcomeKind::Kept);
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
            kind: n.kind.into(),
            cosine: n.cosine,
            confidence: n.confidence.into(),
            source_date: n.source_date.clone(),
            stance: n
                .stance
                .map(Stance::from)
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
    let resolution: Option<Resolution> = item.pattern.clone().map(Into::into);
    let pattern_slug = match &resolution {
        Some(p) => record_pattern(sql, p, &item.hint_embedding, r.now_ms).await?,
        None => None,
    };
    o.pattern = resolution;
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
            search::retext(sql, CORPUS, &e.id, &title, &body, &e.source_date).await?;
            o.outcome = OutcomeKind::Merged;
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
            // The timeline's count of its type and day (migration 0019).
            sql.execute(
                "INSERT INTO knowledge_days (type, day, n) VALUES ($1, $2, 1)
                 ON CONFLICT (type, day) DO UPDATE SET n = knowledge_days.n + 1",
                &[e.kind.as_str().into(), (r.now_ms as i64 / 86_400_000).into()],
            )
            .await?;
            if superseded_by.is_none() {
                let (title, body) = search_text(&e);
                let meta = json!({"type": e.kind.as_str()});
                let new = search::NewItem {
                    corpus: CORPUS,
                    ref_id: &e.id,
                    title: &title,
                    body: &body,
                    context: "",
                    date: &e.source_date,
                    meta: &meta,
                    place: search::Place::NONE,
                };
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
            o.outcome = if superseded_by.is_some() { OutcomeKind::KeptAsHistory } else { OutcomeKind::Kept };
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
