//! `POST /tick/tasks`: one cycle of the persistent-task worker (002 §7).
//! The `tasks` stage expires stale tasks and claims the worker and a task;
//! this module decomposes the goal if nobody has yet (a task the ACT
//! loop's skill created), runs up to three ready steps (or one flat loop)
//! through one bounded ACT loop, checkpoints after every finished step, and
//! ends the cycle: state, surfacing event, next jittered time.

use crate::mneme::llm::llm::{self, Tier};
use crate::mneme::tasks::tasks;
use mneme_background::cycle::{self, Progress};
use mneme_background::tasks::{ACT_PROMPT, STEPS_PER_CYCLE, Step, loop_limits, next_run};
use mneme_conversation::act::{Action, Termination};
use mneme_conversation::generate::ActResult;
use mneme_entry::act::{ActLoop, Origin};
use mneme_entry::model::{JsonAsk, Ledger, ModelPath, ask_json};
use mneme_types::StageError;
use mneme_types::tasks::{ClaimedTask, CycleClose, CycleStart};
use serde_json::{Value, json};

/// A claimed task (and the worker) is someone else's after this long; every
/// checkpoint renews it. It outlasts the longest cycle a tick runs.
pub const LEASE_MS: u64 = 300_000;
/// No new iteration starts after this much wall time in one tick, so a
/// cycle ends well inside the request timeout; the design's 30-minute
/// cumulative limit still bounds the loop.
const BUDGET_MS: u64 = 90_000;
const ITERATION_TIMEOUT_MS: u32 = 30_000;

/// What one step's (or a flat cycle's) iterations came to.
struct StepRun {
    /// `(result, skipped)` when the step finished.
    finished: Option<(String, bool)>,
    /// The model's coverage estimate (flat loop).
    coverage: Option<f64>,
    /// Why the cycle stops here, if it does.
    stop: Option<String>,
}

/// The cycle's bounded ACT loop, shared by its steps.
struct Loop(ActLoop);

impl Loop {
    fn out_of_time(&self) -> bool {
        self.0.elapsed_ms() >= BUDGET_MS
    }

    /// One iteration of the shared driver; `Err(reason)` ends the cycle.
    async fn act(&mut self, plan: &[Action]) -> Result<Result<Vec<ActResult>, String>, StageError> {
        Ok(match self.0.iterate(plan).await? {
            mneme_entry::act::Step::Ran(results) => Ok(results),
            mneme_entry::act::Step::Ended(t) => Err(termination(t)),
        })
    }
}

fn iso(ms: i64) -> String {
    mneme_time::calendar::utc_timestamp(ms.max(0) as u64)
}

fn termination(t: Termination) -> String {
    serde_json::to_value(t).ok().and_then(|v| v.as_str().map(|s| format!("loop ended: {s}"))).unwrap_or_default()
}

fn said(results: &[ActResult]) -> Vec<(String, String)> {
    results.iter().map(|r| (r.action_type.clone(), format!("{} ({})", r.result.trim(), r.status))).collect()
}

