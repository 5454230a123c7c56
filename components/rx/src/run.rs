//! The I/O of the rx stage (`mneme:rx`): doors, observations, the two
//! store-side halves of a run, and the rec store. The rules are
//! `mneme-rx`'s; this module reads and writes around them.
//!
//! A run of `POST /rx/{door}` is `begin` (the door's lock, then steps
//! 0.5–5; a dedup writes its confirmation and ends the run here), then the
//! entry's steps 6–7 (the vault search and the composing model), then
//! `finish` (steps 8–10, then the lock is released). The lock makes runs on
//! one door strictly sequential, so two runs never take the same NN and the
//! second of two runs over one state is absorbed by the first's rec.

use crate::doors::load_door;
use crate::recs::{NewRec, insert_rec};
use mneme_rx::artifact;
use mneme_rx::door::{Door, SignalSource, Store};
use mneme_rx::lifecycle::{self, Status};
use mneme_rx::signals::{self, Acute, AuxRow, Component, Dedup, Prior, Signals};
use mneme_rx::{TraceStep, trace_entry};
use mneme_store::{Echo, Piece, Row, Sql, StoreError, Value};
use mneme_substrate::{Fail, Result, as_store_error, json_text, new_id, random_hex};
use mneme_time::calendar::{format_date, utc_timestamp as timestamp};
use mneme_types::rx::{DoorHistory, HistoryPoint, RunDraft, RunResult, RunStart, RunState};
use serde_json::{Value as J, json};
use spin_sdk::http::body::IncomingBodyExt;
use std::time::{Duration, Instant};

/// A run holds its door this long at most (a crashed run frees it then).
/// Longer than the slowest run that does not crash: two composing calls of
/// up to 30 s each, the evidence search, and reconcile's budget.
pub const LOCK_LEASE_MS: i64 = 180_000;
/// A run waits this long for a busy door before answering 409.
pub const LOCK_WAIT_MS: u64 = 15_000;
/// Outbound calls (signal sources, external stores) give up after this.
pub const HTTP_TIMEOUT_MS: u64 = 5_000;
/// Reconcile looks at artifacts this recent.
pub const RECONCILE_WINDOW_MS: i64 = 60 * lifecycle::DAY_MS;
/// Reconcile against an external store asks it for this long at most; the
/// artifacts it did not reach wait for the next run.
pub const RECONCILE_BUDGET_MS: u64 = 20_000;

/// The lock's lease runs on the wall clock, never a test's request clock.
fn wall_ms() -> i64 {
    mneme_time::clock::system_ms() as i64
}

fn day(ms: i64) -> String {
    format_date(ms.div_euclid(lifecycle::DAY_MS))
}

/// One step of the trace.
#[derive(Default)]
pub struct Trace(Vec<TraceStep>);

impl Trace {
    pub fn push(&mut self, step: &str, started: Instant, outcome: impl Into<String>) {
        self.push_timed(step, started.elapsed(), outcome);
    }

    pub fn push_timed(&mut self, step: &str, took: Duration, outcome: impl Into<String>) {
        self.0.push(trace_entry(step, took, outcome));
    }

    /// The steps, as the seam carries them.
    fn steps(self) -> Vec<mneme_types::rx::TraceStep> {
        self.0.into_iter().map(Into::into).collect()
    }
}

/// Steps 0.5 and 0.7 for stores in this database, as they came out.
struct LocalSteps {
    revive: (Duration, String),
    reconcile: Option<(Duration, String)>,
}

/// Takes the door for `claim` unless another run holds an unexpired lease.
async fn try_claim(sql: &Sql, door: &Door, claim: &str) -> std::result::Result<bool, StoreError> {
    let wall = wall_ms();
    // A row comes back only when this statement wrote the lock.
    let rows = sql
        .query(
            "INSERT INTO rx_locks (door, claim, until_ms) VALUES ($1, $2, $3)
             ON CONFLICT (door) DO UPDATE SET claim = excluded.claim, until_ms = excluded.until_ms
             WHERE rx_locks.until_ms < $4
             RETURNING claim",
            &[door.name.as_str().into(), claim.into(), (wall + LOCK_LEASE_MS).into(), wall.into()],
        )
        .await?;
    Ok(rows.first().and_then(|r| r.text("claim").ok()).as_deref() == Some(claim))
}

/// Steps 0.5 and 0.7 where they touch only this database (inside the
/// caller's transaction); an external store reconciles over HTTP later.
async fn local_steps(sql: &Sql, door: &Door, now: i64) -> std::result::Result<LocalSteps, StoreError> {
    let t = Instant::now();
    let revived = revive(sql, door, now).await?;
    let revive = (t.elapsed(), revived);
    let reconcile = match door.store {
        Store::Http { .. } => None,
        _ => {
            let t = Instant::now();
            let outcome = reconcile_here(sql, door, now).await?;
            Some((t.elapsed(), outcome))
        }
    };
    Ok(LocalSteps { revive, reconcile })
}

