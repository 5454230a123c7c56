//! The search index that `/retrieve` and `/search` share: one row per
//! searchable item (an active knowledge entry, a document, an episode) with
//! its text for full-text search (SQLite FTS5 / PostgreSQL tsvector), its
//! embedding in `search_vectors`, and the embedding's sign bits packed into
//! `vector_blocks` for the Hamming scan. Candidate generation here; ranking is the caller's.
//! Removing an item rewrites its block without its signature, so the scan
//! holds exactly the indexed items. A corpus's blocks are flat until it
//! holds [`ivf::TRAIN_AT`] signatures; [`index`] then trains its centroids
//! and moves them into inverted lists, of which a query reads the nearest
//! [`ivf::PROBES`] (D-K16).

use crate::{Fail, Result, bytes_f32, f32_bytes, in_list};
use mneme_knowledge::fusion::{self, Block, Mode};
use mneme_knowledge::ivf::{self, Centroids};
use mneme_store::sql::SqlKind;
use mneme_store::{Row, Sql, Value};
use mneme_text::cosine;

/// Every corpus the index holds: knowledge entries, documents, episodes.
pub const CORPORA: [&str; 3] = ["knowledge", "document", "episode"];

/// Signature length of a 384-dimension embedding, in u64 words.
const SIG_WORDS: usize = 6;

/// What an item is indexed by.
pub struct NewItem<'a> {
    pub corpus: &'a str,
    pub ref_id: &'a str,
    pub title: &'a str,
    pub body: &'a str,
    /// Text around the item (a transcript turn's neighbours), searchable
    /// and ranked below its own words (D-K13); empty for most items.
    pub context: &'a str,
    /// The item's date, `YYYY-MM-DD` (a time after it is not read), found
    /// by its day, month and year ([`fusion::date_words`], D-K19); empty
    /// for the day it is indexed (UTC).
    pub date: &'a str,
    pub meta: &'a serde_json::Value,
    /// Its place in a run of documents ([`Place::NONE`] for an item in
    /// none).
    pub place: Place<'a>,
}

/// Where an item sits in a run of documents that lend each other their
/// words (D-K29): the run's key (`neighbours::run_key`, empty for none),
/// its position in the run (`None`: after the run's last, given under the
/// corpus lock), and whether its context was built from its neighbours.
#[derive(Debug, Clone, Copy)]
pub struct Place<'a> {
    pub run: &'a str,
    pub pos: Option<i64>,
    pub lent: bool,
}

impl Place<'_> {
    pub const NONE: Place<'static> = Place { run: "", pos: Some(0), lent: false };
}

/// Adds an item; returns its sequence number. Call inside the caller's
/// transaction so the row and its signature land together.
pub async fn put(sql: &Sql, item: &NewItem<'_>, embedding: &[f32], now_ms: u64) -> Result<i64> {
    let seqs = put_many(sql, &[(item, embedding)], now_ms).await?;
    seqs.first().copied().ok_or_else(|| Fail::new("internal", "insert returned no sequence number"))
}

/// Rows per multi-row `INSERT` (11 parameters each: well inside both
/// databases' limits).
const ROWS_PER_INSERT: usize = 50;

