//! The routing stability regulator (002 §12: the only process that changes
//! the mode router's weights, once a day) and routing reflection's batch,
//! answer and filters (§10), as pure rules. The numbers are the
//! reference's where the design gives none (D-B7).

use mneme_conversation::Mode;
use mneme_conversation::router::Weights;
use serde::{Deserialize, Serialize};
use serde_json::Value;

const H: i64 = 3_600_000;
/// The regulator runs once a day, over the last day's decisions…
pub const CYCLE_MS: i64 = 24 * H;
/// …and does nothing with fewer than this many.
pub const MIN_DECISIONS: usize = 10;
/// A parameter rests this long after a change; a change is judged after it.
pub const COOLDOWN_MS: i64 = 48 * H;
/// A step is `direction × min(severity × 0.05, 0.02)`.
pub const STEP_SCALE: f64 = 0.05;
pub const MAX_STEP: f64 = 0.02;
/// A change is confirmed when its pressure fell under 0.9 × what it was,
/// reverted when it rose over 1.1 ×, and reverted as neutral in between.
pub const CONFIRM_BELOW: f64 = 0.9;
pub const REVERT_ABOVE: f64 = 1.1;
/// Reflection dimensions are read over a week; the dominant one needs 30%
/// of the disagreements.
pub const DIMENSION_WINDOW_MS: i64 = 7 * 24 * H;
pub const DIMENSION_SHARE: f64 = 0.3;
/// Reflection disagreement is measured only over at least this many
/// counted reflections a day.
pub const MIN_REFLECTIONS: usize = 5;
/// Metrics history is kept 30 days, the adjustment log its last 50.
pub const METRICS_KEEP_MS: i64 = 30 * 24 * H;
pub const ADJUSTMENTS_KEEP: i64 = 50;

/// The parameters the regulator may move, with their hard bounds.
pub const BOUNDS: [(&str, f64, f64); 13] = [
    ("RESPOND.base", 0.30, 0.70),
    ("CLARIFY.base", 0.10, 0.50),
    ("ACT.base", 0.05, 0.40),
    ("ACKNOWLEDGE.base", 0.0, 0.30),
    ("respond.warmth_boost", 0.05, 0.40),
    ("respond.cold_penalty", 0.05, 0.30),
    ("clarify.cold_boost", 0.10, 0.40),
    ("clarify.warm_penalty", 0.05, 0.35),
    ("act.question_moderate_context", 0.05, 0.35),
    ("act.implicit_reference", 0.05, 0.30),
    ("acknowledge.greeting", 0.30, 0.80),
    ("acknowledge.question_penalty", 0.10, 0.50),
    ("tiebreaker_base_margin", 0.05, 0.30),
];

fn slot<'a>(w: &'a mut Weights, param: &str) -> Option<&'a mut f64> {
    let base = |m: Mode| m;
    Some(match param {
        "RESPOND.base" => w.base.entry(base(Mode::Respond)).or_insert(0.0),
        "CLARIFY.base" => w.base.entry(base(Mode::Clarify)).or_insert(0.0),
        "ACT.base" => w.base.entry(base(Mode::Act)).or_insert(0.0),
        "ACKNOWLEDGE.base" => w.base.entry(base(Mode::Acknowledge)).or_insert(0.0),
        "respond.warmth_boost" => &mut w.respond_warmth_boost,
        "respond.cold_penalty" => &mut w.respond_cold_penalty,
        "clarify.cold_boost" => &mut w.clarify_cold_boost,
        "clarify.warm_penalty" => &mut w.clarify_warm_penalty,
        "act.question_moderate_context" => &mut w.act_question_moderate_context,
        "act.implicit_reference" => &mut w.act_implicit_reference,
        "acknowledge.greeting" => &mut w.acknowledge_greeting,
        "acknowledge.question_penalty" => &mut w.acknowledge_question_penalty,
        "tiebreaker_base_margin" => &mut w.tiebreaker_base_margin,
        _ => return None,
    })
}

