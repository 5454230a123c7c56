//! The `commit` stage (`mneme:commit`): Phase D, the exchange's rows
//! in one transaction ([`exchange`]).

spin_sdk::wit_bindgen::generate!({
    path: ["../../wit/types", "../../wit/commit"],
    world: "mneme:commit/stage-commit",
    runtime_path: "::spin_sdk::wit_bindgen::rt",
    with: {
        "mneme:types/types@0.1.0": mneme_types::mneme::types::types,
        "mneme:types/conversation@0.1.0": mneme_types::conversation,
    },
    generate_all,
});

mod exchange;

use exports::mneme::commit::commit::Guest;
use mneme_types::StageError;
use mneme_types::conversation::{Committed, FinishedExchange};

struct Stage;

impl Guest for Stage {
    async fn commit(exchange: FinishedExchange) -> Result<Committed, StageError> {
        Ok(exchange::commit(exchange).await?)
    }
}

export!(Stage);
