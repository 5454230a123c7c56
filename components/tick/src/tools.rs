//! `POST /tick/tools`: the tool worker of Path B (002 §5, D-C19). For each
//! job it claims from `tool-queue`: the tools the job names, each called
//! the same way with its own timeout; the critic (the light model with
//! `prompts/act-critic.md`) on each result when a model is configured; the
//! cycle in `cortex_iterations`; the reply (the primary model, or the
//! labelled rules); Phase D's commit; then the reply stored on the job,
//! which the waiting `/chat` stream takes, or `/events` gets when the
//! stream gave up.

use crate::internal;
use crate::mneme::act::act;
use crate::mneme::commit::commit;
use crate::mneme::llm::llm::{self, Tier};
use mneme_conversation::Mode;
use mneme_conversation::act::{Action, Limits};
use mneme_conversation::context::Assembled;
use mneme_conversation::generate::{self, ActResult, ReplySource};
use mneme_conversation::tools::{self as rules, CriticStep, ToolReply};
use mneme_entry::act::{ActLoop, Origin};
use mneme_entry::model::{Fallback, JsonAsk, Ledger, ModelPath, ask_json};
use mneme_entry::tool_job::ToolJob;
use mneme_types::StageError;
use mneme_types::conversation::{ClaimedToolJob, FinishedExchange};
use serde_json::{Value, json};

/// A claimed job is another tick's to take over after this long: above
/// the longest a job can take (three tools at 30 s, each called three
/// times, nine critic calls at 5 s, and the reply's 30 s: 345 s).
pub const LEASE_MS: u64 = 420_000;
/// No new job starts after this much of one tick.
const BUDGET_MS: u64 = 20_000;
const CRITIC_TIMEOUT_MS: u32 = 5_000;
pub const CRITIC_PROMPT: &str = include_str!("../../../prompts/act-critic.md");

/// Runs tool jobs until the queue is empty or the budget is spent.
pub async fn drain(clock: impl Fn() -> u64) -> Result<Value, StageError> {
    let started = clock();
    let model = llm::status(CRITIC_TIMEOUT_MS).await;
    let mut done = Vec::new();
    let mut ledger = Ledger::default();
    while clock().saturating_sub(started) < BUDGET_MS {
        let Some(claimed) = act::claim_tool_work(clock(), LEASE_MS).await? else { break };
        let job = &claimed.job;
        // One job's failure is that job's: it is failed (its error reaches
        // the principal) and the tick goes on; a lost claim is the other
        // worker's to finish.
        let outcome = match run(&claimed, &model, &clock, &mut ledger).await {
            Ok(entry) => entry,
            Err(e) if e.code == mneme_types::ErrorCode::LeaseLost => {
                json!({"job_id": job.id, "status": "lost", "error": e.message})
            }
            Err(e) => {
                let error = format!("{}: {}", e.code, e.message);
                let failed = act::fail_tool_work(job.clone(), error.clone(), clock())
                    .await
                    .map(|d| json!(d.name()))
                    .unwrap_or(Value::Null);
                json!({"job_id": job.id, "status": "failed", "error": error, "delivery": failed})
            }
        };
        done.push(outcome);
    }
    ledger.flush(None, clock()).await;
    Ok(json!({"jobs": done}))
}

