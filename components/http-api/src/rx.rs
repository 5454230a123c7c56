//! Recommendations: doors and observations, `POST /rx/{door}` (the eleven
//! steps), and the rec store under `/v1/rx/recs`. The stage does the store
//! side (steps 0.5–5 and 8–10); this module runs step 6 (the vault search,
//! through the `knowledge` stage) and step 7 (the composing model through
//! `llm`, or the labelled template), enforcing D-008 and D-011 on the draft.

use crate::knowledge::{bad, body_json, known_fields};
use crate::mneme::knowledge::knowledge;
use crate::mneme::llm::llm::{self, ChatMessage, CompletionRequest, Tier};
use crate::mneme::rx::rx;
use crate::{Reply, err, num, reply, stage_error, stage_value};
use mneme_entry::clock;
use mneme_entry::model::{Fallback, Ledger, ModelPath};
use mneme_http::{ApiError, json};
use mneme_rx::artifact::{self, Draft, Inputs, Source};
use mneme_rx::door::{Door, valid_name};
use mneme_rx::signals::{self, AuxRow, CompositeScore, Signals};
use mneme_types::knowledge::SearchMode;
use mneme_types::rx::{PushedRec, RecStatus, RecView, RunDraft, RunStart, TraceStep};
use serde_json::{Value, json};
use spin_sdk::http::{IntoResponse, Method, Request, StatusCode};
use std::collections::HashMap;
use std::time::Instant;

const MAX_BODY: usize = 1024 * 1024;
const MAX_OBSERVATIONS: usize = 500;
const COMPOSE_TIMEOUT_MS: u32 = 30_000;
/// The model gets this many tries at a draft that passes D-008 and D-011.
const COMPOSE_ATTEMPTS: usize = 2;

fn no_door() -> Reply {
    err(ApiError::not_found("no such door"))
}

/// Whether a path is one of this module's (behind the API key).
pub fn handles(path: &str) -> bool {
    path == "/rx" || path.starts_with("/rx/") || path == "/v1/rx/recs" || path.starts_with("/v1/rx/recs/")
}

/// `POST /v1/rx/recs`, after the rx ingest token was checked.
pub async fn ingest(req: Request) -> Reply {
    let now = clock::request_ms(req.headers()).await;
    let v = match body_json(req, MAX_BODY).await {
        Ok(v) => v,
        Err(e) => return err(e),
    };
    let checked = (|| {
        known_fields(
            &v,
            &[
                "door",
                "drift_score",
                "confidence",
                "tldr",
                "body_md",
                "rx_md_path",
                "driving_signal",
                "signals_fired",
                "source_refs",
                "drift_breakdown",
                "confidence_breakdown",
                "created_at",
            ],
        )?;
        for k in ["door", "tldr", "body_md"] {
            if v.get(k).and_then(Value::as_str).is_none_or(|s| s.trim().is_empty()) {
                return Err(bad("invalid", format!("`{k}` is required and must be a non-empty string")));
            }
        }
        if !v.get("drift_score").and_then(Value::as_f64).is_some_and(|d| (0.0..=1.0).contains(&d)) {
            return Err(bad("invalid", "`drift_score` is a number in [0, 1]"));
        }
        if !v.get("confidence").and_then(Value::as_i64).is_some_and(|c| (0..=100).contains(&c)) {
            return Err(bad("invalid", "`confidence` is an integer from 0 to 100"));
        }
        for k in ["rx_md_path", "driving_signal"] {
            if v.get(k).is_some_and(|x| !x.is_string() && !x.is_null()) {
                return Err(bad("invalid", format!("`{k}` must be a string")));
            }
        }
        Ok(())
    })();
    if let Err(e) = checked {
        return err(e);
    }
    let text = |k: &str| v.get(k).and_then(Value::as_str).map(String::from);
    // A document the generator sent, as its JSON text; left out, or null, is none.
    let document = |k: &str| v.get(k).filter(|x| !x.is_null()).map(Value::to_string);
    let rec = PushedRec {
        door: text("door").unwrap_or_default(),
        drift_score: v["drift_score"].as_f64().unwrap_or_default(),
        confidence: v["confidence"].as_i64().unwrap_or_default(),
        tldr: text("tldr").unwrap_or_default(),
        body_md: text("body_md").unwrap_or_default(),
        rx_md_path: text("rx_md_path"),
        driving_signal: text("driving_signal"),
        signals_fired: document("signals_fired"),
        source_refs: document("source_refs"),
        drift_breakdown: document("drift_breakdown"),
        confidence_breakdown: document("confidence_breakdown"),
        now_ms: now as i64,
    };
    match rx::ingest_rec(rec).await {
        Ok(id) => reply(json(StatusCode::CREATED, &json!({"id": id}))),
        Err(e) => reply(stage_error(e)),
    }
}