/// Retries `attempt` (one transaction that answers `None` while another
/// run holds the door) until it gets the door or [`LOCK_WAIT_MS`] passes.
async fn with_door<T>(door: &Door, mut attempt: impl AsyncFnMut() -> Result<Option<T>>) -> Result<T> {
    let started = Instant::now();
    // Each attempt is a write transaction, so a waiting run backs off
    // (25 ms doubling to 400 ms) rather than take SQLite's write lock often.
    let mut pause = 25;
    loop {
        if let Some(v) = attempt().await? {
            return Ok(v);
        }
        if started.elapsed() > Duration::from_millis(LOCK_WAIT_MS) {
            return Err(Fail::new("door-busy", format!("door `{}` is busy with another run; try again", door.name)));
        }
        spin_sdk::time::sleep(Duration::from_millis(pause)).await;
        pause = (pause * 2).min(400);
    }
}

/// Frees the door if `claim` still holds it; whether it did.
async fn release_lock(sql: &Sql, door: &str, claim: &str) -> std::result::Result<bool, StoreError> {
    Ok(sql.execute("DELETE FROM rx_locks WHERE door = $1 AND claim = $2", &[door.into(), claim.into()]).await? > 0)
}

/// Frees a door after a run that failed between `begin` and `finish`.
pub async fn release(door: &str, claim: &str) -> Result<()> {
    let sql = mneme_store::open_sql().await?;
    release_lock(&sql, door, claim).await?;
    Ok(())
}

/// A GET or POST with a JSON answer, bounded by [`HTTP_TIMEOUT_MS`].
async fn http_json(method: &str, url: &str, headers: &[(&str, String)], body: Option<String>) -> Result<(u16, J)> {
    use futures::future::{Either, select};
    let mut b = spin_sdk::http::Request::builder().method(method).uri(url).header("accept", "application/json");
    for (k, v) in headers {
        b = b.header(*k, v.as_str());
    }
    let req = match body {
        Some(body) => b.header("content-type", "application/json").body(body),
        None => b.body(String::new()),
    }
    .map_err(|e| Fail::new("upstream", format!("{url}: {e}")))?;
    let timeout = Box::pin(spin_sdk::time::sleep(Duration::from_millis(HTTP_TIMEOUT_MS)));
    let resp = match select(Box::pin(spin_sdk::http::send(req)), timeout).await {
        Either::Left((r, _)) => r.map_err(|e| Fail::new("upstream", format!("{url}: {e:?}")))?,
        Either::Right(_) => return Err(Fail::new("upstream", format!("{url}: no answer within {HTTP_TIMEOUT_MS} ms"))),
    };
    let status = resp.status().as_u16();
    let bytes = resp.into_body().bytes().await.map_err(|e| Fail::new("upstream", format!("{url}: {e:?}")))?;
    let v = serde_json::from_slice(&bytes).unwrap_or(J::Null);
    Ok((status, v))
}

fn optional_f64(r: &Row, col: &str) -> std::result::Result<Option<f64>, StoreError> {
    match r.value(col)? {
        Value::Null => Ok(None),
        _ => r.f64(col).map(Some),
    }
}

/// Steps 1 and 2 for a door whose signals are SQL views: the signal view,
/// its acute view and every auxiliary view in one statement, so the
/// database is asked once.
async fn read_views(sql: &Sql, door: &Door, view: &str, acute: Option<&str>) -> Result<(Signals, Vec<AuxRow>)> {
    const REAL: &str = "DOUBLE PRECISION";
    let mut parts = vec![format!(
        "SELECT 's' AS part, component AS name, CAST(raw AS {REAL}) AS raw, CAST(normalised AS {REAL}) AS normalised,
                CAST(weight AS {REAL}) AS weight, CAST(contribution AS {REAL}) AS contribution, CAST(NULL AS BIGINT) AS at_ms
         FROM {view}"
    )];
    if let Some(a) = acute {
        parts.push(format!("SELECT 'a', name, NULL, NULL, NULL, NULL, CAST(at_ms AS BIGINT) FROM {a}"));
    }
    for a in &door.auxiliary {
        parts.push(format!(
            "SELECT 'x', name, CAST(raw AS {REAL}), CAST(normalised AS {REAL}), NULL, NULL, NULL FROM {}",
            a.view
        ));
    }
    // A view that broke after the door was configured, or answers rows of
    // the wrong shape (a NULL weight, say), is the signal source failing,
    // as an HTTP source answering 500 would be.
    let failed = |e: StoreError| {
        let views: Vec<&str> =
            [view].into_iter().chain(acute).chain(door.auxiliary.iter().map(|a| a.view.as_str())).collect();
        Fail::new(
            "upstream",
            format!("the signal views of door `{}` ({}) failed: {}", door.name, views.join(", "), e.message),
        )
    };
    let rows = sql.query(&parts.join("\nUNION ALL\n"), &[]).await.map_err(failed)?;
    let (mut s, mut aux) = (Signals { components: Vec::new(), acute: Vec::new(), facts: J::Null }, Vec::new());
    let decoded: std::result::Result<(), StoreError> = rows.iter().try_for_each(|r| {
        match r.text("part")?.as_str() {
            "s" => s.components.push(Component {
                component: r.text("name")?,
                raw: optional_f64(r, "raw")?,
                normalised: r.f64("normalised")?,
                weight: r.f64("weight")?,
                contribution: r.f64("contribution")?,
            }),
            "a" => s.acute.push(Acute { name: r.text("name")?, at_ms: r.i64("at_ms")? }),
            _ => aux.push(AuxRow {
                name: r.text("name")?,
                raw: optional_f64(r, "raw")?,
                normalised: r.f64("normalised")?,
            }),
        }
        Ok(())
    });
    decoded.map_err(failed)?;
    Ok((s, aux))
}

