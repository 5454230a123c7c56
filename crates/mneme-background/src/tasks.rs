//! Path D (002 §7): persistent tasks. A task's cycle is scheduled every
//! 30 minutes with ±30% jitter; stale tasks expire; a plan proposed by the
//! model is validated before it is stored; ready steps are those whose
//! dependencies are all done; coverage decides completion; progress is
//! surfaced after cycle 2 or when coverage jumps by more than 15 points.

use mneme_conversation::act::Limits;
use mneme_text::{jaccard, words};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet, VecDeque};

/// The worker's period (design: "30min Cycle").
pub const CYCLE_MS: i64 = 30 * 60 * 1000;
/// The jitter on every period (design: "± 30% jitter").
pub const JITTER: f64 = 0.30;
/// A task older than this expires (design: `max_age`; the value is the
/// reference implementation's 14 days, D-B2).
pub const MAX_AGE_MS: i64 = 14 * 24 * 3_600_000;
/// Tasks that may be open (neither terminal nor paused) at once.
pub const MAX_ACTIVE: usize = 5;
/// Progress is surfaced after this cycle…
pub const SURFACE_AFTER_CYCLE: u32 = 2;
/// …or when coverage rose by more than this in one cycle.
pub const SURFACE_JUMP: f64 = 0.15;
/// Two steps this similar (word Jaccard) make a plan a rejected one.
pub const STEP_JACCARD_MAX: f64 = 0.7;
/// A plan's confidence must be above this.
pub const MIN_CONFIDENCE: f64 = 0.5;
/// Words in one step's description.
pub const STEP_WORDS: std::ops::RangeInclusive<usize> = 4..=30;
/// Steps in a plan (the reference's bounds; the design is silent, D-B2).
pub const PLAN_STEPS: std::ops::RangeInclusive<usize> = 2..=8;
/// Ready steps run in one cycle at most (D-B2).
pub const STEPS_PER_CYCLE: usize = 3;
/// Length of a goal, in characters.
pub const GOAL_CHARS: std::ops::RangeInclusive<usize> = 3..=2000;

/// The plan-decomposition prompt (design: `plan-decomposition.md`).
pub const PLAN_PROMPT: &str = include_str!("../../../prompts/plan-decomposition.md");
/// The prompt of one task iteration.
pub const ACT_PROMPT: &str = include_str!("../../../prompts/persistent-task-act.md");

/// The JSON Schema of a decomposition (D-L2): two to eight steps.
pub fn plan_schema() -> String {
    serde_json::json!({
        "type": "object",
        "properties": {
            "steps": {
                "type": "array",
                "minItems": 2,
                "maxItems": 8,
                "items": {
                    "type": "object",
                    "properties": {
                        "id": {"type": "string", "maxLength": 8},
                        "description": {"type": "string", "maxLength": 300},
                        "depends_on": {"type": "array", "items": {"type": "string", "maxLength": 8}, "maxItems": 7},
                    },
                    "required": ["id", "description", "depends_on"],
                    "additionalProperties": false,
                },
            },
            "confidence": {"type": "number"},
        },
        "required": ["steps", "confidence"],
        "additionalProperties": false,
    })
    .to_string()
}

/// The JSON Schema of a worker iteration's answer (D-L2): up to three of
/// the background skills, each with its own parameters.
pub fn act_schema() -> String {
    serde_json::json!({
        "type": "object",
        "properties": {
            "actions": {
                "type": "array",
                "maxItems": 3,
                "items": {
                    "type": "object",
                    "properties": {
                        "type": {"enum": ["recall", "memorize", "introspect", "associate"]},
                        "params": {"type": "object", "additionalProperties": true},
                    },
                    "required": ["type", "params"],
                    "additionalProperties": false,
                },
            },
            "done": {"type": "boolean"},
            "result": {"type": "string", "maxLength": 1500},
            "coverage": {"type": "number"},
        },
        "required": ["actions", "done", "result", "coverage"],
        "additionalProperties": false,
    })
    .to_string()
}

