//! The `tasks` stage (`mneme:tasks`): a thin adapter over
//! `mneme_pipeline::tasks`.

spin_sdk::wit_bindgen::generate!({
    path: ["../../wit/types", "../../wit/tasks"],
    world: "mneme:tasks/stage-tasks",
    runtime_path: "::spin_sdk::wit_bindgen::rt",
    with: {
        "mneme:types/types@0.1.0": mneme_types::mneme::types::types,
    },
    generate_all,
});

use exports::mneme::tasks::tasks::Guest;
use mneme_pipeline::tasks as t;
use mneme_pipeline::{Fail, run};
use mneme_types::StageError;

struct Stage;

fn err(f: Fail) -> StageError {
    f.into()
}

impl Guest for Stage {
    async fn create(request: String) -> Result<String, StageError> {
        run(&request, t::create).await.map_err(err)
    }
    async fn get(request: String) -> Result<String, StageError> {
        run(&request, t::get).await.map_err(err)
    }
    async fn list(request: String) -> Result<String, StageError> {
        run(&request, t::list).await.map_err(err)
    }
    async fn cancel(request: String) -> Result<String, StageError> {
        run(&request, t::cancel).await.map_err(err)
    }
    async fn begin_cycle(request: String) -> Result<String, StageError> {
        run(&request, t::begin_cycle).await.map_err(err)
    }
    async fn checkpoint(request: String) -> Result<String, StageError> {
        run(&request, t::checkpoint).await.map_err(err)
    }
    async fn end_cycle(request: String) -> Result<String, StageError> {
        run(&request, t::end_cycle).await.map_err(err)
    }
}

export!(Stage);
