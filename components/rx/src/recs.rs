//! The rec store: recs as the principal and the vault see them, their
//! lifecycle (disposition, snooze, revival), recs pushed by external
//! generators, and the vault's artifacts.

use crate::doors::load_door;
use mneme_rx::door::valid_name;
use mneme_rx::lifecycle::{Disposition, Status};
use mneme_rx::{artifact, lifecycle};
use mneme_store::{Row, Sql, StoreError, Value};
use mneme_substrate::{Fail, Result, new_id};
use mneme_time::calendar::utc_timestamp as timestamp;
use mneme_types::VaultFile;
use mneme_types::rx::{ArtifactView, PushedRec, RecArtifact, RecView};
use serde_json::json;

const REC_COLUMNS: &str = "id, door, status, drift_score, confidence, driving_signal, tldr, rx_md_path, signals_fired, \
    source_refs, drift_breakdown, confidence_breakdown, origin, created_ms, updated_ms, acted_disposition, acted_ms, \
    subjective_fit_1_5, outcome_note, snoozed_until_ms, snooze_count, revived_ms";

fn rec_view(r: &Row, now: i64) -> std::result::Result<RecView, StoreError> {
    let status = Status::parse(&r.text("status")?)
        .ok_or_else(|| StoreError::new("internal", "a stored rec has an invalid status"))?;
    let created = r.i64("created_ms")?;
    let until = r.opt_i64("snoozed_until_ms")?;
    let count = r.i64("snooze_count")?;
    let id = r.text("id")?;
    let ts = |ms: Option<i64>| ms.map(|m| timestamp(m as u64));
    Ok(RecView {
        id,
        door: r.text("door")?,
        status: status.into(),
        drift_score: r.f64("drift_score")?,
        confidence: r.i64("confidence")?,
        driving_signal: r.opt_text("driving_signal")?,
        tldr: r.text("tldr")?,
        rx_md_path: r.opt_text("rx_md_path")?,
        signals_fired: r.text("signals_fired")?,
        source_refs: r.text("source_refs")?,
        drift_breakdown: r.text("drift_breakdown")?,
        confidence_breakdown: r.text("confidence_breakdown")?,
        origin: r.text("origin")?,
        created_at: timestamp(created as u64),
        updated_at: timestamp(r.i64("updated_ms")? as u64),
        acted_disposition: r.opt_text("acted_disposition")?,
        acted_at: ts(r.opt_i64("acted_ms")?),
        subjective_fit: r.opt_i64("subjective_fit_1_5")?,
        outcome_note: r.opt_text("outcome_note")?,
        snoozed_until: ts(until),
        snooze_count: count,
        flags: lifecycle::flags(status, count, created, until, r.opt_i64("revived_ms")?, now).into(),
        body_md: None,
    })
}

/// Recs ordered open, snoozed, acted, dismissed; newest first in each.
pub async fn list_recs(door: Option<String>, status: Option<Status>, limit: u32, now_ms: i64) -> Result<Vec<RecView>> {
    let sql = mneme_store::open_sql().await?;
    let rows = sql
        .query(
            &format!(
                "SELECT {REC_COLUMNS} FROM rx_recs WHERE ($1 = '' OR door = $1) AND ($2 = '' OR status = $2)
                 ORDER BY CASE status WHEN 'open' THEN 0 WHEN 'snoozed' THEN 1 WHEN 'acted' THEN 2 ELSE 3 END, created_ms DESC, id
                 LIMIT $3"
            ),
            &[
                door.unwrap_or_default().into(),
                status.map_or("", Status::as_str).into(),
                Value::Int(i64::from(limit)),
            ],
        )
        .await?;
    Ok(rows.iter().map(|row| rec_view(row, now_ms)).collect::<std::result::Result<Vec<_>, _>>()?)
}

async fn rec_row(sql: &Sql, id: &str) -> Result<Row> {
    let rows = sql.query(&format!("SELECT {REC_COLUMNS}, body_md FROM rx_recs WHERE id = $1"), &[id.into()]).await?;
    rows.into_iter().next().ok_or_else(|| Fail::new("not-found", format!("no rec `{id}`")))
}

/// One rec, with its markdown body.
pub async fn get_rec(id: &str, now_ms: i64) -> Result<RecView> {
    let sql = mneme_store::open_sql().await?;
    let row = rec_row(&sql, id).await?;
    let mut v = rec_view(&row, now_ms)?;
    v.body_md = Some(row.text("body_md")?);
    Ok(v)
}

