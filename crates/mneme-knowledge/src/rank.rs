//! The read-time scores of `/retrieve` (001, "The read-time scores"):
//! computed on each call, never stored.

use crate::entry::{Confidence, KnowledgeType, Stability};
use mneme_time::calendar::parse_date;

/// relevance_score: the cosine of question and entry, clamped to [0, 1].
pub fn relevance(cos: f32) -> f64 {
    f64::from(cos).clamp(0.0, 1.0)
}

/// freshness = exp(−days_old / half_life), days_old counted from the
/// entry's source_date. Evergreen is 1.0 forever; an unparseable or future
/// date is 1.0 rather than a penalty. The seed's formula is used as
/// written, so at days_old = half_life freshness is 1/e ≈ 0.37 (D-K3).
pub fn freshness(stability: Stability, source_date: &str, now_ms: u64) -> f64 {
    let Some(half_life) = stability.half_life_days() else { return 1.0 };
    let Some(day) = parse_date(source_date) else { return 1.0 };
    let days_old = now_ms as f64 / 86_400_000.0 - day as f64;
    if days_old < 0.0 { 1.0 } else { (-days_old / half_life).exp() }
}

/// The seed's weights of the final ranking score.
pub const W_RELEVANCE: f64 = 0.6;
pub const W_TYPE: f64 = 0.15;
pub const W_CONFIDENCE: f64 = 0.15;
pub const W_FRESHNESS: f64 = 0.10;

/// final = 0.6 × relevance + 0.15 × type_weight + 0.15 × confidence_weight
/// + 0.10 × freshness.
pub fn final_score(relevance: f64, kind: KnowledgeType, confidence: Confidence, freshness: f64) -> f64 {
    W_RELEVANCE * relevance + W_TYPE * kind.weight() + W_CONFIDENCE * confidence.weight() + W_FRESHNESS * freshness
}

#[cfg(test)]
mod tests {
    use super::*;

    const DAY: u64 = 86_400_000;

    fn now() -> u64 {
        mneme_time::calendar::days_from_date(2026, 11, 22).unwrap() as u64 * DAY
    }

    #[test]
    fn freshness_follows_the_seed_formula() {
        let f = |s, d: &str| freshness(s, d, now());
        assert_eq!(f(Stability::Evergreen, "1990-01-01"), 1.0);
        assert_eq!(f(Stability::Stable, "2026-11-22"), 1.0);
        assert!((f(Stability::Evolving, "2026-11-01") - (-1.0f64).exp()).abs() < 1e-12, "21 days = one half_life");
        assert!((f(Stability::Stable, "2024-11-22") - (-730.0f64 / 730.0).exp()).abs() < 1e-12);
    }

    #[test]
    fn a_future_or_unparseable_date_is_not_penalised() {
        assert_eq!(freshness(Stability::Evolving, "2026-11-23", now()), 1.0);
        assert_eq!(freshness(Stability::Evolving, "2099-01-01", now()), 1.0);
        assert_eq!(freshness(Stability::Evolving, "last tuesday", now()), 1.0);
        assert_eq!(freshness(Stability::Evolving, "2026-02-30", now()), 1.0);
    }

    #[test]
    fn relevance_is_clamped() {
        assert_eq!(relevance(-0.3), 0.0);
        assert_eq!(relevance(1.2), 1.0);
        assert!((relevance(0.42) - 0.42).abs() < 1e-6);
    }

    #[test]
    fn the_final_score_weights() {
        let top = final_score(1.0, KnowledgeType::Framework, Confidence::High, 1.0);
        assert!((top - 1.0).abs() < 1e-12);
        let s = final_score(0.5, KnowledgeType::Reaction, Confidence::Low, 0.0);
        assert!((s - (0.3 + 0.075 + 0.06)).abs() < 1e-12);
    }

    #[test]
    fn relevance_leads_type_and_confidence() {
        // A generic-but-confident framework does not leapfrog a clearly
        // more relevant low-confidence reaction.
        let relevant = final_score(0.9, KnowledgeType::Reaction, Confidence::Low, 1.0);
        let generic = final_score(0.4, KnowledgeType::Framework, Confidence::High, 1.0);
        assert!(relevant > generic);
    }
}
