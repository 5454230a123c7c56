//! The `context` stage (`mneme:context`): Phase A, context assembly. A thin
//! adapter over `mneme_pipeline::context`.

spin_sdk::wit_bindgen::generate!({
    path: ["../../wit/types", "../../wit/context"],
    world: "mneme:context/stage-context",
    runtime_path: "::spin_sdk::wit_bindgen::rt",
    with: {
        "mneme:types/types@0.1.0": mneme_types::mneme::types::types,
    },
    generate_all,
});

use exports::mneme::context::context::Guest;
use mneme_pipeline::{Fail, run};
use mneme_types::StageError;

struct Stage;

fn err(f: Fail) -> StageError {
    f.into()
}

impl Guest for Stage {
    async fn assemble(request: String) -> Result<String, StageError> {
        run(&request, mneme_pipeline::context::assemble).await.map_err(err)
    }
}

export!(Stage);
