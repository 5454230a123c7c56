//! The ACT loop's driver (002 §4b), one for its three users: `/chat`'s
//! Path C, the persistent-task worker, and the tool worker of Path B.
//!
//! The rules are `mneme_conversation::act`'s (limits, fatigue, the
//! termination conditions); this runs them against the `act` stage. Before
//! each plan it checks the limits and logs why the loop ends, if it does;
//! then it dispatches the plan, grows fatigue and logs the iteration in
//! `cortex_iterations`. Planning stays with the caller: the model or the
//! rules for `/chat`, a step's plan for a task, the configured tools for
//! Path B.

use crate::StageError;
use crate::mneme::act::act as stage;
use mneme_conversation::act::{Action, Limits, LoopState, Termination};
use mneme_conversation::generate::ActResult;
use mneme_time::clock::system_ms;
use mneme_types::conversation::{Conv, Iteration};

/// Where a loop's iterations are filed.
#[derive(Debug, Clone)]
pub struct Origin {
    /// The loop's id (one per loop, shared by its iterations).
    pub loop_id: String,
    /// The exchange it serves (`task:<id>` for a task's cycle).
    pub exchange_id: String,
    /// The thread and topic its actions act in.
    pub thread_id: String,
    pub topic: String,
    /// The `mode` label of its log rows (`ACT`, `TASK`, `ACT (Path B)`…).
    pub mode: String,
    /// The request's time, which stamps what the actions write.
    pub now_ms: u64,
}

/// What one call of [`ActLoop::iterate`] came to.
#[derive(Debug)]
pub enum Step {
    /// The plan ran; its results, in order.
    Ran(Vec<ActResult>),
    /// The loop ended before the plan, for this reason (logged).
    Ended(Termination),
}

/// A running ACT loop.
pub struct ActLoop {
    pub state: LoopState,
    pub origin: Origin,
    limits: Limits,
    started_ms: u64,
}

impl ActLoop {
    pub fn new(origin: Origin, limits: Limits) -> Self {
        Self { state: LoopState::default(), origin, limits, started_ms: system_ms() }
    }

    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// Wall time since the loop began.
    pub fn elapsed_ms(&self) -> u64 {
        system_ms().saturating_sub(self.started_ms)
    }

    /// Checks the limits before `plan` (the elapsed time re-read from the
    /// clock); when the loop must end, logs why and returns it.
    pub async fn gate(&mut self, plan: &[Action]) -> Result<Option<Termination>, StageError> {
        self.state.elapsed_ms = self.elapsed_ms();
        let Some(reason) = self.state.check(plan, &self.limits) else { return Ok(None) };
        self.log(plan, &[], 0, 0.0, Some(reason)).await?;
        Ok(Some(reason))
    }

    /// Dispatches `plan` through the `act` stage, each action within the
    /// per-action timeout; grows fatigue and logs the iteration.
    pub async fn dispatch(&mut self, plan: &[Action]) -> Result<Vec<ActResult>, StageError> {
        let t0 = system_ms();
        let o = &self.origin;
        let results: Vec<ActResult> = stage::dispatch(
            plan.to_vec().conv(),
            o.thread_id.clone(),
            o.topic.clone(),
            o.now_ms,
            self.limits.per_action_timeout_ms,
        )
        .await?
        .conv();
        self.record(plan, &results, system_ms().saturating_sub(t0), 0.0).await?;
        Ok(results)
    }

    /// [`gate`](Self::gate), then [`dispatch`](Self::dispatch).
    pub async fn iterate(&mut self, plan: &[Action]) -> Result<Step, StageError> {
        match self.gate(plan).await? {
            Some(reason) => Ok(Step::Ended(reason)),
            None => self.dispatch(plan).await.map(Step::Ran),
        }
    }

    /// Records an iteration of `plan` that took `took_ms`: its fatigue by
    /// the rules, plus `extra_cost` for work the rules do not price (the
    /// tool worker's critic calls), then logs it. [`dispatch`](Self::dispatch)
    /// calls it; the tool worker, which calls its tools itself, does too.
    pub async fn record(
        &mut self,
        plan: &[Action],
        results: &[ActResult],
        took_ms: u64,
        extra_cost: f64,
    ) -> Result<(), StageError> {
        let cost = self.state.record(plan, 0, &self.limits) + extra_cost;
        self.state.fatigue = ((self.state.fatigue + extra_cost) * 1000.0).round() / 1000.0;
        self.log(plan, results, took_ms, (cost * 1000.0).round() / 1000.0, None).await
    }

    async fn log(
        &self,
        plan: &[Action],
        results: &[ActResult],
        took_ms: u64,
        cost: f64,
        reason: Option<Termination>,
    ) -> Result<(), StageError> {
        let o = &self.origin;
        stage::log_iteration(Iteration {
            loop_id: o.loop_id.clone(),
            exchange_id: o.exchange_id.clone(),
            iteration_number: self.state.iteration,
            actions: plan.to_vec().conv(),
            results: results.to_vec().conv(),
            execution_time_ms: took_ms,
            cost,
            fatigue: self.state.fatigue,
            mode: o.mode.clone(),
            termination_reason: reason.map(Into::into),
            now_ms: o.now_ms,
        })
        .await
    }
}
