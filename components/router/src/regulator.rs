//! The I/O of the routing stability regulator and routing reflection (002
//! §10, §12, D-B7), in the router stage: the regulator is the only writer
//! of `router_weights`, which the router reads on every message.
//!
//! `regulate` runs a whole day's cycle in one transaction: it takes the
//! day (the schedule moves on by 24 h only if the transaction commits),
//! measures the last 24 h of decisions, judges the changes made 48 h or
//! more ago (reverting those that did not help), makes at most one new
//! bounded change, and records the day's metrics. Reflection is two steps
//! either side of the strong model's calls in the tick entry.

use mneme_background::Draws;
use mneme_background::regulator::{self as rules, Candidate, Change, Decision, Judgement, Pressure, Reflection};
use mneme_conversation::router::{Signals, Weights};
use mneme_store::{Sql, StoreError, Value};
use mneme_substrate::{Fail, Result, as_store_error, in_list, json_text, random_hex, schedule};
use mneme_types::NotDue;
use mneme_types::routing::{
    AppliedChange, DecisionReview, JudgedChange, ReflectionBatch, ReflectionBusy, ReflectionStart, ReflectionsStored,
    RegulatedDay, Regulation, Review,
};
use serde_json::json;

/// The engines' rows in `engine_schedule`.
pub const REGULATOR: &str = "regulator";
pub const REFLECTION: &str = "reflection";

/// The router's weights: the defaults with the regulator's stored values.
pub async fn weights(sql: &Sql) -> std::result::Result<Weights, StoreError> {
    let rows = sql.query("SELECT param, value FROM router_weights", &[]).await?;
    let stored: Vec<(String, f64)> =
        rows.iter().map(|r| Ok((r.text("param")?, r.f64("value")?))).collect::<std::result::Result<_, StoreError>>()?;
    Ok(rules::weights(&stored))
}

/// One regulator cycle, if the day is up.
pub async fn regulate(now_ms: u64) -> Result<Regulation> {
    let sql = mneme_store::open_sql().await?;
    let now = now_ms as i64;
    let out = sql.transaction(async |sql: &Sql| cycle(sql, now).await.map_err(as_store_error)).await?;
    Ok(out)
}

