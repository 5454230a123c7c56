//! How much of a claim's exact neighbours the ingest's neighbour search
//! finds, and what reading no full text for a claim whose every word is
//! common gave up (D-K26, D-K27, D-K28), on real entries
//! (docs/BENCHMARKS.md). Outside the app, over an embedded store that
//! `bench-knowledge --entries N --save DIR` made from LoCoMo turns: each of
//! `--claims` entries of the store's second half is replayed as a new claim
//! against the entries indexed before it, the way
//! `components/knowledge/src/ingest.rs` searches, with the pure functions
//! the store calls. The truth is every earlier entry by identity cosine,
//! kept as `neighbours` keeps them (the top [`STANCE_NEIGHBOURS`] at
//! ≥ [`STANCE_MIN_COSINE`] and the best same-type merge candidate).
//!
//! The store is small, so its sizes are scaled to `--scale` items (a
//! million by default; `--scale store` keeps its own): each term's document
//! frequency and the item count are multiplied by `scale / items` before
//! [`fusion::text_plan`] chooses, which is the term budget of 2,000 at a
//! million items, and the newest window is [`fusion::RECENT_WINDOW`] ×
//! `items / scale`. A term's frequency counts the knowledge corpus alone
//! (the store counts every corpus: a store of entries alone has no other),
//! so no rare term is ever held by no row here. Three plans, for a claim
//! with no rare term or none that a row holds:
//! - **old** (before D-K26): the rows of the newest window holding any
//!   term, ranked by every term, beside [`ivf::NEIGHBOUR_PROBES`] lists;
//! - **D-K26**: no full text, the same lists;
//! - **D-K27** (the store's): no full text, [`ivf::NEIGHBOUR_PROBES_ALONE`]
//!   lists.
//!
//! The vector side is the flat scan a store of this size runs, which
//! re-scores the best [`SHORTLIST`] by Hamming distance (D-K28). With
//! `--lists K` it reads lists of K trained on the retrieval embeddings of
//! the store's first half (no claim's) and re-scores
//! [`NEIGHBOUR_SHORTLIST`]: `--lists 256` reads the share of the corpus
//! that 4 lists read of a million items, though each list holds about 23
//! entries where a million items' hold about 3,900.
//! `--shortlist N` re-scores N instead (the store shortlists by the
//! retrieval embedding and keeps a neighbour by its identity cosine).
//!
//! Usage: bench-neighbours --store DIR [--claims 400] [--scale 1000000|store] [--lists K] [--shortlist N]

use std::collections::BTreeSet;

use mneme_e2e::bench::arg;
use mneme_knowledge::fusion::{self, Block, NEIGHBOUR_SHORTLIST, SHORTLIST, TextPlan};
use mneme_knowledge::governor::{MERGE_COSINE_DEFAULT, STANCE_MIN_COSINE, STANCE_NEIGHBOURS};
use mneme_knowledge::ivf::{self, Centroids};
use rusqlite::{Connection, OpenFlags, params};

/// An active entry as the index holds it.
struct Entry {
    seq: i64,
    kind: String,
    query: String,
    identity: Vec<f32>,
    retrieval: Vec<f32>,
    sig: Vec<u64>,
}

fn floats(b: &[u8]) -> Vec<f32> {
    b.chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect()
}

/// The cosine as the store computes it.
fn cosine(a: &[f32], b: &[f32]) -> f32 {
    mneme_text::cosine(a, b) as f32
}

/// The full-text statement the store runs on SQLite, over rows before
/// `before` (and from `since`), best 50.
fn ranked(db: &Connection, any: &str, since: i64, before: i64) -> Vec<i64> {
    let (context, date) = (fusion::CONTEXT_WEIGHT, fusion::DATE_WEIGHT);
    let sql = format!(
        "SELECT s.seq FROM search_fts CROSS JOIN search_index s ON s.seq = search_fts.rowid
         WHERE search_fts MATCH ?1 AND search_fts.rowid >= ?2 AND search_fts.rowid < ?3 AND s.corpus = 'knowledge'
         ORDER BY bm25(search_fts, 2.0, 1.0, {context:?}, {date:?}) LIMIT {}",
        fusion::GENERATOR_CANDIDATES
    );
    let mut st = db.prepare_cached(&sql).unwrap();
    st.query_map(params![any, since, before], |r| r.get(0)).unwrap().map(Result::unwrap).collect()
}

