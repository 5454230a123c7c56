//! Candidate generation shared by `/retrieve` and `/search`: full-text and
//! vector candidates, fused (full-text rank plus cosine) before the exact
//! re-rank.
//!
//! The vector side must scale without a vector extension on either backend
//! (Spin's SQLite has none), so it is a two-stage search: every indexed
//! item's embedding is reduced to its sign bits (384 dimensions → 48 bytes),
//! packed into blocks of [`BLOCK_SIZE`] per row, and scanned by Hamming
//! distance; the closest [`SHORTLIST`] are re-scored by exact cosine on their
//! full embeddings. The two candidate lists meet in [`fuse`] (D-K6).

use serde::{Deserialize, Serialize};

/// Items per packed signature row.
pub const BLOCK_SIZE: usize = 1024;
/// How many Hamming-nearest items get an exact cosine.
pub const SHORTLIST: usize = 200;
/// How many get one in an ingest's search for a claim's near neighbours
/// when it reads lists (D-K24): the lists bound what it finds, and
/// `bench-neighbours` finds 0.731 of a claim's exact neighbours among the
/// best 40 by Hamming distance against 0.735 among 200. A flat scan ranks
/// every item and keeps 200 (D-K28).
pub const NEIGHBOUR_SHORTLIST: usize = 40;
/// Candidates each generator contributes to the fusion.
pub const GENERATOR_CANDIDATES: usize = 50;

/// Which candidate generators a query uses. `hybrid` is the default; the
/// single-generator modes exist for evaluation and debugging.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    #[default]
    Hybrid,
    Text,
    Vector,
}

impl Mode {
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "hybrid" => Some(Mode::Hybrid),
            "text" => Some(Mode::Text),
            "vector" => Some(Mode::Vector),
            _ => None,
        }
    }
    pub fn uses_text(self) -> bool {
        self != Mode::Vector
    }
    pub fn uses_vector(self) -> bool {
        self != Mode::Text
    }
}

/// The sign bits of an embedding, 64 dimensions per word.
pub fn signature(embedding: &[f32]) -> Vec<u64> {
    embedding
        .chunks(64)
        .map(|c| c.iter().enumerate().fold(0u64, |w, (i, &x)| if x > 0.0 { w | (1 << i) } else { w }))
        .collect()
}

pub fn hamming(a: &[u64], b: &[u64]) -> u32 {
    a.iter().zip(b).map(|(x, y)| (x ^ y).count_ones()).sum()
}

/// One packed row: item sequence numbers and their signatures.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Block {
    pub seqs: Vec<i64>,
    pub sigs: Vec<Vec<u64>>,
}

impl Block {
    /// `(seqs blob, sigs blob)`, little-endian.
    pub fn encode(&self) -> (Vec<u8>, Vec<u8>) {
        let seqs = self.seqs.iter().flat_map(|s| s.to_le_bytes()).collect();
        let sigs = self.sigs.iter().flatten().flat_map(|w| w.to_le_bytes()).collect();
        (seqs, sigs)
    }

    /// Decodes a row; `words` is the signature length in u64 words.
    pub fn decode(seqs: &[u8], sigs: &[u8], words: usize) -> Option<Self> {
        if !seqs.len().is_multiple_of(8) || words == 0 || sigs.len() != seqs.len() * words {
            return None;
        }
        let u = |c: &[u8]| u64::from_le_bytes(c.try_into().expect("8 bytes"));
        Some(Block {
            seqs: seqs.chunks_exact(8).map(|c| u(c) as i64).collect(),
            sigs: sigs.chunks_exact(8 * words).map(|s| s.chunks_exact(8).map(u).collect()).collect(),
        })
    }

    pub fn push(&mut self, seq: i64, sig: Vec<u64>) {
        self.seqs.push(seq);
        self.sigs.push(sig);
    }

    /// Keeps the items whose sequence number `keep` accepts, in order.
    pub fn retain(&mut self, keep: impl Fn(i64) -> bool) {
        let kept: Vec<bool> = self.seqs.iter().map(|&s| keep(s)).collect();
        let mut flags = kept.iter();
        self.seqs.retain(|_| *flags.next().expect("one flag per item"));
        let mut flags = kept.iter();
        self.sigs.retain(|_| *flags.next().expect("one flag per item"));
    }
}