/// A parameter's value in `w`.
pub fn get(w: &Weights, param: &str) -> Option<f64> {
    let mut w = w.clone();
    slot(&mut w, param).map(|v| *v)
}

/// Sets a parameter within its bounds; false for an unknown name.
pub fn set(w: &mut Weights, param: &str, value: f64) -> bool {
    let Some((_, lo, hi)) = BOUNDS.iter().find(|b| b.0 == param).copied() else { return false };
    match slot(w, param) {
        Some(v) => {
            *v = value.clamp(lo, hi);
            true
        }
        None => false,
    }
}

/// The defaults with the stored values laid over them (unknown names are
/// ignored, values clamped to their bounds).
pub fn weights(stored: &[(String, f64)]) -> Weights {
    let mut w = Weights::default();
    for (p, v) in stored {
        if v.is_finite() {
            set(&mut w, p, *v);
        }
    }
    w
}

/// What the regulator reads of one routing decision.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Decision {
    pub mode: String,
    pub tiebreaker_used: bool,
    /// A counted reflection's verdict: whether it agreed.
    pub counted_agreement: Option<bool>,
}

/// The pressures the regulator can measure. The reference's misroute and
/// triage-miscalibration pressures need feedback and outcome labels that
/// Mneme does not record (D-B7); its act_underused is fixed at 0.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Pressure {
    TiebreakerHigh,
    RespondOverused,
    ReflectionDisagreement,
}

impl Pressure {
    pub const ALL: [Pressure; 3] =
        [Pressure::TiebreakerHigh, Pressure::RespondOverused, Pressure::ReflectionDisagreement];

    pub fn threshold(self) -> f64 {
        match self {
            Pressure::TiebreakerHigh => 0.20,
            Pressure::RespondOverused => 0.10,
            Pressure::ReflectionDisagreement => 0.20,
        }
    }
}

/// One day's routing, measured.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Metrics {
    pub decisions: usize,
    pub mode_shares: std::collections::BTreeMap<String, f64>,
    /// Normalised mode entropy (1 = the five modes equally), for the record.
    pub entropy: f64,
    pub tiebreaker_rate: f64,
    /// `max(0, RESPOND share − 0.75)`.
    pub respond_overused: f64,
    pub reflections_counted: usize,
    /// Counted reflections that disagreed, over those counted.
    pub reflection_disagreement: f64,
}

impl Metrics {
    /// Whether the day had the evidence to measure a pressure: every
    /// decision counts for the first two, [`MIN_REFLECTIONS`] counted
    /// reflections for disagreement.
    pub fn measured(&self, p: Pressure) -> bool {
        match p {
            Pressure::ReflectionDisagreement => self.reflections_counted >= MIN_REFLECTIONS,
            _ => self.decisions >= MIN_DECISIONS,
        }
    }

    pub fn pressure(&self, p: Pressure) -> f64 {
        match p {
            Pressure::TiebreakerHigh => self.tiebreaker_rate,
            Pressure::RespondOverused => self.respond_overused,
            Pressure::ReflectionDisagreement => self.reflection_disagreement,
        }
    }
}

pub fn metrics(decisions: &[Decision]) -> Metrics {
    let n = decisions.len();
    if n == 0 {
        return Metrics::default();
    }
    let mut counts: std::collections::BTreeMap<String, usize> = std::collections::BTreeMap::new();
    for d in decisions {
        *counts.entry(d.mode.clone()).or_default() += 1;
    }
    let shares: std::collections::BTreeMap<String, f64> =
        counts.iter().map(|(m, c)| (m.clone(), *c as f64 / n as f64)).collect();
    let entropy = -shares.values().filter(|p| **p > 0.0).map(|p| p * p.log2()).sum::<f64>() / 5f64.log2();
    let respond = shares.get("RESPOND").copied().unwrap_or(0.0);
    let counted: Vec<bool> = decisions.iter().filter_map(|d| d.counted_agreement).collect();
    let disagreed = counted.iter().filter(|a| !**a).count();
    Metrics {
        decisions: n,
        mode_shares: shares,
        entropy,
        tiebreaker_rate: decisions.iter().filter(|d| d.tiebreaker_used).count() as f64 / n as f64,
        respond_overused: (respond - 0.75).max(0.0),
        reflections_counted: counted.len(),
        reflection_disagreement: if counted.is_empty() { 0.0 } else { disagreed as f64 / counted.len() as f64 },
    }
}

