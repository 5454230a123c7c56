//! The flow of `/chat`'s phases (design 002): screen (intent, social
//! filter) → Phase A → Path A (social exit) or triage → Path B (tool work)
//! or Path C (router → ACT loop → generation) → Phase D commit →
//! `message` → `done`.

use std::time::Instant;

use mneme_conversation::act::{self, Action, Limits};
use mneme_conversation::context::Assembled;
use mneme_conversation::generate::{self, ActResult, ReplySource};
use mneme_conversation::honesty::{self, Done};
use mneme_conversation::intent::Intent;
use mneme_conversation::social::SocialMode;
use mneme_conversation::triage::{self as tri, Triage};
use mneme_conversation::{Mode, router as rt};
use mneme_entry::act::{ActLoop, Origin};
use mneme_entry::model::{JsonAsk, Ledger, ModelPath, ask_json};
use mneme_http::new_id;
use serde_json::{Value, json};

use super::path_b::{configured_tools, path_b, relevant_tools};
use super::request::{Exchange, Message};
use super::stream::Out;
use crate::mneme::commit::commit;
use crate::mneme::context::context;
use crate::mneme::llm::llm::{self, Tier};
use crate::mneme::router::router;
use crate::mneme::triage::triage;
use mneme_entry::clock;
use mneme_types::StageError;
use mneme_types::conversation::{FinishedExchange, TriageCall};

/// Budget of one ACT planning call and of generation's first token.
const PLAN_TIMEOUT_MS: u32 = 10_000;

/// What the exchange came to, for Phase D.
struct Outcome<'a> {
    mode: Mode,
    text: &'a str,
    confidence: f64,
    source: &'a str,
    tools: &'a [String],
    generation_ms: Option<u64>,
    fast_path: bool,
}

/// Milliseconds per pipeline step, reported in the `done` event.
struct Steps {
    at: u64,
    list: serde_json::Map<String, Value>,
}

impl Steps {
    fn start() -> Self {
        Steps { at: clock::system_ms(), list: Default::default() }
    }
    fn mark(&mut self, name: &str) {
        let now = clock::system_ms();
        let prev = self.list.get(name).and_then(Value::as_u64).unwrap_or(0);
        self.list.insert(name.into(), json!(prev + now.saturating_sub(self.at)));
        self.at = now;
    }
}

/// Runs the pipeline; returns the milliseconds spent waiting on models,
/// the time of each step, and what the message cost in model calls and
/// tokens (also added to the day's ledger, under the mode it was answered
/// in).
pub async fn pipeline(
    out: &mut Out,
    msg: &Message,
    request_id: &str,
    now: u64,
) -> Result<(u64, Value, Value), StageError> {
    let mut steps = Steps::start();
    let ex = Exchange { msg, request_id, id: new_id(), now, started: clock::system_ms() };
    let mut ledger = Ledger::default();
    let r = pipeline_steps(out, &ex, &mut steps, &mut ledger).await;
    let (calls, prompt, cached, completion) = ledger.totals();
    let cost =
        json!({"calls": calls, "prompt_tokens": prompt, "cached_tokens": cached, "completion_tokens": completion});
    let kind = r.as_ref().ok().map(|(_, kind)| kind.clone());
    ledger.flush(kind.as_deref(), now).await;
    let (model_us, _) = r?;
    Ok((model_us, Value::Object(steps.list), cost))
}

