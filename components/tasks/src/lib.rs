//! The `tasks` stage (`mneme:tasks`): the principal's persistent tasks
//! (002 §7) and the worker's claims on them. The rules are
//! `mneme-background`'s; the worker's cycle runs in the tick entry, which
//! can call the model and the ACT stage, between `begin-cycle`,
//! `checkpoint` and `end-cycle` here ([`store`]).

spin_sdk::wit_bindgen::generate!({
    path: ["../../wit/types", "../../wit/tasks"],
    world: "mneme:tasks/stage-tasks",
    runtime_path: "::spin_sdk::wit_bindgen::rt",
    with: {
        "mneme:types/types@0.1.0": mneme_types::mneme::types::types,
        "mneme:types/tasks@0.1.0": mneme_types::tasks,
    },
    generate_all,
});

mod store;

use exports::mneme::tasks::tasks::Guest;
use mneme_types::StageError;
use mneme_types::tasks::{Begun, Closed, CycleClose, NewTask, Progress, Task, TaskState};

struct Stage;

impl Guest for Stage {
    async fn admit(goal: String, priority: Option<i64>) -> Result<(), StageError> {
        Ok(store::admit(&goal, priority).await?)
    }
    async fn create(task: NewTask) -> Result<Task, StageError> {
        Ok(store::create(task).await?)
    }
    async fn get(id: String) -> Result<Task, StageError> {
        Ok(store::get(&id).await?)
    }
    async fn list(status: Option<TaskState>, limit: u32) -> Result<Vec<Task>, StageError> {
        Ok(store::list(status, limit).await?)
    }
    async fn cancel(id: String, now_ms: u64) -> Result<Task, StageError> {
        Ok(store::cancel(&id, now_ms).await?)
    }
    async fn begin_cycle(now_ms: u64, lease_ms: u64) -> Result<Begun, StageError> {
        Ok(store::begin_cycle(now_ms, lease_ms).await?)
    }
    async fn checkpoint(
        id: String,
        claim: String,
        progress: Progress,
        now_ms: u64,
        lease_ms: u64,
    ) -> Result<(), StageError> {
        Ok(store::checkpoint(&id, &claim, progress.into(), now_ms, lease_ms).await?)
    }
    async fn end_cycle(close: CycleClose) -> Result<Closed, StageError> {
        Ok(store::end_cycle(close).await?)
    }
}

export!(Stage);