async fn cycle(sql: &Sql, now: i64) -> Result<Regulation> {
    sql.execute(
        "INSERT INTO engine_schedule (engine, next_ms, lease_until_ms) VALUES ($1, 0, 0) ON CONFLICT (engine) DO NOTHING",
        &[REGULATOR.into()],
    )
    .await?;
    let next = now + rules::CYCLE_MS;
    let taken = sql
        .execute(
            "UPDATE engine_schedule SET next_ms = $2, last_ms = $3 WHERE engine = $1 AND next_ms <= $3",
            &[REGULATOR.into(), Value::Int(next), Value::Int(now)],
        )
        .await?;
    if taken == 0 {
        let rows = sql.query("SELECT next_ms FROM engine_schedule WHERE engine = $1", &[REGULATOR.into()]).await?;
        let at = rows.first().map(|r| r.i64("next_ms")).transpose()?.unwrap_or(0);
        return Ok(Regulation::NotDue(at));
    }
    let rows = sql
        .query(
            "SELECT selected_mode, tiebreaker_used, reflection_counted, reflection FROM routing_decisions WHERE created_ms >= $1",
            &[Value::Int(now - rules::CYCLE_MS)],
        )
        .await?;
    let mut decisions = Vec::new();
    for row in &rows {
        let counted = row.opt_i64("reflection_counted")? == Some(1);
        let agreement = match (counted, row.opt_text("reflection")?) {
            (true, Some(text)) => serde_json::from_str::<Reflection>(&text).ok().map(|r| r.agree_with_decision),
            _ => None,
        };
        decisions.push(Decision {
            mode: row.text("selected_mode")?,
            tiebreaker_used: row.i64("tiebreaker_used")? == 1,
            counted_agreement: agreement,
        });
    }
    let m = rules::metrics(&decisions);

    // Changes made 48 h ago or more, judged on the pressure that caused
    // them; only on a day with enough decisions to measure it.
    let mut judged = Vec::new();
    if m.decisions >= rules::MIN_DECISIONS {
        let open = sql
            .query(
                "SELECT id, param, from_value, to_value, pressure, pressure_before FROM routing_adjustments \
                 WHERE status = 'applied' AND created_ms <= $1 ORDER BY created_ms, id",
                &[Value::Int(now - rules::COOLDOWN_MS)],
            )
            .await?;
        for a in &open {
            let pressure: Pressure = serde_json::from_value(serde_json::Value::String(a.text("pressure")?))
                .map_err(|e| Fail::new("decode", format!("routing_adjustments.pressure: {e}")))?;
            if !m.measured(pressure) {
                // No evidence today either way: judge it another day.
                continue;
            }
            let after = m.pressure(pressure);
            let verdict = rules::judge(a.f64("pressure_before")?, after);
            let (id, param) = (a.text("id")?, a.text("param")?);
            if verdict != Judgement::Confirmed {
                sql.execute(
                    "UPDATE router_weights SET value = $2, last_adjusted_ms = $3 WHERE param = $1",
                    &[param.as_str().into(), a.f64("from_value")?.into(), Value::Int(now)],
                )
                .await?;
            }
            sql.execute(
                "UPDATE routing_adjustments SET status = $2, pressure_after = $3, judged_ms = $4 WHERE id = $1",
                &[id.as_str().into(), json_text(&verdict).trim_matches('"').into(), after.into(), Value::Int(now)],
            )
            .await?;
            judged.push(JudgedChange { id, param, verdict: verdict.into(), pressure_after: after });
        }
    }

    let w = weights(sql).await?;
    let last_adjusted: Vec<(String, i64)> = sql
        .query("SELECT param, last_adjusted_ms FROM router_weights", &[])
        .await?
        .iter()
        .map(|r| Ok((r.text("param")?, r.i64("last_adjusted_ms")?)))
        .collect::<std::result::Result<_, StoreError>>()?;
    let dimension = dominant_dimension(sql, now).await?;
    let planned = rules::plan(&m, dimension, &w, &last_adjusted, now);
    let change = match &planned {
        Ok(c) => Some(apply(sql, c, now).await?),
        Err(_) => None,
    };
    let day = RegulatedDay {
        metrics: m.into(),
        dimension: dimension.map(String::from),
        judged,
        change,
        no_change: planned.err(),
        next_ms: next,
    };
    let record = json!({"metrics": day.metrics, "dimension": day.dimension, "judged": day.judged,
                        "change": day.change, "no_change": day.no_change});
    sql.execute(
        "INSERT INTO routing_metrics (id, metrics, created_ms) VALUES ($1, $2, $3)",
        &[format!("rm-{}", random_hex(6)).into(), record.to_string().into(), Value::Int(now)],
    )
    .await?;
    sql.execute("DELETE FROM routing_metrics WHERE created_ms < $1", &[Value::Int(now - rules::METRICS_KEEP_MS)])
        .await?;
    sql.execute(
        "DELETE FROM routing_adjustments WHERE status <> 'applied' AND id NOT IN \
         (SELECT id FROM routing_adjustments WHERE status <> 'applied' ORDER BY created_ms DESC, id DESC LIMIT $1)",
        &[rules::ADJUSTMENTS_KEEP.into()],
    )
    .await?;
    Ok(Regulation::Ran(day))
}

