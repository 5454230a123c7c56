//! The `knowledge` stage (`mneme:knowledge`): a thin adapter over
//! `mneme_pipeline::knowledge`.

spin_sdk::wit_bindgen::generate!({
    path: ["../../wit/types", "../../wit/knowledge"],
    world: "mneme:knowledge/stage-knowledge",
    runtime_path: "::spin_sdk::wit_bindgen::rt",
    with: {
        "mneme:types/types@0.1.0": mneme_types::mneme::types::types,
    },
    generate_all,
});

use exports::mneme::knowledge::knowledge::Guest;
use mneme_pipeline::knowledge as k;
use mneme_pipeline::{Fail, run};
use mneme_types::StageError;

struct Stage;

fn err(f: Fail) -> StageError {
    f.into()
}

impl Guest for Stage {
    async fn enqueue(request: String) -> Result<String, StageError> {
        run(&request, k::enqueue).await.map_err(err)
    }
    async fn job(request: String) -> Result<String, StageError> {
        run(&request, k::job).await.map_err(err)
    }
    async fn claim(request: String) -> Result<String, StageError> {
        run(&request, k::claim).await.map_err(err)
    }
    async fn prepare(request: String) -> Result<String, StageError> {
        run(&request, k::prepare).await.map_err(err)
    }
    async fn apply(request: String) -> Result<String, StageError> {
        run(&request, k::apply).await.map_err(err)
    }
    async fn fail(request: String) -> Result<String, StageError> {
        run(&request, k::fail).await.map_err(err)
    }
    async fn list(request: String) -> Result<String, StageError> {
        run(&request, k::list).await.map_err(err)
    }
    async fn get(request: String) -> Result<String, StageError> {
        run(&request, k::get).await.map_err(err)
    }
    async fn markdown(request: String) -> Result<String, StageError> {
        run(&request, k::markdown).await.map_err(err)
    }
    async fn vault(request: String) -> Result<String, StageError> {
        run(&request, async |_: serde_json::Value| k::vault().await).await.map_err(err)
    }
    async fn patterns(request: String) -> Result<String, StageError> {
        run(&request, async |_: serde_json::Value| k::pattern_list().await).await.map_err(err)
    }
    async fn retrieve(request: String) -> Result<String, StageError> {
        run(&request, k::retrieve).await.map_err(err)
    }
    async fn search(request: String) -> Result<String, StageError> {
        run(&request, k::search).await.map_err(err)
    }
    async fn add_documents(request: String) -> Result<String, StageError> {
        run(&request, k::add_documents).await.map_err(err)
    }
    async fn delete_document(request: String) -> Result<String, StageError> {
        run(&request, k::delete_document).await.map_err(err)
    }
}

export!(Stage);
