//! Query decoding and JSON request bodies: NUL never gets through, and
//! nothing a client sends panics.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mneme_http::{parse_json_body, parse_query};
use serde_json::Value;

fn has_nul(v: &Value) -> bool {
    match v {
        Value::String(s) => s.contains('\0'),
        Value::Array(a) => a.iter().any(has_nul),
        Value::Object(o) => o.iter().any(|(k, v)| k.contains('\0') || has_nul(v)),
        _ => false,
    }
}

#[derive(serde::Deserialize)]
#[allow(dead_code)]
struct Chat {
    text: String,
    thread_id: Option<String>,
    tags: Option<Vec<String>>,
}

fuzz_target!(|data: &[u8]| {
    let q = String::from_utf8_lossy(data);
    let pairs: Vec<(String, String)> =
        form_urlencoded::parse(q.as_bytes()).map(|(k, v)| (k.into_owned(), v.into_owned())).collect();
    let nul = pairs.iter().any(|(k, v)| k.contains('\0') || v.contains('\0'));
    match parse_query(&q) {
        Ok(map) => {
            assert!(!nul);
            assert!(map.iter().all(|(k, v)| !k.contains('\0') && !v.contains('\0')));
            // The last value of a repeated name wins.
            for (k, v) in &pairs {
                let last = pairs.iter().rev().find(|(k2, _)| k2 == k).map(|p| &p.1);
                assert_eq!(map.get(k), last, "{k}: {v}");
            }
            assert!(map.len() <= pairs.len());
        }
        Err(e) => {
            assert!(nul);
            assert_eq!(e.status, 400);
        }
    }

    let plain = serde_json::from_slice::<Value>(data).ok();
    match parse_json_body::<Value>(data) {
        Ok(v) => {
            assert!(!has_nul(&v));
            assert_eq!(Some(&v), plain.as_ref());
        }
        Err(e) => {
            assert_eq!(e.status, 400);
            assert!(matches!(e.code.as_str(), "invalid-utf8" | "invalid-json" | "invalid"), "{}", e.code);
            // Valid JSON is refused only for a NUL.
            if let Some(v) = &plain {
                assert!(has_nul(v), "{}", e.message);
            }
        }
    }
    if let Ok(c) = parse_json_body::<Chat>(data) {
        assert!(!c.text.contains('\0'));
    }
});
