//! The `drift` stage (`mneme:drift`): a thin adapter over
//! `mneme_pipeline::drift`.

spin_sdk::wit_bindgen::generate!({
    path: ["../../wit/types", "../../wit/drift"],
    world: "mneme:drift/stage-drift",
    runtime_path: "::spin_sdk::wit_bindgen::rt",
    with: {
        "mneme:types/types@0.1.0": mneme_types::mneme::types::types,
    },
    generate_all,
});

use exports::mneme::drift::drift::Guest;
use mneme_pipeline::drift as d;
use mneme_pipeline::{Fail, run};
use mneme_types::StageError;

struct Stage;

fn err(f: Fail) -> StageError {
    f.into()
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
