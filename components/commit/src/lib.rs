//! The `commit` stage (`mneme:commit`): Phase D. A thin adapter over
//! `mneme_pipeline::commit`.

spin_sdk::wit_bindgen::generate!({
    path: ["../../wit/types", "../../wit/commit"],
    world: "mneme:commit/stage-commit",
    runtime_path: "::spin_sdk::wit_bindgen::rt",
    generate_all,
});

use exports::mneme::commit::commit::Guest;
use mneme::types::types::StageError;
use mneme_pipeline::{Fail, run};

struct Stage;

fn err(f: Fail) -> StageError {
    StageError { code: f.code, message: f.message }
}

impl Guest for Stage {
    async fn commit(request: String) -> Result<String, StageError> {
        run(&request, mneme_pipeline::commit::commit).await.map_err(err)
    }
}

export!(Stage);
