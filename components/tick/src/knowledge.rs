//! `POST /tick/knowledge`: drains the knowledge ingest queue. For each job
//! it claims: extraction (the model with `prompts/knowledge-extract.md`, or
//! the labelled rule-based extractor when no model is configured), then the
//! stage's `prepare`, the stance judgements (model or rules), and `apply`.
//! A model failure gives the job back to retry; the third failure fails it.

use crate::mneme::knowledge::knowledge;
use crate::mneme::llm::llm::{self, CompletionRequest, Tier};
use crate::parse;
use mneme_knowledge::governor::{self, MERGE_COSINE_DEFAULT};
use mneme_knowledge::{extract, rules};
use mneme_types::StageError;
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
    let model = llm::status().await;
    let mut done = Vec::new();
    while clock().saturating_sub(started) < BUDGET_MS {
        let claimed = parse(&knowledge::claim(json!({"now_ms": clock(), "lease_ms": LEASE_MS}).to_string()).await?);
        let Some(job) = claimed.get("job").filter(|j| !j.is_null()) else { break };
        let id = job["id"].as_str().unwrap_or_default().to_string();
        let claim = job["claim"].as_str().unwrap_or_default().to_string();
        let patterns: Vec<(String, String)> = serde_json::from_value(claimed["patterns"].clone()).unwrap_or_default();
        let outcome = run_job(job, &patterns, &model, threshold, &clock).await;
        match outcome {
            Ok(summary) => done.push(json!({"job_id": id, "status": "done", "kept": summary["kept"],
                "merged": summary["merged"], "dropped": summary["dropped"], "extractor": summary["extractor"]})),
            Err((error, retry)) => {
                let status = knowledge::fail(
                    json!({"job_id": id, "claim": claim, "error": error, "retry": retry, "now_ms": clock()})
                        .to_string(),
                )
                .await
                .map(|s| parse(&s)["status"].clone())
                .unwrap_or(Value::Null);
                done.push(json!({"job_id": id, "status": status, "error": error}));
            }
        }
    }
    Ok(json!({"jobs": done}))
}

/// One job; `Err((error, retry))` gives it back.
async fn run_job(
    job: &Value,
    patterns: &[(String, String)],
    model: &llm::ModelStatus,
    threshold: f32,
    clock: &impl Fn() -> u64,
) -> Result<Value, (String, bool)> {
    let text = job["source"]["text"].as_str().unwrap_or_default();
    let (candidates, extractor, note) = if model.configured {
        let mut all = Vec::new();
        let mut name = model.primary.clone();
        for chunk in extract::chunks(text) {
            let c = llm::complete(CompletionRequest {
                tier: Tier::Primary,
                messages: mneme_entry::model::system_user(extract::PROMPT, extract::user_message(&chunk, patterns)),
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
    let prepared = knowledge::prepare(json!({"candidates": candidates, "merge_threshold": threshold}).to_string())
        .await
        .map_err(|e| (stage(e), true))?;
    let mut items = parse(&prepared)["items"].as_array().cloned().unwrap_or_default();
    for item in items.iter_mut() {
        judge_stances(item, model, threshold).await;
    }
    let applied = knowledge::apply(
        json!({"job_id": job["id"], "claim": job["claim"], "extractor": extractor, "extractor_note": note,
               "items": items, "merge_threshold": threshold, "now_ms": clock()})
        .to_string(),
    )
    .await
    .map_err(|e| {
        let retry = e.code != mneme_types::ErrorCode::LeaseLost;
        (stage(e), retry)
    })?;
    Ok(parse(&applied))
}

/// Labels each neighbour's stance towards the candidate: by the model when
/// there is one (unlabelled or failed → rules), else by the rules.
async fn judge_stances(item: &mut Value, model: &llm::ModelStatus, threshold: f32) {
    let Some(neighbours) = item["neighbours"].as_array().filter(|n| !n.is_empty()).cloned() else { return };
    let position = item["candidate"]["position"].as_str().unwrap_or_default().to_string();
    let reasoning = item["candidate"]["reasoning"].as_str().unwrap_or_default().to_string();
    let mut by = "rules".to_string();
    let mut labels: Vec<(String, governor::Stance)> = Vec::new();
    if model.configured {
        let earlier: Vec<(String, String)> = neighbours
            .iter()
            .map(|n| (n["id"].as_str().unwrap_or_default().into(), n["position"].as_str().unwrap_or_default().into()))
            .collect();
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
                by = if labels.len() == neighbours.len() { "model".into() } else { "model, rules for the rest".into() };
            }
            Err(e) => by = format!("rules (the model failed: {})", e.code),
        }
    }
    let judged: Vec<Value> = neighbours
        .into_iter()
        .map(|mut n| {
            let id = n["id"].as_str().unwrap_or_default().to_string();
            let stance = labels.iter().find(|l| l.0 == id).map(|l| l.1).unwrap_or_else(|| {
                let cos = n["cosine"].as_f64().unwrap_or(0.0) as f32;
                governor::rule_stance(&position, n["position"].as_str().unwrap_or_default(), cos, threshold)
            });
            n["stance"] = json!(stance);
            n
        })
        .collect();
    item["neighbours"] = Value::Array(judged);
    item["stance_by"] = json!(by);
}