/// Adds items of one corpus at once, with distinct ids; returns their
/// sequence numbers in order. Call inside the caller's transaction. The
/// corpus lock is held for a handful of statements whatever the number of
/// items (one `INSERT` per 50 rows and table, one read and write per
/// signature list, one term count), not for seven per item: twenty writers
/// of twenty documents each queued past the 4 s deadline under Spin (#50).
///
/// A list's last block is read, changed and written back, so two writers
/// must not do it at once: on SQLite every write transaction already holds
/// the write lock (`BEGIN IMMEDIATE`); on Postgres the corpus's
/// transaction-scoped advisory lock queues them ([`lock`]). Without it,
/// concurrent document batches lost signatures or collided on a new block's
/// key (a 500).
pub async fn put_many(sql: &Sql, items: &[(&NewItem<'_>, &[f32])], now_ms: u64) -> Result<Vec<i64>> {
    let rows: Vec<(Stored<'_>, &[f32])> = items
        .iter()
        .map(|(item, embedding)| {
            let NewItem { corpus, ref_id, title, body, context, date, meta, place } = **item;
            let stored = Stored {
                corpus,
                ref_id,
                title,
                body,
                context,
                dated: dated(date, now_ms),
                meta: meta.to_string(),
                created_ms: now_ms as i64,
                place,
            };
            (stored, *embedding)
        })
        .collect();
    put_stored(sql, &rows).await
}

/// An item as the index stores it: its date already in the words it is
/// found by, and the time it was first indexed. A restore (#51) writes
/// items back as an export wrote them out.
pub struct Stored<'a> {
    pub corpus: &'a str,
    pub ref_id: &'a str,
    pub title: &'a str,
    pub body: &'a str,
    pub context: &'a str,
    pub dated: String,
    pub meta: String,
    pub created_ms: i64,
    pub place: Place<'a>,
}

/// Adds stored items of one corpus at once, as [`put_many`] does (its
/// rules and locking), keeping their dates and times; returns their
/// sequence numbers in order.
pub async fn put_stored(sql: &Sql, items: &[(Stored<'_>, &[f32])]) -> Result<Vec<i64>> {
    let Some((first, _)) = items.first() else { return Ok(Vec::new()) };
    let corpus = first.corpus;
    let mut ids: Vec<&str> = Vec::with_capacity(items.len());
    for (item, embedding) in items {
        if item.corpus != corpus {
            return Err(Fail::new("internal", "one batch of search items spans two corpora"));
        }
        if embedding.len() != crate::EMBEDDING_DIM {
            return Err(Fail::new(
                "internal",
                format!("an embedding of {} dimensions, not {}", embedding.len(), crate::EMBEDDING_DIM),
            ));
        }
        if ids.contains(&item.ref_id) {
            return Err(Fail::new("internal", format!("the id {} twice in one batch", item.ref_id)));
        }
        ids.push(item.ref_id);
    }
    lock(sql, corpus).await?;
    let positions = positions(sql, corpus, items).await?;
    let mut seqs = Vec::with_capacity(items.len());
    for (chunk, at) in items.chunks(ROWS_PER_INSERT).zip(positions.chunks(ROWS_PER_INSERT)) {
        let mut params: Vec<Value> = Vec::with_capacity(chunk.len() * 11);
        let rows: Vec<String> = chunk
            .iter()
            .zip(at)
            .enumerate()
            .map(|(i, ((item, _), pos))| {
                let Stored { corpus, ref_id, title, body, context, dated, meta, created_ms, place } = item;
                params.extend([
                    (*corpus).into(),
                    (*ref_id).into(),
                    (*title).into(),
                    (*body).into(),
                    (*context).into(),
                    dated.as_str().into(),
                    meta.as_str().into(),
                    (*created_ms).into(),
                    place.run.into(),
                    (*pos).into(),
                    i64::from(place.lent).into(),
                ]);
                format!("({})", in_list(i * 11 + 1, 11))
            })
            .collect();
        let returned = sql
            .query(
                &format!(
                    "INSERT INTO search_index (corpus, ref_id, title, body, context, dated, meta, created_ms, run, run_pos, lent)
                     VALUES {} RETURNING seq, ref_id",
                    rows.join(", ")
                ),
                &params,
            )
            .await?;
        // Neither database promises RETURNING's order: match by id.
        for (item, _) in chunk {
            let row = returned.iter().find(|r| r.text("ref_id").is_ok_and(|id| id == item.ref_id));
            let row = row.ok_or_else(|| Fail::new("internal", "insert returned no sequence number"))?;
            seqs.push(row.i64("seq")?);
        }
    }
    let pairs: Vec<(i64, &[f32])> = seqs.iter().copied().zip(items.iter().map(|(_, e)| *e)).collect();
    for chunk in pairs.chunks(ROWS_PER_INSERT) {
        let mut params: Vec<Value> = Vec::with_capacity(chunk.len() * 2);
        let rows: Vec<String> = chunk
            .iter()
            .enumerate()
            .map(|(i, (seq, e))| {
                params.extend([Value::from(*seq), f32_bytes(e).into()]);
                format!("({})", in_list(i * 2 + 1, 2))
            })
            .collect();
        sql.execute(&format!("INSERT INTO search_vectors (seq, embedding) VALUES {}", rows.join(", ")), &params)
            .await?;
    }
    // Each signature to its list (the corpus's flat blocks until its
    // centroids are trained, D-K16), read under the lock so an item added
    // while [`index`] trains lands where [`index`] finds it.
    let centroids = writer_centroids(sql, corpus).await?;
    let mut moving: std::collections::BTreeMap<i64, Block> = std::collections::BTreeMap::new();
    for (seq, e) in &pairs {
        let sig = fusion::signature(e);
        let list = centroids.as_ref().map_or(FLAT, |c| c.list_of(&sig) as i64);
        moving.entry(list).or_default().push(*seq, sig);
    }
    append_to_lists(sql, corpus, moving).await?;
    count_terms(sql, corpus, &ids, Count::Add).await?;
    Ok(seqs)
}

/// Each item's position in its run: the one it brings, or, in order, the
/// next after its run's last, stored or brought (read under the corpus
/// lock, so two writers appending to one run queue rather than share a
/// position).
async fn positions(sql: &Sql, corpus: &str, items: &[(Stored<'_>, &[f32])]) -> Result<Vec<i64>> {
    let mut next: std::collections::HashMap<&str, i64> = std::collections::HashMap::new();
    let mut out = Vec::with_capacity(items.len());
    for (item, _) in items {
        let run = item.place.run;
        out.push(match item.place.pos {
            Some(pos) => pos,
            None if run.is_empty() => 0,
            None => {
                if !next.contains_key(run) {
                    let last = sql
                        .query(
                            "SELECT max(run_pos) AS last FROM search_index WHERE corpus = $1 AND run = $2",
                            &[corpus.into(), run.into()],
                        )
                        .await?
                        .first()
                        .map(|r| r.opt_i64("last"))
                        .transpose()?
                        .flatten();
                    // The batch's own positions count too: a neighbour
                    // written back with its context built again was
                    // removed from the run a moment ago.
                    let brought =
                        items.iter().filter(|(i, _)| i.place.run == run).filter_map(|(i, _)| i.place.pos).max();
                    next.insert(run, last.max(brought).map_or(1, |l| l + 1));
                }
                let pos = next.get_mut(run).expect("inserted above");
                *pos += 1;
                *pos - 1
            }
        });
    }
    // A position brought by one item and given to another of the batch
    // would tie; ties are read in sequence order, so nothing is lost.
    Ok(out)
}

/// A document of a run as its neighbours read it, with what a rewrite of
/// its context keeps.
#[derive(Debug, Clone)]
pub struct RunRow {
    pub ref_id: String,
    pub title: String,
    pub body: String,
    pub context: String,
    pub dated: String,
    pub meta: String,
    pub created_ms: i64,
    pub run: String,
    pub pos: i64,
    pub lent: bool,
}

const RUN_COLUMNS: &str = "ref_id, title, body, context, dated, meta, created_ms, run, run_pos, lent";

fn run_row(r: &Row) -> Result<RunRow> {
    Ok(RunRow {
        ref_id: r.text("ref_id")?,
        title: r.text("title")?,
        body: r.text("body")?,
        context: r.text("context")?,
        dated: r.text("dated")?,
        meta: r.text("meta")?,
        created_ms: r.i64("created_ms")?,
        run: r.text("run")?,
        pos: r.i64("run_pos")?,
        lent: r.i64("lent")? != 0,
    })
}

/// The rows of `ids` that the corpus holds, with their places.
pub async fn rows_of(sql: &Sql, corpus: &str, ids: &[&str]) -> Result<Vec<RunRow>> {
    by_ids(sql, corpus, ids, RUN_COLUMNS).await?.iter().map(run_row).collect()
}

/// `columns` of the rows of `ids` that the corpus holds, in one read.
async fn by_ids(sql: &Sql, corpus: &str, ids: &[&str], columns: &str) -> Result<Vec<Row>> {
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let mut params: Vec<Value> = vec![corpus.into()];
    params.extend(ids.iter().map(|id| Value::from(*id)));
    let statement =
        format!("SELECT {columns} FROM search_index WHERE corpus = $1 AND ref_id IN ({})", in_list(2, ids.len()));
    Ok(sql.query(&statement, &params).await?)
}

/// Which rows of a run to read: up to `n` before a position, those from
/// one position to another, or up to `n` after a position.
#[derive(Debug, Clone, Copy)]
pub enum Stretch {
    Before(i64, usize),
    Between(i64, i64),
    After(i64, usize),
}

/// A stretch of a run, in order (position, then sequence).
pub async fn run_rows(sql: &Sql, corpus: &str, run: &str, stretch: Stretch) -> Result<Vec<RunRow>> {
    let (cond, order, limit, a, b) = match stretch {
        Stretch::Before(pos, n) => ("run_pos < $3", "DESC", Some(n), pos, 0),
        Stretch::Between(lo, hi) => ("run_pos BETWEEN $3 AND $4", "ASC", None, lo, hi),
        Stretch::After(pos, n) => ("run_pos > $3", "ASC", Some(n), pos, 0),
    };
    let mut params: Vec<Value> = vec![corpus.into(), run.into(), a.into()];
    if matches!(stretch, Stretch::Between(..)) {
        params.push(b.into());
    }
    let rows = sql
        .query(
            &format!(
                "SELECT {RUN_COLUMNS} FROM search_index WHERE corpus = $1 AND run = $2 AND {cond}
                 ORDER BY run_pos {order}, seq {order}{}",
                limit.map(|n| format!(" LIMIT {n}")).unwrap_or_default()
            ),
            &params,
        )
        .await?;
    let mut out: Vec<RunRow> = rows.iter().map(run_row).collect::<Result<_>>()?;
    if matches!(stretch, Stretch::Before(..)) {
        out.reverse();
    }
    Ok(out)
}

/// The words `date` is found by, or those of `now_ms`'s day when it is
/// empty (D-K19).
pub fn dated(date: &str, now_ms: u64) -> String {
    if date.trim().is_empty() {
        fusion::date_words(&mneme_time::calendar::format_date(now_ms as i64 / 86_400_000))
    } else {
        fusion::date_words(date)
    }
}

/// Whether [`count_terms`] adds an item's terms or takes them away.
#[derive(Clone, Copy)]
enum Count {
    Add,
    Remove,
}

/// Keeps PostgreSQL's per-corpus document frequencies (`search_terms`,
/// D-K15) and item counts (`search_corpora`, D-K14) true as an item's text
/// comes and goes: each lexeme of the item's `tsv` counts once, and each
/// row of the item once, in one statement. Runs in the writer's
/// transaction under the corpus's block lock, so two writers of a corpus
/// never touch the same lexeme rows at once (and never wait on each other's
/// rows in two orders). A lexeme no item holds any more is deleted. SQLite counts from its FTS5 index
/// instead, so there this does nothing. Call under the corpus lock.
async fn count_terms(sql: &Sql, corpus: &str, ref_ids: &[&str], count: Count) -> Result<()> {
    if sql.kind() != SqlKind::Postgres || ref_ids.is_empty() {
        return Ok(());
    }
    let ids = in_list(2, ref_ids.len());
    let item_terms = format!(
        "SELECT l, count(*) AS n FROM search_index, unnest(tsvector_to_array(tsv)) AS l
         WHERE corpus = $1 AND ref_id IN ({ids}) GROUP BY l"
    );
    let mut params = vec![Value::from(corpus)];
    params.extend(ref_ids.iter().map(|id| Value::from(*id)));
    let item_rows = format!("SELECT count(*) FROM search_index WHERE corpus = $1 AND ref_id IN ({ids})");
    match count {
        Count::Add => {
            sql.execute(
                &format!(
                    "WITH items AS (INSERT INTO search_corpora (corpus, items) SELECT $1, ({item_rows})
                                    ON CONFLICT (corpus) DO UPDATE SET items = search_corpora.items + excluded.items)
                     INSERT INTO search_terms (corpus, lexeme, df) SELECT $1, l, n FROM ({item_terms}) AS x ORDER BY l
                     ON CONFLICT (corpus, lexeme) DO UPDATE SET df = search_terms.df + excluded.df"
                ),
                &params,
            )
            .await?;
        }
        Count::Remove => {
            sql.execute(
                &format!(
                    "WITH items AS (UPDATE search_corpora SET items = items - ({item_rows}) WHERE corpus = $1)
                     UPDATE search_terms AS t SET df = t.df - x.n FROM ({item_terms}) AS x
                     WHERE t.corpus = $1 AND t.lexeme = x.l"
                ),
                &params,
            )
            .await?;
            sql.execute(
                &format!(
                    "DELETE FROM search_terms WHERE corpus = $1 AND df <= 0 AND lexeme IN (SELECT l FROM ({item_terms}) AS x)"
                ),
                &params,
            )
            .await?;
        }
    }
    Ok(())
}

/// The list of a corpus's flat blocks (D-K16).
const FLAT: i64 = -1;

/// `vector_blocks`, for a statement that picks blocks by list. SQLite is
/// told to use the `(corpus, list, block)` index: statistics gathered while
/// every block was flat (an `ANALYZE` after a bulk load, which a pooled
/// connection keeps) make the list look unselective, and the plan it then
/// picks reads every block row past its two blobs to test the list, about
/// 11 ms a statement at a million items against 1.7 (D-K22).
fn by_list(sql: &Sql) -> &'static str {
    match sql.kind() {
        SqlKind::Sqlite => "vector_blocks INDEXED BY vector_blocks_lists",
        SqlKind::Postgres => "vector_blocks",
    }
}

/// [`by_list`] under an alias.
fn by_list_as(sql: &Sql, alias: &str) -> String {
    match sql.kind() {
        SqlKind::Sqlite => format!("vector_blocks AS {alias} INDEXED BY vector_blocks_lists"),
        SqlKind::Postgres => format!("vector_blocks AS {alias}"),
    }
}

/// A corpus's centroids, none before they are trained.
async fn centroids(sql: &Sql, corpus: &str) -> Result<Option<Centroids>> {
    let rows = sql.query("SELECT centroids FROM vector_centroids WHERE corpus = $1", &[corpus.into()]).await?;
    rows.first().map(|r| decode_centroids(&r.blob("centroids")?)).transpose()
}

thread_local! {
    /// Centroids already read, per corpus, with when they were trained. An
    /// instance lives for many requests (D-F17), and delete-all (another
    /// stage) removes centroids that a later training replaces, so a reader
    /// or writer checks the kept ones are still the corpus's (its
    /// `trained_ms`: a query reads it with the flat blocks, a writer by one
    /// primary-key read) before it uses them: a query or a write reads the
    /// 196 KB once per training, not every time.
    static KEPT: std::cell::RefCell<std::collections::HashMap<String, (i64, std::rc::Rc<Centroids>)>> =
        Default::default();
}

/// The corpus's centroids when those kept are of the training at
/// `trained_ms`; else read again (and kept with the training they are of).
async fn kept_centroids(sql: &Sql, corpus: &str, trained_ms: i64) -> Result<Option<std::rc::Rc<Centroids>>> {
    if let Some((at, c)) = KEPT.with(|k| k.borrow().get(corpus).cloned())
        && at == trained_ms
    {
        return Ok(Some(c));
    }
    let rows =
        sql.query("SELECT centroids, trained_ms FROM vector_centroids WHERE corpus = $1", &[corpus.into()]).await?;
    let Some(row) = rows.first() else {
        KEPT.with(|k| k.borrow_mut().remove(corpus));
        return Ok(None);
    };
    let c = std::rc::Rc::new(decode_centroids(&row.blob("centroids")?)?);
    let at = row.i64("trained_ms")?;
    KEPT.with(|k| k.borrow_mut().insert(corpus.to_string(), (at, c.clone())));
    Ok(Some(c))
}

/// [`centroids`] for a writer: the kept ones while the corpus's are the
/// same training, else read again; none when the corpus has none now.
/// Call under the corpus lock, so they cannot change before the write.
async fn writer_centroids(sql: &Sql, corpus: &str) -> Result<Option<std::rc::Rc<Centroids>>> {
    let now = sql.query("SELECT trained_ms FROM vector_centroids WHERE corpus = $1", &[corpus.into()]).await?;
    let Some(trained_ms) = now.first().map(|r| r.i64("trained_ms")).transpose()? else {
        KEPT.with(|k| k.borrow_mut().remove(corpus));
        return Ok(None);
    };
    kept_centroids(sql, corpus, trained_ms).await
}

fn decode_centroids(bytes: &[u8]) -> Result<Centroids> {
    Centroids::decode(bytes).ok_or_else(|| Fail::new("internal", "a corpus's centroids are corrupt"))
}

/// What one run of [`index`] did to a corpus.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct IndexStep {
    pub corpus: String,
    /// Whether this run trained the corpus's centroids.
    pub trained: bool,
    /// Lists the corpus has (0 before its centroids are trained).
    pub lists: u32,
    /// Signatures this run moved from flat blocks into lists.
    pub moved: u64,
    /// Signatures still flat after it.
    pub flat: u64,
}

/// The vector index's upkeep for one corpus (D-K16): once the corpus holds
/// [`ivf::TRAIN_AT`] signatures, trains its centroids on a sample of its
/// embeddings (spread over its history), then moves at most `max_blocks`
/// flat blocks into the lists of their signatures. Below the threshold it
/// does nothing. Training reads and computes outside any transaction (it
/// takes seconds, and no writer should wait on it); the move is one
/// transaction under the corpus lock, so blocks move whole or not at all.
pub async fn index(sql: &Sql, corpus: &str, max_blocks: usize, now_ms: u64) -> Result<IndexStep> {
    let flat = flat_blocks(sql, corpus).await?;
    let held: u64 = flat.iter().map(|f| f.1).sum();
    let kept = sql
        .query(
            "SELECT CAST(length(centroids) AS BIGINT) AS bytes FROM vector_centroids WHERE corpus = $1",
            &[corpus.into()],
        )
        .await?;
    // Nothing to do: no write transaction, no lock.
    if held < ivf::TRAIN_AT && (kept.is_empty() || flat.is_empty()) {
        let lists = match kept.first() {
            Some(r) => (r.i64("bytes")?.max(0) as usize / Centroids::BYTES_EACH) as u32,
            None => 0,
        };
        return Ok(IndexStep { corpus: corpus.into(), lists, flat: held, ..Default::default() });
    }
    let trained = match kept.is_empty() {
        false => None,
        true => match claim_training(sql, corpus, now_ms).await? {
            // Another run is training them: it moves the blocks too.
            None => return Ok(IndexStep { corpus: corpus.into(), flat: held, ..Default::default() }),
            // Past the early return, an untrained corpus holds TRAIN_AT.
            Some(claim) => {
                let s = training_sample(sql, corpus, &flat).await?;
                // Seconds of CPU: between steps the instance's other
                // requests run (it serves several at once, D-F17).
                let mut training = ivf::Training::new(&s, ivf::LISTS, ivf::ROUNDS);
                while training.step() {
                    spin_sdk::wit_bindgen::yield_async().await;
                }
                Some(Trained { sampled: s.len(), centroids: training.finish(), claim })
            }
        },
    };
    sql.transaction(async |sql: &Sql| {
        move_flat(sql, corpus, trained, max_blocks, now_ms).await.map_err(crate::as_store_error)
    })
    .await
    .map_err(Fail::from)
}

/// How long a run may train a corpus's centroids before another may.
const TRAINING_LEASE_MS: u64 = 120_000;

/// Centroids a run trained, how many embeddings they were drawn from and
/// the claim it trained under.
struct Trained {
    centroids: Centroids,
    sampled: usize,
    claim: i64,
}

/// Claims the training of a corpus's centroids for [`TRAINING_LEASE_MS`]
/// and returns the claim (its end); none while another run holds an
/// unexpired one. One statement, so two runs cannot both win it.
async fn claim_training(sql: &Sql, corpus: &str, now_ms: u64) -> Result<Option<i64>> {
    let until = (now_ms + TRAINING_LEASE_MS) as i64;
    let rows = sql
        .query(
            "INSERT INTO vector_training (corpus, until_ms) VALUES ($1, $2)
             ON CONFLICT (corpus) DO UPDATE SET until_ms = excluded.until_ms WHERE vector_training.until_ms < $3
             RETURNING corpus",
            &[corpus.into(), until.into(), (now_ms as i64).into()],
        )
        .await?;
    Ok((!rows.is_empty()).then_some(until))
}

/// Whether the training claim ending at `claim` is still the corpus's.
async fn still_claimed(sql: &Sql, corpus: &str, claim: i64) -> Result<bool> {
    let rows = sql
        .query(
            "SELECT until_ms FROM vector_training WHERE corpus = $1 AND until_ms = $2",
            &[corpus.into(), claim.into()],
        )
        .await?;
    Ok(!rows.is_empty())
}

/// The embeddings the centroids are trained on: those of the items in
/// flat blocks spread evenly over the corpus's `flat` blocks, at most
/// [`ivf::SAMPLE`].
async fn training_sample(sql: &Sql, corpus: &str, flat: &[(i64, u64)]) -> Result<Vec<Vec<f32>>> {
    let picked: Vec<i64> = ivf::sample_blocks(flat.len(), ivf::SAMPLE.div_ceil(fusion::BLOCK_SIZE))
        .into_iter()
        .map(|i| flat[i].0)
        .collect();
    let mut seqs: Vec<i64> = read_blocks(sql, corpus, &picked).await?.into_iter().flat_map(|(_, b)| b.seqs).collect();
    // In one order whatever order the rows came back in, so the same store
    // trains the same centroids.
    seqs.sort_unstable();
    seqs.truncate(ivf::SAMPLE);
    let mut sample = Vec::with_capacity(seqs.len());
    for part in seqs.chunks(1_000) {
        let params: Vec<Value> = part.iter().map(|s| Value::from(*s)).collect();
        let rows = sql
            .query(
                &format!("SELECT embedding FROM search_vectors WHERE seq IN ({}) ORDER BY seq", in_list(1, part.len())),
                &params,
            )
            .await?;
        for r in &rows {
            sample.push(bytes_f32(&r.blob("embedding")?));
        }
    }
    Ok(sample)
}

/// A corpus's flat blocks and how many signatures each holds, in order.
async fn flat_blocks(sql: &Sql, corpus: &str) -> Result<Vec<(i64, u64)>> {
    sql.query(
        &format!("SELECT block, n FROM {} WHERE corpus = $1 AND list = $2 ORDER BY block", by_list(sql)),
        &[corpus.into(), FLAT.into()],
    )
    .await?
    .iter()
    .map(|r| Ok((r.i64("block")?, r.i64("n")?.max(0) as u64)))
    .collect()
}

/// Under the corpus lock: keeps freshly `trained` centroids unless another
/// run kept some first or their claim is gone, then moves at most
/// `max_blocks` flat blocks into the lists of their signatures.
async fn move_flat(
    sql: &Sql,
    corpus: &str,
    trained: Option<Trained>,
    max_blocks: usize,
    now_ms: u64,
) -> Result<IndexStep> {
    lock(sql, corpus).await?;
    let mut step = IndexStep { corpus: corpus.into(), ..Default::default() };
    let flat = flat_blocks(sql, corpus).await?;
    step.flat = flat.iter().map(|f| f.1).sum();
    let c = match (centroids(sql, corpus).await?, trained) {
        (Some(c), _) => c,
        // Kept only under the claim they were trained under: a delete-all
        // while they trained deletes the claim with what they were drawn
        // from, and so does a run that outlived its lease.
        (None, Some(t)) if !t.centroids.is_empty() && still_claimed(sql, corpus, t.claim).await? => {
            sql.execute(
                "INSERT INTO vector_centroids (corpus, centroids, trained_on, trained_ms) VALUES ($1, $2, $3, $4)",
                &[corpus.into(), t.centroids.encode().into(), (t.sampled as i64).into(), (now_ms as i64).into()],
            )
            .await?;
            step.trained = true;
            t.centroids
        }
        (None, _) => return Ok(step),
    };
    step.lists = c.len() as u32;
    let drained: Vec<i64> = flat.iter().take(max_blocks).map(|f| f.0).collect();
    if drained.is_empty() {
        return Ok(step);
    }
    let blocks = read_blocks(sql, corpus, &drained).await?;
    let (seqs, sigs): (Vec<i64>, Vec<Vec<u64>>) =
        blocks.into_iter().flat_map(|(_, b)| b.seqs.into_iter().zip(b.sigs)).unzip();
    let mut moving: std::collections::BTreeMap<i64, Block> = std::collections::BTreeMap::new();
    for ((seq, sig), list) in seqs.into_iter().zip(sigs.iter().cloned()).zip(c.lists_of(&sigs)) {
        moving.entry(list as i64).or_default().push(seq, sig);
        step.moved += 1;
    }
    let mut params: Vec<Value> = vec![corpus.into()];
    params.extend(drained.iter().map(|b| Value::from(*b)));
    sql.execute(
        &format!("DELETE FROM vector_blocks WHERE corpus = $1 AND block IN ({})", in_list(2, drained.len())),
        &params,
    )
    .await?;
    append_to_lists(sql, corpus, moving).await?;
    step.flat = step.flat.saturating_sub(step.moved);
    Ok(step)
}

/// Blocks of a corpus by number, with their numbers.
async fn read_blocks(sql: &Sql, corpus: &str, blocks: &[i64]) -> Result<Vec<(i64, Block)>> {
    if blocks.is_empty() {
        return Ok(Vec::new());
    }
    let mut params: Vec<Value> = vec![corpus.into()];
    params.extend(blocks.iter().map(|b| Value::from(*b)));
    let rows = sql
        .query(
            &format!(
                "SELECT block, seqs, sigs FROM vector_blocks WHERE corpus = $1 AND block IN ({})",
                in_list(2, blocks.len())
            ),
            &params,
        )
        .await?;
    rows.iter().map(|r| Ok((r.i64("block")?, decode(r)?))).collect()
}

/// Appends each list's signatures: first to fill the list's last block,
/// then in new blocks of at most [`fusion::BLOCK_SIZE`]. One read finds
/// every list's last block that has room.
async fn append_to_lists(sql: &Sql, corpus: &str, moving: std::collections::BTreeMap<i64, Block>) -> Result<()> {
    if moving.is_empty() {
        return Ok(());
    }
    let mut params: Vec<Value> = vec![corpus.into()];
    params.extend(moving.keys().map(|l| Value::from(*l)));
    let open = sql
        .query(
            &format!(
                "SELECT list, block, seqs, sigs FROM {} WHERE corpus = $1 AND list IN ({}) AND n < {}
                 AND block = (SELECT max(block) FROM {} WHERE w.corpus = $1 AND w.list = v.list)",
                by_list_as(sql, "v"),
                in_list(2, moving.len()),
                fusion::BLOCK_SIZE,
                by_list_as(sql, "w"),
            ),
            &params,
        )
        .await?;
    let mut last: std::collections::HashMap<i64, (i64, Block)> = std::collections::HashMap::new();
    for r in &open {
        last.insert(r.i64("list")?, (r.i64("block")?, decode(r)?));
    }
    let next = sql
        .query("SELECT coalesce(max(block), -1) + 1 AS next FROM vector_blocks WHERE corpus = $1", &[corpus.into()])
        .await?;
    let mut next = next.first().map_or(Ok(0), |r| r.i64("next"))?;
    for (list, items) in moving {
        let mut items = items.seqs.into_iter().zip(items.sigs).peekable();
        if let Some((block, mut b)) = last.remove(&list) {
            while b.seqs.len() < fusion::BLOCK_SIZE {
                let Some((seq, sig)) = items.next() else { break };
                b.push(seq, sig);
            }
            write_block(sql, corpus, block, &b).await?;
        }
        while items.peek().is_some() {
            let mut b = Block::default();
            for (seq, sig) in items.by_ref().take(fusion::BLOCK_SIZE) {
                b.push(seq, sig);
            }
            let (seqs, sigs) = b.encode();
            let (lo, hi) = (b.seqs.iter().min().copied(), b.seqs.iter().max().copied());
            sql.execute(
                "INSERT INTO vector_blocks (corpus, block, list, n, seqs, sigs, lo, hi) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
                &[corpus.into(), next.into(), list.into(), (b.seqs.len() as i64).into(), seqs.into(), sigs.into(), lo.into(), hi.into()],
            )
            .await?;
            next += 1;
        }
    }
    Ok(())
}

/// Queues writers of a corpus's signature blocks and term counts on
/// Postgres (SQLite's write transaction already excludes them). A
/// transaction that publishes takes the event lock first (D-C21), so the
/// two locks are always taken in the same order; one that also locks rows
/// of its own (an ingest's entries and counter) takes this first, before
/// any of them. Re-entrant within a transaction.
pub async fn lock(sql: &Sql, corpus: &str) -> Result<()> {
    if sql.kind() == SqlKind::Postgres {
        sql.execute("SELECT pg_advisory_xact_lock(hashtext('vector_blocks:' || $1))", &[corpus.into()]).await?;
    }
    Ok(())
}

fn decode(r: &Row) -> Result<Block> {
    Block::decode(&r.blob("seqs")?, &r.blob("sigs")?, SIG_WORDS)
        .ok_or_else(|| Fail::new("internal", "a vector block is corrupt"))
}

/// Writes a non-empty block back with its count and sequence bounds.
async fn write_block(sql: &Sql, corpus: &str, block: i64, b: &Block) -> Result<()> {
    let (lo, hi) = (b.seqs.iter().min().copied(), b.seqs.iter().max().copied());
    let (seqs, sigs) = b.encode();
    sql.execute(
        "UPDATE vector_blocks SET n = $3, seqs = $4, sigs = $5, lo = $6, hi = $7 WHERE corpus = $1 AND block = $2",
        &[corpus.into(), block.into(), (b.seqs.len() as i64).into(), seqs.into(), sigs.into(), lo.into(), hi.into()],
    )
    .await?;
    Ok(())
}

/// Which of `ids` the corpus holds, in one read.
pub async fn present(sql: &Sql, corpus: &str, ids: &[&str]) -> Result<Vec<String>> {
    by_ids(sql, corpus, ids, "DISTINCT ref_id").await?.iter().map(|r| Ok(r.text("ref_id")?)).collect()
}

/// Removes an item, its embedding and its signatures from search, and
/// returns how many rows it had. Call inside a transaction: the rows and
/// the blocks change together.
pub async fn remove(sql: &Sql, corpus: &str, ref_id: &str) -> Result<u64> {
    let seqs: Vec<i64> = sql
        .query("SELECT seq FROM search_index WHERE corpus = $1 AND ref_id = $2", &[corpus.into(), ref_id.into()])
        .await?
        .iter()
        .map(|r| r.i64("seq"))
        .collect::<std::result::Result<_, _>>()?;
    if seqs.is_empty() {
        return Ok(0);
    }
    lock(sql, corpus).await?;
    count_terms(sql, corpus, &[ref_id], Count::Remove).await?;
    // The lists the signatures are in follow from the embeddings (D-K16).
    let mut lists = vec![FLAT];
    if let Some(c) = writer_centroids(sql, corpus).await? {
        for (_, _, e) in embeddings(sql, &seqs).await? {
            // A stored embedding of another length has no list (put refuses one).
            if e.len() == crate::EMBEDDING_DIM {
                lists.push(c.list_of(&fusion::signature(&e)) as i64);
            }
        }
    }
    let params: Vec<Value> = seqs.iter().map(|s| Value::from(*s)).collect();
    sql.execute(&format!("DELETE FROM search_vectors WHERE seq IN ({})", in_list(1, seqs.len())), &params).await?;
    let n = sql
        .execute("DELETE FROM search_index WHERE corpus = $1 AND ref_id = $2", &[corpus.into(), ref_id.into()])
        .await?;
    drop_signatures(sql, corpus, &seqs, &lists).await?;
    Ok(n)
}

/// Rewrites the blocks that hold any of `seqs` without them, so the scan
/// never reads a removed item's signature and shrinks as items go; a block
/// left empty is deleted. The blocks are looked for in `lists` (the flat
/// blocks and the lists of the items' embeddings, through the list index,
/// D-K22), and among those by their bounds; one written before bounds were
/// kept (NULL bounds) is read, and gets its bounds on the way.
/// Call under the corpus lock ([`remove`] takes it).
async fn drop_signatures(sql: &Sql, corpus: &str, seqs: &[i64], lists: &[i64]) -> Result<()> {
    let (Some(&lo), Some(&hi)) = (seqs.iter().min(), seqs.iter().max()) else { return Ok(()) };
    let mut params: Vec<Value> = vec![corpus.into(), lo.into(), hi.into()];
    params.extend(lists.iter().map(|l| Value::from(*l)));
    let rows = sql
        .query(
            &format!(
                "SELECT block, seqs, sigs, lo FROM {}
                 WHERE corpus = $1 AND list IN ({}) AND (lo IS NULL OR (hi >= $2 AND lo <= $3))",
                by_list(sql),
                in_list(4, lists.len())
            ),
            &params,
        )
        .await?;
    for r in &rows {
        let block = r.i64("block")?;
        let mut b = decode(r)?;
        let before = b.seqs.len();
        b.retain(|s| !seqs.contains(&s));
        if b.seqs.is_empty() {
            sql.execute("DELETE FROM vector_blocks WHERE corpus = $1 AND block = $2", &[corpus.into(), block.into()])
                .await?;
        } else if b.seqs.len() < before || r.opt_i64("lo")?.is_none() {
            write_block(sql, corpus, block, &b).await?;
        }
    }
    Ok(())
}

/// Rewrites an item's text and, unless `date` is empty, its date (its
/// embedding is unchanged). Call inside a transaction: the text and its
/// term counts change together.
pub async fn retext(sql: &Sql, corpus: &str, ref_id: &str, title: &str, body: &str, date: &str) -> Result<()> {
    lock(sql, corpus).await?;
    count_terms(sql, corpus, &[ref_id], Count::Remove).await?;
    sql.execute(
        "UPDATE search_index SET title = $3, body = $4, dated = CASE WHEN $5 = '' THEN dated ELSE $5 END
         WHERE corpus = $1 AND ref_id = $2",
        &[corpus.into(), ref_id.into(), title.into(), body.into(), fusion::date_words(date).into()],
    )
    .await?;
    count_terms(sql, corpus, &[ref_id], Count::Add).await
}

/// What candidate generation found, with timings.
#[derive(Debug, Default)]
pub struct Candidates {
    /// Full-text hits, best first.
    pub text: Vec<i64>,
    /// Vector hits, best first (by exact cosine).
    pub vector: Vec<i64>,
    /// Every candidate still indexed: sequence number → (ref id, cosine).
    pub found: std::collections::HashMap<i64, (String, f32)>,
    /// The order for the mode asked, with its score.
    pub fused: Vec<(i64, f64)>,
    /// The full-text read alone.
    pub text_ms: u64,
    /// The signature blocks' read alone (beside the full-text read).
    pub blocks_ms: u64,
    /// The Hamming shortlist and the candidates' embeddings.
    pub vector_ms: u64,
    /// Signatures the Hamming scan read: every one of a corpus whose lists
    /// are not trained, the probed lists' and the flat blocks' of one whose
    /// are (D-K16).
    pub signatures: u64,
}

impl Candidates {
    /// The ref id and cosine of a candidate.
    pub fn get(&self, seq: i64) -> Option<&(String, f32)> {
        self.found.get(&seq)
    }
}

/// Full-text and vector candidates over `corpora`, fused. Three queries:
/// the full-text search and the signature blocks, which go out together,
/// then one read of every candidate's embedding and ref id. The caller
/// embeds the query before the reads start (D-K9).
pub async fn candidates(sql: &Sql, corpora: &[&str], query: &str, embedding: &[f32], mode: Mode) -> Result<Candidates> {
    candidates_within(sql, corpora, query, embedding, mode, Reach::QUESTION).await
}

/// How a search reads each side: the lists its vector side probes, how
/// many of their signatures it re-scores, and what ranks the rows its
/// full-text side chose by their rarest terms.
#[derive(Debug, Clone, Copy)]
pub struct Reach {
    /// The lists read of a corpus whose vector index is trained.
    pub probes: usize,
    /// The lists read when the full-text read finds nothing: the nearest
    /// `probes` first, then the next ones up to this many (D-K27).
    pub probes_alone: usize,
    /// The Hamming-nearest signatures re-scored by exact cosine, of lists.
    pub shortlist: usize,
    /// The same when no list was read: every corpus searched is untrained,
    /// and its flat scan Hamming-ranks every item (D-K28).
    pub shortlist_flat: usize,
    /// What ranks the rows the full-text read chose by its rarest terms.
    pub text: TextRank,
}

impl Reach {
    /// A question's: [`ivf::PROBES`] lists, a shortlist of
    /// [`fusion::SHORTLIST`], full text ranked by every term.
    pub const QUESTION: Reach = Reach {
        probes: ivf::PROBES,
        probes_alone: ivf::PROBES,
        shortlist: fusion::SHORTLIST,
        shortlist_flat: fusion::SHORTLIST,
        text: TextRank::Every,
    };
    /// A claim's search for its near neighbours: fewer lists (D-K17), a
    /// shorter shortlist of lists (D-K24) but not of a flat scan (D-K28),
    /// and full text ranked by the rare terms alone (D-K21), or none when
    /// every term is common or no row holds a rare one (D-K26), when it
    /// reads twice the lists (D-K27).
    pub const NEIGHBOURS: Reach = Reach {
        probes: ivf::NEIGHBOUR_PROBES,
        probes_alone: ivf::NEIGHBOUR_PROBES_ALONE,
        shortlist: fusion::NEIGHBOUR_SHORTLIST,
        shortlist_flat: fusion::SHORTLIST,
        text: TextRank::Chosen,
    };
}

/// [`candidates`] with its [`Reach`].
pub async fn candidates_within(
    sql: &Sql,
    corpora: &[&str],
    query: &str,
    embedding: &[f32],
    mode: Mode,
    reach: Reach,
) -> Result<Candidates> {
    let mut c = Candidates::default();
    let query_sig = fusion::signature(embedding);
    let t1 = mneme_time::clock::system_ms();
    // Both are reads, so they may share the connection on either backend.
    let since = |t: u64| mneme_time::clock::system_ms().saturating_sub(t);
    let ((text, text_ms), (blocks, blocks_ms)) = futures::future::join(
        async {
            let r = match mode.uses_text() {
                true => text_candidates(sql, corpora, query, fusion::GENERATOR_CANDIDATES, reach.text).await,
                false => Ok(Vec::new()),
            };
            (r, since(t1))
        },
        async {
            let r = match mode.uses_vector() {
                true => signature_blocks(sql, corpora, embedding, reach.probes, reach.probes_alone).await,
                false => Ok(VectorRead::default()),
            };
            (r, since(t1))
        },
    )
    .await;
    (c.text_ms, c.blocks_ms) = (text_ms, blocks_ms);
    c.text = text?;
    let VectorRead { mut blocks, trained, more, flat } = blocks?;
    // The vector side alone: the next lists too (D-K27). One more statement,
    // for a claim whose full-text read found nothing.
    if c.text.is_empty() && mode == Mode::Hybrid {
        let t = mneme_time::clock::system_ms();
        blocks.extend(read_lists(sql, &more, &flat).await?);
        c.blocks_ms += since(t);
    }
    c.signatures = blocks.iter().map(|b| b.seqs.len() as u64).sum();
    let t2 = mneme_time::clock::system_ms();
    let shortlist = match mode.uses_vector() {
        true => fusion::shortlist(&query_sig, &blocks, if trained { reach.shortlist } else { reach.shortlist_flat }),
        false => Vec::new(),
    };
    let mut wanted = shortlist.clone();
    wanted.extend(c.text.iter().filter(|t| !shortlist.contains(t)));
    for (seq, ref_id, e) in embeddings(sql, &wanted).await? {
        c.found.insert(seq, (ref_id, cosine(embedding, &e) as f32));
    }
    // Rows deleted since (a superseded entry) drop out here.
    c.text.retain(|t| c.found.contains_key(t));
    let mut vector: Vec<(i64, f32)> = shortlist.iter().filter_map(|s| c.found.get(s).map(|f| (*s, f.1))).collect();
    vector.sort_by(|a, b| b.1.total_cmp(&a.1).then(b.0.cmp(&a.0)));
    vector.truncate(fusion::GENERATOR_CANDIDATES);
    c.vector = vector.iter().map(|v| v.0).collect();
    c.fused = match mode {
        Mode::Text => c.text.iter().enumerate().map(|(r, s)| (*s, 1.0 / (r as f64 + 1.0))).collect(),
        Mode::Vector => vector.iter().map(|&(s, cos)| (s, f64::from(cos))).collect(),
        Mode::Hybrid => {
            let mut cosines = vector.clone();
            cosines.extend(c.text.iter().filter(|t| !c.vector.contains(t)).map(|t| (*t, c.found[t].1)));
            fusion::fuse(&c.text, &cosines)
        }
    };
    c.vector_ms = mneme_time::clock::system_ms().saturating_sub(t2);
    Ok(c)
}

/// Full-text candidates, best first. The read is bounded by the query's
/// rarest terms (D-K15): each term's document frequency first, then the
/// rows [`fusion::text_plan`] chooses, ranked by every term, or with
/// [`TextRank::Chosen`] by the rare terms that chose them.
async fn text_candidates(sql: &Sql, corpora: &[&str], query: &str, limit: usize, rank: TextRank) -> Result<Vec<i64>> {
    let terms = fusion::terms(query);
    if corpora.is_empty() || terms.is_empty() {
        return Ok(Vec::new());
    }
    let (items, df) = frequencies(sql, corpora, &terms).await?;
    let plan = fusion::text_plan(items, &terms, &df);
    let every: Vec<(String, u64)> = terms.iter().cloned().zip(df.iter().copied()).collect();
    // The title weighs 2, the body 1, the date DATE_WEIGHT (D-K19) and the
    // context CONTEXT_WEIGHT (D-K13); PostgreSQL's weights are listed D, C,
    // B, A, and A (the title and body), B (the date) and D (the context)
    // occur (C keeps its default).
    let (context, date) = (fusion::CONTEXT_WEIGHT, fusion::DATE_WEIGHT);
    let statement = |ranked: usize| match sql.kind() {
        // CROSS JOIN keeps the FTS5 list in the lead: given the rowid bound,
        // SQLite 3.50 would rather walk the `(corpus, seq)` index and
        // evaluate the MATCH row by row (1 → 30 ms at 534 items).
        SqlKind::Sqlite => format!(
            "SELECT s.seq FROM search_fts CROSS JOIN search_index s ON s.seq = search_fts.rowid
             WHERE search_fts MATCH $1 AND search_fts.rowid >= $3 AND s.corpus IN ({})
             ORDER BY bm25(search_fts, 2.0, 1.0, {context:?}, {date:?}) LIMIT {limit}",
            in_list(4, corpora.len())
        ),
        // `$2` selects the rows; the rarity of the terms each holds ranks
        // them, and `$1` (any term) breaks ties. `ts_rank_cd` costs about as
        // much as ten term tests, so it runs only on the rows whose rarity
        // ties or beats the `limit`th best (`cut`): the order is the same
        // as ranking every row by both (D-K14).
        SqlKind::Postgres => {
            let rarity = rarity_order(4 + corpora.len(), ranked);
            format!(
                "WITH c AS MATERIALIZED (
               SELECT seq, tsv, q, {} AS s
               FROM search_index, to_tsquery('english', $1) AS q, to_tsquery('english', $2) AS f{}
               WHERE tsv @@ f AND seq >= $3 AND corpus IN ({})),
             cut AS (SELECT s FROM c ORDER BY s DESC LIMIT 1 OFFSET {})
             SELECT seq FROM c WHERE s >= coalesce((SELECT s FROM cut), CAST('-Infinity' AS FLOAT8))
             ORDER BY s DESC, ts_rank_cd('{{{context:?}, 0.2, {date:?}, 1}}', tsv, q) DESC, seq DESC LIMIT {limit}",
                rarity.score,
                rarity.from,
                in_list(4, corpora.len()),
                limit.saturating_sub(1)
            )
        }
    };
    // Rows from `since` holding `filter` (PostgreSQL) or matching `any`
    // (SQLite), ranked by the `ranked` terms: SQLite's `any` names exactly
    // those (it binds `$2` and leaves it unused), PostgreSQL's rarity order
    // scores them by their frequencies.
    let run = async |ranked: &[(String, u64)], any: String, filter: String, since: i64| -> Result<Vec<i64>> {
        let mut params: Vec<Value> = vec![any.into(), filter.into(), since.into()];
        params.extend(corpora.iter().map(|c| Value::from(*c)));
        if sql.kind() == SqlKind::Postgres {
            for (term, held_by) in ranked {
                params.extend([format!("{term}:AB").into(), term.as_str().into(), fusion::idf(items, *held_by).into()]);
            }
        }
        let rows = sql.query(&statement(ranked.len()), &params).await?;
        rows.iter().map(|r| r.i64("seq").map_err(Fail::from)).collect()
    };
    // Rows from `since` on that hold any of `held`, ranked by every term.
    let holding = async |held: &[String], since: i64| -> Result<Vec<i64>> {
        match sql.kind() {
            SqlKind::Sqlite if held.len() == terms.len() => {
                run(&every, fusion::fts5_any(&terms), String::new(), since).await
            }
            SqlKind::Sqlite => {
                let any = format!("({}) AND ({})", fusion::fts5_any(&terms), fusion::fts5_any(held));
                run(&every, any, String::new(), since).await
            }
            SqlKind::Postgres => run(&every, fusion::tsquery_any(&terms), fusion::tsquery_any(held), since).await,
        }
    };
    // Every term common, or no row of the corpus holding a rare one: a
    // question ranks the newest rows holding any term (D-K15). A claim's
    // neighbour search reads no full text then, and its vector side decides
    // on twice the lists (D-K26, D-K27): SQLite's `bm25` would walk each
    // common term's whole list to weigh it, whatever the window. What that
    // gives up (stance-band neighbours that share only common words) is in
    // D-K26.
    let newest = async |rank: TextRank| -> Result<Vec<i64>> {
        match rank {
            TextRank::Every => holding(&terms, window_start(sql, corpora).await?).await,
            TextRank::Chosen => Ok(Vec::new()),
        }
    };
    match plan {
        // The rows holding a rare term, ranked by every term, or for a
        // claim's neighbours by the rare terms alone: on SQLite `bm25` counts
        // every row holding each term it ranks by, so a common term costs a
        // walk of its whole list (D-K21). When no row holds one (on SQLite
        // the rare term may be held only by another corpus, since it counts
        // over all of them), as when every term is common (`newest`).
        fusion::TextPlan::Rare(rare) => {
            let found = match (rank, sql.kind()) {
                (TextRank::Every, _) => holding(&rare, 0).await?,
                (TextRank::Chosen, kind) => {
                    let chosen: Vec<(String, u64)> = every.iter().filter(|(t, _)| rare.contains(t)).cloned().collect();
                    match kind {
                        SqlKind::Sqlite => run(&chosen, fusion::fts5_any(&rare), String::new(), 0).await?,
                        SqlKind::Postgres => {
                            run(&chosen, fusion::tsquery_any(&rare), fusion::tsquery_any(&rare), 0).await?
                        }
                    }
                }
            };
            match found.is_empty() {
                true => newest(rank).await,
                false => Ok(found),
            }
        }
        fusion::TextPlan::Recent => newest(rank).await,
        // First the rows holding two of the terms; only when they are too
        // few, every row holding one (D-K10).
        fusion::TextPlan::All => match (sql.kind(), fusion::tsquery_pairs(&terms)) {
            (SqlKind::Postgres, Some(pairs)) => {
                // The same rows as `pairs` alone, but a row that holds no
                // term fails the short any-term test before the long pair
                // query (D-K14).
                let any = fusion::tsquery_any(&terms);
                let mut found = run(&every, any.clone(), format!("({any}) & ({pairs})"), 0).await?;
                if found.len() < limit {
                    for seq in holding(&terms, 0).await? {
                        if found.len() < limit && !found.contains(&seq) {
                            found.push(seq);
                        }
                    }
                }
                Ok(found)
            }
            _ => holding(&terms, 0).await,
        },
    }
}

/// What ranks the rows a full-text read chose by its rarest terms
/// ([`fusion::TextPlan::Rare`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TextRank {
    /// Every term of the query: a question's answer (D-K15).
    Every,
    /// The rare terms that chose the rows: an ingest's search for a claim's
    /// near neighbours, whose rows are judged by their cosine (D-K21). With
    /// no rare term, or none that a row of the corpus holds, no rows
    /// (D-K26).
    Chosen,
}

/// PostgreSQL's order by term rarity, as pieces of the full-text statement.
struct Rarity {
    /// The term queries, to follow the statement's FROM list.
    from: String,
    /// The score, selected as the column the rows are ordered by.
    score: String,
}

/// The order by term rarity (D-K14) for `n` terms whose parameters start
/// at `$first`, three per term: the term in a row's own words or date
/// (`term:AB`: [`fusion::DATE_WEIGHT`] is 1), the term anywhere, and its
/// [`fusion::idf`]. A row scores the sum of its terms' weights, a term
/// found only in its context counting [`fusion::CONTEXT_WEIGHT`] of one in
/// its own words. A row holds few of the terms, so each is first looked
/// for anywhere: one test per term it lacks.
fn rarity_order(first: usize, n: usize) -> Rarity {
    const { assert!(fusion::DATE_WEIGHT == 1.0, "the date's class B counts as the own words' A") };
    let (mut from, mut score) = (String::new(), Vec::new());
    for i in 0..n {
        let p = first + 3 * i;
        let (own, any, weight) = (p, p + 1, p + 2);
        from.push_str(&format!(", to_tsquery('english', ${own}) AS own{i}, to_tsquery('english', ${any}) AS any{i}"));
        score.push(format!(
            "CASE WHEN NOT tsv @@ any{i} THEN 0 WHEN tsv @@ own{i} THEN CAST(${weight} AS FLOAT8) ELSE {:?} * CAST(${weight} AS FLOAT8) END",
            fusion::CONTEXT_WEIGHT
        ));
    }
    // No terms (the caller returns before it asks): every row scores 0,
    // should it ever.
    Rarity { from, score: if score.is_empty() { "0.0".into() } else { format!("({})", score.join(" + ")) } }
}

/// How many items `corpora` hold and each term's document frequency, in
/// one statement (D-K15). SQLite counts the items through the `(corpus,
/// seq)` index and the first entries of each term's FTS5 list (every
/// corpus: the list has no corpus), both capped a little above
/// [`fusion::TERM_BUDGET`]. PostgreSQL reads the exact counts the store
/// keeps per corpus ([`count_terms`]), since a count through its GIN index
/// reads the whole posting list, and ranks by them (D-K14).
async fn frequencies(sql: &Sql, corpora: &[&str], terms: &[String]) -> Result<(u64, Vec<u64>)> {
    let cap = fusion::TERM_BUDGET + 1;
    let n = terms.len();
    let corpus_list = in_list(n + 1, corpora.len());
    let mut columns = vec![match sql.kind() {
        SqlKind::Sqlite => {
            format!(
                "(SELECT count(*) FROM (SELECT seq FROM search_index WHERE corpus IN ({corpus_list}) LIMIT {cap}) AS i) AS items"
            )
        }
        SqlKind::Postgres => format!(
            "(SELECT CAST(coalesce(sum(items), 0) AS BIGINT) FROM search_corpora WHERE corpus IN ({corpus_list})) AS items"
        ),
    }];
    columns.extend((1..=n).map(|i| match sql.kind() {
        SqlKind::Sqlite => format!(
            "(SELECT count(*) FROM (SELECT rowid FROM search_fts WHERE search_fts MATCH ${i} LIMIT {cap})) AS d{i}"
        ),
        SqlKind::Postgres => format!(
            "(SELECT CAST(coalesce(sum(df), 0) AS BIGINT) FROM search_terms
                  WHERE corpus IN ({corpus_list}) AND lexeme = ANY(tsvector_to_array(to_tsvector('english', ${i})))) AS d{i}"
        ),
    }));
    let mut params: Vec<Value> = terms
        .iter()
        .map(|w| match sql.kind() {
            SqlKind::Sqlite => Value::from(fusion::fts5_any(std::slice::from_ref(w))),
            SqlKind::Postgres => Value::from(w.as_str()),
        })
        .collect();
    params.extend(corpora.iter().map(|c| Value::from(*c)));
    let rows = sql.query(&format!("SELECT {}", columns.join(", ")), &params).await?;
    let row = rows.first().ok_or_else(|| Fail::new("internal", "the term count returned no row"))?;
    let df = (1..=n).map(|i| Ok(row.i64(&format!("d{i}"))?.max(0) as u64)).collect::<Result<_>>()?;
    Ok((row.i64("items")?.max(0) as u64, df))
}