/// The pipeline; the model time and the message's kind for the ledger
/// (the mode it was answered in, `social` for the social exit).
async fn pipeline_steps(
    out: &mut Out,
    ex: &Exchange<'_>,
    steps: &mut Steps,
    ledger: &mut Ledger,
) -> Result<(u64, String), StageError> {
    let (msg, now, exchange_id) = (ex.msg, ex.now, &ex.id);
    // µs spent waiting on a model (see `model_wait_us`).
    let mut model_us = 0u64;

    // Phase B, layer 1 and step 2a, first: a social exit skips the embedding.
    // Intent is classified here once; Phase A's warmth adjusts it after.
    let screen = triage::screen(msg.text.clone(), 0.0).await;
    let (intent, social): (Intent, Option<SocialMode>) = (screen.intent.into(), screen.social.map(Into::into));
    steps.mark("screen");
    let ctx: Assembled =
        context::assemble(msg.thread_id.clone(), msg.text.clone(), now, social.is_some()).await?.into();

    steps.mark("context");
    if let Some(social) = social {
        // Path A: the social exit, no model call at all.
        let (mode, text) = social_reply(social, &msg.text, &ctx);
        let confidence = intent.confidence;
        let outcome = Outcome {
            mode,
            text: &text,
            confidence,
            source: "social",
            tools: &[],
            generation_ms: None,
            fast_path: true,
        };
        let committed = commit_exchange(ex, &ctx, outcome).await?;
        out.event("message", json!({"text": text, "topic": ctx.topic, "mode": mode, "confidence": confidence, "exchange_id": committed, "source": "social"}));
        steps.mark("commit");
        return Ok((0, "social".into()));
    }

    // Model time counts the embedding model as well as the language model.
    model_us += ctx.embed_us;
    out.event("status", json!({"stage": "thinking"}));
    let intent = intent.with_warmth(ctx.warmth);

    // Step 2b: the triage model, 500 ms, then the heuristic.
    let input = tri::Input {
        text: msg.text.clone(),
        previous_mode: ctx.previous_mode,
        previous_tools: ctx.previous_tools.clone(),
        recent_turns: ctx
            .turns
            .iter()
            .rev()
            .take(4)
            .rev()
            .map(|t| tri::Turn { role: t.role.clone(), content: t.content.clone() })
            .collect(),
        warmth: ctx.warmth,
        memory_confidence: ctx.memory_confidence,
        gist_count: ctx.gists.len(),
        fact_count: ctx.facts.len(),
        tools: configured_tools().await?,
    };
    let t0 = clock::system_ms();
    let call = Instant::now();
    // The rules first (D-L5): a skill command or a plain question needs no
    // model; the rest goes to the light model within its budget.
    let heuristic = tri::heuristic(&msg.text, &input.tools);
    let (ans, error) = match tri::settled_by_rules(&msg.text, &heuristic, !input.tools.is_empty()) {
        Some(why) => {
            let configured = llm::status(1).await.configured;
            let reason = if configured { format!("{}{why}", tri::SETTLED) } else { no_model_code() };
            (None, Some(reason))
        }
        None => {
            let ask = JsonAsk {
                path: ModelPath::Triage,
                tier: Tier::Light,
                messages: mneme_entry::model::system_user(tri::PROMPT, tri::user_message(&input)),
                schema: tri::schema(),
                max_tokens: 60,
                temperature: 0.1,
                timeout_ms: light_timeout_ms().await,
            };
            let answer = ask_json(ledger, ask, now, |t| tri::parse(t).map(|_| t.to_string())).await;
            model_us += match &answer {
                Ok((_, c)) => c.wait_us,
                Err(_) => call.elapsed().as_micros() as u64,
            };
            match answer {
                Ok((text, _)) => (Some(text), None),
                Err(why) => (None, Some(why.reason)),
            }
        }
    };
    let took = clock::system_ms().saturating_sub(t0);
    // No model is configured at all (not one that failed): the no-model
    // rules settle the mode and the reply says so (D-C32).
    let no_model = error.as_deref() == Some(mneme_types::ErrorCode::ModelUnavailable.name());
    let triaged: Triage = triage::decide(TriageCall {
        input: input.clone().into(),
        answer: ans,
        error,
        took_ms: took,
        exchange_id: exchange_id.clone(),
        thread_id: msg.thread_id.clone(),
        topic: ctx.topic.clone(),
        now_ms: now,
    })
    .await?
    .into();

    steps.mark("triage");
    // Path B: triage chose to act with tools (named, or relevant to the
    // message when it named none but tools exist; D-C19).
    if triaged.mode == Mode::Act {
        // Relevance only when triage left nothing else to act with: a
        // contextual skill (a reminder, a list) is the message's own ask.
        let contextual = triaged.skills.iter().any(|s| !tri::PRIMITIVES.contains(&s.as_str()));
        let tools = if !triaged.tools.is_empty() {
            triaged.tools.clone()
        } else if !input.tools.is_empty() && !contextual {
            relevant_tools(&msg.text).await?
        } else {
            Vec::new()
        };
        if !tools.is_empty() {
            let waited = path_b(out, ex, &ctx, &intent, &tools).await?;
            steps.mark("tool_work");
            return Ok((model_us + waited * 1000, "tool".into()));
        }
    }

    // Path C: the mode router decides unless triage chose to act; a
    // triage the model answered, or the rules settled, leaves it only the
    // modes that agree with it (D-L5).
    let settled = triaged.source == tri::Source::Model
        || triaged.fallback_reason.as_deref().is_some_and(|r| r.starts_with(tri::SETTLED))
        || triaged.overrides.iter().any(|o| o == tri::UNRESOLVED);
    let excluded = rt::excluded_by_triage(triaged.mode, settled);
    let mut router_confidence = 1.0;
    let mut mode = if triaged.mode == Mode::Act {
        Mode::Act
    } else {
        let (m, c, us) = route(ex, &ctx, &intent, None, false, &excluded, ledger).await?;
        router_confidence = c;
        model_us += us;
        if no_model { mneme_conversation::nomodel::settle(m, &msg.text) } else { m }
    };

    let mut act_results: Vec<ActResult> = Vec::new();
    let mut done: Vec<Done> = Vec::new();
    if mode == Mode::Act {
        let (results, ran, us) = act_loop(out, ex, &ctx, &triaged, ledger).await?;
        model_us += us;
        act_results = results;
        done = ran;
        // Re-route to a terminal mode: previous mode ACT, no tie-breaker.
        let (m, c, _) = route(ex, &ctx, &intent, Some(Mode::Act), true, &[], ledger).await?;
        router_confidence = c;
        mode = m;
        // Having acted, the reply reports what was done: any successful
        // action makes the terminal mode RESPOND (D-C8).
        let succeeded = act_results.iter().any(|r| r.status == "success");
        if mode == Mode::Act || (succeeded && mode != Mode::Respond) {
            mode = Mode::Respond;
        }
    }

    steps.mark("route_and_act");
    // Generation.
    let gen_started = clock::system_ms();
    let (text, source) = if mode == Mode::Ignore {
        (String::new(), ReplySource::Model)
    } else {
        let (text, source, settled) = generate(out, mode, &ctx, &msg.text, &act_results, &mut model_us, ledger).await;
        mode = settled;
        (text, source)
    };
    // A reply claims only what was done (D-L3): a claim with no record
    // behind it is cut, and the reply says what was not done and why.
    let (text, corrected) = match honesty::correct(&text, &done) {
        Some(fixed) => {
            let why = mneme_entry::model::Fallback {
                reason: "unbacked-claim".into(),
                detail: honesty::unbacked(&text, &done)
                    .into_iter()
                    .map(|(_, s)| s.trim().to_string())
                    .collect::<Vec<_>>()
                    .join(" | "),
            };
            ledger.fell_back(ModelPath::Reply, &why, clock::system_ms());
            (fixed, true)
        }
        None => (text, false),
    };
    let generation_ms = clock::system_ms().saturating_sub(gen_started);
    let confidence = generate::confidence(ctx.memory_confidence, router_confidence, source);
    let source_label = match source {
        ReplySource::Model => "model",
        ReplySource::RuleBased => "rule-based",
        ReplySource::Social => "social",
    };
    steps.mark("generate");
    let outcome = Outcome {
        mode,
        text: &text,
        confidence,
        source: source_label,
        tools: &triaged.tools,
        generation_ms: Some(generation_ms),
        fast_path: false,
    };
    let committed = commit_exchange(ex, &ctx, outcome).await?;
    let mut message = json!({"text": text, "topic": ctx.topic, "mode": mode, "confidence": confidence, "exchange_id": committed, "source": source_label});
    if corrected {
        // The streamed tokens said more than was done: this text replaces them.
        message["corrected"] = json!(true);
    }
    out.event("message", message);
    steps.mark("commit");
    Ok((model_us, mode.as_str().to_string()))
}

