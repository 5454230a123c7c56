//! Reading knowledge: entries (as JSON or their markdown mirror), the
//! vault's files, reasoning patterns, `/retrieve`'s ranking and `/search`
//! across entries, documents and episodes, and the documents themselves.

use crate::entries::{CORPUS, ENTRY_COLUMNS, entries_by_id, entry_from};
use mneme_knowledge::entry::{Entry, KnowledgeType};
use mneme_knowledge::fusion::{self, Mode};
use mneme_knowledge::{mirror, rank};
use mneme_store::{Sql, Value};
use mneme_substrate::{Fail, Result, Stores, embed_many, query_embedding, search};
use mneme_time::calendar::utc_timestamp;
use mneme_types::VaultFile;
use mneme_types::knowledge::{
    EntriesOnDay, EntryDetail, EntryPage, EntryTimeline, Mirror, PatternView, RankedEntry, RetrieveTimes, Retrieved,
    SearchHit,
};
use serde_json::Value as J;

/// Which entries a listing shows.
pub struct Listing {
    pub limit: u32,
    pub offset: u32,
    pub kind: Option<KnowledgeType>,
    pub pattern: Option<String>,
    pub include_superseded: bool,
}

/// Entries, newest first.
pub async fn list(r: Listing) -> Result<EntryPage> {
    let stores = Stores::open().await?;
    let mut filters = Vec::new();
    let mut params: Vec<Value> = Vec::new();
    if !r.include_superseded {
        filters.push("superseded_by IS NULL".to_string());
    }
    if let Some(k) = r.kind {
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
    Ok(EntryPage { entries: entries.into_iter().map(Into::into).collect(), total })
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
pub async fn get(id: &str) -> Result<EntryDetail> {
    let stores = Stores::open().await?;
    let (e, supersedes) = one(&stores.sql, id).await?;
    Ok(EntryDetail { entry: e.into(), supersedes })
}

/// The entry's markdown mirror.
pub async fn markdown(id: &str) -> Result<Mirror> {
    let stores = Stores::open().await?;
    let (e, supersedes) = one(&stores.sql, id).await?;
    Ok(Mirror { path: mirror::path(&e.id), markdown: mirror::render(&e, &supersedes) })
}

/// Every entry's mirror, for the vault archive.
pub async fn vault() -> Result<Vec<VaultFile>> {
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
    let files = entries
        .iter()
        .map(|(e, ms)| {
            let older = replaced.get(&e.id).cloned().unwrap_or_default();
            VaultFile {
                path: mirror::path(&e.id),
                content: mirror::render(e, &older),
                mtime_secs: (ms / 1000).max(0) as u64,
            }
        })
        .collect();
    Ok(files)
}

/// Reasoning patterns with how often each was observed.
pub async fn pattern_list() -> Result<Vec<PatternView>> {
    let stores = Stores::open().await?;
    let rows = stores
        .sql
        .query(
            "SELECT slug, description, observations, status, created_ms FROM reasoning_patterns ORDER BY observations DESC, slug",
            &[],
        )
        .await?;
    rows.iter()
        .map(|r| {
            Ok(PatternView {
                slug: r.text("slug")?,
                description: r.text("description")?,
                observations: r.i64("observations")?,
                status: r.text("status")?,
                created_at: utc_timestamp(r.i64("created_ms")? as u64),
            })
        })
        .collect()
}

/// Entries per type recorded from the start of UTC day `since_day`, by
/// day, and the counts before it, from the counts the ingest keeps
/// (D-K18): what is read grows with the days that have entries, not with
/// the entries.
pub async fn timeline(since_day: i64) -> Result<EntryTimeline> {
    let stores = Stores::open().await?;
    // Kept per type and day as entries are recorded (migration 0019): a
    // million entries took a second to count.
    let since = Value::Int(since_day);
    let before = stores
        .sql
        .query(
            "SELECT type, CAST(sum(n) AS BIGINT) AS n FROM knowledge_days WHERE day < $1 GROUP BY type",
            std::slice::from_ref(&since),
        )
        .await;
    let days = stores
        .sql
        .query(
            "SELECT type, day, n FROM knowledge_days WHERE day >= $1 AND n > 0 ORDER BY day, type",
            std::slice::from_ref(&since),
        )
        .await;
    let kind = |r: &mneme_store::Row| -> Result<mneme_types::knowledge::KnowledgeType> {
        let t = r.text("type")?;
        KnowledgeType::parse(&t)
            .map(Into::into)
            .ok_or_else(|| Fail::new("internal", format!("an entry of unknown type `{t}`")))
    };
    Ok(EntryTimeline {
        before: before?.iter().map(|r| Ok((kind(r)?, r.i64("n")?.max(0) as u64))).collect::<Result<_>>()?,
        days: days?
            .iter()
            .map(|r| Ok(EntriesOnDay { kind: kind(r)?, day: r.i64("day")?, count: r.i64("n")?.max(0) as u64 }))
            .collect::<Result<_>>()?,
    })
}

// ---------------------------------------------------------------- retrieval

/// `/retrieve`: active entries ranked by the seed's final score over the
/// fused candidates; both scores computed here, never stored.
pub async fn retrieve(query: &str, k: usize, mode: Mode, now_ms: u64) -> Result<Retrieved> {
    let stores = Stores::open().await?;
    let sql = &stores.sql;
    let t0 = mneme_time::clock::system_ms();
    let q = embed_many(&[query.to_string()])?.pop().unwrap_or_default();
    let embed_ms = mneme_time::clock::system_ms().saturating_sub(t0);
    let found = search::candidates(sql, &[CORPUS], query, &q, mode).await?;
    let t1 = mneme_time::clock::system_ms();
    let pool: std::collections::HashMap<String, f32> = found
        .fused
        .iter()
        .take(fusion::pool(k))
        .filter_map(|f| found.get(f.0).map(|(id, cos)| (id.clone(), *cos)))
        .collect();
    let ids: Vec<String> = pool.keys().cloned().collect();
    let entries = entries_by_id(sql, &ids).await?;
    let mut results: Vec<(f64, f64, Entry)> = Vec::new();
    for e in entries.into_iter().filter(|e| e.superseded_by.is_none()) {
        let Some(cos) = pool.get(&e.id) else { continue };
        let relevance = rank::relevance(*cos);
        let fresh = rank::freshness(e.stability, &e.source_date, now_ms);
        let score = rank::final_score(relevance, e.kind, e.confidence, fresh);
        results.push((score, relevance, e));
    }
    results.sort_by(|a, b| b.0.total_cmp(&a.0).then(b.1.total_cmp(&a.1)).then(a.2.id.cmp(&b.2.id)));
    results.truncate(k);
    let results = results
        .into_iter()
        .map(|(final_score, relevance_score, e)| RankedEntry { entry: e.into(), relevance_score, final_score })
        .collect();
    let took_ms = RetrieveTimes {
        embed: embed_ms,
        text: found.text_ms,
        blocks: found.blocks_ms,
        vector: found.vector_ms,
        rank: mneme_time::clock::system_ms().saturating_sub(t1),
    };
    Ok(Retrieved { results, mode: mode.into(), took_ms, signatures_read: found.signatures })
}

/// A vault search: the query, how many hits, how found, over which
/// corpora, and whether to cache the query's embedding (set for the fixed
/// queries of the rx pipeline's evidence step, never for a principal's own
/// searches).
pub struct Query {
    pub q: String,
    pub k: usize,
    pub mode: Mode,
    pub corpora: Vec<String>,
    pub cache_embedding: bool,
}

/// `/search`: the vault search over knowledge entries, documents and
/// episodes, in fused order.
pub async fn search(r: Query) -> Result<Vec<SearchHit>> {
    let stores = Stores::open().await?;
    let sql = &stores.sql;
    let q = if r.cache_embedding {
        query_embedding(&stores.kv, &r.q).await?
    } else {
        embed_many(std::slice::from_ref(&r.q))?.pop().unwrap_or_default()
    };
    let corpora: Vec<&str> = r.corpora.iter().map(String::as_str).collect();
    let found = search::candidates(sql, &corpora, &r.q, &q, r.mode).await?;
    let top: Vec<(i64, f64)> = found.fused.iter().take(r.k).copied().collect();
    let seqs: Vec<i64> = top.iter().map(|t| t.0).collect();
    let items = search::items(sql, &seqs).await?;
    let meta = |i: &search::Item, k: &str| i.meta.get(k).and_then(J::as_str).map(String::from);
    let results = top
        .iter()
        .filter_map(|(seq, score)| {
            let i = items.iter().find(|i| i.seq == *seq)?;
            Some(SearchHit {
                corpus: i.corpus.clone(),
                id: i.ref_id.clone(),
                title: i.title.clone(),
                snippet: i.body.chars().take(280).collect(),
                score: *score,
                relevance_score: rank::relevance(found.get(*seq).map_or(0.0, |f| f.1)),
                source_url: meta(i, "source_url"),
                source_date: meta(i, "source_date"),
                created_at: utc_timestamp(i.created_ms as u64),
            })
        })
        .collect();
    Ok(results)
}

/// The vector index's upkeep (D-K16): each corpus in its own transaction,
/// so a corpus's lists never wait on another's, and each with its own
/// outcome, so a corpus that fails (a corrupt row, a timeout) does not stop
/// the upkeep of the corpora after it.
pub async fn index_vectors(now_ms: u64) -> Result<Vec<(&'static str, Result<search::IndexStep>)>> {
    let stores = Stores::open().await?;
    let mut steps = Vec::new();
    for corpus in search::CORPORA {
        steps.push((corpus, search::index(&stores.sql, corpus, mneme_knowledge::ivf::DRAIN_BLOCKS, now_ms).await));
    }
    Ok(steps)
}
