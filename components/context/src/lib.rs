//! The `context` stage (`mneme:context`): Phase A, context assembly. A thin
//! adapter over `mneme_pipeline::context`.

spin_sdk::wit_bindgen::generate!({
    path: ["../../wit/types", "../../wit/context"],
    world: "mneme:context/stage-context",
    runtime_path: "::spin_sdk::wit_bindgen::rt",
    generate_all,
});

use exports::mneme::context::context::Guest;
use mneme::types::types::StageError;
use mneme_pipeline::{Fail, run};

struct Stage;

fn err(f: Fail) -> StageError {
    StageError { code: f.code, message: f.message }
}

impl Guest for Stage {
    async fn assemble(request: String) -> Result<String, StageError> {
        run(&request, mneme_pipeline::context::assemble).await.map_err(err)
    }
}

export!(Stage);
