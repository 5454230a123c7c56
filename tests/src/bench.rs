//! What the benchmark binaries share: their command line and percentiles.

use crate::Backend;

/// The value after `name` on the command line (`--runs 300`).
pub fn arg(name: &str) -> Option<String> {
    let args: Vec<String> = std::env::args().collect();
    args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).cloned()
}

/// `--backend hosted` (PostgreSQL and Redis), else the embedded default.
pub fn backend() -> Backend {
    match arg("--backend").as_deref() {
        Some("hosted") => Backend::Hosted,
        _ => Backend::Embedded,
    }
}

/// The `p` quantile (0–1) of already sorted samples, nearest rank.
pub fn percentile(sorted: &[f64], p: f64) -> f64 {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}
