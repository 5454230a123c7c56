//! The I/O of the tasks stage (`mneme:tasks`): the principal's persistent
//! tasks (002 §7) and the worker's claims on them. The rules are
//! `mneme-background`'s; the worker's cycle runs in the tick entry, which
//! can call the model and the ACT stage, between `begin_cycle`,
//! `checkpoint` and `end_cycle` here.
//!
//! A cycle's life: `begin_cycle` (one transaction: expire stale tasks,
//! claim the worker's schedule if it is due, claim the first eligible task,
//! FIFO within priority) → the entry runs ready steps, and after each one
//! `checkpoint` writes `progress` under the claim → `end_cycle` (one
//! transaction: the task's state, the surfacing event, the schedule's next
//! jittered time). A crash before a checkpoint loses only the step in
//! flight; the leases end and the next tick takes the work over.

use crate::events::{publish_with, publishing};
use crate::schedule;
use crate::{Fail, Result, as_store_error, json_text, random_hex};
use mneme_background::cycle::Progress;
use mneme_background::tasks::{self, MAX_ACTIVE, MAX_AGE_MS, State};
use mneme_store::{Row, Sql, StoreError, Value};
use mneme_time::calendar::utc_timestamp as timestamp;
use serde::Deserialize;
use serde_json::{Value as J, json};

/// The worker's row in `engine_schedule`.
pub const ENGINE: &str = "tasks";
/// A new goal this similar (word Jaccard) to an open task's is that task
/// (the reference's threshold).
pub const DUPLICATE_GOAL_JACCARD: f64 = 0.6;
/// Priorities run from 1 (most urgent) to 10.
pub const PRIORITIES: std::ops::RangeInclusive<i64> = 1..=10;
pub const DEFAULT_PRIORITY: i64 = 5;

const COLUMNS: &str =
    "id, goal, status, priority, origin, coverage, progress, created_ms, updated_ms, expires_ms, cycles";
/// States that count against [`MAX_ACTIVE`] and for duplicate goals.
const OPEN: &str = "('proposed', 'accepted', 'in_progress')";

fn iso(ms: i64) -> String {
    timestamp(ms.max(0) as u64)
}

/// A task as the API shows it.
fn view(r: &Row) -> Result<J> {
    let progress = Progress::parse(&r.text("progress")?);
    Ok(json!({
        "id": r.text("id")?,
        "goal": r.text("goal")?,
        "status": r.text("status")?,
        "priority": r.i64("priority")?,
        "origin": r.text("origin")?,
        "coverage": r.f64("coverage")?,
        "cycles": r.i64("cycles")?,
        "plan": progress.plan,
        "plan_source": progress.plan_source,
        "plan_note": progress.plan_note,
        "findings": progress.findings,
        "last_summary": progress.last_summary,
        "last_cycle_at": progress.last_cycle_ms.map(iso),
        "created_at": iso(r.i64("created_ms")?),
        "updated_at": iso(r.i64("updated_ms")?),
        "expires_at": iso(r.i64("expires_ms")?),
    }))
}

/// What [`insert`] did.
pub enum Inserted {
    Created(String),
    /// An open task with a near-identical goal: its id.
    Duplicate(String),
    /// [`MAX_ACTIVE`] tasks are open already.
    Full,
}

/// Inserts an accepted task unless an open one has nearly the same goal or
/// too many are open; call inside a transaction so two creations cannot
/// both pass the checks. The ACT loop's `persistent_task` skill shares it.
pub async fn insert(
    sql: &Sql,
    goal: &str,
    priority: i64,
    origin: &str,
    progress: &Progress,
    now: u64,
) -> Result<Inserted> {
    if let Some(refused) = refusal(sql, goal).await? {
        return Ok(refused);
    }
    let id = format!("pt-{}", random_hex(6));
    sql.execute(
        "INSERT INTO persistent_tasks (id, goal, status, priority, origin, coverage, progress, created_ms, updated_ms, expires_ms, cycles, lease_until_ms) \
         VALUES ($1, $2, 'accepted', $3, $4, $5, $6, $7, $7, $8, 0, 0)",
        &[
            id.as_str().into(),
            goal.into(),
            Value::Int(priority),
            origin.into(),
            progress.coverage().into(),
            json_text(progress).into(),
            Value::Int(now as i64),
            Value::Int(now as i64 + MAX_AGE_MS),
        ],
    )
    .await?;
    Ok(Inserted::Created(id))
}

