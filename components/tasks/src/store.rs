//! The tasks stage's I/O over the `persistent_tasks` table and the
//! worker's row in `engine_schedule`.
//!
//! A cycle's life: [`begin_cycle`] (one transaction: expire stale tasks,
//! claim the worker's schedule if it is due, claim the first eligible task,
//! FIFO within priority) → the entry runs ready steps, and after each one
//! [`checkpoint`] writes `progress` under the claim → [`end_cycle`] (one
//! transaction: the task's state, the surfacing event, the schedule's next
//! jittered time). A crash before a checkpoint loses only the step in
//! flight; the leases end and the next tick takes the work over.

use mneme_background::cycle::{CycleEnd, Progress};
use mneme_background::tasks::{self, DEFAULT_PRIORITY, MAX_ACTIVE, MAX_AGE_MS, PRIORITIES, Refusal, State};
use mneme_store::{Row, Sql, StoreError, Value};
use mneme_substrate::events::{publish_with, publishing};
use mneme_substrate::task_rows::{self, Inserted, OPEN};
use mneme_substrate::{Fail, Result, as_store_error, json_text, random_hex, schedule};
use mneme_time::calendar::utc_timestamp;
use mneme_types::NotDue;
use mneme_types::tasks::{Begun, ClaimedTask, Closed, CycleClose, CycleStart, NewTask, Task, TaskState};

/// The worker's row in `engine_schedule`.
pub const ENGINE: &str = "tasks";

const COLUMNS: &str =
    "id, goal, status, priority, origin, coverage, progress, created_ms, updated_ms, expires_ms, cycles";

fn iso(ms: i64) -> String {
    utc_timestamp(ms.max(0) as u64)
}

fn state(r: &Row) -> Result<TaskState> {
    let s = r.text("status")?;
    State::parse(&s).map(Into::into).ok_or_else(|| Fail::new("decode", format!("persistent_tasks.status `{s}`")))
}

/// A task as the API shows it.
fn task(r: &Row) -> Result<Task> {
    let progress = Progress::parse(&r.text("progress")?);
    Ok(Task {
        id: r.text("id")?,
        goal: r.text("goal")?,
        status: state(r)?,
        priority: r.i64("priority")?,
        origin: r.text("origin")?,
        coverage: r.f64("coverage")?,
        cycles: r.i64("cycles")?.clamp(0, u32::MAX as i64) as u32,
        plan: progress.plan.map(Into::into),
        plan_source: progress.plan_source,
        plan_note: progress.plan_note,
        findings: progress.findings.into_iter().map(Into::into).collect(),
        last_summary: progress.last_summary,
        last_cycle_at: progress.last_cycle_ms.map(iso),
        created_at: iso(r.i64("created_ms")?),
        updated_at: iso(r.i64("updated_ms")?),
        expires_at: iso(r.i64("expires_ms")?),
    })
}

/// The goal trimmed, if its length and the priority are within bounds.
fn checked(goal: &str, priority: Option<i64>) -> Result<(String, i64)> {
    let goal = goal.trim().to_string();
    if !tasks::GOAL_CHARS.contains(&goal.chars().count()) {
        return Err(Fail::invalid(format!(
            "`goal` has {} to {} characters",
            tasks::GOAL_CHARS.start(),
            tasks::GOAL_CHARS.end()
        )));
    }
    let priority = priority.unwrap_or(DEFAULT_PRIORITY);
    if !PRIORITIES.contains(&priority) {
        return Err(Fail::invalid("`priority` is an integer from 1 (most urgent) to 10"));
    }
    Ok((goal, priority))
}

fn refused(r: Refusal) -> Fail {
    match r {
        Refusal::Duplicate(id) => Fail::new("conflict", format!("an open task has nearly the same goal: {id}")),
        Refusal::Full => {
            Fail::new("conflict", format!("{MAX_ACTIVE} tasks are open already; cancel one or wait for one to finish"))
        }
    }
}

