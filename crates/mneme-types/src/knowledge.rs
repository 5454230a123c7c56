//! The seam values of knowledge entries (`mneme:types/knowledge`) and
//! their pure counterparts in `mneme-knowledge`, whose serde names (an
//! entry's `type`, `kept-as-history`, a pattern's `resolution` tag) the API
//! and the stored rows already use.

use mneme_knowledge::entry::{
    Confidence as PureConfidence, Entry as PureEntry, KnowledgeType as PureKnowledgeType, SourceType as PureSourceType,
    Stability as PureStability,
};
use mneme_knowledge::fusion::Mode as PureMode;
use mneme_knowledge::governor::Stance as PureStance;
use mneme_knowledge::job::{Outcome as PureOutcome, OutcomeKind as PureOutcomeKind, Report as PureReport, Source};
use mneme_knowledge::patterns::Resolution;
use mneme_knowledge::validate::{Candidate as PureCandidate, Dropped as PureDropped};

use crate::{named_enum, pair, serialize_as};

pub use crate::mneme::types::knowledge::*;

pair!(enum KnowledgeType, PureKnowledgeType { Framework, Decision, Standard, Philosophy, Reaction });
pair!(enum Confidence, PureConfidence { Low, Medium, High });
pair!(enum Stability, PureStability { Evergreen, Stable, Evolving });
pair!(enum SourceType, PureSourceType { Chat, Meeting });
pair!(enum SearchMode, PureMode { Hybrid, Text, Vector });
pair!(enum Stance, PureStance { Agree, Contradict, Refine, Unrelated });
pair!(enum OutcomeKind, PureOutcomeKind { Kept, Dropped, Merged, KeptAsHistory });
pair!(record KnowledgeEntry, PureEntry {
    id, kind, topic, position, reasoning, reasoning_pattern, confidence, stability, tier, tags, source_type,
    source_channel, source_date, source_url, corroboration_count, last_corroborated_at, superseded_by, created_at,
    extractor,
});
pair!(record Transcript, Source { source_type, source_channel, source_date, source_url, principal, text });
pair!(record Candidate, PureCandidate {
    kind, topic, position, reasoning, pattern_hint, style_only, confidence, stability, tags, notes,
});
pair!(record Dropped, PureDropped { reason, detail });
pair!(record CandidateOutcome, PureOutcome {
    index, outcome, entry_id, into, reason, detail, supersedes, superseded_by, contradicts_but_kept, pattern,
    stance_by, notes, topic,
});
pair!(record IngestReport, PureReport {
    extractor, extractor_note, candidates, kept, merged, dropped, kept_as_history, superseded, outcomes,
});

impl From<Resolution> for PatternResolution {
    fn from(r: Resolution) -> Self {
        match r {
            Resolution::Null { reason } => PatternResolution::NoPattern(reason),
            Resolution::Known { slug } => PatternResolution::Known(slug),
            Resolution::Matched { slug, cosine } => PatternResolution::Matched(PatternMatch { slug, cosine }),
            Resolution::Minted { slug, description } => PatternResolution::Minted(MintedPattern { slug, description }),
        }
    }
}

impl From<PatternResolution> for Resolution {
    fn from(r: PatternResolution) -> Self {
        match r {
            PatternResolution::NoPattern(reason) => Resolution::Null { reason },
            PatternResolution::Known(slug) => Resolution::Known { slug },
            PatternResolution::Matched(m) => Resolution::Matched { slug: m.slug, cosine: m.cosine },
            PatternResolution::Minted(m) => Resolution::Minted { slug: m.slug, description: m.description },
        }
    }
}

pair!(@conv PatternResolution, Resolution);

named_enum!(JobStatus { Queued => "queued", Running => "running", Done => "done", Failed => "failed" });

impl JobStatus {
    pub fn parse(s: &str) -> Option<Self> {
        [JobStatus::Queued, JobStatus::Running, JobStatus::Done, JobStatus::Failed]
            .into_iter()
            .find(|j| j.as_str() == s)
    }
}

serialize_as!(
    KnowledgeType => PureKnowledgeType,
    Confidence => PureConfidence,
    Stability => PureStability,
    SourceType => PureSourceType,
    SearchMode => PureMode,
    Stance => PureStance,
    OutcomeKind => PureOutcomeKind,
    KnowledgeEntry => PureEntry,
    PatternResolution => Resolution,
    CandidateOutcome => PureOutcome,
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pattern_resolution_survives_the_seam_and_keeps_its_tag() {
        for pure in [
            Resolution::Null { reason: "style only".into() },
            Resolution::Known { slug: "first-principles".into() },
            Resolution::Matched { slug: "trade-offs".into(), cosine: 0.8 },
            Resolution::Minted { slug: "new-one".into(), description: "d".into() },
        ] {
            let wit: PatternResolution = pure.clone().into();
            assert_eq!(serde_json::to_value(&wit).unwrap(), serde_json::to_value(&pure).unwrap());
            assert_eq!(Resolution::from(wit), pure);
        }
        assert_eq!(serde_json::to_value(OutcomeKind::KeptAsHistory).unwrap(), "kept-as-history");
        assert_eq!(JobStatus::parse("running"), Some(JobStatus::Running));
    }
}
