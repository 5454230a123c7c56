//! Steps 1–5: the drift signals as read (verbatim, D-011), the composite,
//! the dedup predicate (D-012) and the driving signal, plus the artifact's
//! confidence. Every number that leaves here is either a signal value as
//! read or a composite rounded to [`DRIFT_DECIMALS`].

use crate::door::{Composite, Door};
use serde::{Deserialize, Serialize};

/// A prior open rec younger than this (strictly) can absorb a run (D-012).
pub const DEDUP_WINDOW_MS: i64 = 48 * 3_600_000;
/// …when the drift is within this of the prior's (inclusive).
pub const DEDUP_DRIFT: f64 = 0.05;
/// The composite is rounded to this many decimals before it is compared or
/// written.
pub const DRIFT_DECIMALS: i32 = 4;

/// One component as the signal source reported it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Component {
    pub component: String,
    /// `None` when the source has no data for it.
    pub raw: Option<f64>,
    pub normalised: f64,
    pub weight: f64,
    pub contribution: f64,
}

/// An acute event (a high-severity alert, an injury check-in).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Acute {
    pub name: String,
    pub at_ms: i64,
}

/// An auxiliary signal row.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AuxRow {
    pub name: String,
    pub raw: Option<f64>,
    pub normalised: f64,
}

/// What step 1 read.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Signals {
    pub components: Vec<Component>,
    #[serde(default)]
    pub acute: Vec<Acute>,
    #[serde(default)]
    pub facts: serde_json::Value,
}

/// Checks a signal source's answer: every configured component once, each
/// number finite, normalised values in [0, 1]. Values are kept as read.
pub fn check(door: &Door, s: &Signals) -> Result<(), String> {
    for spec in &door.components {
        let n = s.components.iter().filter(|c| c.component == spec.name).count();
        if n != 1 {
            return Err(format!("the signal source reported `{}` {n} times (expected once)", spec.name));
        }
    }
    for c in &s.components {
        if door.component(&c.component).is_none() {
            return Err(format!("the signal source reported `{}`, which the door does not configure", c.component));
        }
        let finite =
            [c.normalised, c.weight, c.contribution].iter().all(|x| x.is_finite()) && c.raw.is_none_or(f64::is_finite);
        if !finite || !(0.0..=1.0).contains(&c.normalised) || c.weight < 0.0 {
            return Err(format!("`{}`: values must be finite, normalised in [0, 1], weight ≥ 0", c.component));
        }
    }
    Ok(())
}

pub fn round(x: f64, decimals: i32) -> f64 {
    let f = 10f64.powi(decimals);
    (x * f).round() / f
}

/// Step 3's result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CompositeScore {
    pub drift_score: f64,
    /// The weighted average of the view's components.
    pub view_drift: f64,
    /// `(name, score, weight)` of the second layer, if the door has one.
    pub layer: Option<(String, f64, f64)>,
}

/// Step 3: the weighted average of the components (the sum of
/// contributions over the sum of weights), then the door's second layer.
pub fn composite(door: &Door, s: &Signals, aux: &[AuxRow]) -> Result<CompositeScore, String> {
    let weights: f64 = s.components.iter().map(|c| c.weight).sum();
    let view = if weights > 0.0 { s.components.iter().map(|c| c.contribution).sum::<f64>() / weights } else { 0.0 };
    let view_drift = round(view, DRIFT_DECIMALS);
    match &door.composite {
        Composite::Flat => Ok(CompositeScore { drift_score: view_drift, view_drift, layer: None }),
        Composite::Layered { view_weight, aux: name, aux_weight } => {
            let a = aux
                .iter()
                .find(|a| &a.name == name)
                .ok_or_else(|| format!("the auxiliary signal `{name}` reported no `{name}` row"))?;
            let score = view_weight * view + aux_weight * a.normalised;
            Ok(CompositeScore {
                drift_score: round(score, DRIFT_DECIMALS),
                view_drift,
                layer: Some((name.clone(), a.normalised, *aux_weight)),
            })
        }
    }
}

/// Step 5: the component with the highest weighted contribution; a tie
/// goes to the one configured first.
pub fn driving(door: &Door, s: &Signals) -> String {
    let mut best: Option<&Component> = None;
    for spec in &door.components {
        if let Some(c) = s.components.iter().find(|c| c.component == spec.name)
            && best.is_none_or(|b| c.contribution > b.contribution)
        {
            best = Some(c);
        }
    }
    best.map(|c| c.component.clone()).unwrap_or_default()
}