/// Runs one step (or, with `step` `None`, a flat pass at the goal).
async fn run_step(
    goal: &str,
    progress: &Progress,
    step: Option<&Step>,
    model: &llm::ModelStatus,
    lp: &mut Loop,
    ledger: &mut Ledger,
) -> Result<StepRun, StageError> {
    if !model.configured {
        return rule_step(goal, progress, step, lp).await;
    }
    let mut so_far: Vec<String> = Vec::new();
    loop {
        if lp.out_of_time() {
            return Ok(StepRun {
                finished: None,
                coverage: None,
                stop: Some("the tick's time budget is spent".into()),
            });
        }
        let ask = JsonAsk {
            path: ModelPath::TaskAct,
            tier: Tier::Primary,
            messages: mneme_entry::model::system_user(
                ACT_PROMPT,
                cycle::iteration_message(goal, progress, step.map(|s| s.id.as_str()), &so_far),
            ),
            schema: mneme_background::tasks::act_schema(),
            max_tokens: 800,
            temperature: 0.2,
            timeout_ms: ITERATION_TIMEOUT_MS,
        };
        let it = match ask_json(ledger, ask, mneme_time::clock::system_ms(), cycle::parse_iteration).await {
            Ok((it, _)) => it,
            // Unreadable twice: the step's labelled rules, as with no model.
            Err(why) if why.reason == "malformed" || why.reason == "empty" => {
                return rule_step(goal, progress, step, lp).await;
            }
            Err(why) => {
                return Ok(StepRun { finished: None, coverage: None, stop: Some(format!("the model failed: {why}")) });
            }
        };
        if it.done || it.skip {
            let result = if it.result.trim().is_empty() { so_far.join("\n") } else { it.result };
            return Ok(StepRun { finished: Some((result, it.skip)), coverage: it.coverage, stop: None });
        }
        match lp.act(&it.actions).await? {
            Ok(results) => so_far.extend(said(&results).into_iter().map(|(k, t)| format!("{k}: {t}"))),
            Err(stop) => return Ok(StepRun { finished: None, coverage: it.coverage, stop: Some(stop) }),
        }
    }
}

/// A step by the labelled rules: the step's one action (or none for the
/// gathering step, which reads what its dependencies found).
async fn rule_step(goal: &str, progress: &Progress, step: Option<&Step>, lp: &mut Loop) -> Result<StepRun, StageError> {
    {
        // The rules: the step's one action (or none for the gathering
        // step, which reads what its dependencies found), labelled.
        let plan = cycle::rule_actions(goal, step);
        let results = if plan.is_empty() {
            Vec::new()
        } else {
            match lp.act(&plan).await? {
                Ok(r) => r,
                Err(stop) => return Ok(StepRun { finished: None, coverage: None, stop: Some(stop) }),
            }
        };
        let deps: Vec<String> = step
            .map(|s| {
                s.depends_on
                    .iter()
                    .filter_map(|d| progress.plan.as_ref()?.steps.iter().find(|x| &x.id == d)?.result.clone())
                    .collect()
            })
            .unwrap_or_default();
        let result = cycle::rule_result(&said(&results), &deps);
        Ok(StepRun { finished: Some((result, false)), coverage: None, stop: None })
    }
}

/// Ends a cycle whose checkpoint found the claim gone (the principal
/// cancelled the task, or its lease ran out): the task keeps what it has,
/// and the worker moves on to its next time instead of waiting out its
/// lease. Any other failure is the tick's error.
async fn abandon(
    id: &str,
    claim: &str,
    progress: &Progress,
    next: u64,
    now: u64,
    e: StageError,
) -> Result<Value, StageError> {
    if e.code != mneme_types::ErrorCode::LeaseLost {
        return Err(e);
    }
    tasks::end_cycle(CycleClose {
        id: id.to_string(),
        claim: claim.to_string(),
        progress: progress.clone().into(),
        end: None,
        next_ms: next,
        outcome: format!("abandoned: {}", e.message),
        now_ms: now,
    })
    .await?;
    Ok(json!({"due": true, "task_id": id, "abandoned": e.message, "saved": false,
              "next_at": iso(next as i64), "next_ms": next}))
}

