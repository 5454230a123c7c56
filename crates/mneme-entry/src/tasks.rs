//! Decomposing a persistent task's goal into steps (002 §7): the primary
//! model with the plan prompt when one is configured, else the labelled
//! rules. `POST /tasks` does it at creation, the task worker for a task
//! that the ACT loop's `persistent_task` skill created.

use crate::mneme::llm::llm::{self, Tier};
use crate::model::{Fallback, JsonAsk, Ledger, ModelPath, ask_json};
use mneme_background::cycle::{self, Progress};
use mneme_background::tasks::{PLAN_PROMPT, plan_schema};

/// Decomposes `goal` into `progress`'s plan, recording by whom. The
/// model's plan is asked for under its schema, once more if unreadable; a
/// plan the design's gates reject, or none, is a fallback on the ledger
/// (the task then runs flat, as the design has it).
pub async fn decompose(
    goal: &str,
    model: &llm::ModelStatus,
    progress: &mut Progress,
    ledger: &mut Ledger,
    now_ms: u64,
) {
    let answer = if model.configured {
        let ask = JsonAsk {
            path: ModelPath::TaskPlan,
            tier: Tier::Primary,
            messages: crate::model::system_user(PLAN_PROMPT, cycle::decomposition_message(goal)),
            schema: plan_schema(),
            max_tokens: cycle::DECOMPOSE_MAX_TOKENS,
            temperature: cycle::DECOMPOSE_TEMPERATURE,
            timeout_ms: cycle::DECOMPOSE_TIMEOUT_MS,
        };
        let r = ask_json(ledger, ask, now_ms, |t| cycle::parse_proposal(t).map(|_| t.to_string())).await;
        Some(r.map(|(text, c)| (text, c.model)).map_err(|why| why.to_string()))
    } else {
        None
    };
    let asked = answer.is_some();
    let (plan, by) = cycle::decomposition(goal, answer);
    if asked && let Err(why) = &plan {
        // A failed call or an unreadable answer is on the ledger already.
        if why.starts_with("the model's plan was rejected") {
            let f = Fallback { reason: "rejected".into(), detail: why.clone() };
            ledger.fell_back(ModelPath::TaskPlan, &f, now_ms);
        }
    }
    progress.decomposed(plan, &by);
}