/// The components at or above the door's fire threshold, strongest first.
pub fn fired(door: &Door, s: &Signals) -> Vec<String> {
    let mut f: Vec<&Component> = s.components.iter().filter(|c| c.normalised >= door.fire_threshold).collect();
    f.sort_by(|a, b| b.normalised.total_cmp(&a.normalised));
    f.into_iter().map(|c| c.component.clone()).collect()
}

/// The prior open rec step 4 compares against.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Prior {
    pub id: String,
    pub created_ms: i64,
    pub driving_signal: String,
    pub drift_score: f64,
}

/// Why a run was or was not absorbed by a prior rec.
#[derive(Debug, Clone, PartialEq)]
pub enum Dedup {
    /// Write the no-change confirmation and stop.
    Same(Prior),
    New(String),
}

/// Step 4 (D-012): a prior open rec created less than 48 h ago, with the same
/// driving signal and a drift within ±0.05, and no acute event since it was
/// created, absorbs the run. `priors` are the door's open recs, newest
/// first (the caller may leave out those older than the window); the
/// newest one that matches is named.
pub fn dedup(priors: &[Prior], driving: &str, drift: f64, acute: &[Acute], now_ms: i64) -> Dedup {
    let mut reasons = Vec::new();
    for p in priors {
        let age = now_ms - p.created_ms;
        if age >= DEDUP_WINDOW_MS {
            reasons.push(format!("{} is older than 48 h", p.id));
            continue;
        }
        if p.driving_signal != driving {
            reasons.push(format!("{} was driven by {}", p.id, p.driving_signal));
            continue;
        }
        // Both drifts are rounded to four decimals, so the comparison is
        // exact up to float noise far below the rounding.
        if (drift - p.drift_score).abs() > DEDUP_DRIFT + 1e-9 {
            reasons.push(format!("{}'s drift differs by more than 0.05", p.id));
            continue;
        }
        if let Some(a) = acute.iter().find(|a| a.at_ms > p.created_ms) {
            reasons.push(format!("acute signal `{}` fired after {}", a.name, p.id));
            continue;
        }
        return Dedup::Same(p.clone());
    }
    if reasons.is_empty() {
        reasons.push("no open rec younger than 48 h".into());
    }
    Dedup::New(reasons.join("; "))
}

/// The artifact's confidence (0–100) and its breakdown (D-R4): how much of
/// the door's data exists, how much evidence the vault gave, and how
/// clearly one signal drives.
pub fn confidence(s: &Signals, driving: &str, evidence: usize) -> (i64, serde_json::Value) {
    let total = s.components.len().max(1) as f64;
    let coverage = s.components.iter().filter(|c| c.raw.is_some()).count() as f64 / total;
    let ev = (evidence.min(5) as f64) / 5.0;
    let sum: f64 = s.components.iter().map(|c| c.contribution).sum();
    let lead = s.components.iter().find(|c| c.component == driving).map_or(0.0, |c| c.contribution);
    let dominance = if sum > 0.0 { lead / sum } else { 0.0 };
    let (coverage, ev, dominance) = (round(coverage, 3), round(ev, 3), round(dominance, 3));
    let score = (100.0 * (0.5 * coverage + 0.3 * ev + 0.2 * dominance)).round() as i64;
    (
        score,
        serde_json::json!({
            "data_coverage": coverage, "evidence": ev, "driver_dominance": dominance,
            "weights": {"data_coverage": 0.5, "evidence": 0.3, "driver_dominance": 0.2},
        }),
    )
}

#[cfg(test)]
pub(crate) mod tests_support {
    use super::*;
    use serde_json::json;

    pub(crate) fn door() -> Door {
        door_with(false)
    }

    pub(crate) fn door_with(layered: bool) -> Door {
        let mut d = json!({
            "name": "fitness", "title": "Fitness",
            "components": [{"name": "pace", "weight": 0.5}, {"name": "load", "weight": 0.3}, {"name": "sleep", "weight": 0.2}],
            "signals": {"kind": "sql", "view": "v_drift_signals"},
            "auxiliary": [{"name": "body_recomp", "view": "v_body_recomp"}],
            "composite": {"kind": "flat"},
            "store": {"kind": "local"}
        });
        if layered {
            d["composite"] = json!({"kind": "layered", "view_weight": 0.9, "aux": "body_recomp", "aux_weight": 0.1});
        }
        Door::parse("fitness", &d).unwrap()
    }

