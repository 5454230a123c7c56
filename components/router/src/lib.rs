//! The `router` stage (`mneme:router`): the mode router. A thin adapter over
//! `mneme_pipeline::router`.

spin_sdk::wit_bindgen::generate!({
    path: ["../../wit/types", "../../wit/router"],
    world: "mneme:router/stage-router",
    runtime_path: "::spin_sdk::wit_bindgen::rt",
    with: {
        "mneme:types/types@0.1.0": mneme_types::mneme::types::types,
    },
    generate_all,
});

use exports::mneme::router::router::Guest;
use mneme_pipeline::{Fail, run};
use mneme_types::StageError;

struct Stage;

fn err(f: Fail) -> StageError {
    f.into()
}

impl Guest for Stage {
    async fn route(request: String) -> Result<String, StageError> {
        run(&request, mneme_pipeline::router::route).await.map_err(err)
    }

    async fn record_decision(request: String) -> Result<String, StageError> {
        run(&request, mneme_pipeline::router::record).await.map_err(err)
    }

    async fn regulate(request: String) -> Result<String, StageError> {
        run(&request, mneme_pipeline::regulator::regulate).await.map_err(err)
    }

    async fn reflect_begin(request: String) -> Result<String, StageError> {
        run(&request, mneme_pipeline::regulator::reflect_begin).await.map_err(err)
    }

    async fn reflect_finish(request: String) -> Result<String, StageError> {
        run(&request, mneme_pipeline::regulator::reflect_finish).await.map_err(err)
    }
}

export!(Stage);
