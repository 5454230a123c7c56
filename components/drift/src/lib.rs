//! The `drift` stage (`mneme:drift`): a thin adapter over
//! `mneme_pipeline::drift`.

spin_sdk::wit_bindgen::generate!({
    path: ["../../wit/types", "../../wit/drift"],
    world: "mneme:drift/stage-drift",
    runtime_path: "::spin_sdk::wit_bindgen::rt",
    generate_all,
});

use exports::mneme::drift::drift::Guest;
use mneme::types::types::StageError;
use mneme_pipeline::drift as d;
use mneme_pipeline::{Fail, run};

struct Stage;

fn err(f: Fail) -> StageError {
    StageError { code: f.code, message: f.message }
}

impl Guest for Stage {
    async fn begin(request: String) -> Result<String, StageError> {
        run(&request, d::begin).await.map_err(err)
    }
    async fn finish(request: String) -> Result<String, StageError> {
        run(&request, d::finish).await.map_err(err)
    }
}

export!(Stage);
