//! The value envelope that lets Spin key-value stand in for Redis.
//!
//! Spin's key-value interface stores opaque bytes with no expiry and no
//! structure, so each value carries a small header: one byte for its kind
//! (string, list or sorted set) and eight for its expiry (Unix ms, 0 = none).
//! Lists are length-prefixed items; sorted sets are `(score, member)` pairs
//! kept ordered as Redis orders them (score, then member bytes). An expired
//! value reads as absent, exactly as Redis would report it.
//!
//! Emulated lists and sets are read-modify-write: two instances writing the
//! same key at the same instant keep the last write. State that must never
//! lose a concurrent write belongs in SQL (see docs/DECISIONS.md).

/// What a key holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    String = 0,
    List = 1,
    ZSet = 2,
}

/// A decoded value.
#[derive(Debug, Clone, PartialEq)]
pub enum Entry {
    String(Vec<u8>),
    List(Vec<Vec<u8>>),
    ZSet(Vec<(f64, String)>),
}

impl Entry {
    pub fn kind(&self) -> Kind {
        match self {
            Entry::String(_) => Kind::String,
            Entry::List(_) => Kind::List,
            Entry::ZSet(_) => Kind::ZSet,
        }
    }
}

const HEADER: usize = 9;

/// Encodes `entry` with its expiry (`0` = never).
pub fn encode(entry: &Entry, expires_at_ms: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER + 16);
    out.push(entry.kind() as u8);
    out.extend_from_slice(&expires_at_ms.to_be_bytes());
    match entry {
        Entry::String(b) => out.extend_from_slice(b),
        Entry::List(items) => {
            for it in items {
                out.extend_from_slice(&(it.len() as u32).to_be_bytes());
                out.extend_from_slice(it);
            }
        }
        Entry::ZSet(members) => {
            for (score, m) in members {
                out.extend_from_slice(&score.to_be_bytes());
                out.extend_from_slice(&(m.len() as u32).to_be_bytes());
                out.extend_from_slice(m.as_bytes());
            }
        }
    }
    out
}

/// Decodes a stored value. Returns `None` when it has expired at `now_ms`,
/// and an error for bytes this codec did not write.
pub fn decode(bytes: &[u8], now_ms: u64) -> Result<Option<(Entry, u64)>, String> {
    if bytes.len() < HEADER {
        return Err(format!("value of {} bytes is shorter than the envelope header", bytes.len()));
    }
    let expires = u64::from_be_bytes(bytes[1..HEADER].try_into().unwrap());
    if expires != 0 && expires <= now_ms {
        return Ok(None);
    }
    let body = &bytes[HEADER..];
    let entry = match bytes[0] {
        0 => Entry::String(body.to_vec()),
        1 => Entry::List(read_items(body)?),
        2 => {
            let mut out = Vec::new();
            let mut rest = body;
            while !rest.is_empty() {
                if rest.len() < 12 {
                    return Err("truncated sorted-set member".into());
                }
                let score = f64::from_be_bytes(rest[..8].try_into().unwrap());
                let len = u32::from_be_bytes(rest[8..12].try_into().unwrap()) as usize;
                let m = rest.get(12..12 + len).ok_or("truncated sorted-set member")?;
                out.push((score, String::from_utf8(m.to_vec()).map_err(|_| "non-UTF-8 member")?));
                rest = &rest[12 + len..];
            }
            Entry::ZSet(out)
        }
        k => return Err(format!("unknown value kind {k}")),
    };
    Ok(Some((entry, expires)))
}

fn read_items(mut rest: &[u8]) -> Result<Vec<Vec<u8>>, String> {
    let mut out = Vec::new();
    while !rest.is_empty() {
        if rest.len() < 4 {
            return Err("truncated list item".into());
        }
        let len = u32::from_be_bytes(rest[..4].try_into().unwrap()) as usize;
        out.push(rest.get(4..4 + len).ok_or("truncated list item")?.to_vec());
        rest = &rest[4 + len..];
    }
    Ok(out)
}

/// Resolves Redis-style inclusive `start..=stop` indexes (negative counts from
/// the end) against a list of `len` items; `None` when the range is empty.
pub fn redis_range(len: usize, start: i64, stop: i64) -> Option<(usize, usize)> {
    let n = len as i64;
    let s = if start < 0 { (n + start).max(0) } else { start };
    let e = if stop < 0 { n + stop } else { stop.min(n - 1) };
    (s <= e && s < n && e >= 0).then_some((s as usize, e as usize))
}

/// Inserts or rescored `member`, keeping Redis order (score, then member).
pub fn zadd(set: &mut Vec<(f64, String)>, score: f64, member: &str) -> bool {
    let existed = set.iter().position(|(_, m)| m == member).map(|i| set.remove(i)).is_some();
    let at = set.partition_point(|(s, m)| (*s, m.as_str()) < (score, member));
    set.insert(at, (score, member.to_string()));
    !existed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roundtrips_every_kind() {
        for e in [
            Entry::String(b"hello".to_vec()),
            Entry::List(vec![b"a".to_vec(), vec![], b"ccc".to_vec()]),
            Entry::ZSet(vec![(1.5, "x".into()), (2.0, "y".into())]),
        ] {
            assert_eq!(decode(&encode(&e, 0), 5).unwrap(), Some((e.clone(), 0)));
        }
    }

    #[test]
    fn expiry_is_exclusive_of_the_deadline() {
        let v = encode(&Entry::String(b"x".to_vec()), 1_000);
        assert!(decode(&v, 999).unwrap().is_some(), "alive 1 ms before expiry");
        assert!(decode(&v, 1_000).unwrap().is_none(), "gone at the expiry instant");
    }

    #[test]
    fn foreign_bytes_are_an_error_not_a_value() {
        assert!(decode(b"short", 0).is_err());
        assert!(decode(&[9, 0, 0, 0, 0, 0, 0, 0, 0], 0).is_err());
    }

    #[test]
    fn redis_range_matches_redis_semantics() {
        assert_eq!(redis_range(5, 0, -1), Some((0, 4)));
        assert_eq!(redis_range(5, -2, -1), Some((3, 4)));
        assert_eq!(redis_range(5, 1, 100), Some((1, 4)));
        assert_eq!(redis_range(5, 3, 1), None);
        assert_eq!(redis_range(0, 0, -1), None);
        assert_eq!(redis_range(5, -100, 0), Some((0, 0)));
    }

    #[test]
    fn zadd_orders_by_score_then_member_and_rescores() {
        let mut z = Vec::new();
        assert!(zadd(&mut z, 2.0, "b"));
        assert!(zadd(&mut z, 1.0, "c"));
        assert!(zadd(&mut z, 2.0, "a"));
        assert!(!zadd(&mut z, 0.5, "b"), "rescoring is not a new member");
        let order: Vec<&str> = z.iter().map(|(_, m)| m.as_str()).collect();
        assert_eq!(order, ["b", "c", "a"]);
    }
}
