//! A document's context built from the documents around it (D-K29).
//!
//! A transcript's turn ("Mel: Yes, yesterday.") names little of what a
//! question about it asks; the turns around it do. D-K13 let a client send
//! those as the document's `context`. Here the app builds it itself: the
//! documents that name the same source URL and source date form a run, in
//! the order they arrived, in one request or many, and a document with no
//! context of its own borrows the words of up to [`SIDE`] documents of its
//! run on each side of it. Documents that name no source and no day are in
//! no run: nothing says they are one source's.
//!
//! When a run changes (a document joins it, is replaced or leaves it), the
//! contexts its neighbours built from it are built again: [`to_write`] says
//! which, from a window of the run read around the change.

/// How many documents on each side lend their words, to full text and to
/// the embedding alike: chosen on LoCoMo's conversations 0–4 against one
/// on each side and against full text only (BENCHMARKS «Context built by
/// the app»).
pub const SIDE: usize = 2;

/// The most characters one neighbour lends: four of them stay within the
/// 20,000 characters a context may hold.
pub const LEND_CHARS: usize = 4_000;

/// The run a document belongs to: its source URL and its source date
/// joined by U+001F, an empty one counting as absent; empty when it names
/// neither, which is no run. Migration 0023 computes the same key in SQL.
pub fn run_key(source_url: Option<&str>, source_date: Option<&str>) -> String {
    let url = source_url.filter(|s| !s.is_empty());
    let date = source_date.filter(|s| !s.is_empty());
    if url.is_none() && date.is_none() {
        return String::new();
    }
    format!("{}\u{1f}{}", url.unwrap_or(""), date.unwrap_or(""))
}

/// The context of the document at `i` of a run given in order: the ends of
/// up to `side` documents before it (nearest last), then the starts of up to
/// `side` after it (nearest first), joined by spaces. Empty when it has none.
pub fn context_at(run: &[&str], i: usize, side: usize) -> String {
    let before = run[i.saturating_sub(side)..i].iter().map(|t| tail(t.trim(), LEND_CHARS));
    let after = run[(i + 1).min(run.len())..run.len().min(i + 1 + side)].iter().map(|t| head(t.trim(), LEND_CHARS));
    before.chain(after).filter(|p| !p.is_empty()).collect::<Vec<_>>().join(" ")
}

/// One document of a run's window, in order.
#[derive(Debug, Clone, Copy)]
pub struct Member<'a> {
    pub text: &'a str,
    /// Whether its context is the app's to build (the client sent none).
    pub builds: bool,
    /// The context it is stored with; `None` for a document being written
    /// now.
    pub stored: Option<&'a str>,
}

/// A stretch of one run, in order: the documents read around a change and
/// the ones being written, and whether it reaches the run's first and last
/// document (otherwise more of the run lies beyond that edge, unread).
#[derive(Debug, Clone, Default)]
pub struct Window<'a> {
    pub members: Vec<Member<'a>>,
    pub from_start: bool,
    pub to_end: bool,
}

/// The members of `w` whose context is to be written, with it: every one
/// being written now, and every stored one that builds its own whose
/// neighbours now give a context other than the one it holds. A member
/// nearer than `side` to an edge of the window that is not the run's own
/// is left as it is: not all its neighbours were read, so the caller reads
/// `2 × side` beyond every change.
pub fn to_write(w: &Window<'_>, side: usize) -> Vec<(usize, String)> {
    let texts: Vec<&str> = w.members.iter().map(|m| m.text).collect();
    let n = texts.len();
    (0..n)
        .filter(|&i| w.members[i].builds)
        .filter(|&i| w.members[i].stored.is_none() || ((w.from_start || i >= side) && (w.to_end || i + side < n)))
        .filter_map(|i| {
            let context = context_at(&texts, i, side);
            (w.members[i].stored != Some(context.as_str())).then_some((i, context))
        })
        .collect()
}

/// The first `n` characters of `s`.
fn head(s: &str, n: usize) -> &str {
    s.char_indices().nth(n).map_or(s, |(at, _)| &s[..at])
}