/// The most days `history` reads: each is one pass over the door's views.
pub const HISTORY_MAX_DAYS: u32 = 90;

/// The door's signals on each of `days` days ending at `now` (#26 item 5):
/// inside one transaction, `rx_clock` holds each day's instant in turn, so
/// `rx_now` and `rx_observations_asof` (migration 0014) give every view
/// the door as it stood then; the row is gone before the commit, and no
/// other reader ever sees it.
pub async fn history(name: &str, days: u32, now: i64) -> Result<DoorHistory> {
    let sql = mneme_store::open_sql().await?;
    let door = load_door(&sql, name).await?;
    let names: Vec<String> = door.components.iter().map(|c| c.name.clone()).collect();
    let mut out = DoorHistory {
        door: door.name.clone(),
        fire_threshold: door.fire_threshold,
        components: names.clone(),
        points: Vec::new(),
        note: None,
    };
    let SignalSource::Sql { view, .. } = &door.signals else {
        out.note = Some("this door's signals come over HTTP, which keeps no past to read".into());
        return Ok(out);
    };
    let days = days.clamp(1, HISTORY_MAX_DAYS);
    let points = sql
        .transaction(async |sql| {
            let mut points = Vec::with_capacity(days as usize);
            for k in (0..i64::from(days)).rev() {
                let at = now - k * 86_400_000;
                sql.execute("DELETE FROM rx_clock", &[]).await?;
                sql.execute("INSERT INTO rx_clock (now_ms) VALUES ($1)", &[Value::Int(at)]).await?;
                let (s, aux) = read_views(sql, &door, view, None).await.map_err(as_store_error)?;
                let c = signals::composite(&door, &s, &aux).map_err(|e| StoreError::new("upstream", e))?;
                let components = names
                    .iter()
                    .map(|n| s.components.iter().find(|x| &x.component == n).map(|x| x.normalised))
                    .collect();
                points.push(HistoryPoint { at_ms: at, composite: c.drift_score, components });
            }
            sql.execute("DELETE FROM rx_clock", &[]).await?;
            Ok(points)
        })
        .await?;
    out.points = points;
    Ok(out)
}

/// Step 1 for a door whose signals come over HTTP.
async fn read_http_signals(url: &str) -> Result<Signals> {
    let (status, v) = http_json("GET", url, &[], None).await?;
    if status != 200 {
        return Err(Fail::new("upstream", format!("the signal source answered {status}")));
    }
    serde_json::from_value(v).map_err(|e| Fail::new("upstream", format!("the signal source's answer: {e}")))
}

/// Step 2 for a door whose signals come over HTTP (its auxiliary signals
/// are still views here).
async fn read_aux(sql: &Sql, door: &Door) -> Result<Vec<AuxRow>> {
    let mut out = Vec::new();
    for a in &door.auxiliary {
        for r in sql.query(&format!("SELECT name, raw, normalised FROM {}", a.view), &[]).await? {
            out.push(AuxRow { name: r.text("name")?, raw: optional_f64(&r, "raw")?, normalised: r.f64("normalised")? });
        }
    }
    Ok(out)
}

