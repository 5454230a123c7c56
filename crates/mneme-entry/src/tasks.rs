//! Decomposing a persistent task's goal into steps (002 §7): the primary
//! model with the plan prompt when one is configured, else the labelled
//! rules. `POST /tasks` does it at creation, the task worker for a task
//! that the ACT loop's `persistent_task` skill created.

use crate::mneme::llm::llm::{self, CompletionRequest, Tier};
use mneme_background::cycle::{self, Progress};
use mneme_background::tasks::PLAN_PROMPT;

/// Decomposes `goal` into `progress`'s plan, recording by whom.
pub async fn decompose(goal: &str, model: &llm::ModelStatus, progress: &mut Progress) {
    let answer = if model.configured {
        let r = llm::complete(CompletionRequest {
            tier: Tier::Primary,
            messages: crate::model::system_user(PLAN_PROMPT, cycle::decomposition_message(goal)),
            max_tokens: Some(cycle::DECOMPOSE_MAX_TOKENS),
            temperature: Some(cycle::DECOMPOSE_TEMPERATURE),
            json: true,
            timeout_ms: cycle::DECOMPOSE_TIMEOUT_MS,
        })
        .await;
        Some(r.map(|c| (c.text, c.model)).map_err(|e| format!("{}: {}", e.code, e.message)))
    } else {
        None
    };
    let (plan, by) = cycle::decomposition(goal, answer);
    progress.decomposed(plan, &by);
}