/// Writes the change and logs it; its id.
async fn apply(sql: &Sql, c: &Change, now: i64) -> Result<AppliedChange> {
    sql.execute(
        "INSERT INTO router_weights (param, value, last_adjusted_ms) VALUES ($1, $2, $3) \
         ON CONFLICT (param) DO UPDATE SET value = excluded.value, last_adjusted_ms = excluded.last_adjusted_ms",
        &[c.param.as_str().into(), c.to.into(), Value::Int(now)],
    )
    .await?;
    let id = format!("ra-{}", random_hex(6));
    sql.execute(
        "INSERT INTO routing_adjustments (id, param, from_value, to_value, pressure, pressure_before, status, created_ms) \
         VALUES ($1, $2, $3, $4, $5, $6, 'applied', $7)",
        &[
            id.as_str().into(),
            c.param.as_str().into(),
            c.from.into(),
            c.to.into(),
            json_text(&c.pressure).trim_matches('"').into(),
            c.pressure_value.into(),
            Value::Int(now),
        ],
    )
    .await?;
    Ok(AppliedChange {
        id,
        param: c.param.clone(),
        from: c.from,
        to: c.to,
        pressure: c.pressure.into(),
        pressure_value: c.pressure_value,
    })
}

/// The dimension that dominates a week's counted disagreements.
async fn dominant_dimension(sql: &Sql, now: i64) -> Result<Option<&'static str>> {
    let rows = sql
        .query(
            "SELECT reflection FROM routing_decisions WHERE reflection_counted = 1 AND reflected_ms >= $1",
            &[Value::Int(now - rules::DIMENSION_WINDOW_MS)],
        )
        .await?;
    let mut disagreements = Vec::new();
    for r in &rows {
        if let Some(Ok(refl)) = r.opt_text("reflection")?.map(|t| serde_json::from_str::<Reflection>(&t))
            && !refl.agree_with_decision
        {
            disagreements.push(refl.uncertainty_dimensions.into_iter().map(|d| d.dimension).collect::<Vec<_>>());
        }
    }
    Ok(rules::dominant_dimension(&disagreements))
}

/// How long after the last routed message the conversation counts as over.
const CONVERSATION_QUIET_MS: i64 = 5 * 60 * 1000;

/// Claims a reflection batch when every queue is idle and 30 minutes have
/// passed since the last: up to 5 unreflected decisions of the newest 50,
/// stratified, with what the model reads of each.
pub async fn reflect_begin(now_ms: u64, lease_ms: u64, seed: u64) -> Result<ReflectionStart> {
    let sql = &mneme_store::open_sql().await?;
    let now = now_ms as i64;
    let busy = sql
        .query(
            "SELECT (SELECT count(*) FROM jobs WHERE status IN ('queued', 'running')) + \
             (SELECT count(*) FROM knowledge_jobs WHERE status IN ('queued', 'running')) AS n, \
             (SELECT count(*) FROM (SELECT 1 FROM routing_decisions WHERE id = (SELECT MAX(id) FROM routing_decisions) \
                                    AND created_ms > $1) recent) AS talking",
            &[Value::Int(now - CONVERSATION_QUIET_MS)],
        )
        .await?;
    if busy.first().map(|b| b.i64("n")).transpose()?.unwrap_or(0) > 0 {
        return Ok(ReflectionStart::Busy(ReflectionBusy::QueuesBusy));
    }
    // The strong model serves the principal first: no review while they
    // are in conversation (D-B7).
    if busy.first().map(|b| b.i64("talking")).transpose()?.unwrap_or(0) > 0 {
        return Ok(ReflectionStart::Busy(ReflectionBusy::InConversation));
    }
    let claim = random_hex(8);
    if let Err(n) = schedule::claim(sql, REFLECTION, &claim, now, lease_ms as i64).await? {
        return Ok(ReflectionStart::NotDue(NotDue { held: n.held, next_ms: n.next_ms, at_ms: n.at_ms() }));
    }
    let pool: Vec<Candidate> = sql
        .query(
            "SELECT id, router_confidence, tiebreaker_used, reflected_ms FROM \
             (SELECT id, router_confidence, tiebreaker_used, reflected_ms FROM routing_decisions ORDER BY id DESC LIMIT $1) newest \
             WHERE reflected_ms IS NULL ORDER BY id DESC",
            &[rules::REFLECTION_POOL.into()],
        )
        .await?
        .iter()
        .map(|r| {
            Ok(Candidate {
                id: r.i64("id")?,
                confidence: r.f64("router_confidence")?,
                tiebreaker_used: r.i64("tiebreaker_used")? == 1,
            })
        })
        .collect::<std::result::Result<_, StoreError>>()?;
    let mut d = Draws::new(seed);
    let ids = rules::batch(&pool, || d.draw());
    if ids.is_empty() {
        release_reflection(sql, &claim, now).await?;
        return Ok(ReflectionStart::NothingToReview);
    }
    let params: Vec<Value> = ids.iter().map(|i| Value::Int(*i)).collect();
    let rows = sql
        .query(
            &format!(
                "SELECT d.id, d.selected_mode, d.scores, d.margin, d.tiebreaker_used, d.signal_snapshot, e.prompt \
                 FROM routing_decisions d LEFT JOIN exchanges e ON e.id = d.exchange_id WHERE d.id IN ({})",
                in_list(1, ids.len())
            ),
            &params,
        )
        .await?;
    let mut decisions = Vec::new();
    for id in &ids {
        let Some(row) = rows.iter().find(|x| x.i64("id").is_ok_and(|i| i == *id)) else { continue };
        let scores: std::collections::BTreeMap<String, f64> =
            serde_json::from_str(&row.text("scores")?).unwrap_or_default();
        let mode = row.text("selected_mode")?;
        let runner_up =
            scores.iter().filter(|(m, _)| **m != mode).max_by(|a, b| a.1.total_cmp(b.1)).map(|(m, _)| m.clone());
        decisions.push(DecisionReview {
            id: *id,
            message: row.opt_text("prompt")?.unwrap_or_default(),
            signals: serde_json::from_str::<Signals>(&row.text("signal_snapshot")?).ok().map(Into::into),
            selected_mode: mode,
            runner_up,
            margin: row.f64("margin")?,
            tiebreaker_used: row.i64("tiebreaker_used")? == 1,
        });
    }
    Ok(ReflectionStart::Batch(ReflectionBatch { claim, decisions }))
}