/// The reflection dimensions and the parameter each one moves.
pub const DIMENSIONS: [(&str, &str, f64); 5] = [
    ("memory_availability", "act.question_moderate_context", 1.0),
    ("intent_clarity", "clarify.cold_boost", 1.0),
    ("tone_ambiguity", "tiebreaker_base_margin", 1.0),
    ("context_sufficiency", "respond.cold_penalty", 1.0),
    ("social_vs_substantive", "acknowledge.question_penalty", 1.0),
];

/// The dimension named in at least 30% of a week's counted disagreements
/// (the most named; ties to the earlier in [`DIMENSIONS`]).
pub fn dominant_dimension(disagreements: &[Vec<String>]) -> Option<&'static str> {
    if disagreements.is_empty() {
        return None;
    }
    let mut best: Option<(&'static str, usize)> = None;
    for (d, _, _) in DIMENSIONS {
        let n = disagreements.iter().filter(|dims| dims.iter().any(|x| x == d)).count();
        if n > 0 && best.is_none_or(|b| n > b.1) {
            best = Some((d, n));
        }
    }
    best.filter(|(_, n)| *n as f64 >= DIMENSION_SHARE * disagreements.len() as f64).map(|(d, _)| d)
}

/// The parameter a pressure moves, and which way.
pub fn target(p: Pressure, dimension: Option<&str>) -> Option<(&'static str, f64)> {
    match p {
        Pressure::TiebreakerHigh => Some(("tiebreaker_base_margin", -1.0)),
        Pressure::RespondOverused => Some(("RESPOND.base", -1.0)),
        Pressure::ReflectionDisagreement => {
            DIMENSIONS.iter().find(|(d, _, _)| Some(*d) == dimension).map(|(_, param, dir)| (*param, *dir))
        }
    }
}

/// How far over its threshold a pressure is, relative to the threshold.
pub fn severity(p: Pressure, value: f64) -> f64 {
    ((value - p.threshold()) / p.threshold()).max(0.0)
}

/// One change the regulator makes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Change {
    pub pressure: Pressure,
    pub pressure_value: f64,
    pub param: String,
    pub from: f64,
    pub to: f64,
}

/// The day's one change: the worst pressure over its threshold (by
/// severity) whose parameter is out of its cooldown and not already at its
/// bound, stepped by `min(severity × 0.05, 0.02)`. `Err` says why none.
pub fn plan(
    m: &Metrics,
    dimension: Option<&str>,
    w: &Weights,
    last_adjusted: &[(String, i64)],
    now_ms: i64,
) -> Result<Change, String> {
    if m.decisions < MIN_DECISIONS {
        return Err(format!("{} routing decisions in the last day, under {MIN_DECISIONS}", m.decisions));
    }
    let mut over: Vec<(Pressure, f64)> = Pressure::ALL
        .iter()
        .filter(|p| m.measured(**p))
        .map(|p| (*p, m.pressure(*p)))
        .filter(|(p, v)| *v > p.threshold())
        .collect();
    if over.is_empty() {
        return Err("no pressure over its threshold".into());
    }
    over.sort_by(|a, b| severity(b.0, b.1).total_cmp(&severity(a.0, a.1)).then(a.0.cmp(&b.0)));
    let mut why = Vec::new();
    for (p, v) in over {
        let Some((param, dir)) = target(p, dimension) else {
            why.push(format!("{p:?}: no dominant dimension"));
            continue;
        };
        if last_adjusted.iter().any(|(q, t)| q == param && now_ms - t < COOLDOWN_MS) {
            why.push(format!("{param} is cooling down"));
            continue;
        }
        let from = get(w, param).unwrap_or(0.0);
        let step = dir * (severity(p, v) * STEP_SCALE).min(MAX_STEP);
        let mut next = w.clone();
        set(&mut next, param, from + step);
        let to = get(&next, param).unwrap_or(from);
        if (to - from).abs() < 1e-12 {
            why.push(format!("{param} is at its bound"));
            continue;
        }
        let round = |x: f64| (x * 1e6).round() / 1e6;
        return Ok(Change { pressure: p, pressure_value: v, param: param.into(), from: round(from), to: round(to) });
    }
    Err(why.join("; "))
}