/// One job, start to finish.
async fn run(
    claimed: &ClaimedToolJob,
    model: &llm::ModelStatus,
    clock: &impl Fn() -> u64,
    ledger: &mut Ledger,
) -> Result<Value, StageError> {
    let p: ToolJob =
        serde_json::from_str(&claimed.payload).map_err(|e| internal(format!("the tool job's payload: {e}")))?;
    let claim = &claimed.job;
    let (text, topic, ctx, names) = (&p.text, &p.topic, &p.context, &p.tools);
    let began = clock();
    let (mut results, mut critic_fatigue, mut escalation) = (Vec::<ActResult>::new(), 0.0, None);
    for name in names {
        let (mut retries, mut correction) = (0, None::<String>);
        loop {
            let outcome =
                act::call_tool(name.clone(), text.clone(), topic.clone(), p.intent.clone().into(), correction.clone())
                    .await?;
            let consequential = outcome.consequential;
            let result: ActResult = outcome.result.into();
            let step = if model.configured {
                critic(name, text, &result, consequential, retries, ledger, clock()).await?
            } else {
                None
            };
            results.push(result);
            match step {
                None | Some((CriticStep::Keep, _)) => break,
                Some((step, cost)) => {
                    critic_fatigue += cost;
                    match step {
                        CriticStep::Retry(c) => {
                            results.push(note(format!("{name}: the critic asked for a retry: {c}")));
                            retries += 1;
                            correction = Some(c);
                            continue;
                        }
                        CriticStep::Note(n) => results.push(note(format!("{name}: {n}"))),
                        CriticStep::GiveUp => {
                            results.push(note(format!("{name}: still not right after {retries} retries")))
                        }
                        CriticStep::Escalate(issue) => {
                            escalation.get_or_insert(rules::escalation(name, &issue));
                        }
                        CriticStep::Keep => {}
                    }
                    break;
                }
            }
        }
    }
    let took = clock().saturating_sub(began);
    // One iteration of the shared ACT driver: the tools' fatigue by the
    // rules, plus the critic's.
    let actions: Vec<Action> = names.iter().map(|n| Action { kind: n.clone(), params: Default::default() }).collect();
    let origin = Origin {
        loop_id: p.cycle_id.clone(),
        exchange_id: p.exchange_id.clone(),
        thread_id: p.thread_id.clone(),
        topic: topic.clone(),
        mode: if model.configured { "ACT (Path B)" } else { "ACT (Path B, no critic: no model)" }.into(),
        now_ms: p.now_ms,
    };
    ActLoop::new(origin, Limits::default()).record(&actions, &results, took, critic_fatigue).await?;
    // The reply: the escalation as asked, or a RESPOND over the results.
    let gen_started = clock();
    let (mode, reply, source) = match escalation {
        Some(question) => (Mode::Clarify, question, "critic-escalation"),
        None => {
            let (t, src) = reply_text(ctx, text, &results, ledger, clock()).await;
            (Mode::Respond, t, if src == ReplySource::Model { "model" } else { "rule-based" })
        }
    };
    let rule_based = if source == "rule-based" { ReplySource::RuleBased } else { ReplySource::Model };
    let confidence = generate::confidence(ctx.memory_confidence, 1.0, rule_based);
    let committed = commit::commit(FinishedExchange {
        exchange_id: p.exchange_id.clone(),
        request_id: p.request_id.clone(),
        thread_id: p.thread_id.clone(),
        source: p.source.clone(),
        text: text.clone(),
        reply: reply.clone(),
        mode: mode.into(),
        confidence,
        reply_source: source.into(),
        topic: topic.clone(),
        previous_topic: ctx.previous_topic.clone(),
        tools: names.clone(),
        now_ms: p.now_ms,
        duration_ms: clock().saturating_sub(began),
        generation_ms: Some(clock().saturating_sub(gen_started)),
        fast_path: false,
        job: Some(claim.clone()),
    })
    .await?;
    let reply = ToolReply {
        text: reply,
        topic: topic.clone(),
        mode,
        confidence,
        exchange_id: committed.exchange_id,
        thread_id: p.thread_id.clone(),
        source: source.into(),
        tools: results,
    };
    let delivery = act::finish_tool_work(claim.clone(), reply.into(), clock()).await?;
    Ok(json!({"job_id": claim.id, "tools": names, "status": "done", "delivery": delivery.name(),
              "escalated": source == "critic-escalation"}))
}

fn note(text: String) -> ActResult {
    ActResult {
        action_type: "critic".into(),
        status: "note".into(),
        result: text,
        execution_time_ms: 0,
        confidence: 0.0,
    }
}

/// The critic on one result, when its rules apply: `(step, fatigue)`.
async fn critic(
    name: &str,
    text: &str,
    result: &ActResult,
    consequential: bool,
    retries: usize,
    ledger: &mut Ledger,
    now_ms: u64,
) -> Result<Option<(CriticStep, f64)>, StageError> {
    let threshold = act::critic_rate(name.to_string(), None).await?.threshold;
    if !rules::critic_applies(&result.status, result.confidence, threshold) {
        return Ok(None);
    }
    let user = format!(
        "Principal's message: {text}\nTool: {name} ({})\nTool's answer:\n{}",
        if consequential { "consequential" } else { "safe to retry" },
        result.result
    );
    let ask = JsonAsk {
        path: ModelPath::ActCritic,
        tier: Tier::Light,
        messages: mneme_entry::model::system_user(CRITIC_PROMPT, user),
        schema: rules::critic_schema(),
        max_tokens: 200,
        temperature: 0.0,
        timeout_ms: CRITIC_TIMEOUT_MS,
    };
    let readable = |t: &str| mneme_llm::extract_json(t).map(|_| t.to_string()).map_err(|e| e.to_string());
    let answer = ask_json(ledger, ask, now_ms, readable).await;
    // Any failure of the critic counts as verified.
    let verdict = rules::parse_verdict(answer.as_ref().ok().map(|(t, _)| t.as_str()));
    act::critic_rate(name.to_string(), Some(!verdict.verified)).await?;
    Ok(Some((rules::critic_step(&verdict, consequential, retries), rules::CRITIC_FATIGUE)))
}

/// The reply over the tools' results: the primary model, else the labelled
/// rules.
async fn reply_text(
    ctx: &Assembled,
    text: &str,
    results: &[ActResult],
    ledger: &mut Ledger,
    now_ms: u64,
) -> (String, ReplySource) {
    let messages = mneme_entry::model::messages(generate::messages(Mode::Respond, ctx, text, results));
    let started = std::time::Instant::now();
    let answer = llm::complete(mneme_entry::model::reply_request(messages)).await;
    ledger.call(ModelPath::ToolReply, &answer, started);
    match answer {
        Ok(c) if !generate::clean(&c.text).is_empty() => {
            ledger.answered(ModelPath::ToolReply);
            (generate::clean(&c.text), ReplySource::Model)
        }
        Ok(_) => {
            let why = Fallback { reason: "empty".into(), detail: "the model answered nothing".into() };
            ledger.fell_back(ModelPath::ToolReply, &why, now_ms);
            (generate::fallback(Mode::Respond, ctx, text, results, "empty answer"), ReplySource::RuleBased)
        }
        Err(e) => {
            let why = Fallback { reason: e.code.name().into(), detail: e.message.clone() };
            ledger.fell_back(ModelPath::ToolReply, &why, now_ms);
            (generate::fallback(Mode::Respond, ctx, text, results, e.code.name()), ReplySource::RuleBased)
        }
    }
}