/// Steps 1 and 2, with the source contract checked and the components in
/// the configured order, so tables and ties read the same every run.
async fn read_sources(sql: &Sql, door: &Door, trace: &mut Trace) -> Result<(Signals, Vec<AuxRow>)> {
    let t = Instant::now();
    let (mut s, aux) = match &door.signals {
        SignalSource::Sql { view, acute_view } => {
            let (s, aux) = read_views(sql, door, view, acute_view.as_deref()).await?;
            signals::check(door, &s).map_err(|e| Fail::new("upstream", e))?;
            trace.push("1", t, format!("{} components, {} acute events", s.components.len(), s.acute.len()));
            trace.push_timed("2", Duration::ZERO, format!("{} auxiliary rows, read with step 1", aux.len()));
            (s, aux)
        }
        SignalSource::Http { url } => {
            let s = read_http_signals(url).await?;
            signals::check(door, &s).map_err(|e| Fail::new("upstream", e))?;
            trace.push("1", t, format!("{} components, {} acute events", s.components.len(), s.acute.len()));
            let t = Instant::now();
            let aux = read_aux(sql, door).await?;
            trace.push("2", t, format!("{} auxiliary rows", aux.len()));
            (s, aux)
        }
    };
    s.components.sort_by_key(|c| door.components.iter().position(|d| d.name == c.component));
    Ok((s, aux))
}

/// Step 0.5: snoozed recs whose time is up are open again (D-032).
async fn revive(sql: &Sql, door: &Door, now: i64) -> std::result::Result<String, StoreError> {
    if door.store != Store::Local {
        return Ok(format!("skipped: the {} store keeps its own states", door.store.kind()));
    }
    let n = sql
        .execute(
            "UPDATE rx_recs SET status = 'open', revived_ms = $1, updated_ms = $1
             WHERE door = $2 AND status = 'snoozed' AND snoozed_until_ms <= $1",
            &[now.into(), door.name.as_str().into()],
        )
        .await?;
    Ok(format!("{n} revived"))
}

async fn patch_status(
    sql: &Sql,
    path: &str,
    markdown: &str,
    status: &str,
    now: i64,
) -> std::result::Result<(), StoreError> {
    let md = artifact::patch_frontmatter(markdown, "status", &json!(status));
    sql.execute(
        "UPDATE rx_artifacts SET status = $1, markdown = $2, updated_ms = $3 WHERE path = $4",
        &[status.into(), md.into(), now.into(), path.into()],
    )
    .await?;
    Ok(())
}

/// Step 0.7 for a store in this database: one read joins the recent
/// artifacts to their recs and returns only those that disagree, which are
/// patched.
async fn reconcile_here(sql: &Sql, door: &Door, now: i64) -> std::result::Result<String, StoreError> {
    let rows = sql
        .query(
            "SELECT a.path, r.status AS store_status, a.markdown
             FROM rx_artifacts a JOIN rx_recs r ON r.id = a.rec_id
             WHERE a.door = $1 AND a.kind = 'rec' AND a.created_ms > $2 AND a.status <> r.status",
            &[door.name.as_str().into(), (now - RECONCILE_WINDOW_MS).into()],
        )
        .await?;
    for r in &rows {
        patch_status(sql, &r.text("path")?, &r.text("markdown")?, &r.text("store_status")?, now).await?;
    }
    Ok(format!("artifacts patched: {}", rows.len()))
}

/// Step 0.7 for an external store: each recent artifact that is not yet
/// terminal asks the store for its rec's status.
async fn reconcile_remote(sql: &Sql, door: &Door, url: &str, now: i64) -> Result<String> {
    let rows = sql
        .query(
            "SELECT path, rec_id, status, markdown FROM rx_artifacts
             WHERE door = $1 AND kind = 'rec' AND rec_id IS NOT NULL AND created_ms > $2",
            &[door.name.as_str().into(), (now - RECONCILE_WINDOW_MS).into()],
        )
        .await?;
    let key = required_variable("rx_store_api_key").await?;
    let (mut patched, mut unreachable, mut deferred) = (0, 0, 0);
    let started = Instant::now();
    for r in &rows {
        let (id, status) = (r.text("rec_id")?, r.text("status")?);
        if Status::parse(&status).is_some_and(Status::terminal) {
            continue;
        }
        if started.elapsed() > Duration::from_millis(RECONCILE_BUDGET_MS) {
            deferred += 1;
            continue;
        }
        let got = http_json(
            "GET",
            &format!("{}/v1/rx/recs/{id}", url.trim_end_matches('/')),
            &[("authorization", format!("Bearer {key}"))],
            None,
        )
        .await;
        match got {
            Ok((200, v)) => {
                if let Some(s) = v["status"].as_str().filter(|s| Status::parse(s).is_some() && *s != status) {
                    patch_status(sql, &r.text("path")?, &r.text("markdown")?, s, now).await?;
                    patched += 1;
                }
            }
            _ => unreachable += 1,
        }
    }
    let mut outcome = format!("artifacts patched: {patched} of {} checked", rows.len());
    if unreachable > 0 {
        outcome.push_str(&format!("; {unreachable} not reachable in the external store"));
    }
    if deferred > 0 {
        outcome.push_str(&format!("; {deferred} left for the next run (the {RECONCILE_BUDGET_MS} ms budget ran out)"));
    }
    Ok(outcome)
}

