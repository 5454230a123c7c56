//! The `triage` stage (`mneme:triage`): Phase B. A thin adapter over
//! `mneme_pipeline::triage`.

spin_sdk::wit_bindgen::generate!({
    path: ["../../wit/types", "../../wit/triage"],
    world: "mneme:triage/stage-triage",
    runtime_path: "::spin_sdk::wit_bindgen::rt",
    with: {
        "mneme:types/types@0.1.0": mneme_types::mneme::types::types,
    },
    generate_all,
});

use exports::mneme::triage::triage::Guest;
use mneme_pipeline::{Fail, run};
use mneme_types::StageError;

struct Stage;

fn err(f: Fail) -> StageError {
    f.into()
}

impl Guest for Stage {
    async fn screen(request: String) -> Result<String, StageError> {
        run(&request, async |r| Ok(mneme_pipeline::triage::screen(r))).await.map_err(err)
    }

    async fn decide(request: String) -> Result<String, StageError> {
        run(&request, mneme_pipeline::triage::decide).await.map_err(err)
    }
}

export!(Stage);
