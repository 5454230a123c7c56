//! The `context` stage (`mneme:context`): Phase A, context assembly
//! ([`assemble`]). The rules are `mneme-conversation`'s.

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

mod assemble;

use assemble::Request;
use exports::mneme::context::context::Guest;
use mneme_types::StageError;
use mneme_types::conversation::Assembled;

struct Stage;

impl Guest for Stage {
    async fn assemble(thread_id: String, text: String, now_ms: u64, light: bool) -> Result<Assembled, StageError> {
        Ok(assemble::assemble(Request { thread_id, text, now_ms, light }).await?.into())
    }
}

export!(Stage);