/// Routes under `/rx` and `/v1/rx/recs`.
pub async fn route(req: Request, path: &str, query: &HashMap<String, String>) -> Reply {
    let method = req.method().clone();
    let allowed = |m: &str| err(ApiError::method_not_allowed(m));
    let now = clock::request_ms(req.headers()).await;
    if path == "/rx/doors" || path == "/rx" {
        return match method {
            Method::GET => {
                // A stored configuration that no longer reads is left out.
                let doors = rx::doors().await.map(|d| {
                    let configs: Vec<Value> = d.iter().filter_map(|c| serde_json::from_str(c).ok()).collect();
                    json!({"doors": configs})
                });
                reply(stage_value(doors))
            }
            _ => allowed("GET"),
        };
    }
    if let Some(name) = path.strip_prefix("/rx/doors/") {
        if method != Method::PUT {
            return allowed("PUT");
        }
        if !valid_name(name) {
            return err(bad(
                "invalid",
                "a door name is 1 to 32 lowercase letters, digits and -, starts with a letter and is not `doors`",
            ));
        }
        let config = match body_json(req, MAX_BODY).await {
            Ok(v) => v,
            Err(e) => return err(e),
        };
        return reply(stage_value(
            rx::put_door(name.to_string(), config.to_string(), now as i64).await.map(|c| document(&c)),
        ));
    }
    if let Some(rest) = path.strip_prefix("/rx/") {
        let (name, tail) = rest.split_once('/').map_or((rest, ""), |(n, t)| (n, t));
        if !valid_name(name) {
            return no_door();
        }
        return match (tail, method) {
            ("", Method::POST) => run(name, now).await,
            ("", _) => allowed("POST"),
            ("observations", Method::POST) => observe(req, name, now).await,
            ("observations", _) => allowed("POST"),
            ("artifacts", Method::GET) => {
                reply(stage_value(rx::artifacts(name.to_string()).await.map(|a| json!({"artifacts": a}))))
            }
            ("artifacts", _) => allowed("GET"),
            ("history", Method::GET) => {
                let days = match crate::num(query, "days", 28, 1, 90) {
                    Ok(d) => d,
                    Err(e) => return err(e),
                };
                reply(stage_value(rx::history(name.to_string(), days, now as i64).await.map(|h| history_json(&h))))
            }
            ("history", _) => allowed("GET"),
            _ => err(ApiError::not_found(format!("no endpoint at {path}"))),
        };
    }
    if path == "/v1/rx/recs" {
        return match method {
            Method::GET => list(query, now).await,
            _ => allowed("GET (POST takes the X-RX-Ingest-Token)"),
        };
    }
    let rest = path.strip_prefix("/v1/rx/recs/").unwrap_or_default();
    let (id, action) = rest.split_once('/').map_or((rest, ""), |(i, a)| (i, a));
    if let Some(id) = id.strip_suffix(".md")
        && action.is_empty()
    {
        if method != Method::GET {
            return allowed("GET");
        }
        return match rx::rec_markdown(id.to_string()).await {
            Ok(a) => spin_sdk::http::Response::builder()
                .status(200)
                .header("content-type", "text/markdown; charset=utf-8")
                .body(a.markdown)
                .expect("static parts")
                .into_response(),
            Err(e) => reply(stage_error(e)),
        };
    }
    if id.is_empty() || id.len() > 64 || !id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-') {
        return err(ApiError::not_found(format!("no rec `{id}`")));
    }
    match (action, method) {
        ("", Method::GET) => reply(stage_value(rx::get_rec(id.to_string(), now as i64).await.map(rec))),
        ("", _) => allowed("GET"),
        ("disposition", Method::POST) => disposition(req, id, now).await,
        ("snooze", Method::POST) => snooze(req, id, now).await,
        ("disposition" | "snooze", _) => allowed("POST"),
        _ => err(ApiError::not_found(format!("no endpoint at {path}"))),
    }
}

