//! Writing documents to the vault search: added or replaced by id, and
//! deleted, each with the context it borrows from its run (D-K29).
//!
//! The documents that name the same source URL and source date form a run,
//! in the order they arrived, over any number of requests. A document that
//! brings no context borrows its run's neighbours' words; when a document
//! joins a run, is replaced or leaves it, the neighbours that built their
//! contexts from it get them built again and are embedded again, in the
//! same transaction as the change. Which ones, and what they read, is
//! `mneme_knowledge::neighbours`; this module reads the run around the
//! change and writes the result.

use mneme_knowledge::neighbours::{self, Member, SIDE, Window};
use mneme_knowledge::validate;
use mneme_store::Sql;
use mneme_substrate::search::{self, Place, RunRow, Stored, Stretch};
use mneme_substrate::{Fail, Result, Stores, embed_many, random_hex};
use mneme_types::knowledge::NewDocument;
use serde_json::json;

const CORPUS: &str = "document";

/// How far past a change a run is read: a neighbour of a neighbour of the
/// change decides whether a neighbour's context still holds.
const MARGIN: usize = 2 * SIDE;

/// The text a document's embedding reads: its own words first (the
/// embedding reads only its first 256 word pieces), then its context. A
/// title the app derived from the text is left out: it repeats the text's
/// first words, and read twice they pull documents that open alike
/// together. A stored document does not say whether its title was sent, so
/// a title equal to the derived one counts as derived, for a new document
/// as for a neighbour embedded again, and both get the same vector.
fn embedded(title: &str, body: &str, context: &str) -> String {
    let title = if title == validate::derive_topic(body) { "" } else { title };
    format!("{title} {body} {context}").trim().to_string()
}

/// A stored document whose context is built again, with it.
struct Rebuilt {
    row: RunRow,
    context: String,
}

/// One run's part in a change: the documents of the batch that join it
/// (indexes into the batch, with the position each keeps when it replaces
/// itself in place), and the positions of the stored ones that leave it.
#[derive(Default)]
struct RunChange {
    joining: Vec<(usize, Option<i64>)>,
    leaving: Vec<i64>,
}

/// Reads the stretch of `run` that a change touches, in order, and whether
/// it reaches the run's first and last document.
async fn stretch_of(sql: &Sql, run: &str, change: &RunChange) -> Result<(Vec<RunRow>, bool, bool)> {
    let moved: Vec<i64> = change.leaving.iter().copied().chain(change.joining.iter().filter_map(|j| j.1)).collect();
    let appends = change.joining.iter().any(|j| j.1.is_none());
    let (Some(&lo), Some(&hi)) = (moved.iter().min(), moved.iter().max()) else {
        // Only documents after the run's last: its last few are all it reads.
        let before = search::run_rows(sql, CORPUS, run, Stretch::Before(i64::MAX, MARGIN)).await?;
        let from_start = before.len() < MARGIN;
        return Ok((before, from_start, true));
    };
    let mut rows = search::run_rows(sql, CORPUS, run, Stretch::Before(lo, MARGIN)).await?;
    let from_start = rows.len() < MARGIN;
    if appends {
        // A change inside the run and documents after its end: all of it
        // from the change on (one run's length at most).
        rows.extend(search::run_rows(sql, CORPUS, run, Stretch::Between(lo, i64::MAX)).await?);
        return Ok((rows, from_start, true));
    }
    rows.extend(search::run_rows(sql, CORPUS, run, Stretch::Between(lo, hi)).await?);
    let after = search::run_rows(sql, CORPUS, run, Stretch::After(hi, MARGIN)).await?;
    let to_end = after.len() < MARGIN;
    rows.extend(after);
    Ok((rows, from_start, to_end))
}

/// A place in a run's window: a document of the batch (its index) or a
/// stored one (its row).
#[derive(Clone, Copy)]
enum Slot {
    New(usize),
    Held(usize),
}

