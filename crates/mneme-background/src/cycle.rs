//! One worker cycle of a persistent task (002 §7, steps 3–8) as data: the
//! `progress` a task carries between cycles, the plan the rules write when
//! no model is configured, the model's answer to one iteration, and the
//! bookkeeping at the end of a cycle (coverage, completion, surfacing).

use crate::tasks::{self, Plan, Proposal, ProposedStep, State, StepStatus, Surfacing};
use mneme_conversation::act::Action;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// Who wrote a plan or a step result when no model is configured.
pub const RULES_LABEL: &str = "rules (no model configured)";
/// The innate skills a background iteration may call: the reading and
/// remembering ones. Scheduling, lists, focus and tasks stay the
/// principal's.
pub const SKILLS: [&str; 4] = ["recall", "memorize", "introspect", "associate"];
/// Words of the goal quoted in a rule-based step.
const GOAL_WORDS_IN_STEP: usize = 8;
/// Characters of one result kept in `progress`.
const RESULT_CHARS: usize = 1_200;
/// Flat-loop findings kept in `progress` (the newest).
const FINDINGS_KEPT: usize = 20;

/// What a flat (plan-less) cycle found.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Finding {
    pub cycle: u32,
    pub text: String,
}

/// A task's `progress` column: its plan, step statuses and results,
/// coverage, cycle count and what the flat loop found.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Progress {
    #[serde(default)]
    pub plan: Option<Plan>,
    /// The model that wrote the plan, or [`RULES_LABEL`].
    #[serde(default)]
    pub plan_source: Option<String>,
    /// Why the task runs without a plan (the rejection or the failure).
    #[serde(default)]
    pub plan_note: Option<String>,
    /// Whether decomposition was attempted (at creation or in the first
    /// cycle of a task created by the ACT loop's skill).
    #[serde(default)]
    pub decomposed: bool,
    #[serde(default)]
    pub cycles: u32,
    /// Coverage of a plan-less task (the model's estimate); a plan's
    /// coverage is counted from its steps.
    #[serde(default)]
    pub coverage: f64,
    #[serde(default)]
    pub findings: Vec<Finding>,
    #[serde(default)]
    pub last_summary: Option<String>,
    #[serde(default)]
    pub last_cycle_ms: Option<i64>,
}

impl Progress {
    /// Reads the column; an unreadable value starts afresh (an ACT-skill
    /// task stores `{}`).
    pub fn parse(text: &str) -> Progress {
        serde_json::from_str(text).unwrap_or_default()
    }

    pub fn coverage(&self) -> f64 {
        self.plan.as_ref().map_or(self.coverage, Plan::coverage)
    }

    /// Records a decomposition: the plan when it passed the gates, else the
    /// reason, and the task runs flat.
    pub fn decomposed(&mut self, outcome: Result<Plan, String>, source: &str) {
        self.decomposed = true;
        match outcome {
            Ok(plan) => {
                self.plan = Some(plan);
                self.plan_source = Some(source.to_string());
                self.plan_note = None;
            }
            Err(why) => {
                self.plan = None;
                self.plan_source = None;
                self.plan_note = Some(why);
            }
        }
    }

    /// Marks step `id` done (or skipped) with its result.
    pub fn finish_step(&mut self, id: &str, result: &str, skipped: bool) -> bool {
        let Some(step) = self.plan.as_mut().and_then(|p| p.steps.iter_mut().find(|s| s.id == id)) else {
            return false;
        };
        if step.status != StepStatus::Pending {
            return false;
        }
        step.status = if skipped { StepStatus::Skipped } else { StepStatus::Done };
        step.result = Some(clip(result));
        true
    }

    /// A flat cycle's result and the model's coverage estimate.
    pub fn record_flat(&mut self, cycle: u32, text: &str, estimate: Option<f64>, done: bool) {
        if !text.trim().is_empty() {
            self.findings.push(Finding { cycle, text: clip(text) });
            let excess = self.findings.len().saturating_sub(FINDINGS_KEPT);
            self.findings.drain(..excess);
        }
        self.coverage = if done { 1.0 } else { tasks::flat_coverage(self.coverage, estimate) };
    }

