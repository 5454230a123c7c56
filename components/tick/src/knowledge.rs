//! `POST /tick/knowledge`: drains the knowledge ingest queue. For each job
//! it claims: extraction (the model with `prompts/knowledge-extract.md`, or
//! the labelled rule-based extractor when no model is configured), then the
//! stage's `prepare`, the stance judgements (model or rules), and `apply`.
//! A model failure gives the job back to retry; the third failure fails it.

use crate::mneme::knowledge::knowledge;
use crate::mneme::llm::llm::{self, CompletionRequest, Tier};
use mneme_knowledge::governor::{self, MERGE_COSINE_DEFAULT};
use mneme_knowledge::{extract, rules};
use mneme_types::StageError;
use mneme_types::knowledge::{IngestJob, IngestReport, JudgedJob, Prepared};
use serde_json::{Value, json};

/// A claimed job is someone else's to take over after this long.
const LEASE_MS: u64 = 180_000;
/// No new job starts after this much of one tick has passed, so a tick
/// ends well inside the request timeout.
const BUDGET_MS: u64 = 20_000;
const EXTRACT_TIMEOUT_MS: u32 = 60_000;
const STANCE_TIMEOUT_MS: u32 = 20_000;

fn stage(e: StageError) -> String {
    format!("{}: {}", e.code, e.message)
}

/// The merge threshold from the variable `knowledge_merge_threshold`.
async fn merge_threshold() -> Result<f32, StageError> {
    match spin_sdk::variables::get("knowledge_merge_threshold").await {
        Ok(v) if !v.trim().is_empty() => {
            v.trim().parse::<f32>().ok().filter(|t| *t > 0.0 && *t <= 1.0).ok_or_else(|| {
                StageError::new(
                    mneme_types::ErrorCode::Config,
                    "`knowledge_merge_threshold` must be a number in (0, 1]",
                )
            })
        }
        _ => Ok(MERGE_COSINE_DEFAULT),
    }
}

/// Runs queued jobs until the queue is empty or the budget is spent.
pub async fn drain(clock: impl Fn() -> u64) -> Result<Value, StageError> {
    let threshold = merge_threshold().await?;
    let started = clock();
    let model = llm::status(EXTRACT_TIMEOUT_MS).await;
    let mut done = Vec::new();
    while clock().saturating_sub(started) < BUDGET_MS {
        let Some(job) = knowledge::claim(clock(), LEASE_MS).await? else { break };
        let (id, claim) = (job.id.clone(), job.claim.clone());
        match run_job(job, &model, threshold, &clock).await {
            Ok(report) => done.push(json!({"job_id": id, "status": "done", "kept": report.kept,
                "merged": report.merged, "dropped": report.dropped, "extractor": report.extractor})),
            Err((error, retry)) => {
                let status = knowledge::fail(id.clone(), claim, error.clone(), retry, clock())
                    .await
                    .map_or(Value::Null, |s| json!(s));
                done.push(json!({"job_id": id, "status": status, "error": error}));
            }
        }
    }
    Ok(json!({"jobs": done}))
}

/// One job; `Err((error, retry))` gives it back.
async fn run_job(
    job: IngestJob,
    model: &llm::ModelStatus,
    threshold: f32,
    clock: &impl Fn() -> u64,
) -> Result<IngestReport, (String, bool)> {
    let patterns: Vec<(String, String)> = job.patterns.into_iter().map(|p| (p.slug, p.description)).collect();
    let text = job.source.text.as_str();
    let (candidates, extractor, note) = if model.configured {
        let mut all = Vec::new();
        let mut name = model.primary.clone();
        for chunk in extract::chunks(text) {
            let c = llm::complete(CompletionRequest {
                tier: Tier::Primary,
                messages: mneme_entry::model::system_user(extract::PROMPT, extract::user_message(&chunk, &patterns)),
                max_tokens: Some(4_000),
                temperature: Some(0.1),
                json: true,
                timeout_ms: EXTRACT_TIMEOUT_MS,
            })
            .await
            .map_err(|e| (format!("extraction: {}", stage(e)), true))?;
            name = c.model.clone();
            all.extend(extract::parse(&c.text).map_err(|e| (format!("extraction: the model's answer: {e}"), true))?);
        }
        (all, name, None::<String>)
    } else {
        (rules::extract(text), rules::LABEL.to_string(), Some("no model configured: rule-based extraction".into()))
    };
    let candidates: Vec<String> = candidates.iter().map(Value::to_string).collect();
    let mut items = knowledge::prepare(candidates, threshold).await.map_err(|e| (stage(e), true))?;
    for item in items.iter_mut() {
        judge_stances(item, model, threshold).await;
    }
    let judged = JudgedJob {
        job_id: job.id,
        claim: job.claim,
        extractor,
        extractor_note: note,
        items,
        merge_threshold: threshold,
        now_ms: clock(),
    };
    knowledge::apply(judged).await.map_err(|e| {
        let retry = e.code != mneme_types::ErrorCode::LeaseLost;
        (stage(e), retry)
    })
}

/// Labels each neighbour's stance towards the candidate: by the model when
/// there is one (unlabelled or failed → rules), else by the rules.
async fn judge_stances(item: &mut Prepared, model: &llm::ModelStatus, threshold: f32) {
    let Some(candidate) = &item.candidate else { return };
    if item.neighbours.is_empty() {
        return;
    }
    let (position, reasoning) = (candidate.position.clone(), candidate.reasoning.clone());
    let mut by = "rules".to_string();
    let mut labels: Vec<(String, governor::Stance)> = Vec::new();
    if model.configured {
        let earlier: Vec<(String, String)> =
            item.neighbours.iter().map(|n| (n.id.clone(), n.position.clone())).collect();
        match llm::complete(CompletionRequest {
            tier: Tier::Light,
            messages: mneme_entry::model::system_user(
                governor::STANCE_PROMPT,
                governor::stance_message(&position, &reasoning, &earlier),
            ),
            max_tokens: Some(400),
            temperature: Some(0.0),
            json: true,
            timeout_ms: STANCE_TIMEOUT_MS,
        })
        .await
        {
            Ok(c) => {
                labels = governor::parse_stances(&c.text);
                by = if labels.len() == item.neighbours.len() {
                    "model".into()
                } else {
                    "model, rules for the rest".into()
                };
            }
            Err(e) => by = format!("rules (the model failed: {})", e.code),
        }
    }
    for n in item.neighbours.iter_mut() {
        let stance = labels
            .iter()
            .find(|l| l.0 == n.id)
            .map(|l| l.1)
            .unwrap_or_else(|| governor::rule_stance(&position, &n.position, n.cosine, threshold));
        n.stance = Some(stance.into());
    }
    item.stance_by = Some(by);
}