/// The last `n` characters of `s`.
fn tail(s: &str, n: usize) -> &str {
    if n == 0 {
        return "";
    }
    s.char_indices().rev().nth(n - 1).map_or(s, |(at, _)| &s[at..])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn new(text: &str) -> Member<'_> {
        Member { text, builds: true, stored: None }
    }

    fn held<'a>(text: &'a str, stored: &'a str) -> Member<'a> {
        Member { text, builds: true, stored: Some(stored) }
    }

    #[test]
    fn a_turn_borrows_two_on_each_side_in_order() {
        let run = ["a1", "a2", "a3", "a4", "a5", "a6"];
        assert_eq!(context_at(&run, 0, SIDE), "a2 a3");
        assert_eq!(context_at(&run, 1, SIDE), "a1 a3 a4");
        assert_eq!(context_at(&run, 2, SIDE), "a1 a2 a4 a5");
        assert_eq!(context_at(&run, 5, SIDE), "a4 a5");
        assert_eq!(context_at(&run, 2, 1), "a2 a4");
        assert_eq!(context_at(&run, 2, 0), "");
        assert_eq!(context_at(&["alone"], 0, SIDE), "");
    }

    #[test]
    fn a_run_is_its_source_and_its_day() {
        assert_eq!(run_key(None, None), "");
        assert_eq!(run_key(Some(""), Some("")), "", "an empty one counts as absent");
        assert_eq!(run_key(None, Some("2023-05-08")), "\u{1f}2023-05-08");
        assert_eq!(run_key(Some("https://example.org/t"), None), "https://example.org/t\u{1f}");
        assert_ne!(run_key(Some("https://example.org/t"), Some("2023-05-08")), run_key(None, Some("2023-05-08")));
    }

    #[test]
    fn documents_written_now_get_their_context_and_the_stored_ones_before_them_a_new_one() {
        // Two stored turns, each with the context it had at the run's end,
        // then two arriving in a later request.
        let w = Window {
            members: vec![held("t1", "t2"), held("t2", "t1"), new("t3"), new("t4")],
            from_start: true,
            to_end: true,
        };
        assert_eq!(
            to_write(&w, SIDE),
            vec![(0, "t2 t3".into()), (1, "t1 t3 t4".into()), (2, "t1 t2 t4".into()), (3, "t2 t3".into())]
        );
    }

    #[test]
    fn a_stored_context_that_still_holds_or_is_the_clients_is_not_written() {
        let client = Member { text: "t2", builds: false, stored: Some("the client's words") };
        let w =
            Window { members: vec![held("t1", "t2 t3"), client, held("t3", "t1 t2")], from_start: true, to_end: true };
        assert!(to_write(&w, SIDE).is_empty());
    }

    #[test]
    fn members_whose_neighbours_were_not_all_read_are_left_alone() {
        // A window read from the middle of a run: t1's before-neighbours lie
        // outside it, so its stale-looking context is not rewritten; t3's
        // are all read.
        let w = Window {
            members: vec![held("t1", "t0 tx t2 t3"), held("t2", "t0 t1 t3"), held("t3", "t1 t2 gone"), new("t4")],
            from_start: false,
            to_end: true,
        };
        let got = to_write(&w, SIDE);
        assert_eq!(got.iter().map(|g| g.0).collect::<Vec<_>>(), [2, 3]);
        assert_eq!(got[0].1, "t1 t2 t4");
    }

    #[test]
    fn a_document_that_leaves_a_run_is_read_by_none_of_its_neighbours() {
        // t3 deleted: the window holds the run without it.
        let w = Window {
            members: vec![held("t1", "t2 t3"), held("t2", "t1 t3 t4"), held("t4", "t2 t3 t5"), held("t5", "t3 t4")],
            from_start: true,
            to_end: true,
        };
        let got = to_write(&w, SIDE);
        assert_eq!(got, vec![(0, "t2 t4".into()), (1, "t1 t4 t5".into()), (2, "t1 t2 t5".into()), (3, "t2 t4".into())]);
        assert!(got.iter().all(|(_, c)| !c.contains("t3")));
    }

    #[test]
    fn a_long_neighbour_lends_the_end_nearest_before_and_the_start_nearest_after() {
        let long_before = format!("{}END", "x".repeat(10_000));
        let long_after = format!("START{}", "y".repeat(10_000));
        let got = context_at(&[&long_before, "middle", &long_after], 1, SIDE);
        let (b, a) = got.split_once(' ').unwrap();
        assert!(b.ends_with("END") && b.chars().count() == LEND_CHARS);
        assert!(a.starts_with("START") && a.chars().count() == LEND_CHARS);
        assert!(got.chars().count() <= 20_000);
    }

    #[test]
    fn cuts_fall_on_characters_not_bytes() {
        assert_eq!(head("ééé", 2), "éé");
        assert_eq!(tail("ééé", 2), "éé");
        assert_eq!(tail("ab", 5), "ab");
        assert_eq!(tail("ab", 0), "");
        assert_eq!(head("ab", 0), "");
    }
}