    /// Closes a cycle that started at coverage `before`: counts it, and
    /// says what the task becomes and whether the principal hears of it.
    pub fn end_cycle(&mut self, before: f64, summary: Option<String>, now_ms: i64) -> CycleEnd {
        self.cycles += 1;
        self.last_cycle_ms = Some(now_ms);
        if let Some(s) = summary.filter(|s| !s.trim().is_empty()) {
            self.last_summary = Some(clip(&s));
        }
        let after = self.coverage();
        CycleEnd {
            cycle: self.cycles,
            before,
            after,
            state: if after >= 1.0 { State::Completed } else { State::InProgress },
            surfacing: tasks::surfacing(self.cycles, before, after),
        }
    }
}

/// How a cycle ended.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct CycleEnd {
    pub cycle: u32,
    pub before: f64,
    pub after: f64,
    pub state: State,
    pub surfacing: Option<Surfacing>,
}

impl CycleEnd {
    /// The `task` event on `/events` when this cycle surfaces (step 8).
    pub fn event(&self, task_id: &str, goal: &str, progress: &Progress) -> Option<Value> {
        let reason = self.surfacing?;
        let message = match reason {
            Surfacing::Completed => format!("Finished: {goal}"),
            _ => format!("Progress on \"{goal}\": {:.0}% covered after {} cycles", self.after * 100.0, self.cycle),
        };
        Some(json!({
            "task_id": task_id,
            "goal": goal,
            "reason": reason,
            "status": self.state,
            "cycle": self.cycle,
            "coverage_before": self.before,
            "coverage": self.after,
            "message": message,
            "summary": progress.last_summary,
        }))
    }
}

fn clip(s: &str) -> String {
    let s = s.trim();
    match s.char_indices().nth(RESULT_CHARS) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_string(),
    }
}

/// The goal's first words, for a rule-based step.
fn goal_phrase(goal: &str) -> String {
    let words: Vec<&str> = goal.split_whitespace().collect();
    let mut phrase = words.iter().take(GOAL_WORDS_IN_STEP).copied().collect::<Vec<_>>().join(" ");
    phrase = phrase.trim_end_matches(['.', '!', '?', ',', ';', ':']).to_string();
    if words.len() > GOAL_WORDS_IN_STEP {
        phrase.push('…');
    }
    phrase
}

/// The plan the rules write when no model is configured: recall what is
/// known, widen to related memories, then gather the findings. It goes
/// through the same gates as a model's plan, confidence aside.
pub fn rule_plan(goal: &str) -> Proposal {
    let g = goal_phrase(goal);
    let step = |id: &str, d: String, deps: &[&str]| ProposedStep {
        id: id.into(),
        description: d,
        depends_on: deps.iter().map(|d| d.to_string()).collect(),
    };
    Proposal {
        steps: vec![
            step("s1", format!("Recall what is already known about {g}"), &[]),
            step("s2", format!("Look for related memories and concepts on {g}"), &["s1"]),
            step("s3", format!("Gather the findings into notes for the principal on {g}"), &["s1", "s2"]),
        ],
        confidence: None,
    }
}

/// The actions the rules run for a step (or for a plan-less goal): one
/// recall on what the step is about, or introspection for the gathering
/// step, which only reads what earlier steps found.
pub fn rule_actions(goal: &str, step: Option<&tasks::Step>) -> Vec<Action> {
    let obj = |v: Value| v.as_object().cloned().unwrap_or_default();
    match step {
        Some(s) if !s.depends_on.is_empty() && s.description.starts_with("Gather") => Vec::new(),
        Some(s) if s.description.starts_with("Look for related") => {
            vec![Action { kind: "associate".into(), params: obj(json!({"seeds": [goal_phrase(goal)]})) }]
        }
        Some(s) => vec![Action { kind: "recall".into(), params: obj(json!({"query": s.description, "limit": 5})) }],
        None => vec![Action { kind: "recall".into(), params: obj(json!({"query": goal, "limit": 5})) }],
    }
}