/// The deterministic replies of the social exit (D-C7).
fn social_reply(social: SocialMode, text: &str, ctx: &Assembled) -> (Mode, String) {
    match social {
        SocialMode::Acknowledge => {
            let reply = if mneme_conversation::phrases::is_greeting(text) {
                match &ctx.name {
                    Some(n) => format!("Hello, {n}."),
                    None => "Hello.".to_string(),
                }
            } else {
                "Glad that helped.".to_string()
            };
            (Mode::Acknowledge, reply)
        }
        SocialMode::Cancel => (Mode::Cancel, String::new()),
        SocialMode::Ignore => (Mode::Ignore, String::new()),
    }
}

/// Routes, asks the tie-breaker when the top two are within the margin, and
/// records the decision. Returns the mode, router confidence and model time.
async fn route(
    ex: &Exchange<'_>,
    ctx: &Assembled,
    intent: &Intent,
    previous: Option<Mode>,
    skip_tiebreaker: bool,
    excluded: &[Mode],
    ledger: &mut Ledger,
) -> Result<(Mode, f64, u64), StageError> {
    let (msg, now, exchange_id) = (ex.msg, ex.now, &ex.id);
    let t0 = clock::system_ms();
    let routed = router::route(
        msg.text.clone(),
        ctx.clone().into(),
        intent.clone().into(),
        previous.map(Into::into),
        skip_tiebreaker,
        excluded.iter().map(|m| (*m).into()).collect(),
    )
    .await?;
    let mut model_us = 0;
    let mut answer = None;
    if let Some(m) = &routed.tiebreak_message {
        let messages = mneme_entry::model::system_user(rt::TIEBREAKER_PROMPT, m.clone());
        let call = Instant::now();
        let ask = JsonAsk {
            path: ModelPath::Tiebreak,
            tier: Tier::Light,
            messages,
            schema: rt::tiebreak_schema(),
            max_tokens: 20,
            temperature: 0.0,
            timeout_ms: light_timeout_ms().await,
        };
        let parse =
            |t: &str| rt::parse_tiebreak(t).map(|_| t.to_string()).ok_or_else(|| "no choice of A or B".to_string());
        let asked = ask_json(ledger, ask, now, parse).await;
        model_us = match &asked {
            Ok((_, c)) => c.wait_us,
            Err(_) => call.elapsed().as_micros() as u64,
        };
        answer = asked.ok().map(|(t, _)| t);
    }
    let routing_ms = clock::system_ms().saturating_sub(t0).saturating_sub(model_us / 1000);
    let recorded = router::record_decision(
        routed,
        answer,
        exchange_id.clone(),
        msg.thread_id.clone(),
        ctx.topic.clone(),
        routing_ms,
        now,
    )
    .await?;
    Ok((recorded.mode.into(), recorded.router_confidence, model_us))
}

