//! Mneme's schema history and the pure rules for applying it.
//!
//! The SQL lives in `migrations/sqlite/` and `migrations/postgres/` as
//! numbered files (`0001_init.sql`); `build.rs` embeds them so the `store`
//! stage can migrate a database with no file system. This crate decides
//! *what* to apply (ordering, gaps, edited history) and splits files into
//! single statements, because both Spin's SQLite and Postgres interfaces run
//! one statement per call. It performs no I/O: the stage executes the plan.

mod split;

pub use split::split_statements;

/// A migration file as embedded by `build.rs`.
#[derive(Debug, Clone, Copy)]
pub struct RawMigration {
    /// File stem, such as `0001_init`.
    pub file: &'static str,
    pub sql: &'static str,
}

mod embedded {
    use super::RawMigration;
    include!(concat!(env!("OUT_DIR"), "/embedded.rs"));
}

/// Which SQL dialect a migration set is written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
}

/// One migration, parsed and checksummed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Migration {
    pub version: u32,
    pub name: String,
    pub sql: &'static str,
    /// FNV-1a 64 of the file text, recorded when applied so that an edit to
    /// an already-applied file is detected instead of silently ignored.
    pub checksum: String,
}

/// A row of the `schema_migrations` table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Applied {
    pub version: u32,
    pub checksum: String,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum MigrationError {
    #[error("migration file `{0}` must be named NNNN_name.sql")]
    BadFileName(String),
    #[error("migration versions must be 1, 2, 3… without gaps; found {found} where {expected} was expected")]
    Gap { expected: u32, found: u32 },
    #[error(
        "migration {version} was edited after it was applied (checksum {applied} in the database, {shipped} shipped); add a new migration instead"
    )]
    Edited { version: u32, applied: String, shipped: String },
    #[error("the database has migration {0}, which this build does not ship; run a newer build")]
    Unknown(u32),
}

/// The DDL that creates the bookkeeping table, per backend. Both dialects
/// accept this statement verbatim.
pub const CREATE_TABLE: &str = "CREATE TABLE IF NOT EXISTS schema_migrations (\
     version BIGINT PRIMARY KEY, name TEXT NOT NULL, checksum TEXT NOT NULL, applied_at_ms BIGINT NOT NULL)";

/// Every migration shipped for `backend`, in version order.
pub fn shipped(backend: Backend) -> Result<Vec<Migration>, MigrationError> {
    let raw = match backend {
        Backend::Sqlite => embedded::SQLITE,
        Backend::Postgres => embedded::POSTGRES,
    };
    parse(raw)
}

fn parse(raw: &[RawMigration]) -> Result<Vec<Migration>, MigrationError> {
    let mut out = Vec::with_capacity(raw.len());
    for (i, m) in raw.iter().enumerate() {
        let (num, name) = m
            .file
            .split_once('_')
            .filter(|(n, rest)| n.len() == 4 && n.bytes().all(|b| b.is_ascii_digit()) && !rest.is_empty())
            .ok_or_else(|| MigrationError::BadFileName(m.file.to_string()))?;
        let version: u32 = num.parse().map_err(|_| MigrationError::BadFileName(m.file.to_string()))?;
        let expected = i as u32 + 1;
        if version != expected {
            return Err(MigrationError::Gap { expected, found: version });
        }
        out.push(Migration { version, name: name.to_string(), sql: m.sql, checksum: checksum(m.sql) });
    }
    Ok(out)
}

/// FNV-1a 64-bit hash, hex encoded. Detects edits; it is not a security check.
pub fn checksum(text: &str) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in text.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    format!("{h:016x}")
}

/// The migrations still to apply, given what the database records.
///
/// Refuses to proceed when applied history disagrees with the shipped files,
/// since applying on top of an unknown or edited schema loses data silently.
pub fn plan<'a>(shipped: &'a [Migration], applied: &[Applied]) -> Result<Vec<&'a Migration>, MigrationError> {
    for a in applied {
        match shipped.iter().find(|m| m.version == a.version) {
            None => return Err(MigrationError::Unknown(a.version)),
            Some(m) if m.checksum != a.checksum => {
                return Err(MigrationError::Edited {
                    version: a.version,
                    applied: a.checksum.clone(),
                    shipped: m.checksum.clone(),
                });
            }
            Some(_) => {}
        }
    }
    Ok(shipped.iter().filter(|m| !applied.iter().any(|a| a.version == m.version)).collect())
}

/// Highest shipped version for `backend` (0 when none).
pub fn latest(backend: Backend) -> u32 {
    shipped(backend).map(|v| v.last().map_or(0, |m| m.version)).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(files: &[(&'static str, &'static str)]) -> Vec<RawMigration> {
        files.iter().map(|&(file, sql)| RawMigration { file, sql }).collect()
    }

    #[test]
    fn shipped_sets_are_parallel_across_backends() {
        let s = shipped(Backend::Sqlite).unwrap();
        let p = shipped(Backend::Postgres).unwrap();
        assert!(!s.is_empty(), "no sqlite migrations embedded");
        let names = |v: &[Migration]| v.iter().map(|m| (m.version, m.name.clone())).collect::<Vec<_>>();
        assert_eq!(names(&s), names(&p), "each migration must exist for both backends under the same name");
    }

    #[test]
    fn every_shipped_file_splits_into_statements() {
        for backend in [Backend::Sqlite, Backend::Postgres] {
            for m in shipped(backend).unwrap() {
                assert!(!split_statements(m.sql).is_empty(), "{backend:?} {} has no statements", m.name);
            }
        }
    }

    #[test]
    fn gap_in_versions_is_rejected() {
        let err = parse(&raw(&[("0001_a", "x"), ("0003_c", "y")])).unwrap_err();
        assert_eq!(err, MigrationError::Gap { expected: 2, found: 3 });
    }

    #[test]
    fn bad_file_names_are_rejected() {
        for bad in ["1_a", "0001", "0001_", "abcd_x"] {
            assert!(matches!(parse(&raw(&[(bad, "x")])), Err(MigrationError::BadFileName(_))), "{bad}");
        }
    }

    #[test]
    fn plan_skips_applied_and_keeps_order() {
        let ms = parse(&raw(&[("0001_a", "a"), ("0002_b", "b"), ("0003_c", "c")])).unwrap();
        let applied = [Applied { version: 1, checksum: checksum("a") }];
        let todo: Vec<u32> = plan(&ms, &applied).unwrap().iter().map(|m| m.version).collect();
        assert_eq!(todo, [2, 3]);
        let all = [1, 2, 3].map(|v| Applied { version: v, checksum: ms[v as usize - 1].checksum.clone() });
        assert!(plan(&ms, &all).unwrap().is_empty(), "fully applied history must plan nothing");
    }

    #[test]
    fn plan_refuses_edited_history() {
        let ms = parse(&raw(&[("0001_a", "a")])).unwrap();
        let err = plan(&ms, &[Applied { version: 1, checksum: checksum("other") }]).unwrap_err();
        assert!(matches!(err, MigrationError::Edited { version: 1, .. }));
    }

    #[test]
    fn plan_refuses_unknown_applied_version() {
        let ms = parse(&raw(&[("0001_a", "a")])).unwrap();
        let err = plan(&ms, &[Applied { version: 7, checksum: "x".into() }]).unwrap_err();
        assert_eq!(err, MigrationError::Unknown(7));
    }
}
