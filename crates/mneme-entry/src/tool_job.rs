//! A Path B tool job's payload (002 §5, D-C19): what `/chat` queues on
//! `tool-queue` and the tool worker behind `/tick/tools` runs. It is stored
//! as JSON on the job's row, so both entries read and write this one type.

use mneme_conversation::context::Assembled;
use mneme_conversation::intent::Intent;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ToolJob {
    /// The ACT cycle the job is (its row in `cortex_iterations`).
    pub cycle_id: String,
    pub request_id: String,
    pub exchange_id: String,
    pub thread_id: String,
    pub source: String,
    pub text: String,
    pub topic: String,
    pub intent: Intent,
    /// The tools to call, in order.
    pub tools: Vec<String>,
    /// What the design's job record keeps of the context.
    pub context_snapshot: ContextSnapshot,
    /// Phase A's context, for the reply.
    pub context: Assembled,
    pub now_ms: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ContextSnapshot {
    pub warmth: f64,
    pub tool_hints: Vec<String>,
    pub exchange_id: String,
}
