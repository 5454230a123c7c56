//! The seam values of recommendations (`mneme:types/rx`) and their pure
//! counterparts in `mneme-rx`.

use mneme_rx::TraceStep as PureTraceStep;
use mneme_rx::lifecycle::{Disposition as PureDisposition, Flags, Status};
use mneme_rx::signals::{
    Acute as PureAcute, AuxRow as PureAuxRow, Component as PureComponent, CompositeScore as PureCompositeScore,
    Signals as PureSignals,
};

use crate::conv::Conv;
use crate::{pair, serialize_as};

pub use crate::mneme::types::rx::*;

pair!(enum RecStatus, Status { Open, Snoozed, Acted, Dismissed });
pair!(enum Disposition, PureDisposition { ActedAsPrescribed, ActedModified, Skipped, Dismissed });
pair!(record TraceStep, PureTraceStep { step, name, took_ms, outcome });
pair!(record Component, PureComponent { component, raw, normalised, weight, contribution });
pair!(record Acute, PureAcute { name, at_ms });
pair!(record DoorSignals, PureSignals { components, acute, facts });
pair!(record AuxRow, PureAuxRow { name, raw, normalised });
pair!(record RecFlags, Flags { forced_decision, aging, auto_revived });

/// A two-layer composite's second layer is `(name, score, weight)` on the
/// pure side.
impl Conv<Option<LayerScore>> for Option<(String, f64, f64)> {
    fn conv(self) -> Option<LayerScore> {
        self.map(|(name, score, weight)| LayerScore { name, score, weight })
    }
}

impl Conv<Option<(String, f64, f64)>> for Option<LayerScore> {
    fn conv(self) -> Option<(String, f64, f64)> {
        self.map(|l| (l.name, l.score, l.weight))
    }
}

pair!(record CompositeScore, PureCompositeScore { drift_score, view_drift, layer });

serialize_as!(RecStatus => Status, Disposition => PureDisposition);

impl RecStatus {
    pub fn as_str(self) -> &'static str {
        Status::from(self).as_str()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signals_and_the_composite_survive_the_seam() {
        let pure = PureSignals {
            components: vec![PureComponent {
                component: "sleep_debt".into(),
                raw: None,
                normalised: 0.4,
                weight: 2.0,
                contribution: 0.8,
            }],
            acute: vec![PureAcute { name: "injury".into(), at_ms: 5 }],
            facts: serde_json::json!({"last_run": "2026-11-20"}),
        };
        let wit: DoorSignals = pure.clone().into();
        assert_eq!(wit.facts, r#"{"last_run":"2026-11-20"}"#);
        assert_eq!(PureSignals::from(wit), pure);
        let c = PureCompositeScore { drift_score: 0.5, view_drift: 0.4, layer: Some(("acute".into(), 0.9, 0.25)) };
        let wit: CompositeScore = c.clone().into();
        assert_eq!(wit.layer.as_ref().unwrap().weight, 0.25);
        assert_eq!(PureCompositeScore::from(wit), c);
        assert_eq!(serde_json::to_value(Disposition::ActedModified).unwrap(), "acted_modified");
    }
}