/// The neighbours `ingest::neighbours` keeps from a fused list.
fn kept<'a>(claim: &Entry, fused: &[(i64, f64)], by_seq: &dyn Fn(i64) -> &'a Entry) -> Vec<(i64, f32)> {
    let mut all: Vec<(i64, f32, bool)> = fused
        .iter()
        .take(fusion::pool(10))
        .map(|&(s, _)| {
            let e = by_seq(s);
            (s, cosine(&claim.identity, &e.identity), e.kind == claim.kind)
        })
        .filter(|n| n.1 >= STANCE_MIN_COSINE)
        .collect();
    all.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    keep_of(&all)
}

/// The top [`STANCE_NEIGHBOURS`], and the best same-type merge candidate
/// outside them; `all` is sorted best first.
fn keep_of(all: &[(i64, f32, bool)]) -> Vec<(i64, f32)> {
    let mut keep: Vec<(i64, f32)> = all.iter().take(STANCE_NEIGHBOURS).map(|n| (n.0, n.1)).collect();
    if let Some(m) = all.iter().position(|n| n.2 && n.1 >= MERGE_COSINE_DEFAULT).filter(|&i| i >= STANCE_NEIGHBOURS) {
        keep.push((all[m].0, all[m].1));
    }
    keep
}

/// Claims, the neighbours a plan kept for them, their exact neighbours and
/// how many of those it kept; and against the old plan, the neighbours it
/// kept that this plan did not (by band) and those only this plan kept.
#[derive(Default)]
struct Tally {
    claims: usize,
    kept: usize,
    exact: usize,
    found: usize,
    lost: usize,
    lost_band: usize,
    lost_merge: usize,
    gained: usize,
    /// Claims with an exact merge candidate (the best same-type entry at
    /// the merge threshold), and those whose plan kept it.
    merges: usize,
    merges_found: usize,
}

impl Tally {
    fn add(&mut self, kept: &BTreeSet<i64>, exact: &BTreeSet<i64>, merge: Option<i64>) {
        self.claims += 1;
        if let Some(m) = merge {
            self.merges += 1;
            self.merges_found += usize::from(kept.contains(&m));
        }
        self.kept += kept.len();
        self.exact += exact.len();
        self.found += kept.intersection(exact).count();
    }

    fn share(&self) -> f64 {
        if self.exact == 0 { 0.0 } else { self.found as f64 / self.exact as f64 }
    }
}

