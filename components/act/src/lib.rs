//! The `act` stage (`mneme:act`): the innate actions of the ACT loop and
//! Path B's tools. The skills and the
//! `cortex_iterations` log are [`skills`], Path B's registry, queue and
//! calls [`tools`].

spin_sdk::wit_bindgen::generate!({
    path: ["../../wit/types", "../../wit/act"],
    world: "mneme:act/stage-act",
    runtime_path: "::spin_sdk::wit_bindgen::rt",
    with: {
        "mneme:types/types@0.1.0": mneme_types::mneme::types::types,
        "mneme:types/conversation@0.1.0": mneme_types::conversation,
    },
    generate_all,
});

mod skills;
mod tools;

use exports::mneme::act::act::Guest;
use mneme_types::conversation::{
    ActResult, Action, ClaimedToolJob, Conv, CorrectionRate, Delivery, Intent, Iteration, JobClaim, RelevantTool,
    Taken, Tool, ToolOutcome, ToolReply,
};
use mneme_types::{ErrorCode, StageError};
use skills::{DispatchRequest, IterationLog};

struct Stage;

impl Guest for Stage {
    async fn dispatch(
        actions: Vec<Action>,
        thread_id: String,
        topic: String,
        now_ms: u64,
        per_action_timeout_ms: u64,
    ) -> Result<Vec<ActResult>, StageError> {
        let req = DispatchRequest { actions: actions.conv(), thread_id, topic, now_ms, per_action_timeout_ms };
        Ok(skills::dispatch(req).await?.conv())
    }

    async fn log_iteration(i: Iteration) -> Result<(), StageError> {
        let log = IterationLog {
            loop_id: i.loop_id,
            exchange_id: i.exchange_id,
            iteration_number: i.iteration_number,
            actions: i.actions.conv(),
            results: i.results.conv(),
            execution_time_ms: i.execution_time_ms,
            cost: i.cost,
            fatigue: i.fatigue,
            mode: i.mode,
            termination_reason: i.termination_reason.conv(),
            now_ms: i.now_ms,
        };
        Ok(skills::log_iteration(log).await?)
    }

    async fn put_tool(name: String, config: String, allowed_host: String, now_ms: u64) -> Result<Tool, StageError> {
        let config = serde_json::from_str(&config)
            .map_err(|e| StageError::new(ErrorCode::Invalid, format!("a tool's configuration is not JSON: {e}")))?;
        Ok(tools::put(&name, &config, &allowed_host, now_ms).await?.into())
    }

    async fn list_tools() -> Result<Vec<Tool>, StageError> {
        Ok(tools::list().await?.conv())
    }

    async fn delete_tool(name: String) -> Result<(), StageError> {
        Ok(tools::delete(&name).await?)
    }

    async fn relevant_tools(text: String) -> Result<Vec<RelevantTool>, StageError> {
        Ok(tools::relevant(&text).await?)
    }

    async fn enqueue_tool_work(
        request_id: String,
        payload: String,
        now_ms: u64,
        deliver_by_ms: u64,
    ) -> Result<i64, StageError> {
        Ok(tools::enqueue(&request_id, &payload, now_ms, deliver_by_ms).await?)
    }

    async fn claim_tool_work(now_ms: u64, lease_ms: u64) -> Result<Option<ClaimedToolJob>, StageError> {
        Ok(tools::claim(now_ms, lease_ms).await?)
    }

    async fn call_tool(
        name: String,
        text: String,
        topic: String,
        intent: Intent,
        correction: Option<String>,
    ) -> Result<ToolOutcome, StageError> {
        Ok(tools::call_named(tools::CallRequest { name, text, topic, intent: intent.into(), correction }).await?)
    }

    async fn critic_rate(action_type: String, corrected: Option<bool>) -> Result<CorrectionRate, StageError> {
        Ok(tools::critic_rate(&action_type, corrected).await?)
    }

    async fn finish_tool_work(job: JobClaim, reply: ToolReply, now_ms: u64) -> Result<Delivery, StageError> {
        Ok(tools::finish(job.id, &job.claim, &reply.into(), now_ms).await?)
    }

    async fn fail_tool_work(job: JobClaim, error: String, now_ms: u64) -> Result<Delivery, StageError> {
        Ok(tools::fail(job.id, &job.claim, &error, now_ms).await?)
    }

    async fn take_tool_reply(job_id: i64, request_id: String, give_up: bool, gone: bool) -> Result<Taken, StageError> {
        Ok(tools::take(tools::TakeRequest { job_id, request_id, give_up, gone }).await?)
    }
}

export!(Stage);
