//! The seam values of persistent tasks (`mneme:types/tasks`) and their
//! pure counterparts in `mneme-background`, whose serde forms are the
//! `progress` column and the API's JSON. A seam value serialises as its
//! pure counterpart does, so `GET /tasks` reads as it always has.

use mneme_background::cycle::{CycleEnd as PureCycleEnd, Finding as PureFinding, Progress as PureProgress};
use mneme_background::tasks::{
    Plan as PurePlan, State as PureState, Step as PureStep, StepStatus as PureStepStatus, Surfacing as PureSurfacing,
};

use crate::{pair, serialize_as};

pub use crate::mneme::types::tasks::*;

pair!(enum TaskState, PureState { Proposed, Accepted, InProgress, Paused, Completed, Cancelled, Expired });
pair!(enum StepStatus, PureStepStatus { Pending, Done, Skipped });
pair!(record Step, PureStep { id, description, depends_on, status, result });
pair!(record Plan, PurePlan { steps, confidence });
pair!(record Finding, PureFinding { cycle, text });
pair!(record Progress, PureProgress {
    plan, plan_source, plan_note, decomposed, cycles, coverage, findings, last_summary, last_cycle_ms,
});
pair!(enum Surfacing, PureSurfacing { Completed, AfterCycle2, CoverageJump });
pair!(record CycleEnd, PureCycleEnd { cycle, before, after, state, surfacing });

serialize_as!(TaskState => PureState, StepStatus => PureStepStatus, Step => PureStep, Surfacing => PureSurfacing);

impl TaskState {
    /// The state's name as the table and the API write it (`in_progress`).
    pub fn as_str(self) -> &'static str {
        PureState::from(self).as_str()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn progress_survives_the_seam_both_ways() {
        let mut pure = PureProgress::default();
        pure.decomposed(
            Ok(PurePlan {
                steps: vec![PureStep {
                    id: "s1".into(),
                    description: "Recall what is known about the garden".into(),
                    depends_on: vec![],
                    status: PureStepStatus::Pending,
                    result: None,
                }],
                confidence: Some(0.8),
            }),
            "model-a",
        );
        pure.finish_step("s1", "three notes", false);
        pure.record_flat(1, "a finding", Some(0.4), false);
        pure.last_cycle_ms = Some(-5);
        let wit: Progress = pure.clone().into();
        assert_eq!(wit.plan.as_ref().unwrap().steps[0].status, StepStatus::Done);
        assert_eq!(wit.findings[0].cycle, 1);
        assert_eq!(PureProgress::from(wit), pure);
    }

    #[test]
    fn a_seam_value_serialises_as_its_pure_counterpart() {
        let step = Step {
            id: "s1".into(),
            description: "d".into(),
            depends_on: vec!["s0".into()],
            status: StepStatus::Pending,
            result: None,
        };
        // A step with no result has no `result` field, as the column has it.
        assert_eq!(
            serde_json::to_value(&step).unwrap(),
            serde_json::json!({"id": "s1", "description": "d", "depends_on": ["s0"], "status": "pending"})
        );
        assert_eq!(serde_json::to_value(TaskState::InProgress).unwrap(), "in_progress");
        assert_eq!(serde_json::to_value(Surfacing::AfterCycle2).unwrap(), "after_cycle2");
        assert_eq!(TaskState::InProgress.as_str(), "in_progress");
    }
}