/// For one run: the context each joining document builds (by batch index)
/// and the stored documents whose contexts are built again.
async fn relend(
    sql: &Sql,
    run: &str,
    change: &RunChange,
    docs: &[&NewDocument],
    gone: &[&str],
    ids: &[&str],
) -> Result<(Vec<(usize, String)>, Vec<Rebuilt>)> {
    let (rows, from_start, to_end) = stretch_of(sql, run, change).await?;
    // In order: each stored row that stays, or the batch's document that
    // replaces it in place; then the documents joining at the end.
    let mut order: Vec<Slot> = Vec::new();
    for (r, row) in rows.iter().enumerate() {
        if let Some(&(k, _)) = change.joining.iter().find(|(k, pos)| ids[*k] == row.ref_id && pos.is_some()) {
            order.push(Slot::New(k));
        } else if !gone.contains(&row.ref_id.as_str()) && !ids.contains(&row.ref_id.as_str()) {
            order.push(Slot::Held(r));
        }
    }
    order.extend(change.joining.iter().filter(|j| j.1.is_none()).map(|j| Slot::New(j.0)));
    let members: Vec<Member> = order
        .iter()
        .map(|o| match *o {
            Slot::New(k) => Member { text: &docs[k].text, builds: docs[k].context.is_none(), stored: None },
            Slot::Held(r) => Member { text: &rows[r].body, builds: rows[r].lent, stored: Some(&rows[r].context) },
        })
        .collect();
    let window = Window { members, from_start, to_end };
    let mut joining = Vec::new();
    let mut rebuilt = Vec::new();
    for (i, context) in neighbours::to_write(&window, SIDE) {
        match order[i] {
            Slot::New(k) => joining.push((k, context)),
            Slot::Held(r) => rebuilt.push(Rebuilt { row: rows[r].clone(), context }),
        }
    }
    Ok((joining, rebuilt))
}

/// Adds (or replaces, by id) documents in the vault search.
pub async fn add(documents: Vec<NewDocument>, now: u64) -> Result<Vec<String>> {
    let stores = Stores::open().await?;
    let sql = &stores.sql;
    let ids: Vec<String> =
        documents.iter().map(|d| d.id.clone().unwrap_or_else(|| format!("doc-{}", random_hex(8)))).collect();
    // An id given twice in one batch: the later document replaces the
    // earlier, as two requests in a row would, so the earlier is neither
    // stored nor lent to its neighbours.
    let last: Vec<usize> = (0..documents.len()).filter(|&i| !ids[i + 1..].contains(&ids[i])).collect();
    let docs: Vec<&NewDocument> = last.iter().map(|&i| &documents[i]).collect();
    let kept: Vec<&str> = last.iter().map(|&i| ids[i].as_str()).collect();
    let runs: Vec<String> =
        docs.iter().map(|d| neighbours::run_key(d.source_url.as_deref(), d.source_date.as_deref())).collect();
    // What the store holds of these ids: one replaced within its own run
    // keeps its place there; one that changes run leaves the old one. Only
    // an id the client sent can name a stored document, so a batch of new
    // documents reads nothing before its embeddings (under Spin, twenty
    // such reads at once, each opening its connection, outwaited the
    // store's deadline).
    let given: Vec<&str> = last.iter().filter(|&&i| documents[i].id.is_some()).map(|&i| ids[i].as_str()).collect();
    let old = search::rows_of(sql, CORPUS, &given).await?;
    let mut changes: std::collections::BTreeMap<&str, RunChange> = Default::default();
    let mut places: Vec<Option<i64>> = vec![Some(0); docs.len()];
    for (k, run) in runs.iter().enumerate() {
        let before = old.iter().find(|o| o.ref_id == kept[k]);
        if let Some(o) = before.filter(|o| !o.run.is_empty() && o.run != *run) {
            changes.entry(&o.run).or_default().leaving.push(o.pos);
        }
        if run.is_empty() {
            continue;
        }
        places[k] = before.filter(|o| o.run == *run).map(|o| o.pos);
        changes.entry(run).or_default().joining.push((k, places[k]));
    }
    // A document that brings no context of its own borrows its run's
    // neighbours' words (D-K29); one that brings any, even an empty one,
    // keeps it; one in no run has none.
    let mut contexts: Vec<String> = docs.iter().map(|d| d.context.clone().unwrap_or_default()).collect();
    let mut rebuilt: Vec<Rebuilt> = Vec::new();
    for (run, change) in &changes {
        let (joining, again) = relend(sql, run, change, &docs, &[], &kept).await?;
        for (k, context) in joining {
            contexts[k] = context;
        }
        rebuilt.extend(again);
    }
    let titles: Vec<String> =
        docs.iter().map(|d| d.title.clone().unwrap_or_else(|| validate::derive_topic(&d.text))).collect();
    let mut texts: Vec<String> = (0..docs.len()).map(|k| embedded(&titles[k], &docs[k].text, &contexts[k])).collect();
    texts.extend(rebuilt.iter().map(|b| embedded(&b.row.title, &b.row.body, &b.context)));
    let embeddings = embed_many(&texts)?;
    let metas: Vec<String> =
        docs.iter().map(|d| json!({"source_url": d.source_url, "source_date": d.source_date}).to_string()).collect();
    let mut items: Vec<(Stored, &[f32])> = (0..docs.len())
        .map(|k| {
            let stored = Stored {
                corpus: CORPUS,
                ref_id: kept[k],
                title: &titles[k],
                body: &docs[k].text,
                context: &contexts[k],
                dated: search::dated(docs[k].source_date.as_deref().unwrap_or(""), now),
                meta: metas[k].clone(),
                created_ms: now as i64,
                place: Place { run: &runs[k], pos: places[k], lent: !runs[k].is_empty() && docs[k].context.is_none() },
            };
            (stored, embeddings[k].as_slice())
        })
        .collect();
    items.extend(rebuilt.iter().zip(&embeddings[docs.len()..]).map(|(b, e)| (again(b), e.as_slice())));
    sql.transaction(async |sql: &Sql| {
        let fail = mneme_substrate::as_store_error;
        // Replaced documents and rebuilt neighbours go first, one by one
        // (few); new ones, most, cost one read between them.
        for id in search::present(sql, CORPUS, &kept).await.map_err(fail)? {
            search::remove(sql, CORPUS, &id).await.map_err(fail)?;
        }
        for b in &rebuilt {
            search::remove(sql, CORPUS, &b.row.ref_id).await.map_err(fail)?;
        }
        search::put_stored(sql, &items).await.map_err(fail)?;
        Ok(())
    })
    .await?;
    Ok(ids)
}

