//! Properties of query decoding and JSON body parsing (see
//! docs/FUZZING.md; `fuzz/fuzz_targets/http.rs` searches them longer).

use mneme_http::{parse_json_body, parse_query};
use proptest::prelude::*;
use serde_json::Value;

fn config() -> ProptestConfig {
    // 256 cases unless `PROPTEST_CASES` asks for more (or fewer).
    let cases = std::env::var("PROPTEST_CASES").ok().and_then(|c| c.parse().ok()).unwrap_or(256);
    ProptestConfig { cases, ..ProptestConfig::default() }
}

fn has_nul(v: &Value) -> bool {
    match v {
        Value::String(s) => s.contains('\0'),
        Value::Array(a) => a.iter().any(has_nul),
        Value::Object(o) => o.iter().any(|(k, v)| k.contains('\0') || has_nul(v)),
        _ => false,
    }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn a_query_never_yields_a_nul(q in "([a-z%0-9+=&]|%00|%[0-9a-fA-F]{2}|\u{0}|é){0,40}") {
        match parse_query(&q) {
            Ok(map) => prop_assert!(map.iter().all(|(k, v)| !k.contains('\0') && !v.contains('\0'))),
            Err(e) => {
                prop_assert_eq!(e.status, 400);
                prop_assert!(q.contains("%00") || q.contains('\0'));
            }
        }
    }

    #[test]
    fn any_query_decodes_or_is_a_400(q in any::<String>()) {
        if let Err(e) = parse_query(&q) {
            prop_assert_eq!(e.status, 400);
        }
    }

    #[test]
    fn a_body_is_json_without_nul_or_a_400(body in prop::collection::vec(any::<u8>(), 0..200)) {
        match parse_json_body::<Value>(&body) {
            Ok(v) => prop_assert!(!has_nul(&v)),
            Err(e) => prop_assert_eq!(e.status, 400),
        }
    }

    #[test]
    fn json_shaped_bodies(body in "([\\[\\]{}\":,0-9 a]|\\\\u0000|\\\\u00|\\\\){0,60}") {
        match parse_json_body::<Value>(body.as_bytes()) {
            Ok(v) => prop_assert!(!has_nul(&v)),
            Err(e) => {
                prop_assert_eq!(e.status, 400);
                if let Ok(v) = serde_json::from_str::<Value>(&body) {
                    prop_assert!(has_nul(&v), "valid JSON is refused only for a NUL");
                }
            }
        }
    }

    #[test]
    fn nesting_past_128_is_a_400_not_a_crash(depth in 0usize..3_000, object in any::<bool>(), nul in any::<bool>()) {
        let (open, close) = if object { ("{\"a\":", "}") } else { ("[", "]") };
        let inner = if nul { "\"\\u0000\"" } else { "1" };
        let body = format!("{}{inner}{}", open.repeat(depth), close.repeat(depth));
        let got = parse_json_body::<Value>(body.as_bytes());
        if depth >= 128 {
            prop_assert_eq!(got.unwrap_err().code, "invalid-json");
        } else if nul {
            prop_assert_eq!(got.unwrap_err().code, "invalid");
        } else {
            prop_assert!(got.is_ok());
        }
    }
}
