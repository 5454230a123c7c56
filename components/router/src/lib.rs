//! The `router` stage (`mneme:router`): the mode router. A thin adapter over
//! `mneme_pipeline::router`.

spin_sdk::wit_bindgen::generate!({
    path: ["../../wit/types", "../../wit/router"],
    world: "mneme:router/stage-router",
    runtime_path: "::spin_sdk::wit_bindgen::rt",
    with: {
        "mneme:types/types@0.1.0": mneme_types::mneme::types::types,
        "mneme:types/conversation@0.1.0": mneme_types::conversation,
    },
    generate_all,
});

use exports::mneme::router::router::Guest;
use mneme_pipeline::router::{RecordRequest, RouteRequest};
use mneme_pipeline::{Fail, run};
use mneme_types::StageError;
use mneme_types::conversation::{Assembled, Intent, Mode, Recorded, Routed};

struct Stage;

fn err(f: Fail) -> StageError {
    f.into()
}

impl Guest for Stage {
    async fn route(
        text: String,
        context: Assembled,
        intent: Intent,
        previous_mode: Option<Mode>,
        skip_tiebreaker: bool,
    ) -> Result<Routed, StageError> {
        let req = RouteRequest {
            text,
            context: context.into(),
            intent: intent.into(),
            previous_mode: previous_mode.map(Into::into),
            skip_tiebreaker,
        };
        Ok(mneme_pipeline::router::route(req).await?)
    }

    async fn record_decision(
        routed: Routed,
        tiebreak_answer: Option<String>,
        exchange_id: String,
        thread_id: String,
        topic: String,
        routing_time_ms: u64,
        now_ms: u64,
    ) -> Result<Recorded, StageError> {
        let req = RecordRequest { routed, tiebreak_answer, exchange_id, thread_id, topic, routing_time_ms, now_ms };
        Ok(mneme_pipeline::router::record(req).await?)
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