/// Whether a new goal would be taken on; writes nothing.
pub async fn admit(goal: &str, priority: Option<i64>) -> Result<()> {
    let (goal, _) = checked(goal, priority)?;
    let sql = mneme_store::open_sql().await?;
    match task_rows::refused(&sql, &goal).await? {
        Some(r) => Err(refused(r)),
        None => Ok(()),
    }
}

/// `POST /tasks`: a task in state `accepted`, with its plan.
pub async fn create(t: NewTask) -> Result<Task> {
    let (goal, priority) = checked(&t.goal, t.priority)?;
    let progress = Progress::from(t.progress);
    let sql = mneme_store::open_sql().await?;
    let inserted = sql
        .transaction(async |sql: &Sql| {
            task_rows::insert(sql, &goal, priority, "user", &progress, t.now_ms).await.map_err(as_store_error)
        })
        .await?;
    match inserted {
        Inserted::Created(id) => get(&id).await,
        Inserted::Refused(r) => Err(refused(r)),
    }
}

pub async fn get(id: &str) -> Result<Task> {
    let sql = mneme_store::open_sql().await?;
    let rows = sql.query(&format!("SELECT {COLUMNS} FROM persistent_tasks WHERE id = $1"), &[id.into()]).await?;
    match rows.first() {
        Some(row) => task(row),
        None => Err(Fail::new("not-found", format!("no task `{id}`"))),
    }
}

/// Tasks, open ones first (by priority, then age), then the rest, newest
/// first.
pub async fn list(status: Option<TaskState>, limit: u32) -> Result<Vec<Task>> {
    let sql = mneme_store::open_sql().await?;
    let rows = sql
        .query(
            &format!(
                "SELECT {COLUMNS} FROM persistent_tasks WHERE ($1 = '' OR status = $1) \
                 ORDER BY CASE WHEN status IN {OPEN} THEN 0 ELSE 1 END, \
                 CASE WHEN status IN {OPEN} THEN priority ELSE 0 END, \
                 CASE WHEN status IN {OPEN} THEN created_ms ELSE -updated_ms END, id LIMIT $2"
            ),
            &[status.map_or("", TaskState::as_str).into(), Value::Int(limit.clamp(1, 200) as i64)],
        )
        .await?;
    rows.iter().map(task).collect()
}

/// `DELETE /tasks/{id}`: cancels an unfinished task. A cycle holding it
/// finds its claim gone and writes nothing more.
pub async fn cancel(id: &str, now_ms: u64) -> Result<Task> {
    let sql = mneme_store::open_sql().await?;
    let n = task_rows::cancel(&sql, id, now_ms).await?;
    let task = get(id).await?;
    if n == 0 {
        return Err(Fail::new("conflict", format!("task `{id}` is {} already", task.status.as_str())));
    }
    Ok(task)
}

/// Step 1–3 of a cycle, in one transaction: expire stale tasks, claim the
/// worker's schedule if it is due and free, then claim the first eligible
/// task (FIFO within priority, 1 first). With no eligible task the schedule
/// is given back untouched, so a task created later runs at the next tick.
pub async fn begin_cycle(now_ms: u64, lease_ms: u64) -> Result<Begun> {
    let sql = mneme_store::open_sql().await?;
    let now = now_ms as i64;
    let claim = random_hex(8);
    let lease = now + lease_ms as i64;
    let begun = sql
        .transaction(async |sql: &Sql| {
            let expired = sql
                .execute(
                    "UPDATE persistent_tasks SET status = 'expired', claim = NULL, lease_until_ms = 0, updated_ms = $1 \
                     WHERE status IN ('proposed', 'accepted', 'in_progress', 'paused') AND created_ms < $2",
                    &[Value::Int(now), Value::Int(now - MAX_AGE_MS)],
                )
                .await?;
            if let Err(n) = schedule::claim(sql, ENGINE, &claim, now, lease_ms as i64).await? {
                let not_due = NotDue { held: n.held, next_ms: n.next_ms, at_ms: n.at_ms() };
                return Ok(Begun { expired, start: CycleStart::NotDue(not_due) });
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
                return Ok(Begun { expired, start: CycleStart::Idle });
            };
            let task = ClaimedTask {
                id: row.text("id")?,
                goal: row.text("goal")?,
                cycles: row.i64("cycles")?.clamp(0, u32::MAX as i64) as u32,
                progress: Progress::parse(&row.text("progress")?).into(),
                claim: claim.clone(),
            };
            Ok(Begun { expired, start: CycleStart::Claimed(task) })
        })
        .await?;
    Ok(begun)
}

