//! The seam values of the routing stability regulator and routing
//! reflection (`mneme:types/routing`) and their pure counterparts in
//! `mneme_background::regulator`. The metrics serialise as the pure type
//! does (mode shares as a map by mode), as `routing_metrics` stores them.

use std::collections::BTreeMap;

use mneme_background::regulator::{
    Dimension as PureDimension, Judgement as PureJudgement, Metrics as PureMetrics, Pressure as PurePressure,
    Reflection as PureReflection,
};

use crate::conv::Conv;
use crate::{pair, serialize_as};

pub use crate::mneme::types::routing::*;

pair!(enum Pressure, PurePressure { TiebreakerHigh, RespondOverused, ReflectionDisagreement });
pair!(enum Judgement, PureJudgement { Confirmed, Reverted, RevertedNeutral });

/// Shares by mode travel as a list in the map's order.
impl Conv<Vec<ModeShare>> for BTreeMap<String, f64> {
    fn conv(self) -> Vec<ModeShare> {
        self.into_iter().map(|(mode, share)| ModeShare { mode, share }).collect()
    }
}

impl Conv<BTreeMap<String, f64>> for Vec<ModeShare> {
    fn conv(self) -> BTreeMap<String, f64> {
        self.into_iter().map(|s| (s.mode, s.share)).collect()
    }
}

pair!(record RoutingMetrics, PureMetrics {
    decisions, mode_shares, entropy, tiebreaker_rate, respond_overused, reflections_counted, reflection_disagreement,
});
pair!(record UncertaintyDimension, PureDimension { dimension, description, affected_modes, signal_gap });
pair!(record Reflection, PureReflection {
    ambiguity_level, uncertainty_dimensions, agree_with_decision, suggested_mode, confidence,
});

serialize_as!(Pressure => PurePressure, Judgement => PureJudgement, RoutingMetrics => PureMetrics);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metrics_survive_the_seam_and_serialise_with_shares_by_mode() {
        let pure = PureMetrics {
            decisions: 40,
            mode_shares: [("ACT".to_string(), 0.25), ("RESPOND".to_string(), 0.75)].into(),
            entropy: 0.5,
            tiebreaker_rate: 0.1,
            respond_overused: 0.0,
            reflections_counted: 3,
            reflection_disagreement: 1.0 / 3.0,
        };
        let wit: RoutingMetrics = pure.clone().into();
        assert_eq!(wit.mode_shares[1].mode, "RESPOND");
        assert_eq!(serde_json::to_value(&wit).unwrap()["mode_shares"]["ACT"], 0.25);
        assert_eq!(PureMetrics::from(wit), pure);
        assert_eq!(serde_json::to_value(Pressure::RespondOverused).unwrap(), "respond_overused");
        assert_eq!(serde_json::to_value(Judgement::RevertedNeutral).unwrap(), "reverted_neutral");
    }
}