async fn release_reflection(sql: &Sql, claim: &str, now: i64) -> std::result::Result<u64, StoreError> {
    schedule::release(sql, REFLECTION, claim, Some(now + rules::REFLECTION_GAP_MS), Some((now, "reviewed"))).await
}

/// Stores the batch's reflections with whether each counts, and gives the
/// schedule back for 30 minutes; one transaction under the claim. A
/// decision the model could not judge stays unreflected.
pub async fn reflect_finish(claim: &str, now_ms: u64, reviews: Vec<Review>) -> Result<ReflectionsStored> {
    let sql = mneme_store::open_sql().await?;
    let now = now_ms as i64;
    let out = sql
        .transaction(async |sql: &Sql| {
            if release_reflection(sql, claim, now).await? == 0 {
                return Err(StoreError::new("lease-lost", "the reflection batch's claim is gone"));
            }
            let (mut reflected, mut counted) = (0, 0);
            for x in reviews {
                let Some(refl) = x.reflection.map(Reflection::from) else { continue };
                let filtered = rules::filter(&refl, x.message_empty);
                let mut stored = serde_json::to_value(&refl).unwrap_or_default();
                stored["source"] = json!(x.source);
                let n = sql
                    .execute(
                        "UPDATE routing_decisions SET reflection = $2, reflection_counted = $3, reflection_filter = $4, \
                         reflected_ms = $5 WHERE id = $1 AND reflected_ms IS NULL",
                        &[
                            Value::Int(x.id),
                            stored.to_string().into(),
                            Value::Int(i64::from(filtered.is_none())),
                            filtered.into(),
                            Value::Int(now),
                        ],
                    )
                    .await?;
                reflected += n;
                if n == 1 && filtered.is_none() {
                    counted += 1;
                }
            }
            Ok(ReflectionsStored { reflected, counted })
        })
        .await?;
    Ok(out)
}