/// Why a new goal would be refused: an open task with nearly the same goal,
/// or too many open tasks.
pub async fn refusal(sql: &Sql, goal: &str) -> Result<Option<Inserted>> {
    let open = sql.query(&format!("SELECT id, goal FROM persistent_tasks WHERE status IN {OPEN}"), &[]).await?;
    for r in &open {
        if mneme_text::jaccard(&r.text("goal")?, goal) > DUPLICATE_GOAL_JACCARD {
            return Ok(Some(Inserted::Duplicate(r.text("id")?)));
        }
    }
    Ok((open.len() >= MAX_ACTIVE).then_some(Inserted::Full))
}

/// Tasks that count against [`MAX_ACTIVE`].
pub async fn open_count(sql: &Sql) -> Result<i64> {
    let rows = sql.query(&format!("SELECT count(*) AS n FROM persistent_tasks WHERE status IN {OPEN}"), &[]).await?;
    Ok(rows.first().map(|r| r.i64("n")).transpose()?.unwrap_or(0))
}

#[derive(Debug, Deserialize)]
pub struct CreateRequest {
    pub goal: String,
    pub priority: Option<i64>,
    /// The decomposition the entry ran (plan, or why there is none).
    pub progress: Progress,
    pub now_ms: u64,
    /// Only check: the answer is `{admissible: true}` or the refusal, and
    /// nothing is written (the entry checks before it asks the model).
    #[serde(default)]
    pub dry_run: bool,
}

/// `POST /tasks`: a task in state `accepted`, with its plan.
pub async fn create(r: CreateRequest) -> Result<J> {
    let goal = r.goal.trim().to_string();
    if !tasks::GOAL_CHARS.contains(&goal.chars().count()) {
        return Err(Fail::invalid(format!(
            "`goal` has {} to {} characters",
            tasks::GOAL_CHARS.start(),
            tasks::GOAL_CHARS.end()
        )));
    }
    let priority = r.priority.unwrap_or(DEFAULT_PRIORITY);
    if !PRIORITIES.contains(&priority) {
        return Err(Fail::invalid("`priority` is an integer from 1 (most urgent) to 10"));
    }
    let sql = mneme_store::open_sql().await?;
    let inserted = if r.dry_run {
        match refusal(&sql, &goal).await? {
            Some(refused) => refused,
            None => return Ok(json!({"admissible": true})),
        }
    } else {
        sql.transaction(async |sql: &Sql| {
            insert(sql, &goal, priority, "user", &r.progress, r.now_ms).await.map_err(as_store_error)
        })
        .await?
    };
    match inserted {
        Inserted::Created(id) => get(IdRequest { id }).await,
        Inserted::Duplicate(id) => Err(Fail::new("conflict", format!("an open task has nearly the same goal: {id}"))),
        Inserted::Full => Err(Fail::new(
            "conflict",
            format!("{MAX_ACTIVE} tasks are open already; cancel one or wait for one to finish"),
        )),
    }
}

#[derive(Debug, Deserialize)]
pub struct IdRequest {
    pub id: String,
}

pub async fn get(r: IdRequest) -> Result<J> {
    let sql = mneme_store::open_sql().await?;
    let rows =
        sql.query(&format!("SELECT {COLUMNS} FROM persistent_tasks WHERE id = $1"), &[r.id.as_str().into()]).await?;
    match rows.first() {
        Some(row) => view(row),
        None => Err(Fail::new("not-found", format!("no task `{}`", r.id))),
    }
}

#[derive(Debug, Deserialize)]
pub struct ListRequest {
    pub status: Option<String>,
    pub limit: u32,
}

