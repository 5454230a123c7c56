//! Properties of the SSE parser and of JSON extraction (see
//! docs/FUZZING.md; `fuzz/fuzz_targets/{sse,json}.rs` search them longer).

use mneme_llm::{StreamEvent, StreamParser, extract_json, strip_reasoning};
use proptest::prelude::*;
use serde_json::{Value, json};

fn config() -> ProptestConfig {
    // 256 cases unless `PROPTEST_CASES` asks for more (or fewer).
    let cases = std::env::var("PROPTEST_CASES").ok().and_then(|c| c.parse().ok()).unwrap_or(256);
    ProptestConfig { cases, ..ProptestConfig::default() }
}

/// One line of a stream and the event it must give, if any.
fn line() -> impl Strategy<Value = (String, Option<StreamEvent>)> {
    prop_oneof![
        any::<String>().prop_map(|t| {
            let want = t.replace('\0', "");
            let line = format!("data: {}\n\n", json!({"choices": [{"delta": {"content": t}}]}));
            (line, (!want.is_empty()).then_some(StreamEvent::Delta(want)))
        }),
        "[^\n]{0,20}".prop_map(|c| (format!(": {c}\n"), None)),
        Just(("data: [DONE]\r\n".to_string(), Some(StreamEvent::Done))),
        "[a-z ]{1,10}"
            .prop_map(|m| { (format!("data: {}\n", json!({"error": {"message": m}})), Some(StreamEvent::Error(m))) }),
        Just(("event: x\nid: 1\n\n".to_string(), None)),
    ]
}

/// A JSON value without floats (whose text form serde_json does not read
/// back exactly).
fn value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<String>().prop_map(Value::from),
    ];
    leaf.prop_recursive(4, 32, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map(any::<String>(), inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn a_stream_cut_anywhere_gives_its_events(
        lines in prop::collection::vec(line(), 0..8),
        cuts in prop::collection::vec(1usize..64, 1..20),
    ) {
        let whole: String = lines.iter().map(|l| l.0.as_str()).collect();
        let want: Vec<StreamEvent> = lines.iter().filter_map(|l| l.1.clone()).collect();
        let mut p = StreamParser::new();
        prop_assert_eq!(&p.feed(whole.as_bytes()), &want);
        let mut p = StreamParser::new();
        let (mut got, mut at, mut i) = (Vec::new(), 0, 0);
        while at < whole.len() {
            let end = (at + cuts[i % cuts.len()]).min(whole.len());
            got.extend(p.feed(&whole.as_bytes()[at..end]));
            at = end;
            i += 1;
        }
        prop_assert_eq!(got, want);
    }

    #[test]
    fn the_stream_parser_never_panics(
        chunks in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..200), 0..10),
    ) {
        let mut p = StreamParser::new();
        for c in &chunks {
            for e in p.feed(c) {
                if let StreamEvent::Delta(d) = e {
                    prop_assert!(!d.is_empty() && !d.contains('\0'));
                }
            }
        }
    }

    #[test]
    fn json_is_found_inside_prose(
        v in value(),
        before in "[^\\[\\]{}<]{0,40}",
        after in "[^<]{0,40}",
        fence in any::<bool>(),
    ) {
        prop_assume!(v.is_object() || v.is_array());
        prop_assume!(!v.to_string().contains("<think>"));
        let body = if fence { format!("```json\n{v:#}\n```") } else { v.to_string() };
        let text = format!("{before}{body}{after}");
        prop_assert_eq!(extract_json(&text), Ok(v.clone()));
        let reasoned = format!("<think>maybe {{\"x\": 1}}</think>{text}");
        prop_assert_eq!(extract_json(&reasoned), Ok(v));
    }

    #[test]
    fn extraction_never_panics(text in any::<String>()) {
        prop_assert!(strip_reasoning(&text).len() <= text.len());
        if let Ok(v) = extract_json(&text) {
            prop_assert!(v.is_object() || v.is_array());
        }
    }

    #[test]
    fn extraction_takes_bracket_soup(text in "[\\[\\]{}\":,\\\\ a1]{0,80}") {
        let _ = extract_json(&text);
    }
}
