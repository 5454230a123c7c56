//! `mneme:types`, generated once. Every stage component and both entries
//! map the package onto these bindings (wit-bindgen's `with`), so a
//! `StageError` made in a stage is the same Rust type an entry matches on.
//!
//! Its code is an enum at the seam, and the enum has one name per code: the
//! kebab-case name WIT gives it, which is also the `error.code` a client
//! reads. [`ErrorCode::name`] and [`ErrorCode::from_name`] convert, and
//! `Display` writes the name.
//!
//! [`conversation`] holds the message flow's seam values and their
//! conversions to the pure types of `mneme-conversation`; [`tasks`] those
//! of persistent tasks and [`routing`] those of the routing regulator and
//! reflection, to `mneme-background`'s. [`conv`] is the
//! conversion machinery they share. Every seam value is `serde::Serialize`
//! (an entry writes some of them as its HTTP answer).

spin_sdk::wit_bindgen::generate!({
    path: ["../../wit/types"],
    world: "mneme:types/shared",
    generate_unused_types: true,
    runtime_path: "::spin_sdk::wit_bindgen::rt",
    additional_derives: [serde::Serialize],
    // Serialised by hand, under the names rows and the API use. The list
    // names a type without its interface, so a type's name is unique
    // across `mneme:types`.
    additional_derives_ignore: [
        "error-code", "task-state", "step-status", "step", "surfacing", "pressure", "judgement", "routing-metrics",
        "signals", "given-back", "gist-outcome", "gist-stored", "consolidation-summary", "seed-kind", "skip",
        "thought-kind", "drift-action", "thought", "knowledge-type", "confidence", "stability", "source-type",
        "search-mode", "stance", "outcome-kind", "knowledge-entry", "pattern-resolution", "candidate-outcome",
        "job-status", "rec-status", "disposition", "model-path",
    ],
    generate_all,
});

pub mod consolidation;
pub mod conv;
pub mod conversation;
pub mod drift;
pub mod knowledge;
pub mod routing;
pub mod rx;

/// The memory stage's values (`mneme:types/memory`), which have no pure
/// counterparts: the HTTP layer shapes them for its clients.
pub mod memory {
    pub use crate::mneme::types::memory::*;
}
pub mod tasks;

pub use mneme::types::types::{ErrorCode, GivenBack, ModelPath, NotDue, StageError, VaultFile};

named_enum!(GivenBack { Queued => "queued", Failed => "failed" });

// A ledger row's `path` and the name a fallback line gives.
named_enum!(ModelPath {
    Triage => "triage",
    Tiebreak => "tiebreak",
    ActPlan => "act-plan",
    ActCritic => "act-critic",
    Reply => "reply",
    ToolReply => "tool-reply",
    KnowledgeExtract => "knowledge-extract",
    KnowledgeStance => "knowledge-stance",
    ConsolidateChunk => "consolidate-chunk",
    ConsolidateEpisode => "consolidate-episode",
    ConsolidateSemantic => "consolidate-semantic",
    DriftThought => "drift-thought",
    TaskPlan => "task-plan",
    TaskAct => "task-act",
    RxCompose => "rx-compose",
    Reflection => "reflection",
});

/// Every code, in the order WIT lists them.
pub const CODES: [ErrorCode; 24] = [
    ErrorCode::Invalid,
    ErrorCode::NotFound,
    ErrorCode::Conflict,
    ErrorCode::LeaseLost,
    ErrorCode::Terminal,
    ErrorCode::ForcedDecision,
    ErrorCode::DoorBusy,
    ErrorCode::MalformedArtifact,
    ErrorCode::Upstream,
    ErrorCode::ModelError,
    ErrorCode::ModelTimeout,
    ErrorCode::ModelUnavailable,
    ErrorCode::StoreUnavailable,
    ErrorCode::StoreBusy,
    ErrorCode::NotConfigured,
    ErrorCode::Misconfigured,
    ErrorCode::EmbeddingFailed,
    ErrorCode::Config,
    ErrorCode::AccessDenied,
    ErrorCode::Migration,
    ErrorCode::BadSql,
    ErrorCode::Decode,
    ErrorCode::UnknownAction,
    ErrorCode::Internal,
];

