//! The first export format, as version 2 reads it. Version 1 had no
//! `format` or `version`, wrote every blob as `<N bytes>` (so no
//! embedding), held the search index as its three tables, and held memory
//! only as the readable view. Migrating it: the search index's rows become
//! `search` items, its vectors and blocks are dropped (they are rebuilt),
//! each embedding is computed again from the text it was made from, and
//! the view's facts and gists become memory keys.

use serde_json::{Map, Value as J, json};

use crate::KvValue;

/// What a version-1 row becomes.
#[derive(Debug, Clone, PartialEq)]
pub enum Migrated {
    /// A row of the same table, its blobs to compute again
    /// ([`embedded_text`]).
    Row(Map<String, J>),
    /// A search item (without its embedding: [`search_text`]).
    Search(Map<String, J>),
    /// Rebuilt from the others, not restored.
    Dropped,
}

/// Tables version 1 wrote that a restore builds again instead of reading.
pub const REBUILT: [&str; 2] = ["search_vectors", "vector_blocks"];

pub fn migrate(table: &str, mut row: Map<String, J>) -> Migrated {
    match table {
        "search_index" => {
            row.remove("seq");
            row.remove("embedding");
            Migrated::Search(row)
        }
        t if REBUILT.contains(&t) => Migrated::Dropped,
        _ => Migrated::Row(row),
    }
}

fn text<'a>(row: &'a Map<String, J>, k: &str) -> &'a str {
    row.get(k).and_then(J::as_str).unwrap_or("")
}

/// The column of `table` that holds an embedding, and the text it was
/// computed from, read from the row as the writer built it (each writer's
/// text is named beside it). Exact for entries, episodes, concepts, drift
/// thoughts and tools; for a topic (a running mean of its messages) and a
/// reasoning pattern (a mean of the extractor's hints) the row keeps no
/// such history, and the name or description stands in for it.
pub fn embedded_text(table: &str, row: &Map<String, J>) -> Option<(&'static str, String)> {
    Some(match table {
        // components/knowledge/src/entries.rs `identity_text`.
        "knowledge_entries" => ("embedding", format!("{}. {}", text(row, "topic"), text(row, "position"))),
        // components/consolidate: name, then its definition.
        "semantic_concepts" => ("embedding", format!("{}: {}", text(row, "name"), text(row, "definition"))),
        // components/drift/src/engine.rs: the thought itself.
        "drift_log" => ("embedding", text(row, "content").to_string()),
        // components/act/src/tools.rs: the tool's description.
        "tools" => {
            let config: J = serde_json::from_str(text(row, "config")).unwrap_or(J::Null);
            ("embedding", config.get("description").and_then(J::as_str).unwrap_or("").trim().to_string())
        }
        // mneme-background/src/consolidate.rs: gist, intent's direction,
        // outcome and emotion's type, the non-empty ones joined by ". ".
        "episodes" => {
            let field = |col: &str, k: &str| -> String {
                serde_json::from_str::<J>(text(row, col))
                    .ok()
                    .and_then(|v| v.get(k).and_then(J::as_str).map(str::to_string))
                    .unwrap_or_default()
            };
            let parts = [
                text(row, "gist").to_string(),
                field("intent", "direction"),
                text(row, "outcome").to_string(),
                field("emotion", "type"),
            ];
            let kept: Vec<String> = parts.into_iter().filter(|p| !p.is_empty()).collect();
            ("embedding", kept.join(". "))
        }
        "topics" => ("embedding", text(row, "name").replace('-', " ")),
        "reasoning_patterns" => ("centroid", text(row, "description").to_string()),
        _ => return None,
    })
}

/// The text a search item's embedding is computed from: its title, body
/// and context, as a document's is (for an entry or an episode, whose own
/// text the item's body holds most of, a close stand-in).
pub fn search_text(item: &Map<String, J>) -> String {
    format!("{} {} {}", text(item, "title"), text(item, "body"), text(item, "context")).trim().to_string()
}