/// A rec's artifact as the vault holds it (its frontmatter reconciled at
/// the door's last run), or the pushed body of a rec with no artifact.
pub async fn rec_markdown(id: &str) -> Result<RecArtifact> {
    let sql = &mneme_store::open_sql().await?;
    let a =
        sql.query("SELECT path, markdown FROM rx_artifacts WHERE rec_id = $1 AND kind = 'rec'", &[id.into()]).await?;
    if let Some(a) = a.first() {
        return Ok(RecArtifact { path: Some(a.text("path")?), markdown: a.text("markdown")? });
    }
    let row = rec_row(sql, id).await?;
    Ok(RecArtifact { path: row.opt_text("rx_md_path")?, markdown: row.text("body_md")? })
}

/// `POST /v1/rx/recs`: a rec from an external generator (or another
/// Mneme whose door stores here). D-008 is checked on its body.
pub async fn ingest_rec(r: PushedRec) -> Result<String> {
    if !valid_name(&r.door) {
        return Err(Fail::invalid("`door`: lowercase letters, digits and -"));
    }
    if !(0.0..=1.0).contains(&r.drift_score) || !(0..=100).contains(&r.confidence) {
        return Err(Fail::invalid("`drift_score` is in [0, 1] and `confidence` in 0–100"));
    }
    artifact::check_counter_thesis(&r.body_md).map_err(|e| Fail::new("malformed-artifact", e))?;
    let sql = mneme_store::open_sql().await?;
    let id = new_id();
    // What the generator left out is stored as JSON null, as before.
    let doc = |d: &Option<String>| d.clone().unwrap_or_else(|| "null".into());
    let (fired, refs, drift, conf) =
        (doc(&r.signals_fired), doc(&r.source_refs), doc(&r.drift_breakdown), doc(&r.confidence_breakdown));
    let rec = NewRec {
        id: &id,
        door: &r.door,
        drift_score: r.drift_score,
        confidence: r.confidence,
        driving: r.driving_signal.as_deref(),
        tldr: &r.tldr,
        body: &r.body_md,
        path: r.rx_md_path.as_deref(),
        fired: &fired,
        source_refs: &refs,
        drift_breakdown: &drift,
        confidence_breakdown: &conf,
        origin: "ingest",
        now_ms: r.now_ms,
    };
    insert_rec(&sql, &rec).await?;
    Ok(id)
}

fn refused(e: lifecycle::Refused) -> Fail {
    Fail::new(e.code(), e.message())
}

/// Applies a change to a rec only if nobody changed it in between.
async fn change(
    sql: &Sql,
    id: &str,
    f: impl Fn(Status, i64) -> Result<(String, Vec<Value>)>,
    now: i64,
) -> Result<RecView> {
    for _ in 0..5 {
        let row = rec_row(sql, id).await?;
        let status =
            Status::parse(&row.text("status")?).ok_or_else(|| Fail::new("internal", "invalid stored status"))?;
        let count = row.i64("snooze_count")?;
        let (set, mut params) = f(status, count)?;
        let n = params.len();
        params.extend([id.into(), status.as_str().into(), count.into(), now.into()]);
        let changed = sql
            .execute(
                &format!(
                    "UPDATE rx_recs SET {set}, updated_ms = ${} WHERE id = ${} AND status = ${} AND snooze_count = ${}",
                    n + 4,
                    n + 1,
                    n + 2,
                    n + 3
                ),
                &params,
            )
            .await?;
        if changed == 1 {
            return Ok(rec_view(&rec_row(sql, id).await?, now)?);
        }
    }
    Err(Fail::new("conflict", "the rec kept changing; try again"))
}

/// How the principal settled a rec.
pub struct Disposed {
    pub disposition: Disposition,
    pub subjective_fit_1_5: Option<i64>,
    pub outcome_note: Option<String>,
    pub now_ms: i64,
}

pub async fn dispose(id: &str, r: Disposed) -> Result<RecView> {
    let d = r.disposition;
    let sql = mneme_store::open_sql().await?;
    change(
        &sql,
        id,
        |status, _| {
            let next = lifecycle::dispose(status, d, r.subjective_fit_1_5).map_err(refused)?;
            Ok((
                "status = $1, acted_disposition = $2, acted_ms = $3, subjective_fit_1_5 = $4, outcome_note = $5".into(),
                vec![
                    next.as_str().into(),
                    d.as_str().into(),
                    r.now_ms.into(),
                    r.subjective_fit_1_5.map_or(Value::Null, Value::from),
                    r.outcome_note.clone().map_or(Value::Null, Value::from),
                ],
            ))
        },
        r.now_ms,
    )
    .await
}