/// The `n` sequence numbers nearest to `query` by Hamming distance across
/// `blocks` (ties broken by the newer item). An item in two blocks counts
/// once (the store drops such doubles before, D-K16; this keeps the answer
/// free of them whatever the caller passes), which may leave fewer than `n`.
pub fn shortlist(query: &[u64], blocks: &[Block], n: usize) -> Vec<i64> {
    let mut all: Vec<(u32, i64)> =
        blocks.iter().flat_map(|b| b.seqs.iter().zip(&b.sigs).map(|(s, sig)| (hamming(query, sig), *s))).collect();
    let key = |a: &(u32, i64)| (a.0, std::cmp::Reverse(a.1));
    if all.len() > n {
        all.select_nth_unstable_by_key(n, key);
        all.truncate(n);
    }
    all.sort_unstable_by_key(key);
    // Both copies share a distance, so they sit side by side.
    all.dedup();
    all.into_iter().map(|(_, s)| s).collect()
}

/// Weight of an item's context (the text around it, D-K13) in full-text
/// ranking, where its own words weigh 1: FTS5's `bm25` column weight for the
/// context column, and PostgreSQL's weight for the class `D` that the
/// context's words carry (the item's own are `A`). Fitted on LoCoMo
/// conversations 0–4 (docs/BENCHMARKS.md).
pub const CONTEXT_WEIGHT: f64 = 0.25;

/// Weight of an item's date words ([`date_words`]) in full-text ranking,
/// where its own words weigh 1: FTS5's `bm25` column weight for the date
/// column, and PostgreSQL's weight for the class `B` the date's words
/// carry (D-K19). Fitted on LoCoMo conversations 0–4 (docs/BENCHMARKS.md).
pub const DATE_WEIGHT: f64 = 1.0;

const MONTHS: [&str; 12] = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];

/// The words an item's date is found by (D-K19): `2023-05-08` (a time after
/// it is not read) is `8 May 2023`, the way people write a date in a
/// question ("what did I do on 8 May, 2023", "in May 2023"). Empty when it
/// is not a real date. Migration 0020 writes the same words for the items
/// indexed before it.
pub fn date_words(date: &str) -> String {
    let Some(days) = mneme_time::calendar::parse_date(date) else { return String::new() };
    let day = mneme_time::calendar::format_date(days);
    let (year, month, dom) = (&day[..4], &day[5..7], &day[8..10]);
    let month: usize = month.parse().unwrap_or(1);
    format!("{} {} {year}", dom.trim_start_matches('0'), MONTHS[month - 1])
}

/// Rank constant of the full-text term of the fusion (D-K6, refitted on
/// LoCoMo conversations 0–4 with D-K13's context in place).
pub const TEXT_RANK_K: f64 = 5.0;
/// Weight of the cosine term of the fusion.
pub const COSINE_WEIGHT: f64 = 0.4;

/// The hybrid fusion (D-K6): 1 / (5 + full-text rank) for an item the
/// full-text search found, plus 0.4 × its cosine to the query, for every
/// item either generator found (`cosines` covers all of them). Unlike plain
/// reciprocal rank fusion (Σ 1/(60 + rank)), the vector side contributes its score, not its
/// rank, so a weak vector neighbour cannot outvote a strong lexical match,
/// while a close one can; on LoCoMo this beats both generators alone, where
/// plain RRF loses to full text (docs/BENCHMARKS.md). Best first; ties keep
/// the newer item.
pub fn fuse(text: &[i64], cosines: &[(i64, f32)]) -> Vec<(i64, f64)> {
    let mut scored: Vec<(i64, f64)> = cosines
        .iter()
        .map(|&(seq, cos)| {
            let lexical = text.iter().position(|t| *t == seq).map_or(0.0, |r| 1.0 / (TEXT_RANK_K + r as f64 + 1.0));
            (seq, lexical + COSINE_WEIGHT * f64::from(cos))
        })
        .collect();
    for (r, seq) in text.iter().enumerate() {
        if !scored.iter().any(|s| s.0 == *seq) {
            scored.push((*seq, 1.0 / (TEXT_RANK_K + r as f64 + 1.0)));
        }
    }
    scored.sort_by(|a, b| b.1.total_cmp(&a.1).then(b.0.cmp(&a.0)));
    scored
}