/// A variable a configured door cannot work without.
async fn required_variable(name: &str) -> Result<String> {
    mneme_store::variable(name).await?.ok_or_else(|| {
        Fail::new("not-configured", format!("the door's external store needs the variable `{name}`, which is not set"))
    })
}

/// Steps 0.5–5 under the door's lock. A dedup ends the run here (the lock
/// is released); otherwise the answer carries the claim `finish` needs.
///
/// When every step up to 4 stays in this database (SQL signals, a local or
/// markdown store), the lock, steps 0.5–4 and a dedup's confirmation are
/// one transaction: a run absorbed by a prior pays one commit. An HTTP
/// signal source or store is never called inside a transaction, so those
/// doors take the lock in one transaction and write a confirmation in
/// another.
pub async fn begin(door: &str, now_ms: i64) -> Result<RunStart> {
    // No connection is held while waiting for the door: each attempt takes
    // one from the pool and gives it back, so twenty runs queued on one door
    // cannot starve the run that holds it of connections (D-R6).
    let door = load_door(&mneme_store::open_sql().await?, door).await?;
    let now = now_ms;
    let claim = random_hex(8);
    if matches!(door.signals, SignalSource::Sql { .. }) && !matches!(door.store, Store::Http { .. }) {
        return with_door(&door, async || {
            let conn = mneme_store::open_sql().await?;
            let out = conn
                .transaction(async |sql: &Sql| {
                    if !try_claim(sql, &door, &claim).await? {
                        return Ok(None);
                    }
                    // Three independent reads go out together: steps 0.5 and
                    // 0.7 with the priors step 4 weighs (which reconcile may
                    // have patched), steps 1–2, and the NN a confirmation
                    // would take.
                    let (mut local, mut sources, mut nn) = (None, None, None);
                    let since = now - signals::DEDUP_WINDOW_MS;
                    sql.all::<Fail>(vec![
                        Box::pin(async {
                            local = Some(match local_steps(sql, &door, now).await {
                                Ok(steps) => open_priors(sql, &door, Some(since)).await.map(|p| (steps, p)),
                                Err(e) => Err(e),
                            });
                            Ok(())
                        }),
                        Box::pin(async {
                            let mut t = Trace::default();
                            sources = Some(read_sources(sql, &door, &mut t).await.map(|s| (s, t)));
                            Ok(())
                        }),
                        Box::pin(async {
                            nn = Some(next_nn(sql, &door.name, "no-change", &day(now)).await);
                            Ok(())
                        }),
                    ])
                    .await
                    .map_err(as_store_error)?;
                    let (local, sources, nn) = (local.expect("ran"), sources.expect("ran"), nn.expect("ran"));
                    // A failure of steps 0.5–0.7 is reported as it is; on
                    // Postgres the signal read then fails as an echo of it.
                    // A failed signal read makes the other pieces echo it.
                    let ((steps, recent), ((signals_read, aux), read_trace)) = match (local, sources) {
                        (Err(e), _) if !e.echoes_earlier_failure() => return Err(e),
                        // Steps 0.5 and 0.7 stand and the door is free again; if
                        // the failure broke the transaction (Postgres refuses
                        // every later statement), it all rolls back with the
                        // original failure.
                        (_, Err(f)) => {
                            return match release_lock(sql, &door.name, &claim).await {
                                Ok(_) => Ok(Some(Err(f))),
                                Err(_) => Err(as_store_error(f)),
                            };
                        }
                        (Err(e), Ok(_)) => return Err(e),
                        (Ok(l), Ok(s)) => (l, s),
                    };
                    let mut trace = Trace::default();
                    trace.push_timed("0.5", steps.revive.0, steps.revive.1);
                    let (took, outcome) = steps.reconcile.unwrap_or((Duration::ZERO, "nothing to reconcile".into()));
                    trace.push_timed("0.7", took, outcome);
                    trace.0.extend(read_trace.0);
                    match decide(&door, now, signals_read, aux, &recent, &mut trace) {
                        Ok(a) => Ok(Some(Ok(conclude(sql, &door, &claim, a, trace, now, Some(nn?)).await?))),
                        Err(f) => match release_lock(sql, &door.name, &claim).await {
                            Ok(_) => Ok(Some(Err(f))),
                            Err(_) => Err(as_store_error(f)),
                        },
                    }
                })
                .await?;
            out.transpose()
        })
        .await;
    }
    let steps = with_door(&door, async || {
        let conn = mneme_store::open_sql().await?;
        Ok(conn
            .transaction(async |sql: &Sql| match try_claim(sql, &door, &claim).await? {
                true => local_steps(sql, &door, now).await.map(Some),
                false => Ok(None),
            })
            .await?)
    })
    .await?;
    let conn = mneme_store::open_sql().await?;
    let sql = &conn;
    let out = async {
        let mut trace = Trace::default();
        trace.push_timed("0.5", steps.revive.0, steps.revive.1);
        match (&door.store, steps.reconcile) {
            (Store::Http { url }, _) => {
                let t = Instant::now();
                let outcome = reconcile_remote(sql, &door, url, now).await?;
                trace.push("0.7", t, outcome);
            }
            (_, Some((took, outcome))) => trace.push_timed("0.7", took, outcome),
            (_, None) => trace.push_timed("0.7", Duration::ZERO, "nothing to reconcile"),
        }
        let a = assess(sql, &door, now, &mut trace).await?;
        Ok(sql.transaction(async |sql: &Sql| conclude(sql, &door, &claim, a, trace, now, None).await).await?)
    }
    .await;
    // A dedup released the door with its confirmation; a failure frees it here.
    if out.is_err() {
        release_lock(sql, &door.name, &claim).await?;
    }
    out
}