/// A cycle's ACT loop: the design's 5 iterations and 30 minutes
/// cumulative, with the interactive loop's fatigue model; the budget is the
/// reference's for tasks (15.0).
pub fn loop_limits() -> Limits {
    Limits { cumulative_timeout_ms: 30 * 60 * 1000, max_iterations: 5, fatigue_budget: 15.0, ..Limits::default() }
}

/// When the next cycle may run: `now + 30 min × (1 ± 0.3)`, with `r` a
/// draw in `[0, 1)` (0 → 0.7 × the period, just under 1 → 1.3 ×).
pub fn next_run(now_ms: i64, r: f64) -> i64 {
    let factor = 1.0 - JITTER + 2.0 * JITTER * crate::unit(r);
    now_ms + (CYCLE_MS as f64 * factor).round() as i64
}

/// Whether a task created at `created_ms` is stale at `now_ms`.
pub fn expired(created_ms: i64, now_ms: i64) -> bool {
    now_ms - created_ms > MAX_AGE_MS
}

/// A new goal this similar (word Jaccard) to an open task's is that task
/// (the reference's threshold).
pub const DUPLICATE_GOAL_JACCARD: f64 = 0.6;
/// Priorities run from 1 (most urgent) to 10.
pub const PRIORITIES: std::ops::RangeInclusive<i64> = 1..=10;
pub const DEFAULT_PRIORITY: i64 = 5;

/// Why a new goal is not taken on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// An open task has nearly the same goal: its id.
    Duplicate(String),
    /// [`MAX_ACTIVE`] tasks are open already.
    Full,
}

/// Whether a new goal is refused, given the open tasks as `(id, goal)`: the
/// first open task whose goal is more than [`DUPLICATE_GOAL_JACCARD`]
/// similar, else too many open tasks.
pub fn refusal(open: &[(String, String)], goal: &str) -> Option<Refusal> {
    if let Some((id, _)) = open.iter().find(|(_, g)| jaccard(g, goal) > DUPLICATE_GOAL_JACCARD) {
        return Some(Refusal::Duplicate(id.clone()));
    }
    (open.len() >= MAX_ACTIVE).then_some(Refusal::Full)
}

/// A task's state, as the `persistent_tasks` table and the ACT loop's
/// `persistent_task` skill already write it (the reference's names). The
/// design's PENDING is `accepted` (or `proposed`, awaiting the principal),
/// its RUNNING is `in_progress`, and EXPIRED is `expired`; `paused` and
/// `cancelled` are the principal's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum State {
    Proposed,
    Accepted,
    InProgress,
    Paused,
    Completed,
    Cancelled,
    Expired,
}

impl State {
    pub const ALL: [State; 7] = [
        State::Proposed,
        State::Accepted,
        State::InProgress,
        State::Paused,
        State::Completed,
        State::Cancelled,
        State::Expired,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            State::Proposed => "proposed",
            State::Accepted => "accepted",
            State::InProgress => "in_progress",
            State::Paused => "paused",
            State::Completed => "completed",
            State::Cancelled => "cancelled",
            State::Expired => "expired",
        }
    }

    pub fn parse(s: &str) -> Option<State> {
        State::ALL.into_iter().find(|x| x.as_str() == s)
    }

    /// Completed, cancelled and expired tasks never change again.
    pub fn terminal(self) -> bool {
        matches!(self, State::Completed | State::Cancelled | State::Expired)
    }

    /// Whether the worker may run a cycle of a task in this state.
    pub fn runnable(self) -> bool {
        matches!(self, State::Accepted | State::InProgress)
    }

    /// Whether the state machine allows `self → to`.
    pub fn allows(self, to: State) -> bool {
        use State::*;
        matches!(
            (self, to),
            (Proposed, Accepted | Cancelled)
                | (Accepted, InProgress | Cancelled | Expired)
                | (InProgress, Completed | Paused | Cancelled | Expired)
                | (Paused, InProgress | Cancelled | Expired)
        )
    }
}

/// A step as the model proposes it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProposedStep {
    pub id: String,
    pub description: String,
    #[serde(default)]
    pub depends_on: Vec<String>,
}