async fn list(q: &HashMap<String, String>, now: u64) -> Reply {
    let limit = match num(q, "limit", 50, 1, 200) {
        Ok(l) => l,
        Err(e) => return err(e),
    };
    let status = match q.get("status").filter(|s| !s.is_empty()) {
        None => None,
        Some(s) => match mneme_rx::lifecycle::Status::parse(s) {
            Some(s) => Some(RecStatus::from(s)),
            None => return err(bad("invalid", "`status` is open, snoozed, acted or dismissed")),
        },
    };
    let door = q.get("door").filter(|s| !s.is_empty());
    if let Some(d) = door
        && !valid_name(d)
    {
        return err(bad("invalid", "`door`: lowercase letters, digits and -"));
    }
    let recs = rx::list_recs(door.cloned(), status, limit, now as i64).await;
    reply(stage_value(recs.map(|r| json!({"recs": r.into_iter().map(rec).collect::<Vec<_>>()}))))
}

async fn disposition(req: Request, id: &str, now: u64) -> Reply {
    let v = match body_json(req, 64 * 1024).await {
        Ok(v) => v,
        Err(e) => return err(e),
    };
    let checked = (|| {
        known_fields(&v, &["disposition", "subjective_fit_1_5", "outcome_note"])?;
        let d = v.get("disposition").and_then(Value::as_str).ok_or_else(|| {
            bad("invalid", "`disposition` is required: acted_as_prescribed, acted_modified, skipped or dismissed")
        })?;
        let d = mneme_rx::lifecycle::Disposition::parse(d).ok_or_else(|| {
            bad("invalid", "`disposition` is acted_as_prescribed, acted_modified, skipped or dismissed")
        })?;
        let fit = match v.get("subjective_fit_1_5") {
            None | Some(Value::Null) => None,
            Some(f) => {
                Some(f.as_i64().ok_or_else(|| bad("invalid", "`subjective_fit_1_5` must be an integer from 1 to 5"))?)
            }
        };
        let note = match v.get("outcome_note") {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) if s.chars().count() <= 4_000 => Some(s.clone()),
            Some(_) => return Err(bad("invalid", "`outcome_note` is a string of at most 4000 characters")),
        };
        Ok((d, fit, note))
    })();
    match checked {
        Ok((d, fit, note)) => {
            reply(stage_value(rx::dispose(id.to_string(), d.into(), fit, note, now as i64).await.map(rec)))
        }
        Err(e) => err(e),
    }
}

async fn snooze(req: Request, id: &str, now: u64) -> Reply {
    let v = match body_json(req, 64 * 1024).await {
        Ok(v) => v,
        Err(e) => return err(e),
    };
    if let Err(e) = known_fields(&v, &["days"]) {
        return err(e);
    }
    let Some(days) = v.get("days").and_then(Value::as_i64) else {
        return err(bad("invalid", "`days` must be an integer from 1 to 7"));
    };
    reply(stage_value(rx::snooze(id.to_string(), days, now as i64).await.map(rec)))
}

async fn observe(req: Request, door: &str, now: u64) -> Reply {
    let v = match body_json(req, MAX_BODY).await {
        Ok(v) => v,
        Err(e) => return err(e),
    };
    // One observation, or `{observations: [...]}`.
    let items: Vec<Value> = match v.get("observations") {
        Some(Value::Array(a)) if v.as_object().is_some_and(|o| o.len() == 1) => a.clone(),
        Some(_) => return err(bad("invalid", "`observations` is a list, alone in the body")),
        None => vec![v],
    };
    if items.is_empty() || items.len() > MAX_OBSERVATIONS {
        return err(bad("invalid", format!("send 1 to {MAX_OBSERVATIONS} observations")));
    }
    if items.iter().any(|i| !i.is_object()) {
        return err(bad("invalid", "each observation is a JSON object with a `kind`"));
    }
    let items: Vec<String> = items.iter().map(Value::to_string).collect();
    match rx::observe(door.to_string(), items, now as i64).await {
        Ok(ids) => reply(json(StatusCode::CREATED, &json!({"door": door, "ids": ids}))),
        Err(e) => reply(stage_error(e)),
    }
}