/// What steps 1–4 read and decided.
struct Assessed {
    signals: Signals,
    aux: Vec<AuxRow>,
    composite: signals::CompositeScore,
    driving: String,
    decision: Dedup,
    /// When step 4 started, so its trace entry includes a confirmation.
    step4: Instant,
}

/// Steps 1–4 up to the dedup decision; nothing is written.
async fn assess(sql: &Sql, door: &Door, now: i64, trace: &mut Trace) -> Result<Assessed> {
    let (s, aux) = read_sources(sql, door, trace).await?;
    // Only a rec younger than the dedup window can absorb the run.
    let recent = open_priors(sql, door, Some(now - signals::DEDUP_WINDOW_MS)).await?;
    decide(door, now, s, aux, &recent, trace)
}

/// Steps 3 and 4 over what steps 1–2 read and the door's open recs younger
/// than the dedup window.
fn decide(
    door: &Door,
    now: i64,
    s: Signals,
    aux: Vec<AuxRow>,
    recent: &[Prior],
    trace: &mut Trace,
) -> Result<Assessed> {
    let t = Instant::now();
    let c = signals::composite(door, &s, &aux).map_err(|e| Fail::new("upstream", e))?;
    trace.push("3", t, format!("drift {}", artifact::num(c.drift_score)));
    let step4 = Instant::now();
    let driving = signals::driving(door, &s);
    let decision = signals::dedup(recent, &driving, c.drift_score, &s.acute, now);
    Ok(Assessed { signals: s, aux, composite: c, driving, decision, step4 })
}

/// Step 4's outcome, inside the caller's transaction: a dedup writes the
/// no-change confirmation and frees the door; a new rec goes on to step 5
/// with the door still held.
async fn conclude(
    sql: &Sql,
    door: &Door,
    claim: &str,
    a: Assessed,
    mut trace: Trace,
    now: i64,
    confirmation_nn: Option<i64>,
) -> std::result::Result<RunStart, StoreError> {
    let Assessed { signals: s, aux, composite: c, driving, decision, step4 } = a;
    let why = match decision {
        Dedup::Same(prior) => {
            let (tldr, md) = artifact::confirmation(door, &prior, c.drift_score, &driving, &timestamp(now as u64));
            let d = day(now);
            let nn = match confirmation_nn {
                Some(nn) => nn,
                None => next_nn(sql, &door.name, "no-change", &d).await?,
            };
            let path = artifact::confirmation_path(&door.title, &d, nn);
            let mut released = false;
            sql.all(vec![
                Box::pin(async {
                    sql.execute(
                        "INSERT INTO rx_artifacts (path, door, kind, day, nn, rec_id, status, driving_signal, drift_score, tldr, markdown, created_ms, updated_ms)
                         VALUES ($1, $2, 'no-change', $3, $4, $5, 'no-change', $6, $7, $8, $9, $10, $10)",
                        &[path.as_str().into(), door.name.as_str().into(), d.as_str().into(), nn.into(), prior.id.as_str().into(),
                          driving.as_str().into(), c.drift_score.into(), tldr.as_str().into(), md.as_str().into(), now.into()],
                    )
                    .await?;
                    Ok(())
                }) as Piece<'_>,
                Box::pin(async {
                    released = release_lock(sql, &door.name, claim).await?;
                    Ok(())
                }),
            ])
            .await?;
            if !released {
                return Err(StoreError::new("conflict", "the run lost its door lock (it took longer than the lease)"));
            }
            trace.push("4", step4, format!("no change: absorbed by {}; confirmation {path}", prior.id));
            return Ok(RunStart::Absorbed(RunResult {
                path,
                tldr,
                rec_id: Some(prior.id),
                status: "no-change".into(),
                trace: trace.steps(),
            }));
        }
        Dedup::New(why) => why,
    };
    trace.push("4", step4, format!("new rec: {why}"));
    // The frontmatter lists every open rec, however old.
    let priors = open_priors(sql, door, None).await?;
    let t = Instant::now();
    let fired = signals::fired(door, &s);
    trace.push("5", t, driving.clone());
    let evidence_query = door
        .component(&driving)
        .and_then(|c| c.evidence_query.clone())
        .unwrap_or_else(|| format!("{} {}", door.name, driving.replace('_', " ")));
    Ok(RunStart::NewRec(RunState {
        claim: claim.to_string(),
        door: json_text(door),
        signals: s.into(),
        aux: aux.into_iter().map(Into::into).collect(),
        composite: c.into(),
        driving,
        fired,
        prior_open_recs: priors.into_iter().map(|p| p.id).collect(),
        evidence_query,
        trace: trace.steps(),
    }))
}

