//! A door: one life area the principal gets recommendations for, defined
//! entirely by configuration (D-R1). Its components and weights, where its
//! drift signals come from (a SQL view or an HTTP source), its auxiliary
//! signals, its composite rule, its store, and the observations it accepts.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The longest door name.
pub const MAX_NAME: usize = 32;
/// A door has at most this many components.
pub const MAX_COMPONENTS: usize = 16;

/// Names a door may not take because a route already uses them
/// (`/rx/doors` lists the doors).
pub const RESERVED_NAMES: [&str; 1] = ["doors"];

/// A door name as it appears in `/rx/{door}`: lowercase ASCII letters,
/// digits and `-`, starting with a letter, and not reserved. Nothing else
/// ever reaches a path or a query.
pub fn valid_name(name: &str) -> bool {
    let b = name.as_bytes();
    !b.is_empty()
        && !RESERVED_NAMES.contains(&name)
        && b.len() <= MAX_NAME
        && b[0].is_ascii_lowercase()
        && b.iter().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
}

/// A SQL identifier taken from configuration (a view name): lowercase
/// letters, digits and `_`, starting with a letter.
pub fn valid_identifier(name: &str) -> bool {
    let b = name.as_bytes();
    !b.is_empty()
        && b.len() <= 63
        && b[0].is_ascii_lowercase()
        && b.iter().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'_')
}

