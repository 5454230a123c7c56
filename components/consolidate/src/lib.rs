//! The `consolidate` stage (`mneme:consolidate`): a thin adapter over
//! `mneme_pipeline::consolidate`.

spin_sdk::wit_bindgen::generate!({
    path: ["../../wit/types", "../../wit/consolidate"],
    world: "mneme:consolidate/stage-consolidate",
    runtime_path: "::spin_sdk::wit_bindgen::rt",
    with: {
        "mneme:types/types@0.1.0": mneme_types::mneme::types::types,
    },
    generate_all,
});

use exports::mneme::consolidate::consolidate::Guest;
use mneme_pipeline::consolidate as c;
use mneme_pipeline::{Fail, run};
use mneme_types::StageError;

struct Stage;

fn err(f: Fail) -> StageError {
    f.into()
}

impl Guest for Stage {
    async fn claim(request: String) -> Result<String, StageError> {
        run(&request, c::claim).await.map_err(err)
    }
    async fn apply(request: String) -> Result<String, StageError> {
        run(&request, c::apply).await.map_err(err)
    }
    async fn fail(request: String) -> Result<String, StageError> {
        run(&request, c::fail).await.map_err(err)
    }
}

export!(Stage);