/// The door's open recs, newest first, as their artifacts record them
/// (reconciled a moment ago, so the store's word); with `since_ms`, only
/// those created after it. An artifact without a store id is a rec only in
/// the markdown store (its id is the file's stem); elsewhere it is one the
/// external store refused, which exists nowhere to absorb a run.
async fn open_priors(sql: &Sql, door: &Door, since_ms: Option<i64>) -> std::result::Result<Vec<Prior>, StoreError> {
    let stored = if door.store == Store::Markdown { "" } else { "AND rec_id IS NOT NULL" };
    let rows = sql
        .query(
            &format!(
                "SELECT path, rec_id, created_ms, driving_signal, drift_score FROM rx_artifacts
                 WHERE door = $1 AND kind = 'rec' AND status = 'open' AND created_ms > $2 {stored}
                 ORDER BY created_ms DESC, nn DESC"
            ),
            &[door.name.as_str().into(), since_ms.unwrap_or(i64::MIN).into()],
        )
        .await?;
    rows.iter()
        .map(|r| {
            Ok(Prior {
                id: r.opt_text("rec_id")?.unwrap_or_else(|| stem(&r.text("path").unwrap_or_default())),
                created_ms: r.i64("created_ms")?,
                driving_signal: r.opt_text("driving_signal")?.unwrap_or_default(),
                drift_score: r.f64("drift_score")?,
            })
        })
        .collect()
}

fn stem(path: &str) -> String {
    path.rsplit('/').next().unwrap_or(path).trim_end_matches(".md").to_string()
}

async fn next_nn(sql: &Sql, door: &str, kind: &str, day: &str) -> std::result::Result<i64, StoreError> {
    let rows = sql
        .query(
            "SELECT COALESCE(MAX(nn), 0) AS n FROM rx_artifacts WHERE door = $1 AND kind = $2 AND day = $3",
            &[door.into(), kind.into(), day.into()],
        )
        .await?;
    Ok(rows.first().map_or(Ok(0), |r| r.i64("n"))? + 1)
}

/// Steps 8–10, then the door is free again.
pub async fn finish(r: RunDraft) -> Result<RunResult> {
    let sql = &mneme_store::open_sql().await?;
    let out = finish_run(sql, &r).await;
    match out {
        // The local and markdown stores freed the door in step 8's transaction.
        Ok((v, true)) => Ok(v),
        Ok((v, false)) => {
            release_lock(sql, &r.door, &r.claim).await?;
            Ok(v)
        }
        Err(e) => {
            release_lock(sql, &r.door, &r.claim).await?;
            Err(e)
        }
    }
}

