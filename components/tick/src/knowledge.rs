//! `POST /tick/knowledge`: drains the knowledge ingest queue. For each job
//! it claims: extraction (the model with `prompts/knowledge-extract.md`, or
//! the labelled rule-based extractor when no model is configured), then the
//! stage's `prepare`, the stance judgements (model or rules), and `apply`.
//! A model failure gives the job back to retry; the third failure fails it.

use crate::mneme::knowledge::knowledge;
use crate::mneme::llm::llm::{self, Tier};
use mneme_entry::model::{Fallback, JsonAsk, Ledger, ModelPath, ask_json};
use mneme_knowledge::governor::{self, MERGE_COSINE_DEFAULT};
use mneme_knowledge::{extract, rules};
use mneme_types::StageError;
use mneme_types::knowledge::{IngestJob, IngestReport, JudgedJob, Prepared};
use serde_json::{Value, json};

/// A claimed job is someone else's to take over after this long.
const LEASE_MS: u64 = 240_000;
/// No new job starts after this much of one tick has passed, so a tick
/// ends well inside the request timeout.
const BUDGET_MS: u64 = 20_000;
/// One chunk's extraction: a CPU model prefills a 4,000-character chunk
/// and writes its candidates in about a minute (BENCHMARKS, "A real
/// model").
const EXTRACT_TIMEOUT_MS: u32 = 120_000;
/// A job's extraction in all, so a job ends inside its lease.
const EXTRACT_BUDGET_MS: u64 = 150_000;
const STANCE_TIMEOUT_MS: u32 = 30_000;

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
    let mut ledger = Ledger::default();
    while clock().saturating_sub(started) < BUDGET_MS {
        let Some(job) = knowledge::claim(clock(), LEASE_MS).await? else { break };
        let (id, claim) = (job.id.clone(), job.claim.clone());
        match run_job(job, &model, threshold, &clock, &mut ledger).await {
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
    ledger.flush(None, clock()).await;
    Ok(json!({"jobs": done}))
}

/// One job; `Err((error, retry))` gives it back. Each chunk goes to the
/// model; a chunk whose answer stays malformed or empty after a second ask
/// is read by the labelled rules (D-L2), named with why in the job's
/// `extractor_note`. A model that fails or runs out of time gives the job
/// back, and fails it on the last attempt, where a re-ingest queues it
/// again: the rules would keep the model from ever reading it.
async fn run_job(
    job: IngestJob,
    model: &llm::ModelStatus,
    threshold: f32,
    clock: &impl Fn() -> u64,
    ledger: &mut Ledger,
) -> Result<IngestReport, (String, bool)> {
    let patterns: Vec<(String, String)> = job.patterns.into_iter().map(|p| (p.slug, p.description)).collect();
    let text = job.source.text.as_str();
    let principal = job.source.principal.as_deref();
    let (candidates, extractor, note) = if model.configured {
        let started = clock();
        let mut all = Vec::new();
        let mut name = model.primary.clone();
        let mut by_rules: Vec<String> = Vec::new();
        let pieces = extract::chunks(text);
        for (i, chunk) in pieces.iter().enumerate() {
            let left = EXTRACT_BUDGET_MS.saturating_sub(clock().saturating_sub(started));
            let ask = JsonAsk {
                path: ModelPath::KnowledgeExtract,
                tier: Tier::Primary,
                messages: mneme_entry::model::system_user(
                    extract::PROMPT,
                    extract::user_message(chunk, &patterns, principal),
                ),
                schema: extract::schema(),
                max_tokens: extract::MAX_TOKENS,
                temperature: 0.1,
                timeout_ms: (left.min(u64::from(EXTRACT_TIMEOUT_MS)) as u32).max(1),
            };
            match ask_json(ledger, ask, clock(), extract::parse).await {
                Ok((found, c)) => {
                    name = c.model.clone();
                    // A model that finds nothing where the rules find
                    // something has missed it, not judged it away (a small
                    // model's commonest miss): the rules' reading is kept,
                    // labelled, and the miss is on the ledger (D-L2).
                    let by_the_rules = if found.is_empty() { rules::extract(chunk, principal) } else { Vec::new() };
                    if by_the_rules.is_empty() {
                        all.extend(found);
                    } else {
                        let why = Fallback {
                            reason: "empty".into(),
                            detail: format!("the model found nothing where the rules found {}", by_the_rules.len()),
                        };
                        ledger.fell_back(ModelPath::KnowledgeExtract, &why, clock());
                        by_rules.push(format!("part {} of {} ({why})", i + 1, pieces.len()));
                        all.extend(by_the_rules);
                    }
                }
                Err(why) if why.reason == "malformed" || why.reason == "empty" => {
                    all.extend(rules::extract(chunk, principal));
                    by_rules.push(format!("part {} of {} ({why})", i + 1, pieces.len()));
                }
                Err(why) => return Err((format!("extraction: {why}"), true)),
            }
        }
        let note = (!by_rules.is_empty())
            .then(|| format!("rule-based extraction for {}", by_rules.join("; ")).chars().take(500).collect());
        (all, name, note)
    } else {
        (
            rules::extract(text, principal),
            rules::LABEL.to_string(),
            Some("no model configured: rule-based extraction".into()),
        )
    };
    let candidates: Vec<String> = candidates.iter().map(Value::to_string).collect();
    let mut items = knowledge::prepare(candidates, threshold).await.map_err(|e| (stage(e), true))?;
    for item in items.iter_mut() {
        judge_stances(item, model, threshold, ledger, clock()).await;
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
async fn judge_stances(
    item: &mut Prepared,
    model: &llm::ModelStatus,
    threshold: f32,
    ledger: &mut Ledger,
    now_ms: u64,
) {
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
        let ask = JsonAsk {
            path: ModelPath::KnowledgeStance,
            tier: Tier::Light,
            messages: mneme_entry::model::system_user(
                governor::STANCE_PROMPT,
                governor::stance_message(&position, &reasoning, &earlier),
            ),
            schema: governor::stance_schema(),
            max_tokens: 400,
            temperature: 0.0,
            timeout_ms: STANCE_TIMEOUT_MS,
        };
        let parse = |t: &str| {
            let labels = governor::parse_stances(t);
            if labels.is_empty() { Err("no readable stance".to_string()) } else { Ok(labels) }
        };
        match ask_json(ledger, ask, now_ms, parse).await {
            Ok((l, _)) => {
                labels = l;
                by = if labels.len() == item.neighbours.len() {
                    "model".into()
                } else {
                    "model, rules for the rest".into()
                };
            }
            Err(why) => by = format!("rules (the model failed: {})", why.reason),
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