    pub(crate) fn signals(n: [f64; 3]) -> Signals {
        let w = [0.5, 0.3, 0.2];
        let names = ["pace", "load", "sleep"];
        Signals {
            components: (0..3)
                .map(|i| Component {
                    component: names[i].into(),
                    raw: Some(n[i] * 10.0),
                    normalised: n[i],
                    weight: w[i],
                    contribution: round(n[i] * w[i], 4),
                })
                .collect(),
            acute: vec![],
            facts: json!({}),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::tests_support::{door_with as door, signals};
    use super::*;
    use serde_json::json;

    #[test]
    fn the_composite_is_flat_or_two_layered() {
        let s = signals([0.8, 0.5, 0.0]);
        let flat = composite(&door(false), &s, &[]).unwrap();
        assert_eq!(flat.drift_score, 0.55);
        let aux = [AuxRow { name: "body_recomp".into(), raw: Some(1.0), normalised: 0.25 }];
        let layered = composite(&door(true), &s, &aux).unwrap();
        // 0.90 × 0.55 + 0.10 × 0.25 = 0.52
        assert_eq!(layered.drift_score, 0.52);
        assert_eq!(layered.view_drift, 0.55);
        assert!(composite(&door(true), &s, &[]).is_err());
    }

    #[test]
    fn the_driving_signal_is_the_largest_contribution() {
        assert_eq!(driving(&door(false), &signals([0.2, 0.9, 1.0])), "load");
        // Equal contributions: the first configured wins.
        assert_eq!(driving(&door(false), &signals([0.3, 0.5, 0.0])), "pace");
        assert_eq!(fired(&door(false), &signals([0.5, 0.49, 0.9])), vec!["sleep", "pace"]);
    }

    #[test]
    fn a_source_must_report_every_component_once() {
        let d = door(false);
        let mut s = signals([0.1, 0.2, 0.3]);
        assert!(check(&d, &s).is_ok());
        s.components[2].normalised = 1.2;
        assert!(check(&d, &s).unwrap_err().contains("[0, 1]"));
        s.components.pop();
        assert!(check(&d, &s).unwrap_err().contains("0 times"));
    }

    #[test]
    fn dedup_at_its_boundaries() {
        let now = 1_000_000_000_000;
        let prior = |age_ms: i64, drift: f64| Prior {
            id: "r1".into(),
            created_ms: now - age_ms,
            driving_signal: "pace".into(),
            drift_score: drift,
        };
        let h = 3_600_000;
        let m = 60_000;
        assert!(matches!(dedup(&[prior(47 * h + 59 * m, 0.5)], "pace", 0.5, &[], now), Dedup::Same(_)));
        assert!(matches!(dedup(&[prior(48 * h, 0.5)], "pace", 0.5, &[], now), Dedup::New(_)));
        assert!(matches!(dedup(&[prior(h, 0.5)], "pace", 0.55, &[], now), Dedup::Same(_)));
        assert!(matches!(dedup(&[prior(h, 0.5)], "pace", 0.45, &[], now), Dedup::Same(_)));
        assert!(matches!(dedup(&[prior(h, 0.5)], "pace", 0.5501, &[], now), Dedup::New(_)));
        assert!(matches!(dedup(&[prior(h, 0.0)], "pace", 0.0501, &[], now), Dedup::New(_)));
        assert!(matches!(dedup(&[prior(h, 0.5)], "load", 0.5, &[], now), Dedup::New(_)));
        let before = Acute { name: "alert".into(), at_ms: now - 2 * h };
        let after = Acute { name: "alert".into(), at_ms: now - 10 };
        assert!(matches!(dedup(&[prior(h, 0.5)], "pace", 0.5, &[before], now), Dedup::Same(_)));
        match dedup(&[prior(h, 0.5)], "pace", 0.5, &[after], now) {
            Dedup::New(why) => assert!(why.contains("acute")),
            d => panic!("{d:?}"),
        }
        assert_eq!(dedup(&[], "pace", 0.5, &[], now), Dedup::New("no open rec younger than 48 h".into()));
    }

    #[test]
    fn confidence_weighs_coverage_evidence_and_dominance() {
        let mut s = signals([1.0, 0.0, 0.0]);
        let (c, b) = confidence(&s, "pace", 5);
        assert_eq!(c, 100);
        assert_eq!(b["driver_dominance"], json!(1.0));
        s.components[1].raw = None;
        s.components[2].raw = None;
        let (c, _) = confidence(&s, "pace", 0);
        // 0.5 × 0.333 + 0 + 0.2 × 1
        assert_eq!(c, 37);
    }
}