/// The search terms of a query: content words, letters and digits only.
pub fn terms(query: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for w in mneme_text::words(query) {
        let w: String = w.chars().filter(|c| c.is_alphanumeric()).collect();
        if w.len() > 1 && !mneme_text::stopwords::CONTENT.contains(&w.as_str()) && !out.contains(&w) && out.len() < 32 {
            out.push(w);
        }
    }
    out
}

/// An FTS5 MATCH expression: any of `terms`, each quoted (so no query
/// syntax leaks through).
pub fn fts5_any(terms: &[String]) -> String {
    terms.iter().map(|w| format!("\"{w}\"")).collect::<Vec<_>>().join(" OR ")
}

/// A PostgreSQL `to_tsquery` expression: any of `terms`.
pub fn tsquery_any(terms: &[String]) -> String {
    terms.join(" | ")
}

/// Terms [`tsquery_pairs`] combines; `n` terms make `n(n-1)/2` pairs.
pub const PAIR_TERMS: usize = 12;

/// A PostgreSQL `to_tsquery` expression matching a document that holds at
/// least two of the query's terms (its first [`PAIR_TERMS`]): the OR of
/// every pair. `None` below two terms. Ranking the OR of all terms costs
/// one rank per matching row, which is most rows when a term is common;
/// the rows that match two terms are far fewer, and they are the ones the
/// OR ranking puts first (D-K10).
pub fn tsquery_pairs(terms: &[String]) -> Option<String> {
    let t = &terms[..terms.len().min(PAIR_TERMS)];
    let mut pairs = Vec::new();
    for (i, a) in t.iter().enumerate() {
        for b in &t[i + 1..] {
            pairs.push(format!("({a} & {b})"));
        }
    }
    (!pairs.is_empty()).then(|| pairs.join(" | "))
}

/// Rows the full-text read may rank before it narrows to the query's rare
/// terms (D-K15).
pub const TERM_BUDGET: u64 = 2_000;
/// Items a question's full-text read ranks, newest first, when every term
/// of it is common (D-K15); a claim's neighbour search reads none then
/// (D-K26).
pub const RECENT_WINDOW: i64 = 20_000;

/// Which rows the full-text read ranks (D-K15). A question's read scores
/// the rows of every plan by all of its terms; a claim's neighbour search
/// scores the rows of [`TextPlan::Rare`] by those rare terms (D-K21).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TextPlan {
    /// Every row holding any term: the terms together hold at most
    /// [`TERM_BUDGET`] rows.
    All,
    /// Only rows holding one of these terms (the rarest, in query order).
    Rare(Vec<String>),
    /// Only the newest [`RECENT_WINDOW`] items: every term is common (a
    /// claim's neighbour search reads no full text, D-K26).
    Recent,
}

/// Chooses the full-text plan from the number of items searched (`items`)
/// and each term's document frequency (`df[i]` for `terms[i]`); both may be
/// capped anywhere above [`TERM_BUDGET`]. A store of at most the budget, or
/// a query whose terms are rare enough that every one is taken, ranks
/// exactly as before ([`TextPlan::All`]). Otherwise the rarest terms are
/// taken while their frequencies sum to at most the budget:
/// [`TextPlan::Rare`] with those, leaving out terms no row holds (a
/// misspelling must not empty the answer), or [`TextPlan::Recent`] when
/// none is left.
pub fn text_plan(items: u64, terms: &[String], df: &[u64]) -> TextPlan {
    if items <= TERM_BUDGET {
        return TextPlan::All;
    }
    let mut order: Vec<usize> = (0..terms.len().min(df.len())).collect();
    order.sort_by_key(|&i| (df[i], i));
    let (mut taken, mut sum) = (Vec::new(), 0u64);
    for i in order {
        if sum + df[i] > TERM_BUDGET {
            break;
        }
        sum += df[i];
        taken.push(i);
    }
    if taken.len() == terms.len() {
        return TextPlan::All;
    }
    taken.retain(|&i| df[i] > 0);
    taken.sort_unstable();
    match taken.is_empty() {
        true => TextPlan::Recent,
        false => TextPlan::Rare(taken.into_iter().map(|i| terms[i].clone()).collect()),
    }
}

