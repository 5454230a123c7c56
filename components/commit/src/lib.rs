//! The `commit` stage (`mneme:commit`): Phase D. A thin adapter over
//! `mneme_pipeline::commit`.

spin_sdk::wit_bindgen::generate!({
    path: ["../../wit/types", "../../wit/commit"],
    world: "mneme:commit/stage-commit",
    runtime_path: "::spin_sdk::wit_bindgen::rt",
    with: {
        "mneme:types/types@0.1.0": mneme_types::mneme::types::types,
    },
    generate_all,
});

use exports::mneme::commit::commit::Guest;
use mneme_pipeline::{Fail, run};
use mneme_types::StageError;

struct Stage;

fn err(f: Fail) -> StageError {
    f.into()
}

impl Guest for Stage {
    async fn commit(request: String) -> Result<String, StageError> {
        run(&request, mneme_pipeline::commit::commit).await.map_err(err)
    }
}

export!(Stage);