/// Steps 8–10; `true` when the door was released in step 8's transaction.
async fn finish_run(sql: &Sql, r: &RunDraft) -> Result<(RunResult, bool)> {
    let door = load_door(sql, &r.door).await?;
    // D-008 holds at the store's door too: nothing without a counter-thesis.
    artifact::check_counter_thesis(&r.markdown).map_err(|e| Fail::new("malformed-artifact", e))?;
    // Step 9's credential, checked before step 8 writes anything.
    let token = match door.store {
        Store::Http { .. } => Some(required_variable("rx_store_token").await?),
        _ => None,
    };
    let mut trace = Trace::default();
    let now = r.now_ms;
    let d = day(now);
    let rec_id = new_id();
    let fired = json_text(&r.fired);
    let t8 = Instant::now();
    // Step 8, and for the local store 9 and 10, in one transaction.
    let (path, md) = sql
        .transaction(async |sql: &Sql| {
            let held = sql
                .query("SELECT 1 AS held FROM rx_locks WHERE door = $1 AND claim = $2", &[door.name.as_str().into(), r.claim.as_str().into()])
                .await?;
            if held.is_empty() {
                return Err(StoreError::new("conflict", "the run lost its door lock (it took longer than the lease)"));
            }
            let nn = next_nn(sql, &door.name, "rec", &d).await?;
            let path = artifact::path(&door.title, &d, nn);
            let md = artifact::patch_frontmatter(&r.markdown, "status", &json!("open"));
            // The id is known now for this database's store (the rec's) and
            // the markdown store (the file's stem); an external store's
            // comes in step 10.
            let (id, md) = match &door.store {
                Store::Local => (Value::from(rec_id.as_str()), artifact::patch_frontmatter(&md, "id", &json!(rec_id))),
                Store::Markdown => (Value::Null, artifact::patch_frontmatter(&md, "id", &json!(stem(&path)))),
                Store::Http { .. } => (Value::Null, md),
            };
            sql.execute(
                "INSERT INTO rx_artifacts (path, door, kind, day, nn, rec_id, status, driving_signal, drift_score, tldr, markdown, created_ms, updated_ms)
                 VALUES ($1, $2, 'rec', $3, $4, $5, 'open', $6, $7, $8, $9, $10, $10)",
                &[path.as_str().into(), door.name.as_str().into(), d.as_str().into(), nn.into(), id,
                  r.driving.as_str().into(), r.drift_score.into(), r.tldr.as_str().into(), md.as_str().into(), now.into()],
            )
            .await?;
            if !matches!(door.store, Store::Http { .. }) {
                release_lock(sql, &door.name, &r.claim).await?;
            }
            if door.store == Store::Local {
                let rec = NewRec {
                    id: &rec_id,
                    door: &door.name,
                    drift_score: r.drift_score,
                    confidence: r.confidence,
                    driving: Some(&r.driving),
                    tldr: &r.tldr,
                    body: &md,
                    path: Some(&path),
                    fired: &fired,
                    source_refs: &r.source_refs,
                    drift_breakdown: &r.drift_breakdown,
                    confidence_breakdown: &r.confidence_breakdown,
                    origin: "pipeline",
                    now_ms: r.now_ms,
                };
                insert_rec(sql, &rec).await?;
            }
            Ok((path, md))
        })
        .await?;
    trace.push("8", t8, path.clone());
    let t9 = Instant::now();
    let id = match &door.store {
        Store::Local => {
            trace.push("9", t9, format!("rx_recs {rec_id} (same transaction as step 8)"));
            trace.push("10", Instant::now(), format!("id {rec_id} (same transaction as step 8)"));
            Some(rec_id)
        }
        Store::Markdown => {
            trace.push("9", t9, "skipped: the markdown is this door's only store");
            trace.push("10", Instant::now(), "skipped: no store id");
            None
        }
        Store::Http { url } => {
            let token = token.unwrap_or_default();
            let body = json!({
                "door": door.name, "drift_score": r.drift_score, "confidence": r.confidence, "tldr": r.tldr,
                "body_md": md, "rx_md_path": path, "driving_signal": r.driving, "signals_fired": r.fired,
                "source_refs": document(&r.source_refs), "drift_breakdown": document(&r.drift_breakdown),
                "confidence_breakdown": document(&r.confidence_breakdown), "created_at": timestamp(now as u64),
            });
            let sent = http_json(
                "POST",
                &format!("{}/v1/rx/recs", url.trim_end_matches('/')),
                &[("x-rx-ingest-token", token)],
                Some(body.to_string()),
            )
            .await;
            let remote_id = match sent {
                Ok((201 | 200, v)) => v["id"].as_str().map(String::from),
                Ok((status, v)) => {
                    trace.push(
                        "9",
                        t9,
                        format!(
                            "the external store refused: {status} {}",
                            v["error"]["message"].as_str().unwrap_or("")
                        ),
                    );
                    None
                }
                Err(e) => {
                    trace.push("9", t9, format!("the external store failed: {}", e.message));
                    None
                }
            };
            let Some(remote_id) = remote_id else {
                return Err(Fail::new(
                    "upstream",
                    format!(
                        "the artifact {path} was written but the external rec store did not take it; it stays in the vault without a store id"
                    ),
                ));
            };
            trace.push("9", t9, format!("external store id {remote_id}"));
            let t10 = Instant::now();
            let patched = artifact::patch_frontmatter(&md, "id", &json!(remote_id));
            sql.execute(
                "UPDATE rx_artifacts SET rec_id = $1, markdown = $2, updated_ms = $3 WHERE path = $4",
                &[remote_id.as_str().into(), patched.into(), now.into(), path.as_str().into()],
            )
            .await?;
            trace.push("10", t10, format!("id {remote_id}"));
            Some(remote_id)
        }
    };
    let released = !matches!(door.store, Store::Http { .. });
    let done = RunResult { path, tldr: r.tldr.clone(), rec_id: id, status: "open".into(), trace: trace.steps() };
    Ok((done, released))
}

/// A rec document's JSON, for the external store's body.
fn document(text: &str) -> J {
    serde_json::from_str(text).unwrap_or(J::Null)
}