/// A rebuilt neighbour as it is written back: all it was but its context
/// (and the embedding that reads it).
fn again(b: &Rebuilt) -> Stored<'_> {
    Stored {
        corpus: CORPUS,
        ref_id: &b.row.ref_id,
        title: &b.row.title,
        body: &b.row.body,
        context: &b.context,
        dated: b.row.dated.clone(),
        meta: b.row.meta.clone(),
        created_ms: b.row.created_ms,
        place: Place { run: &b.row.run, pos: Some(b.row.pos), lent: true },
    }
}

/// Removes a document from the vault search; the neighbours that borrowed
/// its words get their contexts built without it.
pub async fn delete(id: &str) -> Result<()> {
    let stores = Stores::open().await?;
    let sql = &stores.sql;
    let row = search::rows_of(sql, CORPUS, &[id]).await?.pop();
    let rebuilt = match &row {
        Some(r) if !r.run.is_empty() => {
            let change = RunChange { joining: Vec::new(), leaving: vec![r.pos] };
            relend(sql, &r.run, &change, &[], &[id], &[]).await?.1
        }
        _ => Vec::new(),
    };
    let texts: Vec<String> = rebuilt.iter().map(|b| embedded(&b.row.title, &b.row.body, &b.context)).collect();
    let embeddings = embed_many(&texts)?;
    let items: Vec<(Stored, &[f32])> = rebuilt.iter().zip(&embeddings).map(|(b, e)| (again(b), e.as_slice())).collect();
    let n = sql
        .transaction(async |sql: &Sql| {
            let fail = mneme_substrate::as_store_error;
            let n = search::remove(sql, CORPUS, id).await.map_err(fail)?;
            if n > 0 {
                for b in &rebuilt {
                    search::remove(sql, CORPUS, &b.row.ref_id).await.map_err(fail)?;
                }
                search::put_stored(sql, &items).await.map_err(fail)?;
            }
            Ok(n)
        })
        .await?;
    if n == 0 {
        return Err(Fail::new("not-found", format!("no document `{id}`")));
    }
    Ok(())
}
