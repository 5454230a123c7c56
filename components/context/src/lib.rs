//! The `context` stage (`mneme:context`): Phase A, context assembly. A thin
//! adapter over `mneme_pipeline::context`.

spin_sdk::wit_bindgen::generate!({
    path: ["../../wit/types", "../../wit/context"],
    world: "mneme:context/stage-context",
    runtime_path: "::spin_sdk::wit_bindgen::rt",
    with: {
        "mneme:types/types@0.1.0": mneme_types::mneme::types::types,
        "mneme:types/conversation@0.1.0": mneme_types::conversation,
    },
    generate_all,
});

use exports::mneme::context::context::Guest;
use mneme_pipeline::context::{Request, assemble};
use mneme_types::StageError;
use mneme_types::conversation::Assembled;

struct Stage;

impl Guest for Stage {
    async fn assemble(thread_id: String, text: String, now_ms: u64, light: bool) -> Result<Assembled, StageError> {
        Ok(assemble(Request { thread_id, text, now_ms, light }).await?.into())
    }
}

export!(Stage);
