//! The `act` stage (`mneme:act`): the innate actions of the ACT loop. A thin
//! adapter over `mneme_pipeline::act`.

spin_sdk::wit_bindgen::generate!({
    path: ["../../wit/types", "../../wit/act"],
    world: "mneme:act/stage-act",
    runtime_path: "::spin_sdk::wit_bindgen::rt",
    generate_all,
});

use exports::mneme::act::act::Guest;
use mneme::types::types::StageError;
use mneme_pipeline::{Fail, run};

struct Stage;

fn err(f: Fail) -> StageError {
    StageError { code: f.code, message: f.message }
}

impl Guest for Stage {
    async fn dispatch(request: String) -> Result<String, StageError> {
        run(&request, mneme_pipeline::act::dispatch).await.map_err(err)
    }

    async fn log_iteration(request: String) -> Result<String, StageError> {
        run(&request, mneme_pipeline::act::log_iteration).await.map_err(err)
    }
}

export!(Stage);