/// Tasks, open ones first (by priority, then age), then the rest, newest
/// first.
pub async fn list(r: ListRequest) -> Result<J> {
    if let Some(s) = r.status.as_deref()
        && State::parse(s).is_none()
    {
        let names: Vec<&str> = State::ALL.iter().map(|s| s.as_str()).collect();
        return Err(Fail::invalid(format!("`status` is one of {}", names.join(", "))));
    }
    let sql = mneme_store::open_sql().await?;
    let rows = sql
        .query(
            &format!(
                "SELECT {COLUMNS} FROM persistent_tasks WHERE ($1 = '' OR status = $1) \
                 ORDER BY CASE WHEN status IN {OPEN} THEN 0 ELSE 1 END, \
                 CASE WHEN status IN {OPEN} THEN priority ELSE 0 END, \
                 CASE WHEN status IN {OPEN} THEN created_ms ELSE -updated_ms END, id LIMIT $2"
            ),
            &[r.status.unwrap_or_default().into(), Value::Int(r.limit.clamp(1, 200) as i64)],
        )
        .await?;
    let tasks = rows.iter().map(view).collect::<Result<Vec<_>>>()?;
    Ok(json!({"tasks": tasks}))
}

#[derive(Debug, Deserialize)]
pub struct CancelRequest {
    pub id: String,
    pub now_ms: u64,
}

/// `DELETE /tasks/{id}`: cancels an unfinished task. A cycle holding it
/// finds its claim gone and writes nothing more.
pub async fn cancel(r: CancelRequest) -> Result<J> {
    let sql = mneme_store::open_sql().await?;
    let n = sql
        .execute(
            "UPDATE persistent_tasks SET status = 'cancelled', claim = NULL, lease_until_ms = 0, updated_ms = $2 \
             WHERE id = $1 AND status NOT IN ('completed', 'cancelled', 'expired')",
            &[r.id.as_str().into(), Value::Int(r.now_ms as i64)],
        )
        .await?;
    let task = get(IdRequest { id: r.id.clone() }).await?;
    if n == 0 {
        return Err(Fail::new(
            "conflict",
            format!("task `{}` is {} already", r.id, task["status"].as_str().unwrap_or("?")),
        ));
    }
    Ok(task)
}

#[derive(Debug, Deserialize)]
pub struct BeginRequest {
    pub now_ms: u64,
    pub lease_ms: u64,
}

/// Step 1–3 of a cycle, in one transaction: expire stale tasks, claim the
/// worker's schedule if it is due and free, then claim the first eligible
/// task (FIFO within priority, 1 first). With no eligible task the schedule
/// is given back untouched, so a task created later runs at the next tick.
pub async fn begin_cycle(r: BeginRequest) -> Result<J> {
    let sql = mneme_store::open_sql().await?;
    let now = r.now_ms as i64;
    let claim = random_hex(8);
    let lease = now + r.lease_ms as i64;
    let out = sql
        .transaction(async |sql: &Sql| {
            let expired = sql
                .execute(
                    "UPDATE persistent_tasks SET status = 'expired', claim = NULL, lease_until_ms = 0, updated_ms = $1 \
                     WHERE status IN ('proposed', 'accepted', 'in_progress', 'paused') AND created_ms < $2",
                    &[Value::Int(now), Value::Int(now - MAX_AGE_MS)],
                )
                .await?;
            if let Err(not_due) = schedule::claim(sql, ENGINE, &claim, now, r.lease_ms as i64).await? {
                let why = if not_due.held { "another cycle holds the worker" } else { "not due yet" };
                return Ok(json!({"due": false, "reason": why, "next_at": iso(not_due.at_ms()),
                                 "next_ms": not_due.next_ms, "expired": expired}));
            }
            let picked = sql
                .query(
                    &format!(
                        "UPDATE persistent_tasks SET status = 'in_progress', claim = $1, lease_until_ms = $2, updated_ms = $3 \
                         WHERE id = (SELECT id FROM persistent_tasks WHERE status IN ('accepted', 'in_progress') \
                                     AND lease_until_ms < $3 AND created_ms >= $4 \
                                     ORDER BY priority, created_ms, id LIMIT 1) \
                         RETURNING {COLUMNS}"
                    ),
                    &[claim.as_str().into(), Value::Int(lease), Value::Int(now), Value::Int(now - MAX_AGE_MS)],
                )
                .await?;
            let Some(row) = picked.first() else {
                schedule::release(sql, ENGINE, &claim, None, None).await?;
                return Ok(json!({"due": true, "task": null, "expired": expired}));
            };
            Ok(json!({
                "due": true,
                "claim": claim,
                "expired": expired,
                "task": {"id": row.text("id")?, "goal": row.text("goal")?, "cycles": row.i64("cycles")?,
                         "progress": Progress::parse(&row.text("progress")?)},
            }))
        })
        .await?;
    Ok(out)
}