/// One cycle, if the worker is due. `began_ms` is the request's time and
/// `clock` its time source from then on (the test clock when enabled);
/// `draw` decides the next period's jitter.
pub async fn cycle(began_ms: u64, clock: impl Fn() -> u64, draw: f64) -> Result<Value, StageError> {
    let begun = tasks::begin_cycle(began_ms, LEASE_MS).await?;
    let claimed = match begun.start {
        CycleStart::NotDue(n) => {
            let reason = if n.held { "another cycle holds the worker" } else { "not due yet" };
            return Ok(json!({"due": false, "reason": reason, "next_at": iso(n.at_ms), "next_ms": n.next_ms,
                             "expired": begun.expired}));
        }
        CycleStart::Idle => return Ok(json!({"due": true, "task": null, "expired": begun.expired})),
        CycleStart::Claimed(task) => task,
    };
    let ClaimedTask { id, goal, claim, .. } = claimed;
    let mut progress = Progress::from(claimed.progress);
    let model = llm::status(ITERATION_TIMEOUT_MS).await;
    let before = progress.coverage();
    // The period counts from the cycle's start, so its length does not
    // stretch the schedule.
    let next = next_run(began_ms as i64, draw).max(0) as u64;
    let save =
        async |p: &Progress| tasks::checkpoint(id.clone(), claim.clone(), p.clone().into(), clock(), LEASE_MS).await;
    let mut ledger = Ledger::default();
    if !progress.decomposed {
        mneme_entry::tasks::decompose(&goal, &model, &mut progress, &mut ledger, clock()).await;
        if let Err(e) = save(&progress).await {
            return abandon(&id, &claim, &progress, next, clock(), e).await;
        }
    }
    let origin = Origin {
        loop_id: mneme_http::new_id(),
        exchange_id: format!("task:{id}"),
        thread_id: format!("task:{id}"),
        topic: "persistent-task".into(),
        mode: "TASK".into(),
        now_ms: began_ms,
    };
    let mut lp = Loop(ActLoop::new(origin, loop_limits()));
    let mut ran = Vec::new();
    let mut stop = None;
    if progress.plan.is_some() {
        while ran.len() < STEPS_PER_CYCLE {
            let Some(step) = progress.plan.as_ref().and_then(|p| p.ready().first().map(|&i| p.steps[i].clone())) else {
                break;
            };
            // The repeated-action rule is about one step going round in
            // circles: a recall in each of three steps is progress.
            lp.0.state.history.clear();
            let run = run_step(&goal, &progress, Some(&step), &model, &mut lp, &mut ledger).await?;
            if let Some((result, skipped)) = &run.finished {
                progress.finish_step(&step.id, result, *skipped);
                if let Err(e) = save(&progress).await {
                    return abandon(&id, &claim, &progress, next, clock(), e).await;
                }
                ran.push(json!({"step": step.id, "status": if *skipped { "skipped" } else { "done" }}));
            }
            // A step that did not finish always says why.
            if run.stop.is_some() {
                stop = run.stop;
                break;
            }
        }
    } else {
        let run = run_step(&goal, &progress, None, &model, &mut lp, &mut ledger).await?;
        let (text, done) = run.finished.clone().map_or((String::new(), false), |(t, _)| (t, true));
        progress.record_flat(progress.cycles + 1, &text, run.coverage, done && model.configured);
        stop = run.stop;
        if done {
            ran.push(json!({"flat": true}));
        }
    }
    ledger.flush(None, clock()).await;
    let summary = match (&stop, ran.len()) {
        (Some(s), 0) => Some(format!("nothing finished ({s})")),
        (s, n) => Some(format!(
            "{n} {} this cycle{}",
            if progress.plan.is_some() { "step(s)" } else { "pass(es) at the goal" },
            s.as_ref().map(|s| format!("; stopped: {s}")).unwrap_or_default()
        )),
    };
    let now = clock();
    let end = progress.end_cycle(before, summary.clone(), now as i64);
    let ended = tasks::end_cycle(CycleClose {
        id: id.clone(),
        claim,
        progress: progress.clone().into(),
        end: Some(end.into()),
        next_ms: next,
        outcome: summary.unwrap_or_default(),
        now_ms: now,
    })
    .await?;
    Ok(json!({
        "due": true,
        "expired": begun.expired,
        "task_id": id,
        "cycle": end.cycle,
        "steps": ran,
        "coverage_before": end.before,
        "coverage": end.after,
        "status": end.state,
        "surfaced": end.surfacing,
        "event_id": ended.event_id,
        "saved": ended.saved,
        "model": if model.configured { model.primary } else { cycle::RULES_LABEL.to_string() },
        "next_at": iso(next as i64),
        "next_ms": next,
    }))
}