/// Where the newest items start: the largest of each corpus's
/// [`fusion::RECENT_WINDOW`]th-newest sequence number (a corpus holding
/// fewer gives 0), read through the `(corpus, seq)` index. So the window
/// holds at least the newest `RECENT_WINDOW` items of the largest corpus
/// and at most that many of each corpus searched. Sequence numbers are
/// shared by every corpus, so the rows of corpora not searched that fall
/// in the window are read too: a corpus thinly spread among a much larger
/// one is not bounded by this (D-K15).
async fn window_start(sql: &Sql, corpora: &[&str]) -> Result<i64> {
    let mut start = 0;
    for corpus in corpora {
        let rows = sql
            .query(
                &format!(
                    "SELECT seq FROM search_index WHERE corpus = $1 ORDER BY seq DESC LIMIT 1 OFFSET {}",
                    fusion::RECENT_WINDOW - 1
                ),
                &[Value::from(*corpus)],
            )
            .await?;
        if let Some(r) = rows.first() {
            start = start.max(r.i64("seq")?);
        }
    }
    Ok(start)
}

/// The signature blocks a query reads, for the Hamming shortlist: each
/// corpus's flat blocks, and, of a corpus whose centroids are trained, the
/// `probes` lists nearest to the `query` embedding (D-K16), with the next
/// lists up to `probes_alone`, unread (D-K27). One
/// statement reads the flat blocks with when each corpus's centroids were
/// trained (the centroids themselves are kept, [`kept_centroids`]); a second
/// the lists, when there are any.
async fn signature_blocks(
    sql: &Sql,
    corpora: &[&str],
    query: &[f32],
    probes: usize,
    probes_alone: usize,
) -> Result<VectorRead> {
    if corpora.is_empty() {
        return Ok(VectorRead::default());
    }
    let params: Vec<Value> = corpora.iter().map(|c| Value::from(*c)).collect();
    let corpus_list = in_list(1, corpora.len());
    let rows = sql
        .query(
            &format!(
                "SELECT corpus, {CENTROIDS} AS list, NULL AS seqs, NULL AS sigs, trained_ms FROM vector_centroids
                 WHERE corpus IN ({corpus_list})
                 UNION ALL
                 SELECT corpus, list, seqs, sigs, 0 FROM {} WHERE corpus IN ({corpus_list}) AND list = {FLAT}",
                by_list(sql)
            ),
            &params,
        )
        .await?;
    let mut blocks = Vec::with_capacity(rows.len());
    let (mut wanted, mut more) = (Vec::new(), Vec::new());
    for r in &rows {
        if r.i64("list")? != CENTROIDS {
            blocks.push(decode(r)?);
            continue;
        }
        let corpus = r.text("corpus")?;
        let Some(centroids) = kept_centroids(sql, &corpus, r.i64("trained_ms")?).await? else { continue };
        let mut lists = centroids.probes(query, probes.max(probes_alone));
        more.push((corpus.clone(), lists.split_off(probes.min(lists.len()))));
        wanted.push((corpus, lists));
    }
    // Only a trained corpus has lists to read.
    let trained = !wanted.is_empty();
    let flat = match trained {
        false => Default::default(),
        true => blocks.iter().flat_map(|b| b.seqs.iter().copied()).collect(),
    };
    blocks.extend(read_lists(sql, &wanted, &flat).await?);
    Ok(VectorRead { blocks, trained, more, flat })
}