/// A change judged 48 h on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Judgement {
    Confirmed,
    Reverted,
    RevertedNeutral,
}

pub fn judge(before: f64, now: f64) -> Judgement {
    if now < CONFIRM_BELOW * before {
        Judgement::Confirmed
    } else if now > REVERT_ABOVE * before {
        Judgement::Reverted
    } else {
        Judgement::RevertedNeutral
    }
}

// ------------------------------------------------------------- reflection

/// Reflection runs at idle time, at most one batch in 30 minutes, over 5
/// unreflected decisions of the newest 50.
pub const REFLECTION_GAP_MS: i64 = 30 * 60_000;
pub const REFLECTION_BATCH: usize = 5;
pub const REFLECTION_POOL: i64 = 50;
pub const REFLECTION_PROMPT: &str = include_str!("../../../prompts/routing-reflection.md");

/// The JSON Schema of a routing reflection (D-L2).
pub fn reflection_schema() -> String {
    let modes = serde_json::json!(["RESPOND", "CLARIFY", "ACT", "ACKNOWLEDGE", "IGNORE"]);
    serde_json::json!({
        "type": "object",
        "properties": {
            "ambiguity_level": {"enum": ["low", "medium", "high"]},
            "uncertainty_dimensions": {
                "type": "array",
                "maxItems": 5,
                "items": {
                    "type": "object",
                    "properties": {
                        "dimension": {"enum": ["memory_availability", "intent_clarity", "tone_ambiguity",
                                               "context_sufficiency", "social_vs_substantive"]},
                        "description": {"type": "string", "maxLength": 300},
                        "affected_modes": {"type": "array", "items": {"enum": modes}, "maxItems": 5},
                        "signal_gap": {"type": "string", "maxLength": 200},
                    },
                    "required": ["dimension", "description", "affected_modes", "signal_gap"],
                    "additionalProperties": false,
                },
            },
            "agree_with_decision": {"type": "boolean"},
            "suggested_mode": {"enum": ["RESPOND", "CLARIFY", "ACT", "ACKNOWLEDGE", "IGNORE", null]},
            "confidence": {"type": "number"},
        },
        "required": ["ambiguity_level", "uncertainty_dimensions", "agree_with_decision", "suggested_mode", "confidence"],
        "additionalProperties": false,
    })
    .to_string()
}
pub const REFLECTION_TEMPERATURE: f32 = 0.3;
/// A reflection counts only at this confidence or more.
pub const REFLECTION_MIN_CONFIDENCE: f64 = 0.7;

/// A decision as the batch sampler sees it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Candidate {
    pub id: i64,
    pub confidence: f64,
    pub tiebreaker_used: bool,
}

/// Membership of a batch bucket.
type Bucket = fn(&Candidate) -> bool;

