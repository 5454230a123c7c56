//! The markdown mirror of an entry: YAML frontmatter carrying every field
//! of the seed's table, then the position and reasoning as prose. The row is
//! the source of truth; the mirror is rendered from it on every read, so it
//! can never drift (D-K7).

use crate::entry::Entry;

/// A YAML scalar: JSON's double-quoted string is valid YAML and escapes
/// everything that could break the frontmatter.
fn scalar(s: &str) -> String {
    serde_json::to_string(s).expect("a string serialises")
}

fn opt(s: &Option<String>) -> String {
    s.as_deref().map_or_else(|| "null".to_string(), scalar)
}

/// The path of an entry's file inside the vault.
pub fn path(id: &str) -> String {
    format!("Knowledge/{id}.md")
}

/// The entry as a markdown document. `supersedes` lists the entries this
/// one replaced, for the history line.
pub fn render(e: &Entry, supersedes: &[String]) -> String {
    let tags = e.tags.iter().map(|t| scalar(t)).collect::<Vec<_>>().join(", ");
    let mut m = String::from("---\n");
    let mut field = |k: &str, v: String| m.push_str(&format!("{k}: {v}\n"));
    field("id", scalar(&e.id));
    field("type", e.kind.as_str().into());
    field("topic", scalar(&e.topic));
    field("position", scalar(&e.position));
    field("reasoning", scalar(&e.reasoning));
    field("reasoning_pattern", opt(&e.reasoning_pattern));
    field("confidence", e.confidence.as_str().into());
    field("stability", e.stability.as_str().into());
    field("tier", scalar(&e.tier));
    field("tags", format!("[{tags}]"));
    field("source_type", e.source_type.as_str().into());
    field("source_channel", opt(&e.source_channel));
    field("source_date", scalar(&e.source_date));
    field("source_url", opt(&e.source_url));
    field("corroboration_count", e.corroboration_count.to_string());
    field("last_corroborated_at", opt(&e.last_corroborated_at));
    field("superseded_by", opt(&e.superseded_by));
    field("created_at", scalar(&e.created_at));
    field("extractor", scalar(&e.extractor));
    m.push_str("---\n\n");
    m.push_str(&format!("# {}\n\n", e.topic.replace('\n', " ")));
    if let Some(by) = &e.superseded_by {
        m.push_str(&format!("> Superseded by [[{by}]]: the principal changed their mind.\n\n"));
    }
    m.push_str(&format!("{}\n\n## Why\n\n{}\n", e.position, e.reasoning));
    if let Some(p) = &e.reasoning_pattern {
        m.push_str(&format!("\nReasoning pattern: `{p}`.\n"));
    }
    if !supersedes.is_empty() {
        let links: Vec<String> = supersedes.iter().map(|s| format!("[[{s}]]")).collect();
        m.push_str(&format!("\nReplaces {}.\n", links.join(", ")));
    }
    m
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::entry::{Confidence, KnowledgeType, SourceType, Stability};

    #[test]
    fn frontmatter_carries_every_field_safely_quoted() {
        let e = Entry {
            id: "KE-0007".into(),
            kind: KnowledgeType::Standard,
            topic: "Fridays: \"no deploys\"".into(),
            position: "Never deploy on a Friday".into(),
            reasoning: "Nobody is around\n---\nto fix it".into(),
            reasoning_pattern: Some("second-order-effects".into()),
            confidence: Confidence::High,
            stability: Stability::Evergreen,
            tier: "public".into(),
            tags: vec!["deploys".into(), "risk".into()],
            source_type: SourceType::Meeting,
            source_channel: None,
            source_date: "2026-11-20".into(),
            source_url: Some("https://meet.example/abc".into()),
            corroboration_count: 2,
            last_corroborated_at: Some("2026-11-21T10:00:00Z".into()),
            superseded_by: Some("KE-0009".into()),
            created_at: "2026-11-20T09:00:00Z".into(),
            extractor: "rules".into(),
        };
        let md = render(&e, &["KE-0003".into()]);
        let front = md.split("---\n").nth(1).unwrap();
        for key in [
            "id",
            "type",
            "topic",
            "position",
            "reasoning",
            "reasoning_pattern",
            "confidence",
            "stability",
            "tier",
            "tags",
            "source_type",
            "source_channel",
            "source_date",
            "source_url",
            "corroboration_count",
            "last_corroborated_at",
            "superseded_by",
            "created_at",
        ] {
            assert!(front.lines().any(|l| l.starts_with(&format!("{key}: "))), "{key} missing");
        }
        assert!(front.contains(r#"topic: "Fridays: \"no deploys\"""#));
        assert!(front.contains(r#"reasoning: "Nobody is around\n---\nto fix it""#), "no raw newline in a scalar");
        assert!(front.contains("source_channel: null"));
        assert!(front.contains(r#"tags: ["deploys", "risk"]"#));
        assert!(md.contains("Superseded by [[KE-0009]]") && md.contains("Replaces [[KE-0003]]"));
        assert_eq!(path("KE-0007"), "Knowledge/KE-0007.md");
    }
}