/// `POST /rx/{door}`: the eleven steps.
async fn run(door_name: &str, now: u64) -> Reply {
    let started = Instant::now();
    let begun = match rx::begin(door_name.to_string(), now as i64).await {
        Ok(RunStart::Absorbed(r)) => {
            let mut trace = r.trace;
            trace.push(step("11", started, "returned the no-change confirmation"));
            return reply(json(
                StatusCode::OK,
                &json!({"path": r.path, "tldr": r.tldr, "rec_id": r.rec_id,
                        "status": "no-change", "trace": trace, "took_ms": ms(started)}),
            ));
        }
        Ok(RunStart::NewRec(state)) => state,
        Err(e) => return reply(stage_error(e)),
    };
    let mut trace = begun.trace;
    let claim = begun.claim;
    let release = async || {
        let _ = rx::release(door_name.to_string(), claim.clone()).await;
    };
    // The door as stored: the stage checked it when it was put.
    let door: Door = match serde_json::from_str(&begun.door) {
        Ok(d) => d,
        Err(e) => {
            release().await;
            return err(ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", format!("the run's door: {e}")));
        }
    };
    let sig: Signals = begun.signals.into();
    let aux: Vec<AuxRow> = begun.aux.into_iter().map(Into::into).collect();
    let composite: CompositeScore = begun.composite.into();
    let driving = begun.driving;
    let fired = begun.fired;
    let prior = begun.prior_open_recs;

    // Step 6: evidence from the vault search, keyed off the driving signal.
    let t6 = Instant::now();
    let query = begun.evidence_query;
    let corpora = vec!["knowledge".to_string(), "document".to_string()];
    let k = artifact::MAX_SOURCES as u32;
    let (sources, outcome6) = match knowledge::search(query.clone(), k, SearchMode::Hybrid, corpora, true).await {
        Ok(hits) => {
            let sources: Vec<Source> = hits
                .into_iter()
                .map(|h| Source { corpus: h.corpus, id: h.id, title: h.title, snippet: h.snippet, score: h.score })
                .collect();
            let n = sources.len();
            (sources, format!("{n} sources for \"{query}\""))
        }
        Err(e) => (Vec::new(), format!("the vault search failed ({}); no sources", e.message)),
    };
    trace.push(step("6", t6, outcome6));

    // Step 7: the artifact.
    let t7 = Instant::now();
    let (confidence, breakdown) = signals::confidence(&sig, &driving, sources.len());
    let created_at = mneme_time::calendar::utc_timestamp(now);
    let inputs = Inputs {
        door: &door,
        signals: &sig,
        aux: &aux,
        composite: &composite,
        driving: &driving,
        fired: &fired,
        sources: &sources,
        confidence,
        confidence_breakdown: &breakdown,
        prior_open_recs: &prior,
        created_at: &created_at,
    };
    let mut ledger = Ledger::default();
    let composed = compose(&inputs, &mut ledger, now).await;
    ledger.flush(None, now).await;
    let (draft, composer, outcome7) = match composed {
        Ok(c) => c,
        // Two drafts broke the artifact rules: the labelled template, with
        // why (D-R5 as amended by D-L2).
        Err(reasons) => (
            artifact::template(&inputs),
            artifact::TEMPLATE.into(),
            format!("template: the model's drafts broke the artifact rules twice ({})", reasons.join(" | "))
                .chars()
                .take(600)
                .collect(),
        ),
    };
    let markdown = artifact::render(&inputs, &draft, &composer);
    trace.push(step("7", t7, outcome7));

    let finish = RunDraft {
        door: door.name.clone(),
        claim: claim.clone(),
        now_ms: now as i64,
        markdown,
        tldr: draft.tldr.clone(),
        driving: driving.clone(),
        drift_score: composite.drift_score,
        confidence,
        fired: fired.clone(),
        source_refs: artifact::source_refs(&sources).to_string(),
        drift_breakdown: artifact::drift_breakdown(&inputs).to_string(),
        confidence_breakdown: breakdown.to_string(),
    };
    let done = match rx::finish(finish).await {
        Ok(d) => d,
        Err(e) => return reply(stage_error(e)),
    };
    trace.extend(done.trace);
    trace.push(step("11", started, "returned the path and TL;DR"));
    reply(json(
        StatusCode::CREATED,
        &json!({"path": done.path, "tldr": done.tldr, "rec_id": done.rec_id, "status": done.status,
                "composer": composer, "trace": trace, "took_ms": ms(started)}),
    ))
}

fn ms(t: Instant) -> f64 {
    (t.elapsed().as_secs_f64() * 1_000_000.0).round() / 1_000.0
}

fn step(step: &str, t: Instant, outcome: impl Into<String>) -> TraceStep {
    mneme_rx::trace_entry(step, t.elapsed(), outcome).into()
}

/// A JSON document the stage passed as text, as the value it is.
fn document(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or(Value::Null)
}

/// A rec as the rec store's API shows it: its documents as JSON, a short
/// id, and the fit under its API name.
fn rec(r: RecView) -> Value {
    let mut v = json!({
        "id": r.id, "short_id": r.id.chars().take(8).collect::<String>(), "door": r.door, "status": r.status,
        "drift_score": r.drift_score, "confidence": r.confidence, "driving_signal": r.driving_signal, "tldr": r.tldr,
        "rx_md_path": r.rx_md_path, "signals_fired": document(&r.signals_fired),
        "source_refs": document(&r.source_refs), "drift_breakdown": document(&r.drift_breakdown),
        "confidence_breakdown": document(&r.confidence_breakdown), "origin": r.origin, "created_at": r.created_at,
        "updated_at": r.updated_at, "acted_disposition": r.acted_disposition, "acted_at": r.acted_at,
        "subjective_fit_1_5": r.subjective_fit, "outcome_note": r.outcome_note, "snoozed_until": r.snoozed_until,
        "snooze_count": r.snooze_count, "flags": r.flags,
    });
    if let Some(body) = r.body_md {
        v["body_md"] = json!(body);
    }
    v
}

/// Step 7's narrative: the model under the draft's schema, asked again
/// once with the reason when a draft breaks D-008 or D-011; the labelled
/// template with no model (or when the model cannot be reached). `Err`
/// lists the rejected drafts' reasons, and the caller takes the template.
async fn compose(i: &Inputs<'_>, ledger: &mut Ledger, now_ms: u64) -> Result<(Draft, String, String), Vec<String>> {
    let status = llm::status(COMPOSE_TIMEOUT_MS).await;
    if !status.configured {
        return Ok((artifact::template(i), artifact::TEMPLATE.into(), "template: no model is configured".into()));
    }
    let allowed = artifact::allowed_numbers(i);
    let mut messages = mneme_entry::model::system_user(artifact::PROMPT, artifact::user_message(i));
    let mut reasons = Vec::new();
    for attempt in 1..=COMPOSE_ATTEMPTS {
        if attempt > 1 {
            ledger.retried(ModelPath::RxCompose);
        }
        let started = std::time::Instant::now();
        let answer = llm::complete(CompletionRequest {
            tier: Tier::Primary,
            messages: messages.clone(),
            max_tokens: Some(1_500),
            temperature: Some(0.2),
            json: true,
            schema: Some(artifact::schema()),
            timeout_ms: COMPOSE_TIMEOUT_MS,
        })
        .await;
        ledger.call(ModelPath::RxCompose, &answer, started);
        let c = match answer {
            Ok(c) => c,
            Err(e) => {
                let why = Fallback { reason: e.code.name().into(), detail: e.message.clone() };
                ledger.fell_back(ModelPath::RxCompose, &why, now_ms);
                let note = format!("template: the model failed ({}: {})", e.code, e.message);
                return Ok((artifact::template(i), artifact::TEMPLATE.into(), note));
            }
        };
        let checked = artifact::parse_draft(&c.text).and_then(|d| artifact::check_draft(&d, &allowed).map(|_| d));
        match checked {
            Ok(d) => {
                ledger.answered(ModelPath::RxCompose);
                let note = if attempt == 1 {
                    format!("drafted by {}", c.model)
                } else {
                    format!("drafted by {} on the second try", c.model)
                };
                return Ok((d, c.model, note));
            }
            Err(reason) => {
                messages.push(ChatMessage { role: "assistant".into(), content: c.text.clone() });
                messages.push(ChatMessage {
                    role: "user".into(),
                    content: format!(
                        "The draft was rejected: {reason}. Answer again with the whole JSON object, fixed."
                    ),
                });
                reasons.push(reason);
            }
        }
    }
    let why = Fallback { reason: "rejected".into(), detail: reasons.join(" | ") };
    ledger.fell_back(ModelPath::RxCompose, &why, now_ms);
    Err(reasons)
}

/// A door's history as the web app draws it: the dates, the composite per
/// day, and each component's normalised value per day, by name.
fn history_json(h: &mneme_types::rx::DoorHistory) -> Value {
    let dates: Vec<String> =
        h.points.iter().map(|p| mneme_time::calendar::format_date(p.at_ms.div_euclid(86_400_000))).collect();
    let composite: Vec<f64> = h.points.iter().map(|p| p.composite).collect();
    let mut components = serde_json::Map::new();
    for (i, name) in h.components.iter().enumerate() {
        let series: Vec<Option<f64>> = h.points.iter().map(|p| p.components.get(i).copied().flatten()).collect();
        components.insert(name.clone(), json!(series));
    }
    json!({"door": h.door, "fire_threshold": h.fire_threshold, "dates": dates, "composite": composite,
           "components": components, "note": h.note})
}