/// The ACT loop: plan (model, or rules without one), then one iteration of
/// the shared driver (limits, dispatch, fatigue, the iteration's log).
async fn act_loop(
    out: &mut Out,
    ex: &Exchange<'_>,
    ctx: &Assembled,
    triaged: &Triage,
    ledger: &mut Ledger,
) -> Result<(Vec<ActResult>, Vec<Done>, u64), StageError> {
    let (msg, now) = (ex.msg, ex.now);
    let origin = Origin {
        loop_id: new_id(),
        exchange_id: ex.id.clone(),
        thread_id: msg.thread_id.clone(),
        topic: ctx.topic.clone(),
        mode: "ACT".into(),
        now_ms: now,
    };
    let mut lp = ActLoop::new(origin, Limits::default());
    // Read once the rules plan (a model plans without it). A `time_zone`
    // that names no zone must not stop lists or focus: the rules read
    // reminders in UTC, and the skill itself refuses to set one with the
    // deployment's error.
    let mut zone: Option<mneme_time::Zone> = None;
    let mut results: Vec<ActResult> = Vec::new();
    let mut done: Vec<Done> = Vec::new();
    let mut model_us = 0;
    let mut rule_based = false;
    // What the rules read off the message, with the skills the heuristic
    // finds in it besides triage's: the model's plan is checked against it.
    let mut rule_skills = triaged.skills.clone();
    for s in tri::heuristic(&msg.text, &[]).skills {
        if !rule_skills.contains(&s) {
            rule_skills.push(s);
        }
    }
    loop {
        let iteration = lp.state.iteration;
        let plan: Vec<Action> = if rule_based {
            act::rule_plan(&msg.text, &triaged.skills, iteration, now, rules_zone(&mut zone).await)
        } else {
            let history = results
                .iter()
                .map(|r| format!("- {} ({}): {}", r.action_type, r.status, r.result))
                .collect::<Vec<_>>()
                .join("\n");
            let tz = rules_zone(&mut zone).await;
            let user = format!(
                "Now: {} ({}, {})\nMessage: {}\nSkills suggested by triage: {}\nActions already run:\n{}",
                tz.describe(now as i64),
                tz.format(now as i64),
                tz.spec(),
                msg.text,
                triaged.skills.join(", "),
                if history.is_empty() { "(none)".into() } else { history }
            );
            let call = Instant::now();
            let ask = JsonAsk {
                path: ModelPath::ActPlan,
                tier: Tier::Primary,
                messages: mneme_entry::model::system_user(act::PROMPT, user),
                schema: act::schema(),
                max_tokens: 600,
                temperature: 0.2,
                timeout_ms: PLAN_TIMEOUT_MS,
            };
            let answer = ask_json(ledger, ask, now, act::parse_plan).await;
            model_us += match &answer {
                Ok((_, c)) => c.wait_us,
                Err(_) => call.elapsed().as_micros() as u64,
            };
            match answer {
                Ok((p, _)) => {
                    let rules = act::rule_plan(&msg.text, &rule_skills, 0, now, rules_zone(&mut zone).await);
                    let (p, notes) = act::reconcile(p, &rules, iteration == 0);
                    if !notes.is_empty() {
                        lp.origin.mode = format!("ACT (model plan; the rules {})", notes.join(", "));
                    }
                    p
                }
                Err(_) if iteration == 0 => {
                    // No usable plan from the model: the rules plan instead (labelled in the log).
                    rule_based = true;
                    lp.origin.mode = "ACT (rule-based plan)".into();
                    act::rule_plan(&msg.text, &triaged.skills, 0, now, rules_zone(&mut zone).await)
                }
                Err(_) => Vec::new(),
            }
        };
        if lp.gate(&plan).await?.is_some() {
            break;
        }
        out.event(
            "status",
            json!({"stage": "acting", "iteration": iteration + 1, "actions": plan.iter().map(|a| a.kind.clone()).collect::<Vec<_>>()}),
        );
        let ran = lp.dispatch(&plan).await?;
        for (a, r) in plan.iter().zip(&ran) {
            done.push(Done {
                kind: a.kind.clone(),
                verb: act::verb(a),
                ok: r.status == "success",
                result: r.result.clone(),
            });
        }
        results.extend(ran);
    }
    Ok((results, done, model_us))
}