/// What [`signature_blocks`] read.
#[derive(Default)]
struct VectorRead {
    blocks: Vec<Block>,
    /// Whether a corpus searched is trained, so lists were read.
    trained: bool,
    /// Each trained corpus's next lists, not read: those a search whose
    /// full text finds nothing reads too (D-K27).
    more: Vec<(String, Vec<usize>)>,
    /// The items of the flat blocks read, when lists were read too.
    flat: std::collections::HashSet<i64>,
}

/// The blocks of each corpus's `lists`, in one statement, without the
/// items read from `flat` blocks: a move that committed since they were
/// read put some of them into lists, and each item is scanned once.
async fn read_lists(
    sql: &Sql,
    wanted: &[(String, Vec<usize>)],
    flat: &std::collections::HashSet<i64>,
) -> Result<Vec<Block>> {
    let (mut params, mut probed): (Vec<Value>, Vec<String>) = (Vec::new(), Vec::new());
    for (corpus, lists) in wanted.iter().filter(|w| !w.1.is_empty()) {
        params.push(corpus.as_str().into());
        let first = params.len() + 1;
        probed.push(format!("(corpus = ${} AND list IN ({}))", first - 1, in_list(first, lists.len())));
        params.extend(lists.iter().map(|&l| Value::from(l as i64)));
    }
    if probed.is_empty() {
        return Ok(Vec::new());
    }
    let rows =
        sql.query(&format!("SELECT seqs, sigs FROM {} WHERE {}", by_list(sql), probed.join(" OR ")), &params).await?;
    rows.iter()
        .map(|r| {
            let mut b = decode(r)?;
            if !flat.is_empty() {
                b.retain(|s| !flat.contains(&s));
            }
            Ok(b)
        })
        .collect()
}