/// The stratified batch: low confidence (< 0.20) half of it, high (> 0.60)
/// a fifth, tie-breaker decisions three tenths, each bucket at least one
/// while it has any, the rest at random; every pick by a draw.
pub fn batch(pool: &[Candidate], mut draw: impl FnMut() -> f64) -> Vec<i64> {
    let n = REFLECTION_BATCH.min(pool.len());
    let mut chosen: Vec<i64> = Vec::new();
    let buckets: [(f64, Bucket); 3] =
        [(0.5, |c| c.confidence < 0.20), (0.2, |c| c.confidence > 0.60), (0.3, |c| c.tiebreaker_used)];
    for (share, member) in buckets {
        let quota = ((REFLECTION_BATCH as f64 * share).floor() as usize).max(1);
        for _ in 0..quota {
            if chosen.len() >= n {
                break;
            }
            let left: Vec<i64> = pool.iter().filter(|c| member(c) && !chosen.contains(&c.id)).map(|c| c.id).collect();
            if left.is_empty() {
                break;
            }
            chosen.push(left[crate::drift::pick(left.len(), draw())]);
        }
    }
    while chosen.len() < n {
        let left: Vec<i64> = pool.iter().filter(|c| !chosen.contains(&c.id)).map(|c| c.id).collect();
        chosen.push(left[crate::drift::pick(left.len(), draw())]);
    }
    chosen
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Dimension {
    pub dimension: String,
    #[serde(default)]
    pub description: String,
    #[serde(default)]
    pub affected_modes: Vec<String>,
    #[serde(default)]
    pub signal_gap: String,
}

/// The reflection model's answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Reflection {
    pub ambiguity_level: String,
    pub uncertainty_dimensions: Vec<Dimension>,
    pub agree_with_decision: bool,
    /// The mode it would have chosen, when it disagrees.
    pub suggested_mode: Option<String>,
    pub confidence: f64,
}