#[derive(Debug, Deserialize)]
pub struct CheckpointRequest {
    pub id: String,
    pub claim: String,
    pub progress: Progress,
    pub now_ms: u64,
    pub lease_ms: u64,
}

/// Writes a step's progress under the claim and renews both leases. A
/// claim that is gone (the task was cancelled, or the lease ran out and
/// another worker took it) is a `conflict` and writes nothing.
pub async fn checkpoint(r: CheckpointRequest) -> Result<J> {
    let sql = mneme_store::open_sql().await?;
    let now = r.now_ms as i64;
    let lease = now + r.lease_ms as i64;
    sql.transaction(async |sql: &Sql| {
        let n = sql
            .execute(
                "UPDATE persistent_tasks SET progress = $3, coverage = $4, updated_ms = $5, lease_until_ms = $6 \
                     WHERE id = $1 AND claim = $2 AND status = 'in_progress'",
                &[
                    r.id.as_str().into(),
                    r.claim.as_str().into(),
                    json_text(&r.progress).into(),
                    r.progress.coverage().into(),
                    Value::Int(now),
                    Value::Int(lease),
                ],
            )
            .await?;
        if n == 0 {
            return Err(StoreError::new("lease-lost", format!("task `{}` is no longer claimed by this cycle", r.id)));
        }
        schedule::renew(sql, ENGINE, &r.claim, lease).await?;
        Ok(())
    })
    .await?;
    Ok(json!({"saved": true}))
}

#[derive(Debug, Deserialize)]
pub struct EndRequest {
    pub id: String,
    pub claim: String,
    pub progress: Progress,
    pub status: State,
    /// The surfacing event's payload, if the cycle surfaces.
    pub event: Option<J>,
    pub next_ms: u64,
    pub outcome: String,
    pub now_ms: u64,
}

/// Step 6–8, in one transaction: the task's progress, cycle count and
/// state, the `task` event on `/events` when the cycle surfaces, and the
/// worker's next jittered time. A task that is no longer ours (cancelled
/// mid-cycle) keeps what it has; the schedule moves on all the same.
pub async fn end_cycle(r: EndRequest) -> Result<J> {
    if !matches!(r.status, State::InProgress | State::Completed) {
        return Err(Fail::invalid("a cycle ends in_progress or completed"));
    }
    let sql = mneme_store::open_sql().await?;
    let now = r.now_ms as i64;
    let out = publishing(&sql, async |sql: &Sql| {
        let n = sql
            .execute(
                "UPDATE persistent_tasks SET progress = $3, coverage = $4, status = $5, cycles = cycles + 1, \
                     claim = NULL, lease_until_ms = 0, updated_ms = $6 \
                     WHERE id = $1 AND claim = $2 AND status = 'in_progress'",
                &[
                    r.id.as_str().into(),
                    r.claim.as_str().into(),
                    json_text(&r.progress).into(),
                    r.progress.coverage().into(),
                    r.status.as_str().into(),
                    Value::Int(now),
                ],
            )
            .await?;
        let event_id = match (&r.event, n) {
            (Some(payload), 1) => publish_with(sql, "task", payload, r.now_ms).await?["id"].as_i64(),
            _ => None,
        };
        schedule::release(sql, ENGINE, &r.claim, Some(r.next_ms as i64), Some((now, &r.outcome))).await?;
        Ok(json!({"saved": n == 1, "event_id": event_id}))
    })
    .await?;
    Ok(out)
}
