//! Tolerant JSON extraction from model text.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mneme_llm::{extract_json, extract_json_as, strip_reasoning};
use serde_json::Value;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let stripped = strip_reasoning(&text);
    assert!(stripped.len() <= text.len());

    let got = extract_json(&text);
    if let Ok(v) = &got {
        assert!(v.is_object() || v.is_array(), "{v}");
        // Extracting from its own serialisation reads it as serde_json
        // does (a string holding `<think>` is cut by design; serde_json's
        // default float parsing is not exact, so compare with it, not `v`).
        let s = v.to_string();
        if !s.contains("<think>") {
            assert_eq!(extract_json(&s).ok(), serde_json::from_str::<Value>(&s).ok());
        }
    }
    // A text that is a JSON object or array is extracted as itself.
    if !text.contains("<think>")
        && let Ok(v) = serde_json::from_str::<Value>(&text)
        && (v.is_object() || v.is_array())
    {
        assert_eq!(got, Ok(v));
    }
    let _ = extract_json_as::<std::collections::BTreeMap<String, String>>(&text);
    let _ = mneme_rx::artifact::parse_draft(&text);
});