/// Generates the reply, streaming tokens; falls back to the rules, in the
/// mode the reply then takes.
async fn generate(
    out: &mut Out,
    mode: Mode,
    ctx: &Assembled,
    text: &str,
    act: &[ActResult],
    model_us: &mut u64,
    ledger: &mut Ledger,
) -> (String, ReplySource, Mode) {
    let messages = mneme_entry::model::messages(generate::messages(mode, ctx, text, act));
    let call = Instant::now();
    let (mut deltas, outcome) = llm::complete_stream(mneme_entry::model::reply_request(messages)).await;
    let mut streamed = String::new();
    while let Some(d) = deltas.next().await {
        if !d.is_empty() {
            out.event("token", json!({"text": d}));
            streamed.push_str(&d);
        }
    }
    let result = outcome.await;
    *model_us += mneme_entry::model::wait_us(&result, call);
    ledger.call(ModelPath::Reply, &result, call);
    let now = mneme_time::clock::system_ms();
    match result {
        Ok(c) => {
            let cleaned = generate::clean(&c.text);
            if cleaned.is_empty() {
                let why = mneme_entry::model::Fallback {
                    reason: "empty".into(),
                    detail: "the model answered nothing".into(),
                };
                ledger.fell_back(ModelPath::Reply, &why, now);
                let mode = generate::settle_after_failure(mode, text, "empty answer");
                (generate::fallback(mode, ctx, text, act, "empty answer"), ReplySource::RuleBased, mode)
            } else {
                ledger.answered(ModelPath::Reply);
                (cleaned, ReplySource::Model, mode)
            }
        }
        Err(e) if !streamed.trim().is_empty() => {
            ledger.answered(ModelPath::Reply);
            out.event("error", json!({"message": format!("the model stopped early ({}); the reply may be incomplete", e.code), "recoverable": true}));
            (generate::clean(&streamed), ReplySource::Model, mode)
        }
        Err(e) => {
            let why = mneme_entry::model::Fallback { reason: e.code.name().into(), detail: e.message.clone() };
            ledger.fell_back(ModelPath::Reply, &why, now);
            let mode = generate::settle_after_failure(mode, text, e.code.name());
            (generate::fallback(mode, ctx, text, act, e.code.name()), ReplySource::RuleBased, mode)
        }
    }
}

