//! The seam values of memory consolidation (`mneme:types/consolidation`)
//! and their pure counterparts in `mneme_background::consolidate`. A job's
//! summary serialises as `jobs.result` stores it: the case's fields alone,
//! or `{skipped}`.

use mneme_background::consolidate::{
    Chunk as PureChunk, ConceptDraft as PureConceptDraft, EpisodeBrief as PureEpisodeBrief,
    EpisodeDraft as PureEpisodeDraft, Exchange as PureExchange, FactDraft as PureFactDraft, Factors as PureFactors,
    GistDraft as PureGistDraft, RelationDraft as PureRelationDraft, Semantic as PureSemantic,
};
use serde::ser::{SerializeMap, Serializer};

use crate::{named_enum, pair};

pub use crate::mneme::types::consolidation::*;

pair!(record Exchange, PureExchange { id, topic, prompt, response });
pair!(record EpisodeBrief, PureEpisodeBrief { id, topic, gist, intent, outcome });
pair!(record GistDraft, PureGistDraft { kind, content, confidence });
pair!(record FactDraft, PureFactDraft { key, value, confidence });
pair!(record Chunk, PureChunk { gists, facts });
pair!(record Factors, PureFactors { novelty, emotional, commitment, unresolved });
pair!(record EpisodeDraft, PureEpisodeDraft { intent, context, action, emotion, outcome, gist, factors, open_loops });
pair!(record ConceptDraft, PureConceptDraft { name, kind, definition, domain, abstraction_level, episodes });
pair!(record RelationDraft, PureRelationDraft { source, target, kind, strength });
pair!(record Semantic, PureSemantic { concepts, relationships });

named_enum!(GistOutcome {
    Stored => "stored",
    Replaced => "replaced",
    Duplicate => "duplicate",
    LowConfidence => "low_confidence",
});

/// `{type, outcome}`, as the chunker's summary has always named them.
impl serde::Serialize for GistStored {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(2))?;
        m.serialize_entry("type", &self.kind)?;
        m.serialize_entry("outcome", &self.outcome)?;
        m.end()
    }
}

impl serde::Serialize for ConsolidationSummary {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            ConsolidationSummary::Skipped(why) => {
                let mut m = s.serialize_map(Some(1))?;
                m.serialize_entry("skipped", why)?;
                m.end()
            }
            ConsolidationSummary::Chunk(c) => c.serialize(s),
            ConsolidationSummary::Episode(e) => e.serialize(s),
            ConsolidationSummary::Semantic(x) => x.serialize(s),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_episode_draft_keeps_its_facets_as_json() {
        let pure = PureEpisodeDraft {
            intent: json!({"direction": "plan", "clarity": 0.8}),
            context: json!({}),
            action: "asked".into(),
            emotion: json!({"valence": "calm"}),
            outcome: "a plan".into(),
            gist: "planned the garden".into(),
            factors: PureFactors { novelty: 2, emotional: 1, commitment: 3, unresolved: true },
            open_loops: vec!["buy seeds".into()],
        };
        let wit: EpisodeDraft = pure.clone().into();
        assert_eq!(wit.intent, r#"{"clarity":0.8,"direction":"plan"}"#);
        assert_eq!(PureEpisodeDraft::from(wit), pure);
    }

    #[test]
    fn a_summary_serialises_as_jobs_result_stores_it() {
        let chunk = ConsolidationSummary::Chunk(ChunkSummary {
            topic: "garden".into(),
            gists: vec![GistStored { kind: "fact".into(), outcome: GistOutcome::LowConfidence }],
            facts: 2,
            source: "m".into(),
        });
        assert_eq!(
            serde_json::to_value(&chunk).unwrap(),
            json!({"topic": "garden", "gists": [{"type": "fact", "outcome": "low_confidence"}], "facts": 2, "source": "m"})
        );
        let skipped = ConsolidationSummary::Skipped("gone".into());
        assert_eq!(serde_json::to_value(&skipped).unwrap(), json!({"skipped": "gone"}));
    }
}
