//! A document's context built from the documents sent beside it (D-K29).
//!
//! A transcript's turn ("Mel: Yes, yesterday.") names little of what a
//! question about it asks; the turns around it do. D-K13 let a client send
//! those as the document's `context`. Here the app builds it itself: the
//! documents of one batch arrive in order, and a document with no context of
//! its own borrows the words of up to [`SIDE`] documents on each side of it,
//! as long as they belong to the same run: they name a source URL or a
//! source date, and the same ones. Documents from different sources or days
//! in one batch lend each other nothing, and neither do documents that name
//! no source and no day: nothing says they are one source's.

/// How many documents on each side lend their words, to full text and to
/// the embedding alike: chosen on LoCoMo's conversations 0–4 against one
/// on each side and against full text only (BENCHMARKS «Context built by
/// the app»).
pub const SIDE: usize = 2;

/// The most characters one neighbour lends: four of them stay within the
/// 20,000 characters a context may hold.
pub const LEND_CHARS: usize = 4_000;

/// One document of a batch, as its neighbours see it.
#[derive(Debug, Clone, Copy)]
pub struct Placed<'a> {
    pub text: &'a str,
    pub source_url: Option<&'a str>,
    pub source_date: Option<&'a str>,
}

impl Placed<'_> {
    fn same_run(&self, other: &Placed<'_>) -> bool {
        (self.source_url.is_some() || self.source_date.is_some())
            && self.source_url == other.source_url
            && self.source_date == other.source_date
    }
}

/// Each document's context from up to `side` neighbours on each side, in
/// batch order: the ones before it (their ends, nearest last), then the
/// ones after it (their starts, nearest first), joined by spaces. Empty when
/// it has none.
pub fn contexts(batch: &[Placed<'_>], side: usize) -> Vec<String> {
    (0..batch.len())
        .map(|i| {
            let me = &batch[i];
            let before = (i.saturating_sub(side)..i).rev().take_while(|&j| batch[j].same_run(me)).collect::<Vec<_>>();
            let after = (i + 1..batch.len().min(i + 1 + side)).take_while(|&j| batch[j].same_run(me));
            let mut parts: Vec<&str> = before.iter().rev().map(|&j| tail(batch[j].text.trim(), LEND_CHARS)).collect();
            parts.extend(after.map(|j| head(batch[j].text.trim(), LEND_CHARS)));
            parts.retain(|p| !p.is_empty());
            parts.join(" ")
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

    fn doc<'a>(text: &'a str, date: Option<&'a str>) -> Placed<'a> {
        Placed { text, source_url: None, source_date: date }
    }

    #[test]
    fn a_turn_borrows_two_on_each_side_in_order() {
        let texts = ["a1", "a2", "a3", "a4", "a5", "a6"];
        let batch: Vec<_> = texts.iter().map(|t| doc(t, Some("2023-05-08"))).collect();
        let got = contexts(&batch, SIDE);
        assert_eq!(got[0], "a2 a3");
        assert_eq!(got[1], "a1 a3 a4");
        assert_eq!(got[2], "a1 a2 a4 a5");
        assert_eq!(got[5], "a4 a5");
        assert_eq!(contexts(&batch, 1)[2], "a2 a4");
        assert!(contexts(&batch, 0).iter().all(String::is_empty));
    }

    #[test]
    fn a_run_ends_where_the_date_or_the_source_changes() {
        let batch = [
            doc("monday one", Some("2023-05-08")),
            doc("monday two", Some("2023-05-08")),
            doc("tuesday one", Some("2023-05-09")),
            Placed { text: "clipping", source_url: Some("https://example.org/a"), source_date: Some("2023-05-09") },
            doc("tuesday two", Some("2023-05-09")),
        ];
        let got = contexts(&batch, SIDE);
        assert_eq!(got[1], "monday one");
        assert_eq!(got[2], "", "the day before and a clipping lend nothing");
        assert_eq!(got[3], "");
        // The run stops at the first document of another run: "tuesday one"
        // is past the clipping.
        assert_eq!(got[4], "");
    }

    #[test]
    fn one_document_alone_has_no_context() {
        assert_eq!(contexts(&[doc("alone", Some("2023-05-08"))], SIDE), vec![String::new()]);
        assert!(contexts(&[], SIDE).is_empty());
    }

    #[test]
    fn documents_naming_no_source_and_no_day_lend_nothing() {
        let batch = [doc("one", None), doc("two", None), doc("three", None)];
        assert!(contexts(&batch, SIDE).iter().all(String::is_empty));
        let by_url = |text| Placed { text, source_url: Some("https://example.org/t"), source_date: None };
        assert_eq!(contexts(&[by_url("one"), by_url("two")], SIDE), ["two", "one"], "a URL alone names a source");
    }

    #[test]
    fn a_long_neighbour_lends_the_end_nearest_before_and_the_start_nearest_after() {
        let long_before = format!("{}END", "x".repeat(10_000));
        let long_after = format!("START{}", "y".repeat(10_000));
        let day = Some("2023-05-08");
        let batch = [doc(&long_before, day), doc("middle", day), doc(&long_after, day)];
        let got = contexts(&batch, SIDE);
        let (b, a) = got[1].split_once(' ').unwrap();
        assert!(b.ends_with("END") && b.chars().count() == LEND_CHARS);
        assert!(a.starts_with("START") && a.chars().count() == LEND_CHARS);
        assert!(got[1].chars().count() <= 20_000);
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
