//! Frontmatter: the rx artifact's read and patch functions on any markdown,
//! and the knowledge mirror's frontmatter read back by them.
#![no_main]

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use mneme_knowledge::entry::{Confidence, Entry, KnowledgeType, SourceType, Stability};
use mneme_rx::artifact::{check_counter_thesis, frontmatter_field, invented_numbers, numbers_in, patch_frontmatter};
use serde_json::{Value, json};

/// The keys the pipeline patches and reads.
const KEYS: [&str; 5] = ["id", "status", "store_id", "drift_score", "composer"];

#[derive(Arbitrary, Debug)]
enum V {
    Null,
    Bool(bool),
    Int(i64),
    Text(String),
}

#[derive(Arbitrary, Debug)]
struct In {
    markdown: String,
    any_key: String,
    key: u8,
    value: V,
    texts: [String; 6],
}

fuzz_target!(|i: In| {
    let md = i.markdown.as_str();
    let value = match i.value {
        V::Null => Value::Null,
        V::Bool(b) => json!(b),
        V::Int(n) => json!(n),
        V::Text(s) => json!(s),
    };

    // No panic on any markdown or key.
    let _ = frontmatter_field(md, &i.any_key);
    let _ = patch_frontmatter(md, &i.any_key, &value);
    let _ = check_counter_thesis(md);
    let _ = invented_numbers(md, &[0.5, 42.0]);
    for (token, x, _) in numbers_in(md) {
        assert!(x.is_finite() || token.len() > 300, "{token}");
    }

    // Patching a pipeline key: idempotent, readable back, body untouched.
    let key = KEYS[usize::from(i.key) % KEYS.len()];
    let once = patch_frontmatter(md, key, &value);
    assert_eq!(patch_frontmatter(&once, key, &value), once, "idempotent");
    let head_end = md.strip_prefix("---\n").and_then(|r| r.find("\n---\n"));
    match head_end {
        Some(end) => {
            assert_eq!(frontmatter_field(&once, key), Some(value.clone()), "{once:?}");
            assert!(once.ends_with(&md[4 + end..]), "the body is untouched");
        }
        None => assert_eq!(once, md),
    }

    // The knowledge mirror's frontmatter reads back field by field.
    let [topic, position, reasoning, tier, tag, url] = i.texts;
    let e = Entry {
        id: "KE-0001".into(),
        kind: KnowledgeType::Decision,
        topic,
        position,
        reasoning,
        reasoning_pattern: None,
        confidence: Confidence::Medium,
        stability: Stability::Evolving,
        tier,
        tags: vec![tag.clone(), "x".into()],
        source_type: SourceType::Chat,
        source_channel: None,
        source_date: "2026-01-01".into(),
        source_url: Some(url),
        corroboration_count: 1,
        last_corroborated_at: None,
        superseded_by: None,
        created_at: "2026-01-01T00:00:00Z".into(),
        extractor: "rules".into(),
    };
    let mirror = mneme_knowledge::mirror::render(&e, &[]);
    for (k, v) in [
        ("topic", json!(e.topic)),
        ("position", json!(e.position)),
        ("reasoning", json!(e.reasoning)),
        ("tier", json!(e.tier)),
        ("tags", json!([tag, "x"])),
        ("source_url", json!(e.source_url)),
        ("reasoning_pattern", Value::Null),
        ("corroboration_count", json!(1)),
        ("extractor", json!("rules")),
    ] {
        assert_eq!(frontmatter_field(&mirror, k), Some(v), "{k} in {mirror:?}");
    }
});
