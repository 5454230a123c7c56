//! Doors, as configuration, and the principal's observations for them.

use mneme_rx::door::{Door, SignalSource, observation_time, valid_name};
use mneme_store::{Sql, Value};
use mneme_substrate::{Fail, Result, json_text, random_hex};
use serde_json::Value as J;

pub async fn load_door(sql: &Sql, name: &str) -> Result<Door> {
    if !valid_name(name) {
        return Err(Fail::new("not-found", "no such door"));
    }
    let rows = sql.query("SELECT config FROM rx_doors WHERE name = $1", &[name.into()]).await?;
    let Some(row) = rows.first() else {
        return Err(Fail::new("not-found", format!("no door `{name}` is configured")));
    };
    let config: J = serde_json::from_str(&row.text("config")?).map_err(|e| Fail::new("internal", e.to_string()))?;
    Door::parse(name, &config).map_err(|e| Fail::new("config", format!("door `{name}`: {e}")))
}

/// Every door's configuration, by name.
pub async fn doors() -> Result<Vec<String>> {
    let sql = mneme_store::open_sql().await?;
    let rows = sql.query("SELECT config FROM rx_doors ORDER BY name", &[]).await?;
    Ok(rows.iter().filter_map(|r| r.text("config").ok()).collect())
}

/// Adds or replaces a door. A SQL source must already answer with the
/// signal columns; the door's weights are what its views report.
pub async fn put_door(name: &str, config: &str, now_ms: i64) -> Result<String> {
    let config: J = serde_json::from_str(config).map_err(|e| Fail::invalid(format!("a door's configuration: {e}")))?;
    let door = Door::parse(name, &config).map_err(Fail::invalid)?;
    let sql = &mneme_store::open_sql().await?;
    if let SignalSource::Sql { view, acute_view } = &door.signals {
        sql.query(&format!("SELECT component, raw, normalised, weight, contribution FROM {view} WHERE 1 = 0"), &[])
            .await
            .map_err(|e| {
                Fail::invalid(format!("view `{view}` does not answer with the signal columns: {}", e.message))
            })?;
        if let Some(a) = acute_view {
            sql.query(&format!("SELECT name, at_ms FROM {a} WHERE 1 = 0"), &[])
                .await
                .map_err(|e| Fail::invalid(format!("view `{a}` does not answer with (name, at_ms): {}", e.message)))?;
        }
    }
    for a in &door.auxiliary {
        sql.query(&format!("SELECT name, raw, normalised FROM {} WHERE 1 = 0", a.view), &[]).await.map_err(|e| {
            Fail::invalid(format!("view `{}` does not answer with (name, raw, normalised): {}", a.view, e.message))
        })?;
    }
    let config = serde_json::to_string(&door).map_err(|e| Fail::new("internal", e.to_string()))?;
    sql.transaction(async |sql: &Sql| {
        sql.execute(
            "INSERT INTO rx_doors (name, config, updated_ms) VALUES ($1, $2, $3)
             ON CONFLICT (name) DO UPDATE SET config = excluded.config, updated_ms = excluded.updated_ms",
            &[door.name.as_str().into(), config.as_str().into(), now_ms.into()],
        )
        .await?;
        sql.execute("DELETE FROM rx_weights WHERE door = $1", &[door.name.as_str().into()]).await?;
        for c in &door.components {
            sql.execute(
                "INSERT INTO rx_weights (door, component, weight) VALUES ($1, $2, $3)",
                &[door.name.as_str().into(), c.name.as_str().into(), c.weight.into()],
            )
            .await?;
        }
        Ok(())
    })
    .await?;
    Ok(config)
}

/// Records observations, all or none.
pub async fn observe(door: &str, items: &[String], now_ms: i64) -> Result<Vec<String>> {
    let sql = &mneme_store::open_sql().await?;
    let door = load_door(sql, door).await?;
    let mut rows = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let at = |e: String| Fail::invalid(if items.len() > 1 { format!("observation {i}: {e}") } else { e });
        let item: serde_json::Map<String, J> =
            serde_json::from_str(item).map_err(|_| at("an observation is a JSON object with a `kind`".into()))?;
        let Some(kind) = item.get("kind").and_then(J::as_str) else {
            return Err(at("`kind` is required".into()));
        };
        let (data, key) = door.observation(kind, &item).map_err(at)?;
        let at_ms = observation_time(item.get("at"), now_ms).map_err(at)?;
        rows.push((format!("ob-{}", random_hex(8)), kind.to_string(), key, at_ms, json_text(&data)));
    }
    sql.transaction(async |sql: &Sql| {
        for (id, kind, key, at_ms, data) in &rows {
            sql.execute(
                "INSERT INTO rx_observations (id, door, kind, key, at_ms, data, created_ms) VALUES ($1, $2, $3, $4, $5, $6, $7)",
                &[
                    id.as_str().into(),
                    door.name.as_str().into(),
                    kind.as_str().into(),
                    key.clone().map_or(Value::Null, Value::from),
                    (*at_ms).into(),
                    data.as_str().into(),
                    now_ms.into(),
                ],
            )
            .await?;
        }
        Ok(())
    })
    .await?;
    Ok(rows.into_iter().map(|r| r.0).collect())
}