fn main() {
    let store = arg("--store").expect("--store DIR (a state directory `bench-knowledge --save` kept)");
    let claims_wanted: usize = arg("--claims").map_or(400, |n| n.parse().expect("--claims takes a number"));
    // None: the store's own sizes (`--scale store`).
    let scale: Option<f64> = match arg("--scale").as_deref() {
        None => Some(1e6),
        Some("store") => None,
        Some(n) => Some(n.parse().expect("--scale takes a number or `store`")),
    };
    let lists: usize = arg("--lists").map_or(0, |n| n.parse().expect("--lists takes a number"));
    let shortlist: usize = arg("--shortlist").map_or(if lists == 0 { SHORTLIST } else { NEIGHBOUR_SHORTLIST }, |n| {
        n.parse().expect("--shortlist takes a number")
    });
    let db = Connection::open_with_flags(format!("{store}/sqlite_db.db"), OpenFlags::SQLITE_OPEN_READ_ONLY)
        .unwrap_or_else(|e| panic!("opening {store}/sqlite_db.db: {e}"));

    let mut st = db
        .prepare(
            "SELECT s.seq, e.type, e.topic, e.position, e.embedding, v.embedding
             FROM search_index s JOIN knowledge_entries e ON e.id = s.ref_id JOIN search_vectors v ON v.seq = s.seq
             WHERE s.corpus = 'knowledge' AND e.superseded_by IS NULL ORDER BY s.seq",
        )
        .unwrap();
    let entries: Vec<Entry> = st
        .query_map([], |r| {
            let retrieval = floats(&r.get::<_, Vec<u8>>(5)?);
            Ok(Entry {
                seq: r.get(0)?,
                kind: r.get(1)?,
                query: format!("{} {}", r.get::<_, String>(2)?, r.get::<_, String>(3)?),
                identity: floats(&r.get::<_, Vec<u8>>(4)?),
                sig: fusion::signature(&retrieval),
                retrieval,
            })
        })
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let n = entries.len();
    assert!(n >= 200, "the store holds {n} active entries; make one of a few thousand");
    let index: std::collections::HashMap<i64, usize> = entries.iter().enumerate().map(|(i, e)| (e.seq, i)).collect();
    let by_seq = |s: i64| &entries[index[&s]];
    // Each entry's list, when the vector side reads lists: centroids
    // trained on the first half, which holds no claim.
    let centroids = (lists > 0).then(|| {
        let every = (n / 2 / ivf::SAMPLE).max(1);
        let sample: Vec<Vec<f32>> = entries[..n / 2].iter().step_by(every).map(|e| e.retrieval.clone()).collect();
        Centroids::train(&sample, lists, ivf::ROUNDS)
    });
    let list_of: Vec<usize> = entries.iter().map(|e| centroids.as_ref().map_or(0, |c| c.list_of(&e.sig))).collect();
    let step = ((n / 2) / claims_wanted.max(1)).max(1);
    let claims: Vec<usize> = (n / 2..n).step_by(step).take(claims_wanted).collect();

    // Every claim (the store's plan), and the claims whose plans differ, by
    // each plan: old, D-K26, D-K27.
    let mut all = Tally::default();
    let mut differ: [Tally; 3] = Default::default();
    let mut plans = [0usize; 4];
    // The old plan's full-text rows, and the claims where they filled the
    // limit (so the newest window held more rows with the claim's words).
    let (mut old_text_rows, mut old_text_full) = (0usize, 0usize);
    for &c in &claims {
        let claim = &entries[c];
        let earlier = &entries[..c];
        let before = claim.seq;
        let terms = fusion::terms(&claim.query);
        let items = scale.unwrap_or(earlier.len() as f64);
        let factor = items / earlier.len() as f64;
        let df: Vec<u64> = terms
            .iter()
            .map(|t| {
                let held: i64 = db
                    .prepare_cached(
                        "SELECT count(*) FROM search_fts CROSS JOIN search_index s ON s.seq = search_fts.rowid
                         WHERE search_fts MATCH ?1 AND search_fts.rowid < ?2 AND s.corpus = 'knowledge'",
                    )
                    .unwrap()
                    .query_row(params![fusion::fts5_any(std::slice::from_ref(t)), before], |r| r.get(0))
                    .unwrap();
                (held as f64 * factor).round() as u64
            })
            .collect();
        let window = ((fusion::RECENT_WINDOW as f64 / factor).round() as usize).max(1);
        let since = earlier[earlier.len().saturating_sub(window)].seq;
        let plan = fusion::text_plan(items as u64, &terms, &df);
        let newest = || ranked(&db, &fusion::fts5_any(&terms), since, before);
        // (old, new) full-text candidates.
        let (old, new, kind) = match &plan {
            TextPlan::All => {
                let t = ranked(&db, &fusion::fts5_any(&terms), 0, before);
                (t.clone(), t, 0)
            }
            TextPlan::Rare(rare) => match ranked(&db, &fusion::fts5_any(rare), 0, before) {
                t if t.is_empty() => (newest(), Vec::new(), 2),
                t => (t.clone(), t, 1),
            },
            TextPlan::Recent => (newest(), Vec::new(), 3),
        };
        plans[kind] += 1;
        // The vector side: the flat scan's shortlist (or that of the lists
        // probed), by exact cosine.
        let vector_side = |probes: usize| -> Vec<(i64, f32)> {
            let probed: Vec<usize> = centroids.as_ref().map_or(vec![0], |c| c.probes(&claim.retrieval, probes));
            let read: Vec<&Entry> =
                earlier.iter().enumerate().filter(|(i, _)| probed.contains(&list_of[*i])).map(|e| e.1).collect();
            let blocks: Vec<Block> = read
                .chunks(fusion::BLOCK_SIZE)
                .map(|part| Block {
                    seqs: part.iter().map(|e| e.seq).collect(),
                    sigs: part.iter().map(|e| e.sig.clone()).collect(),
                })
                .collect();
            let mut vector: Vec<(i64, f32)> = fusion::shortlist(&claim.sig, &blocks, shortlist)
                .into_iter()
                .map(|s| (s, cosine(&claim.retrieval, &by_seq(s).retrieval)))
                .collect();
            vector.sort_by(|a, b| b.1.total_cmp(&a.1).then(b.0.cmp(&a.0)));
            vector.truncate(fusion::GENERATOR_CANDIDATES);
            vector
        };
        let fused = |text: &[i64], vector: &[(i64, f32)]| {
            let mut cosines = vector.to_vec();
            cosines.extend(
                text.iter()
                    .filter(|t| !vector.iter().any(|v| v.0 == **t))
                    .map(|t| (*t, cosine(&claim.retrieval, &by_seq(*t).retrieval))),
            );
            fusion::fuse(text, &cosines)
        };
        let vector = vector_side(ivf::NEIGHBOUR_PROBES);
        let alone = match new.is_empty() {
            true => vector_side(ivf::NEIGHBOUR_PROBES_ALONE),
            false => vector.clone(),
        };
        let by_plan = [
            kept(claim, &fused(&old, &vector), &by_seq),
            kept(claim, &fused(&new, &vector), &by_seq),
            kept(claim, &fused(&new, &alone), &by_seq),
        ];
        // The exact neighbours: every earlier entry by identity cosine.
        let mut exact: Vec<(i64, f32, bool)> = earlier
            .iter()
            .map(|e| (e.seq, cosine(&claim.identity, &e.identity), e.kind == claim.kind))
            .filter(|n| n.1 >= STANCE_MIN_COSINE)
            .collect();
        exact.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        let merge = exact.iter().find(|n| n.2 && n.1 >= MERGE_COSINE_DEFAULT).map(|n| n.0);
        let exact: BTreeSet<i64> = keep_of(&exact).into_iter().map(|n| n.0).collect();
        let set = |k: &[(i64, f32)]| k.iter().map(|n| n.0).collect::<BTreeSet<i64>>();
        all.add(&set(&by_plan[2]), &exact, merge);
        if kind >= 2 {
            old_text_rows += old.len();
            old_text_full += usize::from(old.len() == fusion::GENERATOR_CANDIDATES);
            let old_set = set(&by_plan[0]);
            for (t, k) in differ.iter_mut().zip(&by_plan) {
                let now = set(k);
                t.add(&now, &exact, merge);
                for (s, cos) in by_plan[0].iter().filter(|n| !now.contains(&n.0)) {
                    t.lost += 1;
                    match (*cos >= MERGE_COSINE_DEFAULT, by_seq(*s).kind == claim.kind) {
                        (true, true) => t.lost_merge += 1,
                        (false, _) => t.lost_band += 1,
                        (true, false) => {}
                    }
                }
                t.gained += now.difference(&old_set).count();
            }
        }
    }
    let sizes = match scale {
        Some(scale) => format!(
            "sizes scaled to {scale} items (term budget {} of {n}, window {})",
            (fusion::TERM_BUDGET as f64 * n as f64 / scale).round(),
            (fusion::RECENT_WINDOW as f64 * n as f64 / scale).round()
        ),
        None => {
            format!("the store's own sizes (term budget {}, window {})", fusion::TERM_BUDGET, fusion::RECENT_WINDOW)
        }
    };
    println!(
        "store: {n} active entries; {} claims from its second half, each against the entries before it; {sizes}; vector side {}",
        claims.len(),
        match lists {
            0 => "flat".to_string(),
            k => format!("{} (alone {}) of {k} lists", ivf::NEIGHBOUR_PROBES, ivf::NEIGHBOUR_PROBES_ALONE),
        }
    );
    println!("shortlist: the best {shortlist} by Hamming distance, re-scored by exact cosine");
    println!(
        "plans: {} every term (all rows), {} rare terms, {} rare terms held by no row, {} every term common",
        plans[0], plans[1], plans[2], plans[3]
    );
    println!(
        "claims whose plans differ: {} (the old plan read {:.1} full-text rows each, the limit of {} for {})",
        differ[0].claims,
        old_text_rows as f64 / differ[0].claims.max(1) as f64,
        fusion::GENERATOR_CANDIDATES,
        old_text_full
    );
    for (name, t) in ["old", "D-K26", "D-K27"].iter().zip(&differ) {
        println!(
            "  {name:6} kept {:5}, exact neighbours found {:5} of {} ({:.3}); against old: lost {} ({} in the stance band < {MERGE_COSINE_DEFAULT}, {} same-type merge candidates), gained {}",
            t.kept,
            t.found,
            t.exact,
            t.share(),
            t.lost,
            t.lost_band,
            t.lost_merge,
            t.gained
        );
    }
    println!(
        "all claims, the store's plan (D-K27): exact neighbours found {} of {} ({:.3}); merge candidates kept {} of {}",
        all.found,
        all.exact,
        all.share(),
        all.merges_found,
        all.merges
    );
}
