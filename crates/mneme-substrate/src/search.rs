//! The search index that `/retrieve` and `/search` share: one row per
//! searchable item (an active knowledge entry, a document, an episode) with
//! its text for full-text search (SQLite FTS5 / PostgreSQL tsvector), its
//! embedding in `search_vectors`, and the embedding's sign bits packed into
//! `vector_blocks` for the Hamming scan. Candidate generation here; ranking is the caller's.
//! Removing an item rewrites its block without its signature, so the scan
//! holds exactly the indexed items.

use crate::{Fail, Result, bytes_f32, f32_bytes, in_list};
use mneme_knowledge::fusion::{self, Block, Mode};
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
    pub meta: &'a serde_json::Value,
}

/// Adds an item; returns its sequence number. Call inside the caller's
/// transaction so the row and its signature land together.
pub async fn put(sql: &Sql, item: &NewItem<'_>, embedding: &[f32], now_ms: u64) -> Result<i64> {
    let NewItem { corpus, ref_id, title, body, context, meta } = *item;
    let rows = sql
        .query(
            "INSERT INTO search_index (corpus, ref_id, title, body, context, meta, created_ms)
             VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING seq",
            &[
                corpus.into(),
                ref_id.into(),
                title.into(),
                body.into(),
                context.into(),
                meta.to_string().into(),
                (now_ms as i64).into(),
            ],
        )
        .await?;
    let seq = rows.first().ok_or_else(|| Fail::new("internal", "insert returned no sequence number"))?.i64("seq")?;
    sql.execute(
        "INSERT INTO search_vectors (seq, embedding) VALUES ($1, $2)",
        &[seq.into(), f32_bytes(embedding).into()],
    )
    .await?;
    append_signature(sql, corpus, seq, fusion::signature(embedding)).await?;
    count_terms(sql, corpus, ref_id, Count::Add).await?;
    Ok(seq)
}

/// Whether [`count_terms`] adds an item's terms or takes them away.
#[derive(Clone, Copy)]
enum Count {
    Add,
    Remove,
}

