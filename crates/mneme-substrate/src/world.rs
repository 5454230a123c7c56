//! The world state around the principal (D-C13), which the context and
//! the `introspect` skill both show.

use mneme_conversation::context::{self, FocusSource};
use mneme_store::{Sql, Value};

use crate::Result;

/// World state (D-C13): what is in motion around the principal: the focus
/// session, reminders due in the next 24 h and active persistent tasks.
/// Empty when nothing is, which makes world_score 0.
pub async fn world_state(sql: &Sql, focus: Option<&context::Focus>, now: u64) -> Result<String> {
    let mut lines = Vec::new();
    if let Some(f) = focus {
        let how = if f.source == FocusSource::Explicit { "set by the principal" } else { "inferred" };
        lines.push(format!("- [FOCUS] {} ({how})", f.description));
    }
    // Reminders due within 24 h and active tasks, in one round trip.
    let rows = sql
        .query(
            "SELECT kind, text, n, c FROM (SELECT 'reminder' AS kind, message AS text, due_ms AS n, 0.0 AS c FROM scheduled_items \
             WHERE status = 'pending' AND due_ms <= $1 ORDER BY due_ms LIMIT 3) AS r \
             UNION ALL SELECT kind, text, n, c FROM (SELECT 'task' AS kind, goal AS text, priority AS n, coverage AS c FROM persistent_tasks \
             WHERE status IN ('accepted', 'in_progress') ORDER BY priority DESC, created_ms LIMIT 3) AS t",
            &[Value::Int((now + 24 * 3600 * 1000) as i64)],
        )
        .await?;
    for r in &rows {
        if r.text("kind")? == "reminder" {
            let mins = (r.i64("n")? - now as i64) / 60_000;
            lines.push(format!("- [REMINDER] in {mins} min: {}", r.text("text")?));
        } else {
            lines.push(format!("- [TASK] {} ({:.0}% covered)", r.text("text")?, r.f64("c")? * 100.0));
        }
    }
    Ok(lines.join("\n"))
}