/// One result as the rules write it into a step: what each action returned,
/// labelled; the gathering step quotes its dependencies' results.
pub fn rule_result(results: &[(String, String)], dependencies: &[String]) -> String {
    let mut parts: Vec<String> = results.iter().map(|(kind, text)| format!("{kind}: {}", text.trim())).collect();
    if results.is_empty() {
        parts = dependencies.iter().filter(|d| !d.trim().is_empty()).cloned().collect();
    }
    let body = if parts.is_empty() { "nothing found yet".to_string() } else { parts.join(" | ") };
    format!("[{RULES_LABEL}] {body}")
}

/// The model's answer to one iteration of the task prompt.
#[derive(Debug, Clone, PartialEq)]
pub struct Iteration {
    pub actions: Vec<Action>,
    pub done: bool,
    pub skip: bool,
    pub result: String,
    pub coverage: Option<f64>,
}

/// Parses `{actions, done, result, coverage}` (a `skip` flag marks a step
/// that cannot or need not be done). Actions outside [`SKILLS`] are dropped.
pub fn parse_iteration(text: &str) -> Result<Iteration, String> {
    let v = mneme_llm::extract_json(text).map_err(|e| e.to_string())?;
    if !v.is_object() {
        return Err("the answer is not a JSON object".into());
    }
    let actions = match v.get("actions") {
        None | Some(Value::Null) => Vec::new(),
        Some(_) => mneme_conversation::act::parse_plan(&v.to_string())?,
    };
    let flag = |k: &str| v.get(k).and_then(Value::as_bool).unwrap_or(false);
    Ok(Iteration {
        actions: actions.into_iter().filter(|a| SKILLS.contains(&a.kind.as_str())).take(3).collect(),
        done: flag("done"),
        skip: flag("skip"),
        result: v.get("result").and_then(Value::as_str).unwrap_or_default().to_string(),
        coverage: v.get("coverage").and_then(Value::as_f64),
    })
}

/// Parses the model's answer to the plan-decomposition prompt.
pub fn parse_proposal(text: &str) -> Result<Proposal, String> {
    let mut v = mneme_llm::extract_json(text).map_err(|e| e.to_string())?;
    if v.get("confidence").is_none()
        && let Some(c) = v.get("decomposition_confidence").cloned()
    {
        v["confidence"] = c;
    }
    serde_json::from_value(v).map_err(|e| format!("the plan's shape: {e}"))
}

/// The user message of one iteration: the goal, the step (with the results
/// of its dependencies) or, plan-less, what earlier cycles found, and the
/// results of this step's earlier iterations.
pub fn iteration_message(goal: &str, progress: &Progress, step: Option<&str>, so_far: &[String]) -> String {
    let step_view = step.and_then(|id| progress.plan.as_ref()?.steps.iter().find(|s| s.id == id)).map(|s| {
        let deps: Vec<Value> = s
            .depends_on
            .iter()
            .filter_map(|d| progress.plan.as_ref()?.steps.iter().find(|x| &x.id == d))
            .map(|d| json!({"id": d.id, "description": d.description, "result": d.result}))
            .collect();
        json!({"id": s.id, "description": s.description, "dependencies": deps})
    });
    let found: Vec<&str> = progress.findings.iter().rev().take(5).map(|f| f.text.as_str()).collect();
    json!({
        "goal": goal,
        "step": step_view,
        "found_in_earlier_cycles": found,
        "this_step_so_far": so_far,
        "coverage": progress.coverage(),
        "skills": SKILLS,
    })
    .to_string()
}