impl ErrorCode {
    /// The code's name: `lease-lost`, `store-unavailable`…
    pub fn name(self) -> &'static str {
        match self {
            ErrorCode::Invalid => "invalid",
            ErrorCode::NotFound => "not-found",
            ErrorCode::Conflict => "conflict",
            ErrorCode::LeaseLost => "lease-lost",
            ErrorCode::Terminal => "terminal",
            ErrorCode::ForcedDecision => "forced-decision",
            ErrorCode::DoorBusy => "door-busy",
            ErrorCode::MalformedArtifact => "malformed-artifact",
            ErrorCode::Upstream => "upstream",
            ErrorCode::ModelError => "model-error",
            ErrorCode::ModelTimeout => "model-timeout",
            ErrorCode::ModelUnavailable => "model-unavailable",
            ErrorCode::StoreUnavailable => "store-unavailable",
            ErrorCode::StoreBusy => "store-busy",
            ErrorCode::NotConfigured => "not-configured",
            ErrorCode::Misconfigured => "misconfigured",
            ErrorCode::EmbeddingFailed => "embedding-failed",
            ErrorCode::Config => "config",
            ErrorCode::AccessDenied => "access-denied",
            ErrorCode::Migration => "migration",
            ErrorCode::BadSql => "bad-sql",
            ErrorCode::Decode => "decode",
            ErrorCode::UnknownAction => "unknown-action",
            ErrorCode::Internal => "internal",
        }
    }

    /// The code of a name; a name off the list is `internal`, a fault in
    /// Mneme itself.
    pub fn from_name(name: &str) -> Self {
        CODES.into_iter().find(|c| c.name() == name).unwrap_or(ErrorCode::Internal)
    }

    /// Whether retrying later, once a service is back or free, can succeed.
    pub fn is_unavailable(self) -> bool {
        matches!(self, ErrorCode::ModelUnavailable | ErrorCode::StoreUnavailable | ErrorCode::StoreBusy)
    }
}

impl serde::Serialize for ErrorCode {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl StageError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self { code, message: message.into() }
    }

    /// An `internal` error: a fault in Mneme itself.
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::Internal, message)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_unknown_names_are_internal() {
        for c in CODES {
            assert_eq!(ErrorCode::from_name(c.name()), c, "{c}");
        }
        assert_eq!(ErrorCode::from_name("commit"), ErrorCode::Internal);
        assert_eq!(ErrorCode::from_name(""), ErrorCode::Internal);
    }

    /// The cases of `enum NAME` in wit/types/types.wit, in order.
    fn wit_enum(name: &str) -> Vec<&'static str> {
        let wit = include_str!("../../../wit/types/types.wit");
        let body = &wit[wit.find(&format!("enum {name} {{")).unwrap()..];
        let body = &body[..body.find('}').unwrap()];
        body.lines()
            .skip(1)
            .map(str::trim)
            .filter(|l| !l.is_empty() && !l.starts_with("///"))
            .map(|l| l.trim_end_matches(','))
            .collect()
    }

    #[test]
    fn the_wit_file_lists_exactly_these_codes() {
        assert_eq!(wit_enum("error-code"), CODES.map(ErrorCode::name), "wit/types/types.wit and CODES differ");
    }

    #[test]
    fn model_path_names_are_the_wit_names() {
        let listed = wit_enum("model-path");
        // wit-bindgen lifts an enum from its index in WIT's order.
        let named: Vec<&str> = (0..listed.len() as u8).map(|i| unsafe { ModelPath::_lift(i) }.as_str()).collect();
        assert_eq!(listed, named);
    }
}