/// The model's answer to the plan-decomposition prompt.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Proposal {
    pub steps: Vec<ProposedStep>,
    #[serde(default)]
    pub confidence: Option<f64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StepStatus {
    Pending,
    Done,
    Skipped,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Step {
    pub id: String,
    pub description: String,
    pub depends_on: Vec<String>,
    pub status: StepStatus,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<String>,
}

/// A validated plan (a DAG of steps). `confidence` is the model's; a
/// rule-based plan has none.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Plan {
    pub steps: Vec<Step>,
    pub confidence: Option<f64>,
}

/// Why a proposed plan was rejected.
#[derive(Debug, Clone, PartialEq)]
pub enum Rejection {
    StepCount(usize),
    DuplicateId(String),
    UnknownDependency { step: String, depends_on: String },
    Cycle(Vec<String>),
    StepWords { step: String, words: usize },
    TooSimilar { a: String, b: String, jaccard: f64 },
    NoConfidence,
    LowConfidence(f64),
}

impl std::fmt::Display for Rejection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Rejection::StepCount(n) => {
                write!(f, "{n} steps; a plan has {} to {}", PLAN_STEPS.start(), PLAN_STEPS.end())
            }
            Rejection::DuplicateId(id) => write!(f, "step id `{id}` appears twice"),
            Rejection::UnknownDependency { step, depends_on } => {
                write!(f, "step `{step}` depends on `{depends_on}`, which is not a step")
            }
            Rejection::Cycle(ids) => write!(f, "the dependencies form a cycle through {}", ids.join(", ")),
            Rejection::StepWords { step, words } => {
                write!(f, "step `{step}` has {words} words; a step has {} to {}", STEP_WORDS.start(), STEP_WORDS.end())
            }
            Rejection::TooSimilar { a, b, jaccard } => {
                write!(f, "steps `{a}` and `{b}` are near-duplicates (Jaccard {jaccard:.2} ≥ {STEP_JACCARD_MAX})")
            }
            Rejection::NoConfidence => write!(f, "the plan carries no confidence"),
            Rejection::LowConfidence(c) => write!(f, "confidence {c} is not above {MIN_CONFIDENCE}"),
        }
    }
}

/// Kahn's algorithm: the steps in a dependency order, or the ids left on a
/// cycle. Every dependency must name a step.
pub fn topological(steps: &[ProposedStep]) -> Result<Vec<usize>, Rejection> {
    let index: BTreeMap<&str, usize> = steps.iter().enumerate().map(|(i, s)| (s.id.as_str(), i)).collect();
    let mut indegree = vec![0usize; steps.len()];
    let mut dependents = vec![Vec::new(); steps.len()];
    for (i, s) in steps.iter().enumerate() {
        for d in &s.depends_on {
            let Some(&j) = index.get(d.as_str()) else {
                return Err(Rejection::UnknownDependency { step: s.id.clone(), depends_on: d.clone() });
            };
            indegree[i] += 1;
            dependents[j].push(i);
        }
    }
    let mut queue: VecDeque<usize> = (0..steps.len()).filter(|&i| indegree[i] == 0).collect();
    let mut order = Vec::with_capacity(steps.len());
    while let Some(i) = queue.pop_front() {
        order.push(i);
        for &k in &dependents[i] {
            indegree[k] -= 1;
            if indegree[k] == 0 {
                queue.push_back(k);
            }
        }
    }
    if order.len() < steps.len() {
        let stuck = (0..steps.len()).filter(|i| indegree[*i] > 0).map(|i| steps[i].id.clone()).collect();
        return Err(Rejection::Cycle(stuck));
    }
    Ok(order)
}

/// The design's gates on a proposed plan, in order: its shape (step count,
/// unique ids, known dependencies, no cycle by Kahn's algorithm), each
/// step's length (4–30 words), near-duplicate steps (Jaccard ≥ 0.7), and
/// the model's confidence (above 0.5).
pub fn validate(p: &Proposal) -> Result<Plan, Rejection> {
    let plan = validate_shape(p)?;
    let confidence = p.confidence.ok_or(Rejection::NoConfidence)?;
    if confidence.is_nan() || confidence <= MIN_CONFIDENCE {
        return Err(Rejection::LowConfidence(confidence));
    }
    Ok(plan)
}

