//! rx door configurations and observations: `Door::parse` on any JSON,
//! `Door::observation` on any body, `observation_time` and `parse_instant`
//! on any `at`.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mneme_rx::door::{Door, FieldType, MAX_TIME_OFFSET_MS, observation_time, parse_instant};
use serde_json::{Value, json};

const NOW: i64 = 1_800_000_000_000;

fn test_door() -> Door {
    Door::parse(
        "coach",
        &json!({
            "name": "coach", "title": "Coach",
            "components": [{"name": "pace", "weight": 0.6}, {"name": "sleep", "weight": 0.4}],
            "signals": {"kind": "sql", "view": "v_coach"},
            "composite": {"kind": "flat"},
            "store": {"kind": "local"},
            "observations": {
                "session": {"minutes": "number", "note": "string?", "reps": "integer?", "done": "boolean?"},
                "position": {"symbol": "key", "value": "number"}
            }
        }),
    )
    .expect("the test door is valid")
}

/// Checks `body` against `door`'s kind `kind`, and what an `Ok` carries.
fn observe(door: &Door, kind: &str, body: &serde_json::Map<String, Value>) {
    let Ok((data, key)) = door.observation(kind, body) else { return };
    let fields = &door.observations[kind];
    let data = data.as_object().expect("the data is an object");
    for (k, v) in data {
        let (t, _) = FieldType::parse(&fields[k]).expect("a declared field");
        assert!(!v.is_null() || fields[k].ends_with('?'));
        assert_eq!(body.get(k), Some(v));
        if t == FieldType::Key {
            assert_eq!(key.as_deref(), v.as_str().map(str::trim));
        }
    }
    for (k, spec) in fields {
        assert!(spec.ends_with('?') || data.contains_key(k), "required `{k}`");
    }
    assert_eq!(key.is_some(), fields.values().any(|s| s == "key"));
}

fn instant(s: &str) {
    if let Some(ms) = parse_instant(s) {
        let days = mneme_knowledge::entry::parse_date(s).expect("an instant has a date");
        assert_eq!(ms.div_euclid(86_400_000), days, "{s}");
    }
}

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    instant(&text);
    let Ok(v) = serde_json::from_slice::<Value>(data) else { return };

    // A configuration.
    let name = v.get("name").and_then(Value::as_str).unwrap_or("coach");
    if let Ok(door) = Door::parse(name, &v) {
        door.check(name).expect("a parsed door passes its check");
        let again = Door::parse(name, &serde_json::to_value(&door).unwrap()).expect("its own JSON parses");
        assert_eq!(again, door);
        if let Some(body) = v.get("observation").and_then(Value::as_object) {
            for kind in door.observations.keys() {
                observe(&door, kind, body);
            }
        }
    }

    // An observation of the test door, with its `at`.
    let now = v.get("now").and_then(Value::as_i64).unwrap_or(NOW);
    if let Some(s) = v.as_str() {
        instant(s);
    }
    if let Ok(ms) = observation_time(Some(&v), now) {
        assert!(ms.abs_diff(now) <= MAX_TIME_OFFSET_MS as u64);
    }
    if let Some(body) = v.as_object() {
        let door = test_door();
        let kind = body.get("kind").and_then(Value::as_str).unwrap_or("session");
        observe(&door, kind, body);
        if let Ok(ms) = observation_time(body.get("at"), now) {
            assert!(ms.abs_diff(now) <= MAX_TIME_OFFSET_MS as u64, "{ms} vs {now}");
        }
    }
});