/// Phase D: the exchange committed; its id as commit kept it.
async fn commit_exchange(ex: &Exchange<'_>, ctx: &Assembled, o: Outcome<'_>) -> Result<String, StageError> {
    let msg = ex.msg;
    let committed = commit::commit(FinishedExchange {
        exchange_id: ex.id.clone(),
        request_id: ex.request_id.to_string(),
        thread_id: msg.thread_id.clone(),
        source: msg.source.clone(),
        text: msg.text.clone(),
        reply: o.text.to_string(),
        mode: o.mode.into(),
        confidence: o.confidence,
        reply_source: o.source.to_string(),
        topic: ctx.topic.clone(),
        previous_topic: ctx.previous_topic.clone(),
        tools: o.tools.to_vec(),
        now_ms: ex.now,
        duration_ms: clock::system_ms().saturating_sub(ex.started),
        generation_ms: o.generation_ms,
        fast_path: o.fast_path,
        job: None,
    })
    .await?;
    Ok(committed.exchange_id)
}

/// The zone the ACT rules read reminders in, read on first use; UTC when
/// `time_zone` names no zone.
async fn rules_zone(zone: &mut Option<mneme_time::Zone>) -> &mneme_time::Zone {
    let read = match zone.take() {
        Some(z) => z,
        None => principal_zone().await.unwrap_or_else(|e| {
            eprintln!("act: {}; reminders are read in UTC", e.message);
            mneme_time::Zone::utc()
        }),
    };
    zone.insert(read)
}

/// The principal's time zone (the variables `time_zone`, or the older
/// `utc_offset_minutes`), for reading reminders off a message.
async fn principal_zone() -> Result<mneme_time::Zone, StageError> {
    let name = spin_sdk::variables::get("time_zone").await.unwrap_or_default();
    let offset = spin_sdk::variables::get("utc_offset_minutes").await.unwrap_or_default();
    mneme_time::Zone::from_settings(&name, &offset)
        .map_err(|m| StageError::new(mneme_types::ErrorCode::Misconfigured, m))
}

/// The budget of the light model's quick calls, triage and the
/// tie-breaker (D-L5): the variable `llm_light_timeout_ms`, else the
/// design's 500 ms, which a hosted model meets and a CPU model cannot.
async fn light_timeout_ms() -> u32 {
    spin_sdk::variables::get("llm_light_timeout_ms")
        .await
        .ok()
        .and_then(|v| v.trim().parse::<u32>().ok())
        .filter(|ms| (1..=60_000).contains(ms))
        .unwrap_or(tri::TIMEOUT_MS)
}

/// The error code of a model call with no model configured.
fn no_model_code() -> String {
    mneme_types::ErrorCode::ModelUnavailable.name().to_string()
}