/// The vault folder of a door (`Fitness` in `Fitness/rx/…`): a capital
/// letter then letters and digits, so it can never name another folder.
pub fn valid_title(title: &str) -> bool {
    let b = title.as_bytes();
    !b.is_empty() && b.len() <= MAX_NAME && b[0].is_ascii_uppercase() && b.iter().all(u8::is_ascii_alphanumeric)
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ComponentSpec {
    pub name: String,
    pub weight: f64,
    /// A phrase naming the signal for people ("session pace").
    #[serde(default)]
    pub label: Option<String>,
    /// What to do when this component drives the drift (the rule-based
    /// template's recommendation). No numbers: they come from the signals.
    #[serde(default)]
    pub advice: Option<String>,
    /// The vault search query when this component drives (step 6).
    #[serde(default)]
    pub evidence_query: Option<String>,
}

impl ComponentSpec {
    pub fn label(&self) -> String {
        self.label.clone().unwrap_or_else(|| self.name.replace('_', " "))
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase", deny_unknown_fields)]
pub enum SignalSource {
    /// Rows `(component, raw, normalised, weight, contribution)` of a view;
    /// `acute_view` rows `(name, at_ms)` are acute events.
    Sql { view: String, acute_view: Option<String> },
    /// `GET url` answers `{components: [...], acute?: [...], facts?: {...}}`.
    Http { url: String },
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuxSpec {
    /// The signal's name: the view's row of this name is its score.
    pub name: String,
    /// Rows `(name, raw, normalised)`.
    pub view: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase", deny_unknown_fields)]
pub enum Composite {
    /// The weighted average of the components.
    Flat,
    /// `view_weight × view drift + aux_weight × aux score` (fitness: 0.90
    /// and 0.10, D-022).
    Layered { view_weight: f64, aux: String, aux_weight: f64 },
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase", deny_unknown_fields)]
pub enum Store {
    /// This database's rec store.
    Local,
    /// An external rec store with Mneme's `/v1/rx/recs` API, written with
    /// the variable `rx_store_token` as `X-RX-Ingest-Token`.
    Http { url: String },
    /// The markdown artifact is the only record (steps 9 and 10 skip).
    Markdown,
}

impl Store {
    pub fn kind(&self) -> &'static str {
        match self {
            Store::Local => "local",
            Store::Http { .. } => "http",
            Store::Markdown => "markdown",
        }
    }
}

/// A field type of an observation kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldType {
    Number,
    Integer,
    Text,
    Boolean,
    /// A string that is also the observation's key: the newest observation
    /// per (door, kind, key) is the current one.
    Key,
}

impl FieldType {
    /// `number`, `integer`, `string`, `boolean` or `key`, with `?` for
    /// optional (a key is always required).
    pub fn parse(spec: &str) -> Option<(FieldType, bool)> {
        let (t, optional) = match spec.strip_suffix('?') {
            Some(t) => (t, true),
            None => (spec, false),
        };
        let t = match t {
            "number" => FieldType::Number,
            "integer" => FieldType::Integer,
            "string" => FieldType::Text,
            "boolean" => FieldType::Boolean,
            "key" if !optional => FieldType::Key,
            _ => return None,
        };
        Some((t, optional))
    }

    fn accepts(self, v: &serde_json::Value) -> bool {
        match self {
            FieldType::Number => v.as_f64().is_some_and(|x| x.is_finite() && x.abs() <= MAX_MAGNITUDE),
            FieldType::Integer => v.as_i64().is_some_and(|x| (x as f64).abs() <= MAX_MAGNITUDE),
            FieldType::Text => v.as_str().is_some_and(|s| s.chars().count() <= 2_000),
            FieldType::Boolean => v.is_boolean(),
            FieldType::Key => v.as_str().is_some_and(|s| !s.trim().is_empty() && s.chars().count() <= 200),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Door {
    pub name: String,
    pub title: String,
    pub components: Vec<ComponentSpec>,
    pub signals: SignalSource,
    #[serde(default)]
    pub auxiliary: Vec<AuxSpec>,
    pub composite: Composite,
    pub store: Store,
    /// Observation kinds and their fields (`{"workout": {"minutes": "number"}}`).
    #[serde(default)]
    pub observations: BTreeMap<String, BTreeMap<String, String>>,
    /// A component at or above this normalised value has fired.
    #[serde(default = "default_fire")]
    pub fire_threshold: f64,
}

fn default_fire() -> f64 {
    0.5
}

impl Door {
    /// Parses and checks a configuration; the message says what is wrong.
    pub fn parse(name: &str, config: &serde_json::Value) -> Result<Door, String> {
        let door: Door = serde_json::from_value(config.clone()).map_err(|e| format!("door configuration: {e}"))?;
        door.check(name)?;
        Ok(door)
    }

    pub fn check(&self, name: &str) -> Result<(), String> {
        if !valid_name(name) || self.name != name {
            return Err(format!("`name` must be `{name}`: lowercase letters, digits and -, at most {MAX_NAME}"));
        }
        if !valid_title(&self.title) {
            return Err("`title` is the vault folder: a capital letter, then letters and digits".into());
        }
        if self.components.is_empty() || self.components.len() > MAX_COMPONENTS {
            return Err(format!("a door has 1 to {MAX_COMPONENTS} components"));
        }
        for (i, c) in self.components.iter().enumerate() {
            if !valid_identifier(&c.name) {
                return Err(format!("component `{}`: lowercase letters, digits and _", c.name));
            }
            if !(c.weight.is_finite() && c.weight >= 0.0 && c.weight <= 1.0) {
                return Err(format!("component `{}`: the weight must be in [0, 1]", c.name));
            }
            if self.components[..i].iter().any(|p| p.name == c.name) {
                return Err(format!("component `{}` appears twice", c.name));
            }
            for text in [&c.advice, &c.label, &c.evidence_query].into_iter().flatten() {
                if text.chars().count() > 500 {
                    return Err(format!("component `{}`: texts are at most 500 characters", c.name));
                }
            }
        }
        if self.components.iter().map(|c| c.weight).sum::<f64>() <= 0.0 {
            return Err("the component weights must not all be zero".into());
        }
        match &self.signals {
            SignalSource::Sql { view, acute_view } => {
                for v in std::iter::once(view).chain(acute_view) {
                    if !valid_identifier(v) {
                        return Err(format!("view `{v}`: lowercase letters, digits and _"));
                    }
                }
            }
            SignalSource::Http { url } => check_url(url)?,
        }
        for a in &self.auxiliary {
            if !valid_identifier(&a.name) || !valid_identifier(&a.view) {
                return Err(format!("auxiliary `{}`: names and views are lowercase letters, digits and _", a.name));
            }
        }
        if let Composite::Layered { view_weight, aux, aux_weight } = &self.composite {
            if !self.auxiliary.iter().any(|a| &a.name == aux) {
                return Err(format!("the layered composite names `{aux}`, which is not an auxiliary signal"));
            }
            let ok = |w: &f64| w.is_finite() && (0.0..=1.0).contains(w);
            if !ok(view_weight) || !ok(aux_weight) || ((view_weight + aux_weight) - 1.0).abs() > 1e-9 {
                return Err("the layered weights are in [0, 1] and sum to 1".into());
            }
        }
        if let Store::Http { url } = &self.store {
            check_url(url)?;
        }
        for (kind, fields) in &self.observations {
            if !valid_identifier(kind) {
                return Err(format!("observation kind `{kind}`: lowercase letters, digits and _"));
            }
            for (field, spec) in fields {
                if !valid_identifier(field) || matches!(field.as_str(), "kind" | "key" | "at") {
                    return Err(format!(
                        "observation field `{kind}.{field}`: a lowercase identifier other than kind, key and at"
                    ));
                }
                if FieldType::parse(spec).is_none() {
                    return Err(format!(
                        "observation field `{kind}.{field}`: number, integer, string, boolean or key, with ? when optional"
                    ));
                }
            }
            if fields.values().filter(|s| s.as_str() == "key").count() > 1 {
                return Err(format!("observation kind `{kind}` has more than one key field"));
            }
        }
        if !(self.fire_threshold.is_finite() && self.fire_threshold > 0.0 && self.fire_threshold <= 1.0) {
            return Err("`fire_threshold` is in (0, 1]".into());
        }
        Ok(())
    }

    pub fn component(&self, name: &str) -> Option<&ComponentSpec> {
        self.components.iter().find(|c| c.name == name)
    }

    /// Checks an observation against its kind's fields; returns the data
    /// to store (the fields only) and its key, if the kind has one.
    pub fn observation(
        &self,
        kind: &str,
        body: &serde_json::Map<String, serde_json::Value>,
    ) -> Result<(serde_json::Value, Option<String>), String> {
        let Some(fields) = self.observations.get(kind) else {
            let kinds: Vec<&str> = self.observations.keys().map(String::as_str).collect();
            return Err(format!("`{}` takes observations of kind {}", self.name, kinds.join(", ")));
        };
        let mut data = serde_json::Map::new();
        for (k, v) in body {
            if matches!(k.as_str(), "kind" | "key" | "at") {
                continue;
            }
            let Some(spec) = fields.get(k) else {
                let names: Vec<&str> = fields.keys().map(String::as_str).collect();
                return Err(format!("unknown field `{k}` for `{kind}`; fields: {}", names.join(", ")));
            };
            let (t, optional) = FieldType::parse(spec).expect("checked with the door");
            if v.is_null() && optional {
                continue;
            }
            if !t.accepts(v) {
                let what = if t == FieldType::Key {
                    "a non-empty string of at most 200 characters"
                } else {
                    spec.trim_end_matches('?')
                };
                return Err(format!("`{k}` must be {what}"));
            }
            data.insert(k.clone(), v.clone());
        }
        for (k, spec) in fields {
            if !spec.ends_with('?') && !data.contains_key(k) {
                return Err(format!("`{k}` is required for `{kind}`"));
            }
        }
        let key = fields
            .iter()
            .find(|(_, s)| s.as_str() == "key")
            .and_then(|(k, _)| data.get(k))
            .and_then(|v| v.as_str())
            .map(|s| s.trim().to_string());
        Ok((serde_json::Value::Object(data), key))
    }
}

/// The largest magnitude an observation's number may have: far beyond any
/// count, duration or amount a door records, and far below where `f64`
/// arithmetic on a composite would lose meaning (`minutes: 1e308` was
/// accepted once).
pub const MAX_MAGNITUDE: f64 = 1e12;

/// How far from now an observation's time may lie: a hundred years either way.
pub const MAX_TIME_OFFSET_MS: i64 = 100 * 36_525 * crate::lifecycle::DAY_MS / 100;

/// An observation's `at`: absent or null is `now_ms`; else epoch
/// milliseconds or a date or RFC 3339 time ([`parse_instant`]), within
/// [`MAX_TIME_OFFSET_MS`] of `now_ms`.
pub fn observation_time(at: Option<&serde_json::Value>, now_ms: i64) -> Result<i64, String> {
    use serde_json::Value as J;
    let ms = match at {
        None | Some(J::Null) => return Ok(now_ms),
        Some(J::Number(n)) => n.as_i64().ok_or_else(|| "`at` in epoch milliseconds is a whole number".to_string())?,
        Some(J::String(s)) => {
            parse_instant(s).ok_or_else(|| format!("`at` `{s}` is not a date or an RFC 3339 time"))?
        }
        Some(_) => return Err("`at` is epoch milliseconds or an RFC 3339 time".into()),
    };
    if ms.abs_diff(now_ms) > MAX_TIME_OFFSET_MS as u64 {
        return Err("`at` must lie within 100 years of now".into());
    }
    Ok(ms)
}

/// An observation's time: `YYYY-MM-DD` (midnight UTC) or
/// `YYYY-MM-DDTHH:MM:SS[.fff]Z`, as epoch milliseconds.
pub fn parse_instant(s: &str) -> Option<i64> {
    let days = mneme_time::calendar::parse_date(s)?;
    let mut ms = days * crate::lifecycle::DAY_MS;
    if s.len() > 10 {
        let t = s.get(11..)?.trim_end_matches('Z');
        let t = t.split('.').next()?;
        let parts: Vec<i64> = t.split(':').map(|p| p.parse().ok()).collect::<Option<_>>()?;
        let [h, m, sec] = parts[..] else { return None };
        if !(0..24).contains(&h) || !(0..60).contains(&m) || !(0..60).contains(&sec) {
            return None;
        }
        ms += (h * 3600 + m * 60 + sec) * 1000;
    }
    Some(ms)
}

fn check_url(url: &str) -> Result<(), String> {
    if !(url.starts_with("http://") || url.starts_with("https://"))
        || url.len() > 2_048
        || url.contains(char::is_whitespace)
    {
        return Err(format!("`{url}` must be an http(s) URL"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn door() -> serde_json::Value {
        json!({
            "name": "coach", "title": "Coach",
            "components": [{"name": "pace", "weight": 0.6}, {"name": "sleep", "weight": 0.4}],
            "signals": {"kind": "sql", "view": "v_coach"},
            "composite": {"kind": "flat"},
            "store": {"kind": "local"},
            "observations": {"session": {"minutes": "number", "note": "string?"}}
        })
    }

    #[test]
    fn observation_numbers_and_times_are_bounded() {
        let d = Door::parse("coach", &door()).unwrap();
        let body = |v: serde_json::Value| v.as_object().unwrap().clone();
        assert!(d.observation("session", &body(json!({"minutes": 1e12}))).is_ok());
        assert!(d.observation("session", &body(json!({"minutes": -1e12}))).is_ok());
        assert!(d.observation("session", &body(json!({"minutes": 1.000001e12}))).is_err());
        assert!(d.observation("session", &body(json!({"minutes": 1e308}))).is_err());
        let now = 1_800_000_000_000;
        let century = MAX_TIME_OFFSET_MS;
        assert_eq!(observation_time(None, now), Ok(now));
        assert_eq!(observation_time(Some(&json!(null)), now), Ok(now));
        assert_eq!(observation_time(Some(&json!(now + century)), now), Ok(now + century));
        assert_eq!(observation_time(Some(&json!(now - century)), now), Ok(now - century));
        assert!(observation_time(Some(&json!(now + century + 1)), now).is_err());
        assert!(observation_time(Some(&json!(99_999_999_999_999_999_i64)), now).is_err());
        assert_eq!(observation_time(Some(&json!(-1)), now), Ok(-1), "1969 is within 100 years of 2027");
        assert!(observation_time(Some(&json!(now - century - 1)), now).is_err());
        assert!(observation_time(Some(&json!(1.5)), now).is_err());
        assert_eq!(observation_time(Some(&json!("2027-01-15")), now), Ok(parse_instant("2027-01-15").unwrap()));
        assert!(observation_time(Some(&json!("1899-12-31")), now).is_err());
        assert!(observation_time(Some(&json!(true)), now).is_err());
    }

    #[test]
    fn instants_are_dates_or_rfc3339() {
        assert_eq!(parse_instant("1970-01-02"), Some(86_400_000));
        assert_eq!(parse_instant("1970-01-01T01:00:30Z"), Some(3_630_000));
        assert_eq!(parse_instant("1970-01-01T01:00:30.250Z"), Some(3_630_000));
        assert_eq!(parse_instant("1970-01-01T25:00:00Z"), None);
        assert_eq!(parse_instant("yesterday"), None);
    }

    #[test]
    fn names_never_carry_path_characters() {
        for ok in ["fitness", "finance", "a", "door-2"] {
            assert!(valid_name(ok), "{ok}");
        }
        for bad in ["", "Fitness", "../etc", "a/b", "a.b", "2door", "a b", "fitness%2F", "doors", &"x".repeat(33)] {
            assert!(!valid_name(bad), "{bad}");
        }
        assert!(
            valid_title("Fitness") && !valid_title("../Fitness") && !valid_title("fitness") && !valid_title("Fit ness")
        );
    }

    #[test]
    fn a_configuration_is_checked() {
        assert!(Door::parse("coach", &door()).is_ok());
        assert!(Door::parse("other", &door()).unwrap_err().contains("`name`"));
        let mut d = door();
        d["signals"]["view"] = json!("v_coach; DROP TABLE rx_recs");
        assert!(Door::parse("coach", &d).unwrap_err().contains("view"));
        let mut d = door();
        d["composite"] = json!({"kind": "layered", "view_weight": 0.9, "aux": "body", "aux_weight": 0.1});
        assert!(Door::parse("coach", &d).unwrap_err().contains("auxiliary"));
        d["auxiliary"] = json!([{"name": "body", "view": "v_body"}]);
        assert!(Door::parse("coach", &d).is_ok());
        d["composite"]["aux_weight"] = json!(0.2);
        assert!(Door::parse("coach", &d).unwrap_err().contains("sum to 1"));
        let mut d = door();
        d["store"] = json!({"kind": "http", "url": "ftp://x"});
        assert!(Door::parse("coach", &d).is_err());
        let mut d = door();
        d["extra"] = json!(1);
        assert!(Door::parse("coach", &d).unwrap_err().contains("unknown field"));
    }

    /// The doors the migrations seed, with their weights.
    fn seeded(migration: &str) -> Vec<(Door, Vec<(String, f64)>)> {
        let doors: Vec<Door> = migration
            .lines()
            .filter_map(|l| l.strip_prefix("INSERT INTO rx_doors (name, config, updated_ms) VALUES ('"))
            .map(|rest| {
                let (name, rest) = rest.split_once("', '").unwrap();
                let config = rest.rsplit_once("', 0);").unwrap().0.replace("''", "'");
                Door::parse(name, &serde_json::from_str(&config).unwrap()).unwrap()
            })
            .collect();
        doors
            .into_iter()
            .map(|d| {
                let prefix = format!("INSERT INTO rx_weights (door, component, weight) VALUES ('{}', '", d.name);
                let w = migration
                    .lines()
                    .filter_map(|l| l.strip_prefix(prefix.as_str()))
                    .map(|r| {
                        let (c, w) = r.split_once("', ").unwrap();
                        (c.to_string(), w.trim_end_matches(");").parse().unwrap())
                    })
                    .collect();
                (d, w)
            })
            .collect()
    }

    #[test]
    fn the_three_shipped_doors_are_valid_and_agree_across_backends() {
        let sqlite = seeded(include_str!("../../../migrations/sqlite/0004_rx.sql"));
        let postgres = seeded(include_str!("../../../migrations/postgres/0004_rx.sql"));
        assert_eq!(sqlite, postgres);
        let names: Vec<&str> = sqlite.iter().map(|d| d.0.name.as_str()).collect();
        assert_eq!(names, vec!["fitness", "finance", "learning"]);
        for (door, weights) in &sqlite {
            let configured: Vec<(String, f64)> = door.components.iter().map(|c| (c.name.clone(), c.weight)).collect();
            assert_eq!(&configured, weights, "{}: rx_weights repeats the configuration", door.name);
            let sum: f64 = weights.iter().map(|w| w.1).sum();
            assert!((sum - 1.0).abs() < 1e-9, "{}: weights sum to 1", door.name);
            assert!(door.components.iter().all(|c| c.advice.is_some() && c.evidence_query.is_some()));
        }
        let fitness = &sqlite[0].0;
        assert_eq!(fitness.components.len(), 7);
        assert_eq!(
            fitness.composite,
            Composite::Layered { view_weight: 0.90, aux: "body_recomp".into(), aux_weight: 0.10 }
        );
        assert_eq!(sqlite[1].0.components.len(), 6);
        assert_eq!(sqlite[1].0.composite, Composite::Flat);
        assert_eq!(sqlite[2].0.store, Store::Markdown);
    }

    #[test]
    fn observations_follow_their_kind() {
        let d = Door::parse("coach", &door()).unwrap();
        let body = |v: serde_json::Value| v.as_object().unwrap().clone();
        assert_eq!(d.observation("session", &body(json!({"minutes": 30}))).unwrap(), (json!({"minutes": 30}), None));
        assert!(d.observation("session", &body(json!({}))).unwrap_err().contains("required"));
        assert!(d.observation("session", &body(json!({"minutes": "30"}))).unwrap_err().contains("number"));
        assert!(d.observation("session", &body(json!({"minutes": 3, "x": 1}))).unwrap_err().contains("unknown field"));
        assert!(d.observation("run", &body(json!({}))).unwrap_err().contains("session"));
        assert!(d.observation("session", &body(json!({"minutes": 3, "note": null}))).is_ok());
        let mut c = door();
        c["observations"]["position"] = json!({"symbol": "key", "value": "number"});
        let d = Door::parse("coach", &c).unwrap();
        let (data, key) = d.observation("position", &body(json!({"symbol": "AAPL", "value": 3}))).unwrap();
        assert_eq!((data["symbol"].clone(), key), (json!("AAPL"), Some("AAPL".into())));
        assert!(d.observation("position", &body(json!({"symbol": " ", "value": 3}))).is_err());
        c["observations"]["position"]["other"] = json!("key");
        assert!(Door::parse("coach", &c).unwrap_err().contains("more than one key"));
        c["observations"]["position"] = json!({"symbol": "key?"});
        assert!(Door::parse("coach", &c).is_err());
    }
}
