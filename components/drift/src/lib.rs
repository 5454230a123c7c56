//! The `drift` stage (`mneme:drift`): the cognitive drift engine
//! ([`engine`]). The rules are `mneme_background::drift`'s; the tick entry
//! asks the model for the thought between `begin` and `finish`.

spin_sdk::wit_bindgen::generate!({
    path: ["../../wit/types", "../../wit/drift"],
    world: "mneme:drift/stage-drift",
    runtime_path: "::spin_sdk::wit_bindgen::rt",
    with: {
        "mneme:types/types@0.1.0": mneme_types::mneme::types::types,
        "mneme:types/consolidation@0.1.0": mneme_types::consolidation,
        "mneme:types/drift@0.1.0": mneme_types::drift,
    },
    generate_all,
});

mod engine;

use exports::mneme::drift::drift::Guest;
use mneme_types::StageError;
use mneme_types::drift::{DriftBegun, DriftDone, DriftThought};

struct Stage;

impl Guest for Stage {
    async fn begin(now_ms: u64, lease_ms: u64, seed: u64) -> Result<DriftBegun, StageError> {
        Ok(engine::begin(now_ms, lease_ms, seed).await?)
    }
    async fn finish(thought: DriftThought, now_ms: u64) -> Result<DriftDone, StageError> {
        Ok(engine::finish(thought, now_ms).await?)
    }
}

export!(Stage);
