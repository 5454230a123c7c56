//! Reminders: each one due becomes a `reminder` event on `/events`.

use mneme_store::{Sql, Stores, Value};
use mneme_substrate::events::{publish_with, publishing};
use mneme_substrate::{Result, principal_zone};
use mneme_time::Recurrence;
use serde_json::json;

/// Fires every reminder due by `now_ms`: one `reminder` event each, then the
/// reminder is marked fired or moved to its next occurrence, all in one
/// transaction so a reminder fires exactly once even with two ticks at once.
/// A recurrence's next time is reckoned in the principal's zone, so a daily
/// 09:00 stays 09:00 across a daylight-saving change.
pub async fn fire(now_ms: u64) -> Result<u32> {
    let zone = principal_zone().await?;
    let stores = Stores::open().await?;
    let fired = publishing(&stores.sql, async |sql: &Sql| {
        let due = sql
            .query(
                "SELECT id, message, due_ms, recurrence, item_type FROM scheduled_items WHERE status = 'pending' AND due_ms <= $1 ORDER BY due_ms",
                &[Value::Int(now_ms as i64)],
            )
            .await?;
        let mut fired = 0;
        for r in &due {
            let id = r.text("id")?;
            let due_ms = r.i64("due_ms")?;
            let recurrence = r.opt_text("recurrence")?;
            let claimed = match recurrence.as_deref().and_then(Recurrence::parse) {
                Some(every) => {
                    let mut next = every.next(due_ms, &zone);
                    while next <= now_ms as i64 {
                        next = every.next(next, &zone);
                    }
                    sql.execute("UPDATE scheduled_items SET due_ms = $2 WHERE id = $1 AND status = 'pending' AND due_ms = $3", &[id.as_str().into(), Value::Int(next), Value::Int(due_ms)]).await?
                }
                None => sql.execute("UPDATE scheduled_items SET status = 'fired' WHERE id = $1 AND status = 'pending'", &[id.as_str().into()]).await?,
            };
            if claimed == 1 {
                let payload = json!({"reminder_id": id, "message": r.text("message")?, "due_ms": due_ms, "item_type": r.text("item_type")?, "recurrence": recurrence});
                publish_with(sql, "reminder", &payload, now_ms).await?;
                fired += 1;
            }
        }
        Ok(fired)
    })
    .await?;
    Ok(fired)
}