pub async fn snooze(id: &str, days: i64, now_ms: i64) -> Result<RecView> {
    let sql = mneme_store::open_sql().await?;
    change(
        &sql,
        id,
        |status, count| {
            let (until, count) = lifecycle::snooze(status, count, days, now_ms).map_err(refused)?;
            Ok((
                "status = 'snoozed', snoozed_until_ms = $1, snooze_count = $2".into(),
                vec![until.into(), count.into()],
            ))
        },
        now_ms,
    )
    .await
}

/// Every artifact, for the vault archive. A rec
/// artifact of this database's store shows its rec's status as it is now:
/// the reconciler's patch, applied on read (D-CL1); the stored artifact
/// still changes at the door's next run.
pub async fn vault() -> Result<Vec<VaultFile>> {
    let sql = mneme_store::open_sql().await?;
    let rows = sql
        .query(
            "SELECT a.path, a.markdown, a.status, a.updated_ms, r.status AS rec_status, r.updated_ms AS rec_updated_ms
             FROM rx_artifacts a LEFT JOIN rx_recs r ON a.kind = 'rec' AND r.id = a.rec_id ORDER BY a.path",
            &[],
        )
        .await?;
    let files = rows
        .iter()
        .map(|r| {
            let (mut md, mut updated, shown) = (r.text("markdown")?, r.i64("updated_ms")?, r.text("status")?);
            if let Some(now) = r.opt_text("rec_status")?.filter(|s| *s != shown) {
                md = artifact::patch_frontmatter(&md, "status", &json!(now));
                updated = updated.max(r.i64("rec_updated_ms")?);
            }
            Ok(VaultFile { path: r.text("path")?, content: md, mtime_secs: (updated / 1000).max(0) as u64 })
        })
        .collect::<std::result::Result<Vec<_>, StoreError>>()?;
    Ok(files)
}

/// The artifacts of a door, newest first (the vault's folder).
pub async fn artifacts(door: &str) -> Result<Vec<ArtifactView>> {
    let sql = mneme_store::open_sql().await?;
    load_door(&sql, door).await?;
    let rows = sql
        .query(
            "SELECT path, kind, rec_id, status, driving_signal, drift_score, tldr, created_ms FROM rx_artifacts
             WHERE door = $1 ORDER BY created_ms DESC, path DESC LIMIT 200",
            &[door.into()],
        )
        .await?;
    let items = rows
        .iter()
        .map(|a| {
            Ok(ArtifactView {
                path: a.text("path")?,
                kind: a.text("kind")?,
                rec_id: a.opt_text("rec_id")?,
                status: a.text("status")?,
                driving_signal: a.opt_text("driving_signal")?,
                drift_score: a.f64("drift_score").ok(),
                tldr: a.text("tldr")?,
                created_at: timestamp(a.i64("created_ms")? as u64),
            })
        })
        .collect::<std::result::Result<Vec<_>, StoreError>>()?;
    Ok(items)
}

/// A rec row as it is first written (status `open`).
pub struct NewRec<'a> {
    pub id: &'a str,
    pub door: &'a str,
    pub drift_score: f64,
    pub confidence: i64,
    pub driving: Option<&'a str>,
    pub tldr: &'a str,
    pub body: &'a str,
    pub path: Option<&'a str>,
    /// JSON text, as stored.
    pub fired: &'a str,
    pub source_refs: &'a str,
    pub drift_breakdown: &'a str,
    pub confidence_breakdown: &'a str,
    pub origin: &'a str,
    pub now_ms: i64,
}

pub async fn insert_rec(sql: &Sql, r: &NewRec<'_>) -> std::result::Result<(), StoreError> {
    let opt = |v: Option<&str>| v.map_or(Value::Null, Value::from);
    sql.execute(
        "INSERT INTO rx_recs (id, door, status, drift_score, confidence, driving_signal, tldr, body_md, rx_md_path,
            signals_fired, source_refs, drift_breakdown, confidence_breakdown, origin, created_ms, updated_ms, snooze_count)
         VALUES ($1, $2, 'open', $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $14, 0)",
        &[
            r.id.into(),
            r.door.into(),
            r.drift_score.into(),
            r.confidence.into(),
            opt(r.driving),
            r.tldr.into(),
            r.body.into(),
            opt(r.path),
            r.fired.into(),
            r.source_refs.into(),
            r.drift_breakdown.into(),
            r.confidence_breakdown.into(),
            r.origin.into(),
            r.now_ms.into(),
        ],
    )
    .await?;
    Ok(())
}
