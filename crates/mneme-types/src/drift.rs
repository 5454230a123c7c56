//! The seam values of the cognitive drift engine (`mneme:types/drift`)
//! and their pure counterparts in `mneme_background::drift`, whose serde
//! names (`decaying`, `SEED_THREAD`, a thought's `type`) the tick's report
//! and the `drift_log` rows already use.

use mneme_background::drift::{
    Action as PureAction, Activated as PureActivated, Conditions as PureConditions, SeedKind as PureSeedKind,
    Skip as PureSkip, Thought as PureThought, ThoughtKind as PureThoughtKind, Verdict as PureVerdict,
};

use crate::{pair, serialize_as};

pub use crate::mneme::types::drift::*;

pair!(enum SeedKind, PureSeedKind { Decaying, Recent, Salient, Insight, Random });
pair!(enum Skip, PureSkip { QueuesBusy, NoRecentEpisodes, DeepFocus, Fatigued, NoSeed, LowEnergy });
pair!(enum ThoughtKind, PureThoughtKind { Reflection, Question, Hypothesis, Insight });
pair!(enum DriftAction, PureAction { Communicate, Suggest, Nurture, Plan, SeedThread, Reflect, Nothing });
pair!(record Conditions, PureConditions { pending_jobs, last_episode_ms, deep_focus, recent_activation });
pair!(record Activated, PureActivated { id, name, definition, activation });
pair!(record Thought, PureThought { kind, content });
pair!(record Verdict, PureVerdict { action, score, eligible, why });

serialize_as!(
    SeedKind => PureSeedKind,
    Skip => PureSkip,
    ThoughtKind => PureThoughtKind,
    DriftAction => PureAction,
    Thought => PureThought,
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drift_values_serialise_under_the_names_the_log_uses() {
        let t = Thought { kind: ThoughtKind::Question, content: "why cellos?".into() };
        assert_eq!(
            serde_json::to_value(&t).unwrap(),
            serde_json::json!({"type": "question", "content": "why cellos?"})
        );
        assert_eq!(serde_json::to_value(DriftAction::SeedThread).unwrap(), "SEED_THREAD");
        assert_eq!(serde_json::to_value(SeedKind::Decaying).unwrap(), "decaying");
        assert_eq!(serde_json::to_value(Skip::NoSeed).unwrap(), "no_seed");
        assert_eq!(PureThought::from(t.clone()), PureThought { kind: PureThoughtKind::Question, content: t.content });
    }
}