/// What [`signature_blocks`] reads in a centroids row's `list`.
const CENTROIDS: i64 = -2;

/// The ref ids and stored embeddings of items still in the index.
pub async fn embeddings(sql: &Sql, seqs: &[i64]) -> Result<Vec<(i64, String, Vec<f32>)>> {
    if seqs.is_empty() {
        return Ok(Vec::new());
    }
    let params: Vec<Value> = seqs.iter().map(|s| Value::from(*s)).collect();
    let rows = sql
        .query(
            &format!(
                "SELECT i.seq, i.ref_id, v.embedding FROM search_index i JOIN search_vectors v ON v.seq = i.seq
                 WHERE i.seq IN ({})",
                in_list(1, seqs.len())
            ),
            &params,
        )
        .await?;
    rows.iter().map(|r| Ok((r.i64("seq")?, r.text("ref_id")?, bytes_f32(&r.blob("embedding")?)))).collect()
}

/// One indexed item.
#[derive(Debug, Clone)]
pub struct Item {
    pub seq: i64,
    pub corpus: String,
    pub ref_id: String,
    pub title: String,
    pub body: String,
    pub meta: serde_json::Value,
    pub created_ms: i64,
}

/// Loads items by sequence number (those still indexed), in no order.
pub async fn items(sql: &Sql, seqs: &[i64]) -> Result<Vec<Item>> {
    if seqs.is_empty() {
        return Ok(Vec::new());
    }
    let params: Vec<Value> = seqs.iter().map(|s| Value::from(*s)).collect();
    let rows = sql
        .query(
            &format!(
                "SELECT seq, corpus, ref_id, title, body, meta, created_ms FROM search_index WHERE seq IN ({})",
                in_list(1, seqs.len())
            ),
            &params,
        )
        .await?;
    rows.iter().map(item).collect()
}

fn item(r: &Row) -> Result<Item> {
    Ok(Item {
        seq: r.i64("seq")?,
        corpus: r.text("corpus")?,
        ref_id: r.text("ref_id")?,
        title: r.text("title")?,
        body: r.text("body")?,
        meta: serde_json::from_str(&r.text("meta")?).unwrap_or(serde_json::Value::Null),
        created_ms: r.i64("created_ms")?,
    })
}
