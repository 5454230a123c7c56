//! Properties of the artifact's frontmatter functions and of observation
//! validation (see docs/FUZZING.md; `fuzz/fuzz_targets/{frontmatter,door}.rs`
//! search them longer).

use mneme_rx::artifact::{check_counter_thesis, frontmatter_field, numbers_in, patch_frontmatter};
use mneme_rx::door::{Door, MAX_TIME_OFFSET_MS, observation_time, parse_instant};
use proptest::prelude::*;
use serde_json::{Value, json};

fn config() -> ProptestConfig {
    // 256 cases unless `PROPTEST_CASES` asks for more (or fewer).
    let cases = std::env::var("PROPTEST_CASES").ok().and_then(|c| c.parse().ok()).unwrap_or(256);
    ProptestConfig { cases, ..ProptestConfig::default() }
}

/// Markdown built from frontmatter-ish pieces, so that delimiters, keys and
/// line endings meet in every order.
fn markdown() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        Just("---\n".to_string()),
        Just("\n---\n".to_string()),
        Just("\r\n".to_string()),
        Just("\n".to_string()),
        Just("---\r\n".to_string()),
        Just("status: \"open\"".to_string()),
        Just("id: null".to_string()),
        Just(": x".to_string()),
        Just("## Counter-thesis\n- **Reject if:** a b\n".to_string()),
        "[a-z:\" 0-9.%-]{0,12}",
    ];
    prop::collection::vec(piece, 0..12).prop_map(|p| p.concat())
}

fn value() -> impl Strategy<Value = Value> {
    prop_oneof![Just(Value::Null), any::<i64>().prop_map(Value::from), any::<String>().prop_map(Value::from)]
}

fn door() -> Door {
    Door::parse(
        "coach",
        &json!({
            "name": "coach", "title": "Coach",
            "components": [{"name": "pace", "weight": 1.0}],
            "signals": {"kind": "sql", "view": "v_coach"},
            "composite": {"kind": "flat"},
            "store": {"kind": "local"},
            "observations": {"session": {"minutes": "number", "note": "string?", "n": "integer?"},
                             "position": {"symbol": "key", "value": "number"}}
        }),
    )
    .unwrap()
}

/// A JSON value of the kinds an observation body carries.
fn body_value() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>().prop_map(|x| json!(x)),
        "[ a-zA-Z0-9]{0,8}".prop_map(Value::from),
        Just(json!([1])),
    ]
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn frontmatter_patches_are_idempotent_and_read_back(
        md in markdown(),
        key in prop::sample::select(vec!["id", "status", "store_id"]),
        v in value(),
    ) {
        let once = patch_frontmatter(&md, key, &v);
        prop_assert_eq!(&patch_frontmatter(&once, key, &v), &once);
        let end = md.strip_prefix("---\n").and_then(|r| r.find("\n---\n"));
        match end {
            Some(end) => {
                prop_assert_eq!(frontmatter_field(&once, key), Some(v));
                prop_assert!(once.ends_with(&md[4 + end..]));
            }
            None => prop_assert_eq!(&once, &md),
        }
        let _ = check_counter_thesis(&md);
    }

    #[test]
    fn frontmatter_functions_never_panic(md in any::<String>(), key in any::<String>(), v in value()) {
        let _ = patch_frontmatter(&md, &key, &v);
        let _ = frontmatter_field(&md, &key);
        let _ = check_counter_thesis(&md);
        let _ = numbers_in(&md);
    }

    #[test]
    fn instants_read_back_as_written(ms in 0u64..253_402_300_800_000) {
        let written = mneme_time::calendar::utc_timestamp(ms);
        prop_assert_eq!(parse_instant(&written), Some((ms - ms % 1000) as i64));
        prop_assert_eq!(parse_instant(&written[..10]), Some((ms - ms % 86_400_000) as i64));
    }

    #[test]
    fn instants_never_panic(s in "[0-9T:.Z+ -]{0,30}|.{0,30}") {
        if let Some(ms) = parse_instant(&s) {
            prop_assert!(ms.abs() < 400 * 366 * 86_400_000 * 30);
        }
    }

    #[test]
    fn observation_times_stay_within_a_century(
        at in prop_oneof![
            any::<i64>().prop_map(Value::from),
            any::<f64>().prop_map(|x| json!(x)),
            "[0-9]{4}-[0-9]{2}-[0-9]{2}(T[0-9]{2}:[0-9]{2}:[0-9]{2}(\\.[0-9]{1,3})?Z)?".prop_map(Value::from),
            Just(Value::Null),
            Just(json!(true)),
        ],
        now in prop_oneof![Just(1_800_000_000_000i64), any::<i64>()],
    ) {
        if let Ok(ms) = observation_time(Some(&at), now) {
            prop_assert!(ms.abs_diff(now) <= MAX_TIME_OFFSET_MS as u64);
        }
    }

    #[test]
    fn observations_are_checked_against_their_kind(
        kind in prop::sample::select(vec!["session", "position", "other", "kind"]),
        body in prop::collection::btree_map(
            prop::sample::select(vec!["minutes", "note", "n", "symbol", "value", "kind", "key", "at", "x"]),
            body_value(),
            0..6,
        ),
    ) {
        let d = door();
        let body: serde_json::Map<String, Value> = body.into_iter().map(|(k, v)| (k.to_string(), v)).collect();
        if let Ok((data, key)) = d.observation(kind, &body) {
            let fields = &d.observations[kind];
            let data = data.as_object().unwrap();
            prop_assert!(data.keys().all(|k| fields.contains_key(k)));
            prop_assert!(fields.iter().all(|(k, s)| s.ends_with('?') || data.contains_key(k)));
            prop_assert_eq!(key.is_some(), kind == "position");
            for v in data.values() {
                if let Some(x) = v.as_f64() {
                    prop_assert!(x.is_finite() && x.abs() <= 1e12);
                }
            }
        }
    }

    #[test]
    fn near_valid_door_configurations_never_panic(
        name in "[a-z][a-z0-9-]{0,3}|doors|",
        title in "[A-Z][a-z]{0,3}|[a-z.]{0,3}",
        weights in prop::collection::vec(
            prop_oneof![Just(0.0), Just(0.5), Just(1.0), Just(-1.0), Just(f64::MAX), any::<f64>()],
            0..3,
        ),
        layered in any::<bool>(),
        spec in prop::sample::select(vec!["number", "key", "key?", "string?", "integer", "boolean?", "x", ""]),
        field in "kind|key|at|[a-z_]{1,4}",
        fire in prop_oneof![Just(0.5), Just(0.0), any::<f64>()],
    ) {
        let comps: Vec<Value> =
            weights.iter().enumerate().map(|(i, w)| json!({"name": format!("c{i}"), "weight": w})).collect();
        let mut c = json!({
            "name": name, "title": title, "components": comps,
            "signals": {"kind": "sql", "view": "v_x"},
            "composite": {"kind": "flat"}, "store": {"kind": "local"},
            "observations": {"obs": {field.clone(): spec}},
            "fire_threshold": fire,
        });
        if layered {
            c["auxiliary"] = json!([{"name": "aux", "view": "v_aux"}]);
            let view_weight = weights.first().copied().unwrap_or(0.9);
            c["composite"] = json!({"kind": "layered", "view_weight": view_weight, "aux": "aux", "aux_weight": 0.1});
        }
        if let Ok(d) = Door::parse(&name, &c) {
            let body: serde_json::Map<String, Value> = [(field, json!(1))].into_iter().collect();
            let _ = d.observation("obs", &body);
        }
    }
}
