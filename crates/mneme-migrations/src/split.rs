//! Splits a migration file into single statements.
//!
//! Spin's `sqlite` and `postgres` interfaces execute one statement per call,
//! so a file is cut at top-level semicolons. The scanner understands what can
//! hide a semicolon: quoted strings and identifiers, `--` and `/* */`
//! comments, Postgres dollar quoting (`$$ … $$`, `$tag$ … $tag$`) and the
//! `BEGIN … END` body of a SQLite `CREATE TRIGGER`.

/// Returns the statements of `sql`, trimmed, without their final `;`, and
/// without statements that hold only comments or white space.
pub fn split_statements(sql: &str) -> Vec<String> {
    let b = sql.as_bytes();
    let mut out = Vec::new();
    let mut start = 0;
    let mut i = 0;
    let mut trigger_depth: i32 = 0;
    while i < b.len() {
        match b[i] {
            b'\'' | b'"' => i = skip_quoted(b, i),
            b'-' if b.get(i + 1) == Some(&b'-') => {
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
            }
            b'/' if b.get(i + 1) == Some(&b'*') => {
                i += 2;
                while i + 1 < b.len() && !(b[i] == b'*' && b[i + 1] == b'/') {
                    i += 1;
                }
                i += 2;
            }
            b'$' => i = skip_dollar(b, i),
            b';' if trigger_depth > 0 => i += 1,
            b';' => {
                push(&mut out, &sql[start..i]);
                i += 1;
                start = i;
            }
            c if c.is_ascii_alphabetic() && (i == 0 || !is_word(b[i - 1])) => {
                let end = (i..b.len()).find(|&j| !is_word(b[j])).unwrap_or(b.len());
                let word = &sql[i..end];
                if word.eq_ignore_ascii_case("BEGIN") && starts_trigger(&sql[start..i]) {
                    trigger_depth += 1;
                } else if word.eq_ignore_ascii_case("END") && trigger_depth > 0 {
                    trigger_depth -= 1;
                }
                i = end;
            }
            _ => i += 1,
        }
    }
    push(&mut out, &sql[start..]);
    out
}

fn is_word(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_'
}

fn starts_trigger(head: &str) -> bool {
    let words: Vec<String> = strip_comments(head).split_whitespace().take(4).map(str::to_ascii_uppercase).collect();
    words.first().is_some_and(|w| w == "CREATE") && words.iter().any(|w| w == "TRIGGER")
}

fn strip_comments(s: &str) -> String {
    s.lines().map(|l| l.split("--").next().unwrap_or("")).collect::<Vec<_>>().join("\n")
}

fn skip_quoted(b: &[u8], mut i: usize) -> usize {
    let q = b[i];
    i += 1;
    while i < b.len() {
        if b[i] == q {
            if b.get(i + 1) == Some(&q) {
                i += 2;
                continue;
            }
            return i + 1;
        }
        i += 1;
    }
    i
}

/// Skips `$tag$ … $tag$`; a `$` that does not open a dollar quote (such as a
/// `$1` parameter) is stepped over.
fn skip_dollar(b: &[u8], i: usize) -> usize {
    let tag_end = (i + 1..b.len()).find(|&j| !is_word(b[j])).unwrap_or(b.len());
    if b.get(tag_end) != Some(&b'$') || b.get(i + 1).is_some_and(u8::is_ascii_digit) {
        return i + 1;
    }
    let tag = &b[i..=tag_end];
    let mut j = tag_end + 1;
    while j + tag.len() <= b.len() {
        if &b[j..j + tag.len()] == tag {
            return j + tag.len();
        }
        j += 1;
    }
    b.len()
}

fn push(out: &mut Vec<String>, stmt: &str) {
    let s = stmt.trim();
    if !strip_block_comments(&strip_comments(s)).trim().is_empty() {
        out.push(s.to_string());
    }
}

fn strip_block_comments(s: &str) -> String {
    let mut out = String::new();
    let mut rest = s;
    while let Some(p) = rest.find("/*") {
        out.push_str(&rest[..p]);
        rest = rest[p..].find("*/").map_or("", |e| &rest[p + e + 2..]);
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::split_statements as split;

    #[test]
    fn splits_plain_statements() {
        assert_eq!(
            split("CREATE TABLE a(x INT);\nCREATE TABLE b(y INT);\n"),
            ["CREATE TABLE a(x INT)", "CREATE TABLE b(y INT)"]
        );
    }

    #[test]
    fn keeps_semicolons_inside_strings_and_comments() {
        let s = split("INSERT INTO t VALUES ('a;b', \"c;d\"); -- x;y\n/* p;q */ SELECT 1;");
        assert_eq!(s.len(), 2, "{s:?}");
        assert!(s[0].contains("'a;b'"));
    }

    #[test]
    fn keeps_dollar_quoted_bodies_whole() {
        let s = split("CREATE FUNCTION f() RETURNS int AS $body$ SELECT 1; $body$ LANGUAGE sql; SELECT $1;");
        assert_eq!(s.len(), 2, "{s:?}");
        assert!(s[0].ends_with("LANGUAGE sql"));
    }

    #[test]
    fn keeps_sqlite_trigger_bodies_whole() {
        let s = split(
            "CREATE TRIGGER t AFTER INSERT ON a BEGIN INSERT INTO b VALUES (1); UPDATE c SET x = 1; END;\nSELECT 1;",
        );
        assert_eq!(s.len(), 2, "{s:?}");
        assert!(s[0].ends_with("END"));
    }

    #[test]
    fn drops_comment_only_tails() {
        assert_eq!(split("SELECT 1; -- done\n"), ["SELECT 1"]);
        assert!(split("  /* nothing */ ").is_empty());
    }
}
