//! The `triage` stage (`mneme:triage`): Phase B. Screening is a rule
//! of `mneme-conversation`; [`decide`] reads the model's answer, falls back
//! to the heuristic, and logs the calibration row.

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

mod decide;

use exports::mneme::triage::triage::Guest;
use mneme_types::StageError;
use mneme_types::conversation::{Screening, Triage, TriageCall};

struct Stage;

impl Guest for Stage {
    async fn screen(text: String, warmth: f64) -> Screening {
        decide::screen(&text, warmth)
    }

    async fn decide(call: TriageCall) -> Result<Triage, StageError> {
        Ok(decide::decide(call).await?.into())
    }
}

export!(Stage);
