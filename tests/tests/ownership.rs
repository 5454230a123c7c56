//! Which feature writes which table (#52 item 1): every `INSERT`,
//! `UPDATE` and `DELETE` written out in the source of a crate or component
//! (outside its tests), its table, and the feature its file belongs to.
//! A table written by more than one feature is listed in [`KNOWN_SHARED`]
//! with its writers; a new second writer fails the test, and so does a
//! listed one that is gone (take it off, so it cannot come back). As
//! features move into homes of their own the list shrinks.
//!
//! Statements whose table is not written out (restore's and delete-all's,
//! which go over every table by name from `mneme-backup`'s lists) are not
//! counted: they are the two generic writers every data table has. The
//! hosts (`mneme-runner`, the migrations) are not features.

use mneme_e2e::rust_files;
use regex_lite::Regex;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The feature each source file with write statements belongs to, by the
/// longest matching prefix of its path. A file that writes and matches
/// none fails the test, so a new file is placed on purpose.
const FEATURES: &[(&str, &str)] = &[
    ("components/act/src/skills.rs", "conversation"),
    ("components/act/src/tools.rs", "tools"),
    ("components/commit/", "conversation"),
    ("components/consolidate/", "consolidation"),
    ("components/context/", "conversation"),
    ("components/drift/", "drift"),
    ("components/knowledge/", "knowledge"),
    ("components/memory/src/backup.rs", "restore"),
    ("components/memory/src/privacy.rs", "privacy"),
    ("components/memory/src/reminders.rs", "reminders"),
    ("components/router/src/regulator.rs", "regulator"),
    ("components/router/src/route.rs", "conversation"),
    ("components/rx/", "rx"),
    ("crates/mneme-rx/", "rx"),
    ("components/store/", "platform"),
    ("crates/mneme-store/", "platform"),
    ("components/tasks/", "tasks"),
    ("components/triage/", "conversation"),
    ("crates/mneme-substrate/src/events.rs", "platform"),
    ("crates/mneme-substrate/src/jobs.rs", "platform"),
    ("crates/mneme-substrate/src/schedule.rs", "platform"),
    ("crates/mneme-substrate/src/graph.rs", "memory"),
    ("crates/mneme-substrate/src/search.rs", "search"),
    ("crates/mneme-substrate/src/task_rows.rs", "tasks"),
    ("crates/mneme-substrate/src/wm.rs", "conversation"),
];

/// Not features: the hosts and the schema's own history.
const NOT_FEATURES: &[&str] = &["crates/mneme-runner/", "crates/mneme-migrations/"];

/// Tables more than one feature writes today, with their writers, sorted.
/// Read from the source by this test; #52 takes them off one by one. A
/// statement counts for the file it is written in: a feature that writes
/// through another's module (the ACT skill cancelling a task through
/// `task_rows`, say) counts as that module's feature, so this list is the
/// least of the sharing, not all of it (docs/research/issue-52-plan.md
/// §1.10 has the callers too).
const KNOWN_SHARED: &[(&str, &[&str])] = &[
    ("curiosity_threads", &["drift", "memory"]),
    ("drift_cooldowns", &["drift", "memory"]),
    ("drift_log", &["drift", "memory"]),
    ("engine_schedule", &["platform", "regulator"]),
    ("episodes", &["consolidation", "conversation", "privacy"]),
    ("exchanges", &["consolidation", "conversation", "privacy"]),
    ("jobs", &["consolidation", "platform", "privacy", "tools"]),
    ("knowledge_days", &["knowledge", "privacy", "restore"]),
    ("restores", &["privacy", "restore"]),
    ("routing_decisions", &["conversation", "regulator"]),
    ("scheduled_items", &["conversation", "reminders"]),
    ("search_corpora", &["privacy", "search"]),
    ("search_terms", &["privacy", "search"]),
    ("semantic_concepts", &["consolidation", "drift", "privacy"]),
    ("semantic_relationships", &["consolidation", "privacy"]),
    ("topics", &["conversation", "privacy"]),
    ("vector_centroids", &["privacy", "search"]),
    ("vector_training", &["privacy", "search"]),
    ("working_memory", &["conversation", "privacy"]),
];

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The text of a source file before its tests (`#[cfg(test)]` modules sit
/// at the end of a file here).
fn without_tests(text: &str) -> &str {
    text.find("#[cfg(test)]").map_or(text, |at| &text[..at])
}

/// The tables `text` writes in statements written out: `INSERT [OR …]
/// INTO t`, `UPDATE t SET`, `DELETE FROM t`, across line breaks. An
/// `ON CONFLICT … DO UPDATE SET` or `FOR UPDATE` names no table.
fn tables_written(text: &str) -> BTreeSet<String> {
    let re = Regex::new(
        r"\b(?:INSERT\s+(?:OR\s+[A-Z]+\s+)?INTO\s+([a-z_][a-z0-9_]*)|UPDATE\s+([a-z_][a-z0-9_]*)\s+SET\b|DELETE\s+FROM\s+([a-z_][a-z0-9_]*))",
    )
    .unwrap();
    re.captures_iter(text).filter_map(|c| c.get(1).or(c.get(2)).or(c.get(3)).map(|m| m.as_str().to_string())).collect()
}

fn feature_of(rel: &str) -> Option<&'static str> {
    FEATURES.iter().filter(|(prefix, _)| rel.starts_with(prefix)).max_by_key(|(p, _)| p.len()).map(|(_, f)| *f)
}