/// How rare a term is: BM25's inverse document frequency,
/// `ln(1 + (n − df + 0.5) / (df + 0.5))`, for a term `df` of `n` items hold
/// (D-K14). It falls as `df` grows and is never negative: a `df` above `n`
/// (a term that stems to several lexemes has their frequencies summed)
/// counts as `n`.
pub fn idf(n: u64, df: u64) -> f64 {
    let (n, df) = (n as f64, df.min(n) as f64);
    (1.0 + (n - df + 0.5) / (df + 0.5)).ln()
}

/// How many fused candidates the exact re-rank sees for a top-`k` answer.
pub fn pool(k: usize) -> usize {
    (4 * k).clamp(40, 100)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_date_is_found_by_its_day_month_and_year() {
        assert_eq!(date_words("2023-05-08"), "8 May 2023");
        assert_eq!(date_words("2022-10-13T09:30:00Z"), "13 October 2022");
        assert_eq!(date_words(" 1999-12-31 "), "31 December 1999");
        for not_a_date in ["", "2023-02-30", "08/05/2023", "2023-5-8", "yesterday"] {
            assert_eq!(date_words(not_a_date), "", "{not_a_date:?}");
        }
    }

    #[test]
    fn a_rarer_term_weighs_more_and_every_term_weighs_something() {
        assert!(idf(1_000, 1) > idf(1_000, 10));
        assert!(idf(1_000, 10) > idf(1_000, 999));
        // A term every item holds still weighs a little, more than none.
        assert!(idf(1_000, 1_000) > 0.0);
        assert_eq!(idf(1_000, 5_000), idf(1_000, 1_000));
        assert_eq!(idf(0, 0), 2f64.ln());
        // The figure BM25 gives: ln(1 + 90.5 / 10.5).
        assert!((idf(100, 10) - (1.0f64 + 90.5 / 10.5).ln()).abs() < 1e-12);
    }

    #[test]
    fn signatures_are_sign_bits() {
        let mut e = vec![-1.0f32; 384];
        e[0] = 0.5;
        e[65] = 0.1;
        let s = signature(&e);
        assert_eq!(s.len(), 6);
        assert_eq!((s[0], s[1], s[2]), (1, 2, 0));
        assert_eq!(hamming(&s, &signature(&vec![-1.0; 384])), 2);
    }

    #[test]
    fn retain_keeps_each_seq_with_its_own_signature() {
        let mut b = Block::default();
        for s in 1..=5 {
            b.push(s, vec![s as u64 * 10, s as u64 * 100]);
        }
        b.retain(|s| s % 2 == 1);
        assert_eq!(b.seqs, vec![1, 3, 5]);
        assert_eq!(b.sigs, vec![vec![10, 100], vec![30, 300], vec![50, 500]]);
        b.retain(|_| false);
        assert_eq!(b, Block::default());
    }

    #[test]
    fn blocks_round_trip() {
        let mut b = Block::default();
        b.push(7, vec![1, 2]);
        b.push(9, vec![u64::MAX, 0]);
        let (seqs, sigs) = b.encode();
        assert_eq!(Block::decode(&seqs, &sigs, 2), Some(b));
        assert_eq!(Block::decode(&seqs, &sigs[1..], 2), None);
    }

    #[test]
    fn the_shortlist_is_nearest_first() {
        let mut b = Block::default();
        for (seq, sig) in [(1, 0b1111u64), (2, 0b0001), (3, 0b0011), (4, 0b0000)] {
            b.push(seq, vec![sig]);
        }
        assert_eq!(shortlist(&[0], std::slice::from_ref(&b), 3), [4, 2, 3]);
        assert_eq!(shortlist(&[0], std::slice::from_ref(&b), 10), [4, 2, 3, 1]);
        // The same item in two blocks counts once.
        assert_eq!(shortlist(&[0], &[b.clone(), b], 10), [4, 2, 3, 1]);
    }

    #[test]
    fn fusion_adds_the_cosine_to_the_lexical_rank() {
        // 1 is the best lexical match; 3 and 4 only vector neighbours, 3
        // a close one and 4 a weak one; 2 both.
        let text = [1, 2];
        let cos = [(1, 0.1), (2, 0.6), (3, 0.9), (4, 0.3)];
        let fused = fuse(&text, &cos);
        let order: Vec<i64> = fused.iter().map(|f| f.0).collect();
        assert_eq!(
            order,
            [2, 3, 1, 4],
            "both signals beat either; a weak vector-only hit stays below the top lexical match"
        );
        assert!((fused[0].1 - (1.0 / 7.0 + 0.4 * 0.6)).abs() < 1e-6);
        assert!((fused[1].1 - 0.4 * 0.9).abs() < 1e-6);
        assert!((fused[2].1 - (1.0 / 6.0 + 0.4 * 0.1)).abs() < 1e-6);
        // An item without a cosine still counts its lexical rank.
        assert_eq!(fuse(&[7], &[]), vec![(7, 1.0 / 6.0)]);
    }

    #[test]
    fn the_text_plan_takes_the_rarest_terms_within_the_budget() {
        let t = |w: &[&str]| w.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let q = t(&["caroline", "hiking", "melanie", "said"]);
        let text_plan = |q: &[String], df: &[u64]| text_plan(TERM_BUDGET + 1, q, df);
        // A small store ranks every row holding a term, however many.
        assert_eq!(super::text_plan(TERM_BUDGET, &q, &[1_500, 900, 1_200, 2_000]), TextPlan::All);
        assert_eq!(super::text_plan(500, &q, &[400, 300, 450, 500]), TextPlan::All);
        // Every term fits, so nothing changes.
        assert_eq!(text_plan(&q, &[40, 12, 30, 900]), TextPlan::All);
        assert_eq!(text_plan(&q, &[0, 0, 0, 0]), TextPlan::All, "no term occurs: nothing to bound");
        // The rarest first while they fit; query order kept.
        assert_eq!(text_plan(&q, &[1_200, 300, 2_001, 2_001]), TextPlan::Rare(t(&["caroline", "hiking"])));
        assert_eq!(text_plan(&q, &[1_800, 300, 2_001, 2_001]), TextPlan::Rare(t(&["hiking"])));
        // The sum may reach the budget exactly.
        assert_eq!(text_plan(&q, &[1_700, 300, 2_001, 2_001]), TextPlan::Rare(t(&["caroline", "hiking"])));
        // A term no row holds is taken but does not filter.
        assert_eq!(text_plan(&q, &[0, 300, 2_001, 2_001]), TextPlan::Rare(t(&["hiking"])));
        assert_eq!(text_plan(&q, &[0, 2_001, 2_001, 2_001]), TextPlan::Recent);
        assert_eq!(text_plan(&q, &[2_001, 2_001, 2_001, 2_001]), TextPlan::Recent);
        // Ties go to the earlier term.
        assert_eq!(text_plan(&q, &[1_000, 1_000, 1_000, 2_001]), TextPlan::Rare(t(&["caroline", "hiking"])));
        assert_eq!(text_plan(&[], &[]), TextPlan::All);
    }

    #[test]
    fn queries_are_sanitised() {
        let q = fts5_any(&terms("What did Caroline say about \"adoption\" OR NEAR(x)?"));
        assert_eq!(q, r#""caroline" OR "adoption" OR "near""#);
        assert_eq!(tsquery_any(&terms("deploys & rollbacks!")), "deploys | rollbacks");
        assert!(terms("the a of").is_empty());
        assert_eq!(tsquery_pairs(&terms("deploys & rollbacks!")).unwrap(), "(deploys & rollbacks)");
        assert_eq!(
            tsquery_pairs(&terms("When did Caroline go hiking with Melanie?")).unwrap(),
            "(caroline & hiking) | (caroline & melanie) | (hiking & melanie)"
        );
        assert_eq!(tsquery_pairs(&terms("adoption")), None);
        let many: Vec<String> = (0..20).map(|i| format!("w{i}")).collect();
        let pairs = tsquery_pairs(&terms(&many.join(" "))).unwrap();
        assert_eq!(pairs.matches('&').count(), PAIR_TERMS * (PAIR_TERMS - 1) / 2);
        assert!(!pairs.contains("w12"));
    }
}
