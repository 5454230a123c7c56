//! The `router` stage (`mneme:router`): the mode router. Routing and its log
//! ([`route`]); the routing stability regulator and routing reflection
//! ([`regulator`]).

spin_sdk::wit_bindgen::generate!({
    path: ["../../wit/types", "../../wit/router"],
    world: "mneme:router/stage-router",
    runtime_path: "::spin_sdk::wit_bindgen::rt",
    with: {
        "mneme:types/types@0.1.0": mneme_types::mneme::types::types,
        "mneme:types/conversation@0.1.0": mneme_types::conversation,
        "mneme:types/routing@0.1.0": mneme_types::routing,
    },
    generate_all,
});

mod regulator;
mod route;

use exports::mneme::router::router::Guest;
use mneme_types::StageError;
use mneme_types::conversation::{Assembled, Intent, Mode, Recorded, Routed};
use mneme_types::routing::{ReflectionStart, ReflectionsStored, Regulation, Review};
use route::{RecordRequest, RouteRequest};

struct Stage;

impl Guest for Stage {
    async fn route(
        text: String,
        context: Assembled,
        intent: Intent,
        previous_mode: Option<Mode>,
        skip_tiebreaker: bool,
        excluded: Vec<Mode>,
    ) -> Result<Routed, StageError> {
        let req = RouteRequest {
            text,
            context: context.into(),
            intent: intent.into(),
            previous_mode: previous_mode.map(Into::into),
            skip_tiebreaker,
            excluded: excluded.into_iter().map(Into::into).collect(),
        };
        Ok(route::route(req).await?)
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
        Ok(route::record(req).await?)
    }

    async fn regulate(now_ms: u64) -> Result<Regulation, StageError> {
        Ok(regulator::regulate(now_ms).await?)
    }
    async fn reflect_begin(now_ms: u64, lease_ms: u64, seed: u64) -> Result<ReflectionStart, StageError> {
        Ok(regulator::reflect_begin(now_ms, lease_ms, seed).await?)
    }
    async fn reflect_finish(claim: String, now_ms: u64, reviews: Vec<Review>) -> Result<ReflectionsStored, StageError> {
        Ok(regulator::reflect_finish(&claim, now_ms, reviews).await?)
    }
}

export!(Stage);