/// Parses the answer: `agree_with_decision` and `confidence` are required;
/// dimensions off the closed list are dropped.
pub fn parse_reflection(answer: &str) -> Result<Reflection, String> {
    let v = mneme_llm::extract_json(answer).map_err(|e| e.to_string())?;
    let agree = v.get("agree_with_decision").and_then(Value::as_bool).ok_or("no agree_with_decision")?;
    let confidence = v.get("confidence").and_then(Value::as_f64).ok_or("no confidence")?;
    if !(0.0..=1.0).contains(&confidence) {
        return Err(format!("confidence {confidence} is outside 0–1"));
    }
    let dims: Vec<Dimension> = v
        .get("uncertainty_dimensions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|d| serde_json::from_value::<Dimension>(d.clone()).ok())
        .filter(|d| DIMENSIONS.iter().any(|(name, _, _)| *name == d.dimension))
        .collect();
    let level = v.get("ambiguity_level").and_then(Value::as_str).unwrap_or("unknown").to_lowercase();
    let suggested =
        v.get("suggested_mode").and_then(Value::as_str).and_then(Mode::parse).map(|m| m.as_str().to_string());
    Ok(Reflection {
        ambiguity_level: level,
        uncertainty_dimensions: dims,
        agree_with_decision: agree,
        suggested_mode: suggested,
        confidence,
    })
}

/// Why a reflection does not count, if it does not: under 0.7 confidence;
/// it suggests IGNORE for a message that said something.
pub fn filter(r: &Reflection, input_empty: bool) -> Option<&'static str> {
    if r.confidence < REFLECTION_MIN_CONFIDENCE {
        return Some("confidence under 0.7");
    }
    if !r.agree_with_decision && r.suggested_mode.as_deref() == Some("IGNORE") && !input_empty {
        return Some("suggests IGNORE for a message that said something");
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(mode: &str, tie: bool, agree: Option<bool>) -> Decision {
        Decision { mode: mode.into(), tiebreaker_used: tie, counted_agreement: agree }
    }

    #[test]
    fn weights_by_name_within_bounds() {
        let mut w = Weights::default();
        assert_eq!(get(&w, "RESPOND.base"), Some(0.40));
        assert_eq!(get(&w, "tiebreaker_base_margin"), Some(0.20));
        assert!(set(&mut w, "ACT.base", 0.9));
        assert_eq!(get(&w, "ACT.base"), Some(0.40), "clamped to its bound");
        assert!(!set(&mut w, "IGNORE.base", 0.0), "not regulated");
        let w = weights(&[("CLARIFY.base".into(), 0.35), ("nonsense".into(), 1.0), ("ACT.base".into(), f64::NAN)]);
        assert_eq!(get(&w, "CLARIFY.base"), Some(0.35));
        assert_eq!(get(&w, "ACT.base"), Some(0.20));
        for (p, lo, hi) in BOUNDS {
            let v = get(&Weights::default(), p).unwrap();
            assert!((lo..=hi).contains(&v), "{p}'s default {v} is inside {lo}–{hi}");
        }
    }

    #[test]
    fn metrics_and_pressures() {
        let mut all: Vec<Decision> = (0..17).map(|_| d("RESPOND", false, None)).collect();
        all.extend([d("CLARIFY", true, Some(false)), d("ACT", true, Some(true)), d("RESPOND", true, Some(false))]);
        let m = metrics(&all);
        assert_eq!(m.decisions, 20);
        assert!((m.respond_overused - 0.15).abs() < 1e-12, "0.9 − 0.75");
        assert!((m.tiebreaker_rate - 0.15).abs() < 1e-12);
        assert!((m.reflection_disagreement - 2.0 / 3.0).abs() < 1e-12);
        assert!(m.entropy > 0.0 && m.entropy < 1.0);
        assert_eq!(metrics(&[]), Metrics::default());
    }

    #[test]
    fn one_bounded_step_on_the_worst_pressure_with_cooldowns() {
        let now = 1_000 * H;
        let w = Weights::default();
        let all: Vec<Decision> = (0..20).map(|_| d("RESPOND", false, None)).collect();
        let m = metrics(&all);
        // respond_overused 0.25: severity 1.5, step min(0.075, 0.02).
        let c = plan(&m, None, &w, &[], now).unwrap();
        assert_eq!((c.param.as_str(), c.from, c.to), ("RESPOND.base", 0.4, 0.38));
        assert_eq!(
            plan(&metrics(&all[..9]), None, &w, &[], now).unwrap_err(),
            "9 routing decisions in the last day, under 10"
        );
        let cooling = [("RESPOND.base".to_string(), now - COOLDOWN_MS + 1)];
        assert!(plan(&m, None, &w, &cooling, now).unwrap_err().contains("cooling down"));
        let cooled = [("RESPOND.base".to_string(), now - COOLDOWN_MS)];
        assert!(plan(&m, None, &w, &cooled, now).is_ok(), "48 h exactly has cooled");
        let mut low = w.clone();
        set(&mut low, "RESPOND.base", 0.30);
        assert!(plan(&m, None, &low, &[], now).unwrap_err().contains("at its bound"));
        let mut at = w.clone();
        set(&mut at, "RESPOND.base", 0.31);
        assert_eq!(plan(&m, None, &at, &[], now).unwrap().to, 0.30, "a step stops at the bound");
        // A small excess makes a small step: 0.11 → severity 0.1 → 0.005.
        let mut some: Vec<Decision> = (0..86).map(|_| d("RESPOND", false, None)).collect();
        some.extend((0..14).map(|_| d("CLARIFY", false, None)));
        let c = plan(&metrics(&some), None, &w, &[], now).unwrap();
        assert!((c.to - 0.395).abs() < 1e-9, "{c:?}");
        // Reflection disagreement is the worst here, and needs its dimension.
        let r: Vec<Decision> = (0..20).map(|_| d("RESPOND", false, Some(false))).collect();
        let m = metrics(&r);
        let c = plan(&m, Some("tone_ambiguity"), &w, &[], now).unwrap();
        assert_eq!(
            (c.pressure, c.param.as_str(), c.to),
            (Pressure::ReflectionDisagreement, "tiebreaker_base_margin", 0.22)
        );
        let c = plan(&m, None, &w, &[], now).unwrap();
        assert_eq!(c.param, "RESPOND.base", "no dominant dimension: the next pressure");
        // Four counted reflections are too few to measure disagreement.
        let mut few: Vec<Decision> = (0..16).map(|_| d("RESPOND", false, None)).collect();
        few.extend((0..4).map(|_| d("RESPOND", false, Some(false))));
        let m = metrics(&few);
        assert!(!m.measured(Pressure::ReflectionDisagreement) && m.measured(Pressure::RespondOverused));
        assert_eq!(plan(&m, Some("tone_ambiguity"), &w, &[], now).unwrap().param, "RESPOND.base");
        let calm: Vec<Decision> = (0..20).map(|i| d(if i % 2 == 0 { "RESPOND" } else { "ACT" }, false, None)).collect();
        assert_eq!(plan(&metrics(&calm), None, &w, &[], now).unwrap_err(), "no pressure over its threshold");
    }

    #[test]
    fn judgement_dimensions_and_the_reflection_batch() {
        assert_eq!(judge(0.25, 0.2249), Judgement::Confirmed);
        assert_eq!(judge(0.25, 0.225), Judgement::RevertedNeutral);
        assert_eq!(judge(0.25, 0.275), Judgement::RevertedNeutral);
        assert_eq!(judge(0.25, 0.2751), Judgement::Reverted);
        let v = |xs: &[&str]| xs.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        let week = vec![v(&["tone_ambiguity"]), v(&["tone_ambiguity"]), v(&["intent_clarity"]), v(&[])];
        assert_eq!(dominant_dimension(&week), Some("tone_ambiguity"));
        let tie = vec![v(&["tone_ambiguity"]), v(&["intent_clarity"])];
        assert_eq!(dominant_dimension(&tie), Some("intent_clarity"), "a tie goes to the earlier dimension");
        let thin = vec![v(&["tone_ambiguity"]), v(&[]), v(&[]), v(&[])];
        assert_eq!(dominant_dimension(&thin), None, "1 of 4 is under 30%");
        let pool: Vec<Candidate> =
            (0..50).map(|i| Candidate { id: i, confidence: (i as f64) / 50.0, tiebreaker_used: i % 10 == 0 }).collect();
        let mut d = crate::Draws::new(4);
        let b = batch(&pool, || d.draw());
        assert_eq!(b.len(), 5);
        let mut u = b.clone();
        u.sort();
        u.dedup();
        assert_eq!(u.len(), 5, "no decision twice");
        assert!(b[..2].iter().all(|i| (*i as f64) / 50.0 < 0.2), "two low-confidence: {b:?}");
        assert!((b[2] as f64) / 50.0 > 0.6, "one high-confidence: {b:?}");
        assert_eq!(b[3] % 10, 0, "one tie-breaker: {b:?}");
        assert_eq!(batch(&pool[..3], || 0.0).len(), 3);
        assert!(batch(&[], || 0.0).is_empty());
    }

    #[test]
    fn reflections_parse_and_filter() {
        let r = parse_reflection(
            r#"{"ambiguity_level":"High","uncertainty_dimensions":[{"dimension":"tone_ambiguity","description":"sarcasm?","affected_modes":["RESPOND","ACKNOWLEDGE"],"signal_gap":"no tone signal"},{"dimension":"made_up"}],"agree_with_decision":false,"suggested_mode":"acknowledge","confidence":0.8}"#,
        )
        .unwrap();
        assert_eq!(r.uncertainty_dimensions.len(), 1);
        assert_eq!((r.ambiguity_level.as_str(), r.suggested_mode.as_deref()), ("high", Some("ACKNOWLEDGE")));
        assert_eq!(filter(&r, false), None);
        assert!(parse_reflection(r#"{"confidence":0.9}"#).is_err());
        assert!(parse_reflection(r#"{"agree_with_decision":true,"confidence":1.5}"#).is_err());
        let low = Reflection { confidence: 0.69, ..r.clone() };
        assert_eq!(filter(&low, false), Some("confidence under 0.7"));
        let ignore = Reflection { suggested_mode: Some("IGNORE".into()), ..r.clone() };
        assert!(filter(&ignore, false).is_some());
        assert_eq!(filter(&ignore, true), None);
    }
}