/// Writes a step's progress under the claim and renews both leases. A
/// claim that is gone (the task was cancelled, or the lease ran out and
/// another worker took it) is `lease-lost` and writes nothing.
pub async fn checkpoint(id: &str, claim: &str, progress: Progress, now_ms: u64, lease_ms: u64) -> Result<()> {
    let sql = mneme_store::open_sql().await?;
    let now = now_ms as i64;
    let lease = now + lease_ms as i64;
    sql.transaction(async |sql: &Sql| {
        let n = sql
            .execute(
                "UPDATE persistent_tasks SET progress = $3, coverage = $4, updated_ms = $5, lease_until_ms = $6 \
                     WHERE id = $1 AND claim = $2 AND status = 'in_progress'",
                &[
                    id.into(),
                    claim.into(),
                    json_text(&progress).into(),
                    progress.coverage().into(),
                    Value::Int(now),
                    Value::Int(lease),
                ],
            )
            .await?;
        if n == 0 {
            return Err(StoreError::new("lease-lost", format!("task `{id}` is no longer claimed by this cycle")));
        }
        schedule::renew(sql, ENGINE, claim, lease).await?;
        Ok(())
    })
    .await?;
    Ok(())
}

/// Step 6–8, in one transaction: the task's progress, cycle count and
/// state, the `task` event on `/events` when the cycle surfaces, and the
/// worker's next jittered time. A task that is no longer ours (cancelled
/// mid-cycle) keeps what it has; the schedule moves on all the same. An
/// abandoned cycle (no `end`) leaves the task in progress.
pub async fn end_cycle(c: CycleClose) -> Result<Closed> {
    let end: Option<CycleEnd> = c.end.map(Into::into);
    let status = end.map_or(State::InProgress, |e| e.state);
    if !matches!(status, State::InProgress | State::Completed) {
        return Err(Fail::invalid("a cycle ends in_progress or completed"));
    }
    let progress = Progress::from(c.progress);
    let sql = mneme_store::open_sql().await?;
    let now = c.now_ms as i64;
    let closed = publishing(&sql, async |sql: &Sql| {
        let goal = sql
            .query(
                "UPDATE persistent_tasks SET progress = $3, coverage = $4, status = $5, cycles = cycles + 1, \
                     claim = NULL, lease_until_ms = 0, updated_ms = $6 \
                     WHERE id = $1 AND claim = $2 AND status = 'in_progress' RETURNING goal",
                &[
                    c.id.as_str().into(),
                    c.claim.as_str().into(),
                    json_text(&progress).into(),
                    progress.coverage().into(),
                    status.as_str().into(),
                    Value::Int(now),
                ],
            )
            .await?
            .first()
            .map(|r| r.text("goal"))
            .transpose()?;
        let event = match (&end, &goal) {
            (Some(end), Some(goal)) => end.event(&c.id, goal, &progress),
            _ => None,
        };
        let event_id = match event {
            Some(payload) => Some(publish_with(sql, "task", &payload, c.now_ms).await?),
            None => None,
        };
        schedule::release(sql, ENGINE, &c.claim, Some(c.next_ms as i64), Some((now, &c.outcome))).await?;
        Ok(Closed { saved: goal.is_some(), event_id })
    })
    .await?;
    Ok(closed)
}
