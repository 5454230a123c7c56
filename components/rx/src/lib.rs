//! The `rx` stage (`mneme:rx`): a thin adapter over `mneme_pipeline::rx`.

spin_sdk::wit_bindgen::generate!({
    path: ["../../wit/types", "../../wit/rx"],
    world: "mneme:rx/stage-rx",
    runtime_path: "::spin_sdk::wit_bindgen::rt",
    with: {
        "mneme:types/types@0.1.0": mneme_types::mneme::types::types,
    },
    generate_all,
});

use exports::mneme::rx::rx::Guest;
use mneme_pipeline::rx;
use mneme_pipeline::{Fail, run};
use mneme_types::StageError;

struct Stage;

fn err(f: Fail) -> StageError {
    f.into()
}

impl Guest for Stage {
    async fn doors(request: String) -> Result<String, StageError> {
        run(&request, rx::doors).await.map_err(err)
    }
    async fn put_door(request: String) -> Result<String, StageError> {
        run(&request, rx::put_door).await.map_err(err)
    }
    async fn observe(request: String) -> Result<String, StageError> {
        run(&request, rx::observe).await.map_err(err)
    }
    async fn begin(request: String) -> Result<String, StageError> {
        run(&request, rx::begin).await.map_err(err)
    }
    async fn finish(request: String) -> Result<String, StageError> {
        run(&request, rx::finish).await.map_err(err)
    }
    async fn release(request: String) -> Result<String, StageError> {
        run(&request, rx::release).await.map_err(err)
    }
    async fn list_recs(request: String) -> Result<String, StageError> {
        run(&request, rx::list_recs).await.map_err(err)
    }
    async fn get_rec(request: String) -> Result<String, StageError> {
        run(&request, rx::get_rec).await.map_err(err)
    }
    async fn rec_markdown(request: String) -> Result<String, StageError> {
        run(&request, rx::rec_markdown).await.map_err(err)
    }
    async fn ingest_rec(request: String) -> Result<String, StageError> {
        run(&request, rx::ingest_rec).await.map_err(err)
    }
    async fn dispose(request: String) -> Result<String, StageError> {
        run(&request, rx::dispose).await.map_err(err)
    }
    async fn snooze(request: String) -> Result<String, StageError> {
        run(&request, rx::snooze).await.map_err(err)
    }
    async fn vault(request: String) -> Result<String, StageError> {
        run(&request, rx::vault).await.map_err(err)
    }
    async fn artifacts(request: String) -> Result<String, StageError> {
        run(&request, rx::artifacts).await.map_err(err)
    }
}

export!(Stage);