/// Every gate of [`validate`] but the model's confidence: the gates a
/// rule-based plan passes too.
pub fn validate_shape(p: &Proposal) -> Result<Plan, Rejection> {
    if !PLAN_STEPS.contains(&p.steps.len()) {
        return Err(Rejection::StepCount(p.steps.len()));
    }
    let mut seen = BTreeSet::new();
    for s in &p.steps {
        if !seen.insert(s.id.as_str()) {
            return Err(Rejection::DuplicateId(s.id.clone()));
        }
    }
    topological(&p.steps)?;
    for s in &p.steps {
        let n = words(&s.description).len();
        if !STEP_WORDS.contains(&n) {
            return Err(Rejection::StepWords { step: s.id.clone(), words: n });
        }
    }
    for (i, a) in p.steps.iter().enumerate() {
        for b in &p.steps[i + 1..] {
            let j = jaccard(&a.description, &b.description);
            if j >= STEP_JACCARD_MAX {
                return Err(Rejection::TooSimilar { a: a.id.clone(), b: b.id.clone(), jaccard: j });
            }
        }
    }
    Ok(Plan {
        steps: p
            .steps
            .iter()
            .map(|s| Step {
                id: s.id.clone(),
                description: s.description.trim().to_string(),
                depends_on: s.depends_on.clone(),
                status: StepStatus::Pending,
                result: None,
            })
            .collect(),
        confidence: p.confidence,
    })
}

impl Plan {
    fn finished(&self, id: &str) -> bool {
        self.steps.iter().any(|s| s.id == id && s.status != StepStatus::Pending)
    }

    /// Indices of the pending steps whose dependencies are all done (or
    /// skipped), in plan order.
    pub fn ready(&self) -> Vec<usize> {
        (0..self.steps.len())
            .filter(|&i| {
                let s = &self.steps[i];
                s.status == StepStatus::Pending && s.depends_on.iter().all(|d| self.finished(d))
            })
            .collect()
    }

    /// Done and skipped steps over all steps.
    pub fn coverage(&self) -> f64 {
        if self.steps.is_empty() {
            return 0.0;
        }
        let n = self.steps.iter().filter(|s| s.status != StepStatus::Pending).count();
        n as f64 / self.steps.len() as f64
    }
}

/// Why a cycle's progress reaches the principal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Surfacing {
    Completed,
    AfterCycle2,
    CoverageJump,
}

/// Step 8 (adaptive surfacing): after `cycle` (1-based) moved coverage
/// from `before` to `after`. Completion is always surfaced.
pub fn surfacing(cycle: u32, before: f64, after: f64) -> Option<Surfacing> {
    if after >= 1.0 {
        Some(Surfacing::Completed)
    } else if cycle == SURFACE_AFTER_CYCLE {
        Some(Surfacing::AfterCycle2)
    } else if after - before > SURFACE_JUMP + 1e-9 {
        Some(Surfacing::CoverageJump)
    } else {
        None
    }
}

