//! The `triage` stage (`mneme:triage`): Phase B. A thin adapter over
//! `mneme_pipeline::triage`.

spin_sdk::wit_bindgen::generate!({
    path: ["../../wit/types", "../../wit/triage"],
    world: "mneme:triage/stage-triage",
    runtime_path: "::spin_sdk::wit_bindgen::rt",
    with: {
        "mneme:types/types@0.1.0": mneme_types::mneme::types::types,
        "mneme:types/conversation@0.1.0": mneme_types::conversation,
    },
    generate_all,
});

use exports::mneme::triage::triage::Guest;
use mneme_types::StageError;
use mneme_types::conversation::{Screening, Triage, TriageCall};

struct Stage;

impl Guest for Stage {
    async fn screen(text: String, warmth: f64) -> Screening {
        mneme_pipeline::triage::screen(&text, warmth)
    }

    async fn decide(call: TriageCall) -> Result<Triage, StageError> {
        Ok(mneme_pipeline::triage::decide(call).await?.into())
    }
}

export!(Stage);
