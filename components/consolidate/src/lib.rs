//! The `consolidate` stage (`mneme:consolidate`): memory consolidation's
//! queues ([`jobs`]). The rules are `mneme_background::consolidate`'s; the
//! tick entry makes the model calls between `claim` and `apply`.

spin_sdk::wit_bindgen::generate!({
    path: ["../../wit/types", "../../wit/consolidate"],
    world: "mneme:consolidate/stage-consolidate",
    runtime_path: "::spin_sdk::wit_bindgen::rt",
    with: {
        "mneme:types/types@0.1.0": mneme_types::mneme::types::types,
        "mneme:types/consolidation@0.1.0": mneme_types::consolidation,
    },
    generate_all,
});

mod jobs;

use exports::mneme::consolidate::consolidate::Guest;
use mneme_types::consolidation::{ConsolidationJob, ConsolidationSummary, JobOutput};
use mneme_types::{GivenBack, StageError};

struct Stage;

impl Guest for Stage {
    async fn claim(now_ms: u64, lease_ms: u64) -> Result<Option<ConsolidationJob>, StageError> {
        Ok(jobs::claim(now_ms, lease_ms).await?)
    }
    async fn apply(
        job_id: i64,
        claim: String,
        output: JobOutput,
        source: String,
        now_ms: u64,
    ) -> Result<ConsolidationSummary, StageError> {
        Ok(jobs::apply(jobs::Applying { job_id, claim, source, now_ms }, output).await?)
    }
    async fn fail(
        job_id: i64,
        claim: String,
        error: String,
        retry: bool,
        now_ms: u64,
    ) -> Result<Option<GivenBack>, StageError> {
        Ok(jobs::fail(job_id, &claim, &error, retry, now_ms).await?)
    }
}

export!(Stage);