/// Every table's writing features, and the files that write outside any
/// feature.
fn writers() -> (BTreeMap<String, BTreeSet<&'static str>>, Vec<String>) {
    let root = repo();
    let mut files = Vec::new();
    for parent in ["crates", "components"] {
        for e in std::fs::read_dir(root.join(parent)).unwrap() {
            let src = e.unwrap().path().join("src");
            if src.is_dir() {
                rust_files(&src, &mut files);
            }
        }
    }
    let mut by_table: BTreeMap<String, BTreeSet<&'static str>> = BTreeMap::new();
    let mut unplaced = Vec::new();
    for f in files {
        let rel = f.strip_prefix(&root).unwrap().to_string_lossy().replace('\\', "/");
        if NOT_FEATURES.iter().any(|p| rel.starts_with(p)) {
            continue;
        }
        let text = std::fs::read_to_string(&f).unwrap();
        let tables = tables_written(without_tests(&text));
        if tables.is_empty() {
            continue;
        }
        match feature_of(&rel) {
            Some(feature) => {
                for t in tables {
                    by_table.entry(t).or_default().insert(feature);
                }
            }
            None => unplaced.push(rel),
        }
    }
    (by_table, unplaced)
}

#[test]
fn the_reader_finds_written_tables_across_lines() {
    let text = r#"
        sql.execute("INSERT INTO jobs (id) VALUES ($1) ON CONFLICT (id) DO UPDATE SET n = 1", &[]);
        sql.execute("UPDATE persistent_tasks
                     SET status = 'cancelled'", &[]);
        sql.execute("DELETE
            FROM drift_log WHERE id = $1", &[]);
        sql.execute("INSERT OR IGNORE INTO topics (t) VALUES ($1)", &[]);
        sql.query("SELECT * FROM events FOR UPDATE SKIP LOCKED", &[]);
        sql.execute(&format!("DELETE FROM {table}"), &[]);
    "#;
    let got: Vec<String> = tables_written(text).into_iter().collect();
    assert_eq!(got, ["drift_log", "jobs", "persistent_tasks", "topics"]);
    assert_eq!(without_tests("a\n#[cfg(test)]\nINSERT INTO x"), "a\n");
    assert_eq!(feature_of("components/act/src/skills.rs"), Some("conversation"));
    assert_eq!(feature_of("components/act/src/lib.rs"), None);
}

#[test]
fn no_table_gains_a_second_writing_feature() {
    let (by_table, unplaced) = writers();
    assert!(
        unplaced.is_empty(),
        "files that write tables but belong to no feature; add them to FEATURES: {unplaced:#?}"
    );
    let shared: BTreeMap<&str, Vec<&str>> =
        by_table.iter().filter(|(_, w)| w.len() > 1).map(|(t, w)| (t.as_str(), w.iter().copied().collect())).collect();
    let known: BTreeMap<&str, Vec<&str>> = KNOWN_SHARED.iter().map(|(t, w)| (*t, w.to_vec())).collect();
    let new: Vec<_> = shared.iter().filter(|(t, w)| known.get(*t) != Some(w)).collect();
    let gone: Vec<_> = known.iter().filter(|(t, w)| shared.get(*t) != Some(w)).collect();
    let today: String = shared.iter().map(|(t, w)| format!("    (\"{t}\", &{w:?}),\n")).collect();
    assert!(
        new.is_empty(),
        "tables with a new second writer (or new writers); give each table one home: {new:?}\ntoday:\n{today}"
    );
    assert!(
        gone.is_empty(),
        "listed shared tables whose writers changed; update KNOWN_SHARED: {gone:?}\ntoday:\n{today}"
    );
}