/// Coverage of a task without a plan: the model's estimate, in `[0, 1]`,
/// never below what an earlier cycle reached.
pub fn flat_coverage(before: f64, estimate: Option<f64>) -> f64 {
    match estimate.filter(|e| e.is_finite()) {
        Some(e) => e.clamp(0.0, 1.0).max(before),
        None => before,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(id: &str, description: &str, deps: &[&str]) -> ProposedStep {
        ProposedStep {
            id: id.into(),
            description: description.into(),
            depends_on: deps.iter().map(|d| d.to_string()).collect(),
        }
    }

    fn good() -> Proposal {
        Proposal {
            steps: vec![
                step("s1", "List the laptops released this year under 1.4 kg", &[]),
                step("s2", "Compare battery life reviews from two independent sources", &["s1"]),
                step("s3", "Write a short recommendation with the top three picks", &["s1", "s2"]),
            ],
            confidence: Some(0.8),
        }
    }

    #[test]
    fn jitter_stays_within_thirty_percent() {
        assert_eq!(next_run(0, 0.0), 1_260_000);
        assert_eq!(next_run(0, 0.5), 1_800_000);
        assert!(next_run(0, 0.999_999) <= 2_340_000 && next_run(0, 0.999_999) > 2_339_000);
        assert_eq!(next_run(0, 1.0), next_run(0, 1.0 - f64::EPSILON));
        let mut d = crate::Draws::new(42);
        for _ in 0..10_000 {
            let t = next_run(1_000, d.draw()) - 1_000;
            assert!((1_260_000..=2_340_000).contains(&t), "{t}");
        }
    }

    #[test]
    fn expiry_is_strictly_after_fourteen_days() {
        assert!(!expired(0, MAX_AGE_MS));
        assert!(expired(0, MAX_AGE_MS + 1));
    }

    #[test]
    fn the_state_machine() {
        use State::*;
        assert!(Accepted.allows(InProgress) && InProgress.allows(Completed));
        assert!(!Accepted.allows(Completed), "a task runs before it completes");
        assert!(!Proposed.allows(InProgress), "a proposed task waits for the principal");
        for t in [Completed, Cancelled, Expired] {
            assert!(t.terminal());
            assert!(State::ALL.iter().all(|&to| !t.allows(to)), "{t:?} is final");
        }
        assert!(Paused.allows(InProgress) && InProgress.allows(Paused));
        assert!(Accepted.runnable() && InProgress.runnable() && !Paused.runnable() && !Proposed.runnable());
        for st in State::ALL {
            assert_eq!(State::parse(st.as_str()), Some(st));
        }
        assert_eq!(State::parse("IN_PROGRESS"), None);
    }

    #[test]
    fn a_good_plan_passes_with_every_step_pending() {
        let p = validate(&good()).unwrap();
        assert_eq!(p.steps.len(), 3);
        assert!(p.steps.iter().all(|s| s.status == StepStatus::Pending));
        assert_eq!(p.ready(), vec![0]);
        assert_eq!(p.coverage(), 0.0);
    }

    #[test]
    fn kahn_rejects_cycles_and_unknown_dependencies() {
        let mut p = good();
        p.steps[0].depends_on = vec!["s3".into()];
        assert_eq!(validate(&p), Err(Rejection::Cycle(vec!["s1".into(), "s2".into(), "s3".into()])));
        let mut p = good();
        p.steps[1].depends_on = vec!["s2".into()];
        assert_eq!(validate(&p), Err(Rejection::Cycle(vec!["s2".into(), "s3".into()])));
        let mut p = good();
        p.steps[2].depends_on = vec!["s9".into()];
        assert!(matches!(validate(&p), Err(Rejection::UnknownDependency { .. })));
        let mut p = good();
        p.steps[2].id = "s1".into();
        assert_eq!(validate(&p), Err(Rejection::DuplicateId("s1".into())));
    }

    #[test]
    fn step_word_bounds_are_four_to_thirty() {
        let mut p = good();
        p.steps[1].description = "Compare battery life reviews".into();
        assert!(validate(&p).is_ok());
        p.steps[1].description = "Compare battery life".into();
        assert_eq!(validate(&p), Err(Rejection::StepWords { step: "s2".into(), words: 3 }));
        p.steps[1].description = vec!["word"; 30].join(" ");
        assert!(validate(&p).is_ok());
        p.steps[1].description = vec!["word"; 31].join(" ");
        assert_eq!(validate(&p), Err(Rejection::StepWords { step: "s2".into(), words: 31 }));
    }

    #[test]
    fn near_duplicate_steps_are_rejected_at_exactly_point_seven() {
        // 7 shared words of 10 in the union: Jaccard exactly 0.7.
        let a = "alpha beta gamma delta epsilon zeta eta theta";
        let b = "alpha beta gamma delta epsilon zeta eta iota kappa";
        assert!((jaccard(a, b) - 0.7).abs() < 1e-12);
        let mut p = good();
        p.steps[0].description = a.into();
        p.steps[1].description = b.into();
        assert!(matches!(validate(&p), Err(Rejection::TooSimilar { .. })));
        // 7 of 11: 0.636…, passes.
        p.steps[1].description = "alpha beta gamma delta epsilon zeta eta iota kappa lambda".into();
        assert!(validate(&p).is_ok());
    }

    #[test]
    fn confidence_must_be_above_one_half() {
        let mut p = good();
        p.confidence = Some(0.5);
        assert_eq!(validate(&p), Err(Rejection::LowConfidence(0.5)));
        p.confidence = Some(0.51);
        assert!(validate(&p).is_ok());
        p.confidence = None;
        assert_eq!(validate(&p), Err(Rejection::NoConfidence));
    }

    #[test]
    fn step_count_bounds() {
        let mut p = good();
        p.steps.truncate(1);
        p.steps[0].depends_on.clear();
        assert_eq!(validate(&p), Err(Rejection::StepCount(1)));
        let mut p = good();
        p.steps =
            (0..9).map(|i| step(&format!("s{i}"), &format!("Distinct step number {i} does thing{i}"), &[])).collect();
        assert_eq!(validate(&p), Err(Rejection::StepCount(9)));
        p.steps.truncate(8);
        assert!(validate(&p).is_ok());
        p.steps.truncate(2);
        assert!(validate(&p).is_ok());
    }

    #[test]
    fn ready_steps_wait_for_every_dependency() {
        let mut p = validate(&good()).unwrap();
        p.steps[0].status = StepStatus::Done;
        assert_eq!(p.ready(), vec![1]);
        p.steps[1].status = StepStatus::Skipped;
        assert_eq!(p.ready(), vec![2]);
        assert!((p.coverage() - 2.0 / 3.0).abs() < 1e-12);
        p.steps[2].status = StepStatus::Done;
        assert!(p.ready().is_empty());
        assert_eq!(p.coverage(), 1.0);
    }

    #[test]
    fn surfacing_after_cycle_two_or_a_jump_over_fifteen_points() {
        assert_eq!(surfacing(1, 0.0, 0.15), None);
        assert_eq!(surfacing(1, 0.0, 0.16), Some(Surfacing::CoverageJump));
        assert_eq!(surfacing(3, 0.5, 0.65), None);
        assert_eq!(surfacing(2, 0.5, 0.5), Some(Surfacing::AfterCycle2));
        assert_eq!(surfacing(3, 0.5, 0.5), None);
        assert_eq!(surfacing(5, 0.9, 1.0), Some(Surfacing::Completed));
    }

    #[test]
    fn flat_coverage_never_goes_back() {
        assert_eq!(flat_coverage(0.4, Some(0.3)), 0.4);
        assert_eq!(flat_coverage(0.4, Some(1.7)), 1.0);
        assert_eq!(flat_coverage(0.4, None), 0.4);
        assert_eq!(flat_coverage(0.4, Some(f64::NAN)), 0.4);
    }

    #[test]
    fn the_cycle_loop_is_the_designs() {
        let l = loop_limits();
        assert_eq!((l.max_iterations, l.cumulative_timeout_ms, l.fatigue_budget), (5, 1_800_000, 15.0));
        assert_eq!(l.fatigue_growth_rate, Limits::default().fatigue_growth_rate);
    }

    #[test]
    fn a_goal_is_refused_as_a_duplicate_before_it_is_refused_for_room() {
        let open = |goals: &[&str]| -> Vec<(String, String)> {
            goals.iter().enumerate().map(|(i, g)| (format!("pt-{i}"), g.to_string())).collect()
        };
        let goal = "plan the spring garden beds";
        assert_eq!(refusal(&open(&[]), goal), None);
        assert_eq!(
            refusal(&open(&["learn the cello", "plan the spring garden beds!"]), goal),
            Some(Refusal::Duplicate("pt-1".into()))
        );
        // Four of five words shared is 0.8 > 0.6; two of six is not.
        assert_eq!(refusal(&open(&["plan the spring garden"]), goal), Some(Refusal::Duplicate("pt-0".into())));
        let five = ["learn the cello", "read more poetry", "fix the bike", "call the bank", "sort the attic"];
        assert_eq!(refusal(&open(&five[..4]), goal), None);
        assert_eq!(refusal(&open(&five), goal), Some(Refusal::Full));
        let mut six = open(&five);
        six.push(("pt-9".into(), "plan the spring garden beds".into()));
        assert_eq!(
            refusal(&six, goal),
            Some(Refusal::Duplicate("pt-9".into())),
            "a duplicate names itself even when full"
        );
    }
}
