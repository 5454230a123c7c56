//! The rules of Mneme's recommendation pipeline (the 000 seed), free of
//! I/O so each one is tested at its boundaries:
//! - `door`: a door's configuration, checked, and its observations;
//! - `signals`: the signal contract, the composite, the dedup predicate
//!   (D-012), the driving signal, and confidence;
//! - `artifact`: the draft, its two content rules (D-008, D-011), the
//!   labelled template, the markdown, and frontmatter patches;
//! - `lifecycle`: snooze, disposition, auto-revive and the derived flags.

pub mod artifact;
pub mod door;
pub mod lifecycle;
pub mod signals;

/// The steps of `POST /rx/{door}`, in their fixed order.
pub const STEPS: [(&str, &str); 13] = [
    ("0.5", "auto-revive"),
    ("0.7", "reconcile"),
    ("1", "read drift signals"),
    ("2", "auxiliary signals"),
    ("3", "composite"),
    ("4", "auto-dedup"),
    ("5", "driving signal"),
    ("6", "evidence"),
    ("7", "compose"),
    ("8", "write markdown"),
    ("9", "insert into the store"),
    ("10", "patch frontmatter"),
    ("11", "return"),
];

/// One entry of a run's trace: the step, its name, how long it took (ms,
/// microsecond precision) and what it did.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct TraceStep {
    pub step: String,
    pub name: String,
    pub took_ms: f64,
    pub outcome: String,
}

/// The trace entry of `step`, which took `took`.
pub fn trace_entry(step: &str, took: std::time::Duration, outcome: impl Into<String>) -> TraceStep {
    let name = STEPS.iter().find(|s| s.0 == step).map_or("", |s| s.1);
    let took_ms = (took.as_secs_f64() * 1_000_000.0).round() / 1_000.0;
    TraceStep { step: step.into(), name: name.into(), took_ms, outcome: outcome.into() }
}