/// The user message of the plan-decomposition prompt.
pub fn decomposition_message(goal: &str) -> String {
    json!({"goal": goal}).to_string()
}

/// The decomposition call's sampling temperature and time limit (the
/// reference's).
pub const DECOMPOSE_TEMPERATURE: f32 = 0.3;
pub const DECOMPOSE_TIMEOUT_MS: u32 = 30_000;
/// Room for a plan of eight steps.
pub const DECOMPOSE_MAX_TOKENS: u32 = 1_200;

/// A decomposition's outcome: with no model, the rule-based plan; with
/// one, its answer through the design's gates, or why there is no plan
/// (the task then runs flat). `answer` is the model's text and name, or
/// the call's error. Returns the outcome and who wrote the plan.
pub fn decomposition(goal: &str, answer: Option<Result<(String, String), String>>) -> (Result<Plan, String>, String) {
    match answer {
        None => (
            tasks::validate_shape(&rule_plan(goal)).map_err(|r| format!("the rule-based plan does not fit: {r}")),
            RULES_LABEL.to_string(),
        ),
        Some(Err(e)) => (Err(format!("the model failed: {e}")), String::new()),
        Some(Ok((text, model))) => {
            let plan = parse_proposal(&text)
                .map_err(|e| format!("the model's plan could not be read: {e}"))
                .and_then(|p| tasks::validate(&p).map_err(|r| format!("the model's plan was rejected: {r}")));
            (plan, model)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rule_plan_passes_the_gates_for_short_and_long_goals() {
        for goal in [
            "tea",
            "Find a quiet laptop for travel",
            "Research every option for moving the family to Lisbon next spring, including schools, \
             neighbourhoods, visas, taxes, healthcare and the cost of shipping our furniture there",
        ] {
            let p = tasks::validate_shape(&rule_plan(goal)).unwrap_or_else(|r| panic!("{goal}: {r}"));
            assert_eq!(p.steps.len(), 3);
            assert_eq!(p.confidence, None);
            assert_eq!(p.ready(), vec![0]);
        }
        assert!(tasks::validate(&rule_plan("tea")).is_err(), "the confidence gate is the model's");
    }

    #[test]
    fn rule_actions_follow_the_step() {
        let plan = tasks::validate_shape(&rule_plan("a quiet laptop")).unwrap();
        assert_eq!(rule_actions("a quiet laptop", Some(&plan.steps[0]))[0].kind, "recall");
        assert_eq!(rule_actions("a quiet laptop", Some(&plan.steps[1]))[0].kind, "associate");
        assert!(rule_actions("a quiet laptop", Some(&plan.steps[2])).is_empty());
        assert_eq!(rule_actions("a quiet laptop", None)[0].params["query"], "a quiet laptop");
        assert_eq!(
            rule_result(&[], &["recall: the X1 is light".into()]),
            "[rules (no model configured)] recall: the X1 is light"
        );
        assert_eq!(rule_result(&[], &[]), "[rules (no model configured)] nothing found yet");
    }

    #[test]
    fn iterations_parse_tolerantly_and_keep_background_skills_only() {
        let it = parse_iteration(
            "Sure:\n```json\n{\"actions\":[{\"type\":\"recall\",\"params\":{\"query\":\"x\"}},\
             {\"type\":\"schedule\",\"params\":{}}],\"done\":false,\"coverage\":0.3}\n```",
        )
        .unwrap();
        assert_eq!(it.actions.len(), 1);
        assert_eq!((it.done, it.coverage), (false, Some(0.3)));
        let it = parse_iteration(r#"{"done": true, "result": "Three picks."}"#).unwrap();
        assert!(it.done && it.actions.is_empty() && it.result == "Three picks.");
        assert!(parse_iteration("no json here").is_err());
        assert!(parse_iteration("[1, 2]").is_err());
    }

    #[test]
    fn proposals_accept_the_references_confidence_key() {
        let p = parse_proposal(
            r#"{"steps":[{"id":"s1","description":"a b c d","depends_on":[],"tools_needed":[]}],"decomposition_confidence":0.7}"#,
        )
        .unwrap();
        assert_eq!(p.confidence, Some(0.7));
        assert!(parse_proposal(r#"{"steps": "none"}"#).is_err());
    }

    #[test]
    fn decomposition_outcomes() {
        let (plan, by) = decomposition("find a quiet laptop", None);
        assert_eq!((plan.unwrap().steps.len(), by.as_str()), (3, RULES_LABEL));
        let (plan, _) = decomposition("x", Some(Err("model-timeout: 30 s".into())));
        assert_eq!(plan.unwrap_err(), "the model failed: model-timeout: 30 s");
        let cyclic = r#"{"steps":[{"id":"a","description":"Do the first thing well","depends_on":["b"]},
            {"id":"b","description":"Then do another different thing","depends_on":["a"]}],"confidence":0.9}"#;
        let (plan, by) = decomposition("x", Some(Ok((cyclic.into(), "m1".into()))));
        assert!(plan.unwrap_err().starts_with("the model's plan was rejected: the dependencies form a cycle"));
        assert_eq!(by, "m1");
        let (plan, _) = decomposition("x", Some(Ok(("nothing".into(), "m1".into()))));
        assert!(plan.unwrap_err().starts_with("the model's plan could not be read"));
    }

    #[test]
    fn a_cycle_counts_completes_and_surfaces() {
        let mut p = Progress::default();
        p.decomposed(tasks::validate_shape(&rule_plan("a quiet laptop")).map_err(|r| r.to_string()), RULES_LABEL);
        assert!(p.finish_step("s1", "found two", false));
        assert!(!p.finish_step("s1", "again", false), "a finished step stays finished");
        let end = p.end_cycle(0.0, None, 10);
        assert_eq!((end.cycle, end.state), (1, State::InProgress));
        assert_eq!(end.surfacing, Some(Surfacing::CoverageJump), "0 → 1/3 is a jump over 15 points");
        let end = p.end_cycle(p.coverage(), None, 20);
        assert_eq!(end.surfacing, Some(Surfacing::AfterCycle2));
        p.finish_step("s2", "related", false);
        p.finish_step("s3", "notes", true);
        let end = p.end_cycle(1.0 / 3.0, Some("done".into()), 30);
        assert_eq!((end.state, end.surfacing), (State::Completed, Some(Surfacing::Completed)));
        let e = end.event("pt-1", "a quiet laptop", &p).unwrap();
        assert_eq!(
            (e["reason"].as_str(), e["status"].as_str(), e["cycle"].as_u64()),
            (Some("completed"), Some("completed"), Some(3))
        );
        assert_eq!(e["message"], "Finished: a quiet laptop");
        assert_eq!(p.last_summary.as_deref(), Some("done"));
        let back = Progress::parse(&serde_json::to_string(&p).unwrap());
        assert_eq!(back, p);
        assert_eq!(Progress::parse("{}"), Progress::default());
    }

    #[test]
    fn a_flat_cycle_keeps_the_newest_findings_and_never_loses_coverage() {
        let mut p = Progress::default();
        p.decomposed(Err("rejected".into()), "m");
        for c in 0..25 {
            p.record_flat(c, &format!("finding {c}"), Some(0.1), false);
        }
        assert_eq!(p.findings.len(), FINDINGS_KEPT);
        assert_eq!(p.findings[0].text, "finding 5");
        p.record_flat(26, "", Some(0.6), false);
        p.record_flat(27, "", Some(0.2), false);
        assert_eq!(p.coverage(), 0.6);
        p.record_flat(28, "all", None, true);
        assert_eq!(p.end_cycle(0.6, None, 1).state, State::Completed);
        assert_eq!(clip(&"x".repeat(2000)).chars().count(), RESULT_CHARS + 1);
    }
}