/// Keeps PostgreSQL's per-corpus document frequencies (`search_terms`,
/// D-K15) true as an item's text comes and goes: each lexeme of the item's
/// `tsv` counts once. Runs in the writer's transaction under the corpus's
/// block lock, so two writers of a corpus never touch the same lexeme rows
/// at once (and never wait on each other's rows in two orders). A lexeme no
/// item holds any more is deleted. SQLite counts from its FTS5 index
/// instead, so there this does nothing.
async fn count_terms(sql: &Sql, corpus: &str, ref_id: &str, count: Count) -> Result<()> {
    if sql.kind() != SqlKind::Postgres {
        return Ok(());
    }
    lock(sql, corpus).await?;
    let item_terms = "SELECT l, count(*) AS n FROM search_index, unnest(tsvector_to_array(tsv)) AS l
                      WHERE corpus = $1 AND ref_id = $2 GROUP BY l";
    let params = [Value::from(corpus), Value::from(ref_id)];
    match count {
        Count::Add => {
            sql.execute(
                &format!(
                    "INSERT INTO search_terms (corpus, lexeme, df) SELECT $1, l, n FROM ({item_terms}) AS x ORDER BY l
                     ON CONFLICT (corpus, lexeme) DO UPDATE SET df = search_terms.df + excluded.df"
                ),
                &params,
            )
            .await?;
        }
        Count::Remove => {
            sql.execute(
                &format!(
                    "UPDATE search_terms AS t SET df = t.df - x.n FROM ({item_terms}) AS x
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

/// Appends a signature to the corpus's last block, or starts a new block.
///
/// The block is read, changed and written back, so two writers must not do
/// it at once: on SQLite every write transaction already holds the write
/// lock (`BEGIN IMMEDIATE`); on Postgres the corpus's transaction-scoped
/// advisory lock queues them ([`lock`]). Without it, concurrent
/// document batches lost signatures or collided on a new block's key (a
/// 500).
async fn append_signature(sql: &Sql, corpus: &str, seq: i64, sig: Vec<u64>) -> Result<()> {
    lock(sql, corpus).await?;
    let last = sql
        .query(
            "SELECT block, n, seqs, sigs FROM vector_blocks WHERE corpus = $1 ORDER BY block DESC LIMIT 1",
            &[corpus.into()],
        )
        .await?;
    match last.first() {
        Some(r) if (r.i64("n")? as usize) < fusion::BLOCK_SIZE => {
            let mut b = decode(r)?;
            b.push(seq, sig);
            write_block(sql, corpus, r.i64("block")?, &b).await?;
        }
        other => {
            let block = match other {
                Some(r) => r.i64("block")? + 1,
                None => 0,
            };
            let mut b = Block::default();
            b.push(seq, sig);
            let (seqs, sigs) = b.encode();
            sql.execute(
                "INSERT INTO vector_blocks (corpus, block, n, seqs, sigs, lo, hi) VALUES ($1, $2, 1, $3, $4, $5, $5)",
                &[corpus.into(), block.into(), seqs.into(), sigs.into(), seq.into()],
            )
            .await?;
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
    count_terms(sql, corpus, ref_id, Count::Remove).await?;
    let params: Vec<Value> = seqs.iter().map(|s| Value::from(*s)).collect();
    sql.execute(&format!("DELETE FROM search_vectors WHERE seq IN ({})", in_list(1, seqs.len())), &params).await?;
    let n = sql
        .execute("DELETE FROM search_index WHERE corpus = $1 AND ref_id = $2", &[corpus.into(), ref_id.into()])
        .await?;
    drop_signatures(sql, corpus, &seqs).await?;
    Ok(n)
}

/// Rewrites the blocks that hold any of `seqs` without them, so the scan
/// never reads a removed item's signature and shrinks as items go; a block
/// left empty is deleted. The bounds index finds the blocks; one written
/// before it (NULL bounds) is read, and gets its bounds on the way.
async fn drop_signatures(sql: &Sql, corpus: &str, seqs: &[i64]) -> Result<()> {
    let (Some(&lo), Some(&hi)) = (seqs.iter().min(), seqs.iter().max()) else { return Ok(()) };
    lock(sql, corpus).await?;
    let rows = sql
        .query(
            "SELECT block, seqs, sigs, lo FROM vector_blocks
             WHERE corpus = $1 AND (lo IS NULL OR (hi >= $2 AND lo <= $3))",
            &[corpus.into(), lo.into(), hi.into()],
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

/// Rewrites an item's text (its embedding is unchanged). Call inside a
/// transaction: the text and its term counts change together.
pub async fn retext(sql: &Sql, corpus: &str, ref_id: &str, title: &str, body: &str) -> Result<()> {
    count_terms(sql, corpus, ref_id, Count::Remove).await?;
    sql.execute(
        "UPDATE search_index SET title = $3, body = $4 WHERE corpus = $1 AND ref_id = $2",
        &[corpus.into(), ref_id.into(), title.into(), body.into()],
    )
    .await?;
    count_terms(sql, corpus, ref_id, Count::Add).await
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
    let mut c = Candidates::default();
    let t1 = mneme_time::clock::system_ms();
    // Both are reads, so they may share the connection on either backend.
    let since = |t: u64| mneme_time::clock::system_ms().saturating_sub(t);
    let ((text, text_ms), (blocks, blocks_ms)) = futures::future::join(
        async {
            let r = match mode.uses_text() {
                true => text_candidates(sql, corpora, query, fusion::GENERATOR_CANDIDATES).await,
                false => Ok(Vec::new()),
            };
            (r, since(t1))
        },
        async {
            let r = match mode.uses_vector() {
                true => signature_blocks(sql, corpora).await,
                false => Ok(Vec::new()),
            };
            (r, since(t1))
        },
    )
    .await;
    (c.text_ms, c.blocks_ms) = (text_ms, blocks_ms);
    c.text = text?;
    let blocks = blocks?;
    let t2 = mneme_time::clock::system_ms();
    let shortlist = match mode.uses_vector() {
        true => fusion::shortlist(&fusion::signature(embedding), &blocks, fusion::SHORTLIST),
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
/// rows [`fusion::text_plan`] chooses, ranked by every term.
async fn text_candidates(sql: &Sql, corpora: &[&str], query: &str, limit: usize) -> Result<Vec<i64>> {
    let terms = fusion::terms(query);
    if corpora.is_empty() || terms.is_empty() {
        return Ok(Vec::new());
    }
    let (items, df) = frequencies(sql, corpora, &terms).await?;
    let plan = fusion::text_plan(items, &terms, &df);
    // The title weighs 2, the body 1 and the context CONTEXT_WEIGHT
    // (D-K13); PostgreSQL's weights are listed D, C, B, A, and only A (the
    // title and body) and D (the context) occur (B and C keep their defaults).
    let context = fusion::CONTEXT_WEIGHT;
    let statement = match sql.kind() {
        // CROSS JOIN keeps the FTS5 list in the lead: given the rowid bound,
        // SQLite 3.50 would rather walk the `(corpus, seq)` index and
        // evaluate the MATCH row by row (1 → 30 ms at 534 items).
        SqlKind::Sqlite => format!(
            "SELECT s.seq FROM search_fts CROSS JOIN search_index s ON s.seq = search_fts.rowid
             WHERE search_fts MATCH $1 AND search_fts.rowid >= $3 AND s.corpus IN ({})
             ORDER BY bm25(search_fts, 2.0, 1.0, {context:?}) LIMIT {limit}",
            in_list(4, corpora.len())
        ),
        // `$2` selects the rows, `$1` (any term) ranks them.
        SqlKind::Postgres => format!(
            "SELECT seq FROM search_index, to_tsquery('english', $1) AS q, to_tsquery('english', $2) AS f
             WHERE tsv @@ f AND seq >= $3 AND corpus IN ({})
             ORDER BY ts_rank_cd('{{{context:?}, 0.2, 0.4, 1}}', tsv, q) DESC, seq DESC LIMIT {limit}",
            in_list(4, corpora.len())
        ),
    };
    // SQLite leaves `$2` unused.
    let run = async |any: String, filter: String, since: i64| -> Result<Vec<i64>> {
        let mut params: Vec<Value> = vec![any.into(), filter.into(), since.into()];
        params.extend(corpora.iter().map(|c| Value::from(*c)));
        let rows = sql.query(&statement, &params).await?;
        rows.iter().map(|r| r.i64("seq").map_err(Fail::from)).collect()
    };
    // Rows from `since` on that hold any of `held`, ranked by every term.
    let holding = async |held: &[String], since: i64| -> Result<Vec<i64>> {
        match sql.kind() {
            SqlKind::Sqlite if held.len() == terms.len() => run(fusion::fts5_any(&terms), String::new(), since).await,
            SqlKind::Sqlite => {
                run(format!("({}) AND ({})", fusion::fts5_any(&terms), fusion::fts5_any(held)), String::new(), since)
                    .await
            }
            SqlKind::Postgres => run(fusion::tsquery_any(&terms), fusion::tsquery_any(held), since).await,
        }
    };
    match plan {
        // The rows holding a rare term; when there are none (on SQLite the
        // rare term may be held only by another corpus, since it counts
        // over all of them), the newest rows holding any term.
        fusion::TextPlan::Rare(rare) => match holding(&rare, 0).await? {
            found if found.is_empty() => holding(&terms, window_start(sql, corpora).await?).await,
            found => Ok(found),
        },
        fusion::TextPlan::Recent => holding(&terms, window_start(sql, corpora).await?).await,
        // First the rows holding two of the terms; only when they are too
        // few, every row holding one (D-K10).
        fusion::TextPlan::All => match (sql.kind(), fusion::tsquery_pairs(&terms)) {
            (SqlKind::Postgres, Some(pairs)) => {
                let mut found = run(fusion::tsquery_any(&terms), pairs, 0).await?;
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

/// How many items `corpora` hold and each term's document frequency, both
/// capped a little above [`fusion::TERM_BUDGET`], in one statement (D-K15).
/// The items are counted through the `(corpus, seq)` index. SQLite counts
/// the first entries of each term's FTS5 list (every corpus: the list has
/// no corpus); PostgreSQL reads the counts the store keeps per corpus
/// ([`count_terms`]), since a count through its GIN index reads the whole
/// posting list.
async fn frequencies(sql: &Sql, corpora: &[&str], terms: &[String]) -> Result<(u64, Vec<u64>)> {
    let cap = fusion::TERM_BUDGET + 1;
    let n = terms.len();
    let mut columns = vec![format!(
        "(SELECT count(*) FROM (SELECT seq FROM search_index WHERE corpus IN ({}) LIMIT {cap}) AS i) AS items",
        in_list(n + 1, corpora.len())
    )];
    columns.extend((1..=n).map(|i| match sql.kind() {
        SqlKind::Sqlite => format!(
            "(SELECT count(*) FROM (SELECT rowid FROM search_fts WHERE search_fts MATCH ${i} LIMIT {cap})) AS d{i}"
        ),
        SqlKind::Postgres => format!(
            "(SELECT CAST(coalesce(sum(df), 0) AS BIGINT) FROM search_terms
                  WHERE corpus IN ({}) AND lexeme = ANY(tsvector_to_array(to_tsvector('english', ${i})))) AS d{i}",
            in_list(n + 1, corpora.len())
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

/// The corpora's signature blocks, for the Hamming shortlist.
async fn signature_blocks(sql: &Sql, corpora: &[&str]) -> Result<Vec<Block>> {
    if corpora.is_empty() {
        return Ok(Vec::new());
    }
    let params: Vec<Value> = corpora.iter().map(|c| Value::from(*c)).collect();
    let rows = sql
        .query(
            &format!("SELECT seqs, sigs FROM vector_blocks WHERE corpus IN ({})", in_list(1, corpora.len())),
            &params,
        )
        .await?;
    let mut blocks = Vec::with_capacity(rows.len());
    for r in &rows {
        blocks.push(decode(r)?);
    }
    Ok(blocks)
}

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