/// The memory keys of a version-1 view: each fact and gist as a record
/// live for its usual time from the export (the view kept no expiry), and
/// the indexes that list them. Focus sessions are not kept: a session of
/// minutes is over by the time a backup is restored.
pub fn memory_keys(view: &J, exported_at_ms: u64, fact_ttl_ms: u64, gist_ttl_ms: u64) -> Vec<(String, KvValue)> {
    let mut out = Vec::new();
    for (kind, ttl, id_field, score_field) in
        [("fact", fact_ttl_ms, "key", "updated_ms"), ("gist", gist_ttl_ms, "id", "created_ms")]
    {
        let Some(topics) = view.get(format!("{kind}s")).and_then(J::as_object) else { continue };
        for (topic, records) in topics {
            let mut index = Vec::new();
            for r in records.as_array().into_iter().flatten() {
                let Some(id) = r.get(id_field).and_then(J::as_str) else { continue };
                let stamped = json!({"value": r, "expires_ms": exported_at_ms + ttl});
                out.push((format!("{kind}:{topic}:{id}"), KvValue::Text(stamped.to_string())));
                index.push((id.to_string(), r.get(score_field).and_then(J::as_f64).unwrap_or(exported_at_ms as f64)));
            }
            if !index.is_empty() {
                out.push((format!("{kind}_index:{topic}"), KvValue::Sorted(index)));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obj(v: J) -> Map<String, J> {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn the_search_index_becomes_items_and_its_vectors_are_dropped() {
        let row =
            obj(json!({"seq": 4, "corpus": "document", "ref_id": "d", "title": "T", "body": "b", "created_ms": 1}));
        let Migrated::Search(item) = migrate("search_index", row) else { panic!("not an item") };
        assert!(!item.contains_key("seq"));
        assert_eq!(search_text(&item), "T b");
        assert_eq!(migrate("search_vectors", obj(json!({"seq": 4}))), Migrated::Dropped);
        assert_eq!(migrate("vector_blocks", obj(json!({}))), Migrated::Dropped);
        assert!(matches!(migrate("threads", obj(json!({"id": "t"}))), Migrated::Row(_)));
    }

    #[test]
    fn embeddings_are_computed_from_the_text_their_writer_used() {
        let e = obj(json!({"topic": "hiring", "position": "Hire for slope", "embedding": "<1536 bytes>"}));
        assert_eq!(embedded_text("knowledge_entries", &e), Some(("embedding", "hiring. Hire for slope".into())));
        let ep = obj(
            json!({"gist": "G", "intent": "{\"direction\":\"ask\"}", "outcome": "", "emotion": "{\"type\":\"calm\"}"}),
        );
        assert_eq!(embedded_text("episodes", &ep).unwrap().1, "G. ask. calm");
        let tool = obj(json!({"config": "{\"description\":\" Weather now \"}"}));
        assert_eq!(embedded_text("tools", &tool).unwrap().1, "Weather now");
        assert_eq!(embedded_text("reasoning_patterns", &obj(json!({"description": "d"}))).unwrap().0, "centroid");
        assert_eq!(embedded_text("threads", &obj(json!({}))), None);
    }

    #[test]
    fn the_views_facts_and_gists_become_keys_with_their_indexes() {
        let view = json!({
            "facts": {"home": [{"key": "city", "value": "Lisbon", "confidence": 0.9, "source": "s", "created_ms": 1, "updated_ms": 2}]},
            "gists": {"home": [{"id": "g1", "content": "c", "type": "t", "confidence": 8, "created_ms": 3}]},
            "focus": {"th": {}}
        });
        let keys = memory_keys(&view, 100, 10, 20);
        let names: Vec<&str> = keys.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(names, ["fact:home:city", "fact_index:home", "gist:home:g1", "gist_index:home"]);
        let KvValue::Text(t) = &keys[0].1 else { panic!() };
        assert_eq!(crate::expiry_of(t), Some(110));
        assert_eq!(keys[1].1, KvValue::Sorted(vec![("city".into(), 2.0)]));
        assert_eq!(keys[3].1, KvValue::Sorted(vec![("g1".into(), 3.0)]));
    }
}
