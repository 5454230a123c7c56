//! Knowledge entries as rows: their columns, reading them back, and the
//! texts they are embedded and found by. Ingest and reading share these.

use mneme_knowledge::entry::{Confidence, Entry, KnowledgeType, SourceType, Stability};
use mneme_store::{Row, Sql, Value};
use mneme_substrate::{Fail, Result, in_list};

/// The search-index corpus of active knowledge entries.
pub const CORPUS: &str = "knowledge";
pub const ENTRY_COLUMNS: &str = "seq, id, type, topic, position, reasoning, reasoning_pattern, confidence, stability, \
    tier, tags, source_type, source_channel, source_date, source_url, corroboration_count, last_corroborated_at, \
    superseded_by, created_at, extractor";

pub fn bad_row(what: &str) -> Fail {
    Fail::new("internal", format!("a stored entry has an invalid {what}"))
}

pub fn entry_from(r: &Row) -> Result<Entry> {
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
pub async fn entries_by_id(sql: &Sql, ids: &[String]) -> Result<Vec<Entry>> {
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
pub fn search_text(e: &Entry) -> (String, String) {
    (e.topic.clone(), format!("{}\n{}\n{}", e.position, e.reasoning, e.tags.join(" ")))
}

/// What the retrieval embedding sees.
pub fn retrieval_text(topic: &str, position: &str, reasoning: &str) -> String {
    format!("{topic}. {position} {reasoning}")
}

/// What near-duplicate and contradiction checks compare: the claim itself.
pub fn identity_text(topic: &str, position: &str) -> String {
    format!("{topic}. {position}")
}
