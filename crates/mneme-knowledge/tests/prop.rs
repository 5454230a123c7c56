//! Properties of the parsers that read outside input (see docs/FUZZING.md;
//! the cargo-fuzz targets in `fuzz/` search the same properties longer).

use mneme_knowledge::entry::{Confidence, Entry, KnowledgeType, SourceType, Stability};
use mneme_knowledge::{mirror, tar};
use proptest::prelude::*;

fn config() -> ProptestConfig {
    // 256 cases unless `PROPTEST_CASES` asks for more (or fewer).
    let cases = std::env::var("PROPTEST_CASES").ok().and_then(|c| c.parse().ok()).unwrap_or(256);
    ProptestConfig { cases, ..ProptestConfig::default() }
}

/// Vault-like paths: directories and names, short and past ustar's 100.
fn path() -> impl Strategy<Value = String> {
    prop::collection::vec("[A-Za-z0-9_.é -]{1,60}", 1..5).prop_map(|s| s.join("/"))
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn tar_reads_back_what_it_writes(
        files in prop::collection::vec((path(), prop::collection::vec(any::<u8>(), 0..1500), any::<u64>()), 0..5)
    ) {
        let list: Vec<tar::File> =
            files.iter().map(|(p, c, t)| tar::File { path: p, contents: c, mtime_secs: *t }).collect();
        if let Ok(a) = tar::archive(&list) {
            prop_assert_eq!(a.len() % 512, 0);
            let want: Vec<(String, Vec<u8>)> = files.iter().map(|(p, c, _)| (p.clone(), c.clone())).collect();
            prop_assert_eq!(tar::entries(&a).unwrap(), want);
            // Any cut of it is refused or reads a prefix of the files.
            for cut in [1, 511, 512, 513, a.len() / 2] {
                if let Ok(got) = tar::entries(&a[..a.len().saturating_sub(cut)]) {
                    prop_assert!(got.len() <= files.len());
                }
            }
        } else {
            prop_assert!(files.iter().any(|(p, _, _)| p.len() > 100));
        }
    }

    #[test]
    fn tar_reader_never_panics(bytes in prop::collection::vec(any::<u8>(), 0..3000)) {
        let _ = tar::entries(&bytes);
    }

    #[test]
    fn tar_reader_takes_damaged_headers(
        contents in prop::collection::vec(any::<u8>(), 0..700),
        at in 0usize..512,
        byte in any::<u8>(),
    ) {
        let mut a = tar::archive(&[tar::File { path: "a.md", contents: &contents, mtime_secs: 1 }]).unwrap();
        a[at] = byte;
        let _ = tar::entries(&a);
    }

    #[test]
    fn the_mirror_frontmatter_holds_one_line_per_field(
        topic in any::<String>(),
        position in any::<String>(),
        reasoning in any::<String>(),
        tags in prop::collection::vec(any::<String>(), 0..3),
        url in proptest::option::of(any::<String>()),
    ) {
        let e = Entry {
            id: "KE-0001".into(),
            kind: KnowledgeType::Framework,
            topic: topic.clone(),
            position: position.clone(),
            reasoning: reasoning.clone(),
            reasoning_pattern: None,
            confidence: Confidence::High,
            stability: Stability::Stable,
            tier: "public".into(),
            tags: tags.clone(),
            source_type: SourceType::Chat,
            source_channel: None,
            source_date: "2026-01-01".into(),
            source_url: url.clone(),
            corroboration_count: 0,
            last_corroborated_at: None,
            superseded_by: None,
            created_at: "2026-01-01T00:00:00Z".into(),
            extractor: "rules".into(),
        };
        let md = mirror::render(&e, &[]);
        let rest = md.strip_prefix("---\n").unwrap();
        let head = &rest[..rest.find("\n---\n").unwrap()];
        let lines: Vec<&str> = head.split('\n').collect();
        prop_assert_eq!(lines.len(), 19, "{}", head);
        let field = |k: &str| {
            let line = lines.iter().find(|l| l.starts_with(&format!("{k}: "))).unwrap();
            serde_json::from_str::<serde_json::Value>(&line[k.len() + 2..]).unwrap()
        };
        prop_assert_eq!(field("topic"), serde_json::json!(topic));
        prop_assert_eq!(field("position"), serde_json::json!(position));
        prop_assert_eq!(field("reasoning"), serde_json::json!(reasoning));
        prop_assert_eq!(field("tags"), serde_json::json!(tags));
        prop_assert_eq!(field("source_url"), serde_json::json!(url));
    }
}
