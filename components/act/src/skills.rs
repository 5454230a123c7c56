//! Path C step 4b (design 002 §4b): dispatch of the innate actions against
//! the stores, and the `cortex_iterations` log. Each action is real: it
//! reads or writes what the rest of the pipeline reads.

use std::time::Duration;

use futures::future::{Either, select};
use mneme_conversation::act::{self, Action, Termination};
use mneme_conversation::context::{Focus, FocusSource};
use mneme_conversation::generate::ActResult;
use mneme_store::{Sql, Stores, Value};
use serde_json::{Map, Value as J, json};

use mneme_knowledge::fusion::Mode;
use mneme_substrate::{Fail, Result, graph, in_list, json_text, records, search, wm};

/// A plan to run.
#[derive(Debug)]
pub struct DispatchRequest {
    pub actions: Vec<Action>,
    pub thread_id: String,
    pub topic: String,
    pub now_ms: u64,
    pub per_action_timeout_ms: u64,
}

/// Runs each action in order, each under the per-action timeout.
pub async fn dispatch(req: DispatchRequest) -> Result<Vec<ActResult>> {
    let stores = Stores::open().await?;
    let mut out = Vec::with_capacity(req.actions.len());
    for a in &req.actions {
        let started = mneme_time::clock::system_ms();
        let run = Box::pin(run_one(&stores, a, &req));
        let timeout = Box::pin(spin_sdk::time::sleep(Duration::from_millis(req.per_action_timeout_ms.max(1))));
        let (status, result) = match select(run, timeout).await {
            Either::Left((Ok(text), _)) => ("success", text),
            Either::Left((Err(e), _)) => ("error", format!("{}: {}", e.code, e.message)),
            Either::Right(_) => ("timeout", format!("no result within {} ms", req.per_action_timeout_ms)),
        };
        let confidence = act::result_confidence(&a.kind, status, &result);
        out.push(ActResult {
            action_type: a.kind.clone(),
            status: status.into(),
            result,
            execution_time_ms: mneme_time::clock::system_ms().saturating_sub(started),
            confidence,
        });
    }
    Ok(out)
}

fn s<'a>(p: &'a Map<String, J>, k: &str) -> Option<&'a str> {
    p.get(k).and_then(J::as_str).map(str::trim).filter(|v| !v.is_empty())
}

async fn run_one(stores: &Stores, a: &Action, req: &DispatchRequest) -> Result<String> {
    let p = &a.params;
    match a.kind.as_str() {
        "recall" => recall(stores, p, req).await,
        "memorize" => memorize(stores, p, req).await,
        "introspect" => introspect(stores, req).await,
        "associate" => associate(stores, p).await,
        "schedule" => schedule(&stores.sql, p, req.now_ms).await,
        "list" => list(&stores.sql, p, req.now_ms).await,
        "focus" => focus(stores, p, req).await,
        "persistent_task" => persistent_task(&stores.sql, p, req.now_ms).await,
        other => Err(Fail::new("unknown-action", format!("no action named `{other}`"))),
    }
}

/// A recall hit: where it came from, the text, and how sure memory is.
struct Hit {
    layer: &'static str,
    text: String,
    confidence: f64,
}

async fn recall(stores: &Stores, p: &Map<String, J>, req: &DispatchRequest) -> Result<String> {
    let query = s(p, "query").ok_or_else(|| Fail::invalid("recall needs a `query`"))?;
    let limit = p.get("limit").and_then(J::as_u64).unwrap_or(3).clamp(1, 10) as usize;
    let q = query.to_lowercase();
    let broad = ["me", "everything", "what do you know", "about me", "anything"]
        .iter()
        .any(|b| q == *b || q.contains("what do you know"));
    let keys = mneme_conversation::generate::keywords(query);
    let matches = |t: &str| {
        let l = t.to_lowercase();
        broad || l.contains(&q) || (!keys.is_empty() && keys.iter().any(|k| l.contains(k.as_str())))
    };
    let mut hits: Vec<Hit> = Vec::new();
    for t in wm::read(&stores.sql, &req.thread_id, req.now_ms).await? {
        if t.role == "user" && matches(&t.content) {
            hits.push(Hit { layer: "working_memory", text: t.content, confidence: 0.8 });
        }
    }
    for f in records::facts(&stores.kv, &req.topic, req.now_ms).await? {
        if matches(&f.key) || matches(&f.value) {
            hits.push(Hit { layer: "fact", text: format!("{} = {}", f.key, f.value), confidence: f.confidence });
        }
    }
    for g in records::gists(&stores.kv, &req.topic, req.now_ms).await? {
        if matches(&g.content) {
            hits.push(Hit { layer: "gist", text: g.content, confidence: g.confidence as f64 / 10.0 });
        }
    }
    let traits = stores
        .sql
        .query("SELECT key, value, confidence FROM user_traits ORDER BY updated_ms DESC LIMIT 15", &[])
        .await?;
    for r in &traits {
        let (k, v) = (r.text("key")?, r.text("value")?);
        if broad || matches(&k) || matches(&v) {
            hits.push(Hit { layer: "trait", text: format!("{k}: {v}"), confidence: r.f64("confidence")? });
        }
    }
    hits.extend(recall_episodes(&stores.sql, query, broad, req.now_ms).await?);
    hits.extend(recall_concepts(&stores.sql, query).await?);
    // Past exchanges beyond working memory, any topic: one query per keyword.
    for k in keys.iter().take(3) {
        let rows = stores
            .sql
            .query(
                "SELECT prompt FROM exchanges WHERE lower(prompt) LIKE $1 ORDER BY created_ms DESC LIMIT 5",
                &[format!("%{}%", k.replace(['%', '_'], "")).into()],
            )
            .await?;
        for r in &rows {
            let text = r.text("prompt")?;
            if !hits.iter().any(|h| h.text == text) {
                hits.push(Hit { layer: "exchange", text, confidence: 0.6 });
            }
        }
    }
    hits.sort_by(|a, b| b.confidence.total_cmp(&a.confidence));
    let confident = hits.iter().filter(|h| h.confidence >= 0.5).count();
    records::set_fok(&stores.kv, &req.topic, confident as f64).await?;
    let cap = if broad { 15 } else { limit };
    if hits.is_empty() {
        return Ok(format!("nothing found for \"{query}\""));
    }
    let label = |c: f64| {
        if c >= 0.7 {
            "well established"
        } else if c >= 0.4 {
            "likely"
        } else {
            "uncertain"
        }
    };
    Ok(hits
        .iter()
        .take(cap)
        .map(|h| format!("[{}, {}] {}", h.layer, label(h.confidence), h.text))
        .collect::<Vec<_>>()
        .join("; "))
}

/// An episode is recalled when the query's words hit its text or its
/// embedding is at least this close.
const EPISODE_RECALL_COSINE: f32 = 0.35;

/// Episodes consolidation built (D-B4): the search index's hybrid
/// candidates on the query (the 3 most salient recent ones for a broad
/// query); their confidence grows with salience, and each recall counts as
/// an access.
async fn recall_episodes(sql: &Sql, query: &str, broad: bool, now: u64) -> Result<Vec<Hit>> {
    let ids: Vec<String> = if broad {
        sql.query("SELECT id FROM episodes ORDER BY salience DESC, created_ms DESC LIMIT 3", &[])
            .await?
            .iter()
            .map(|r| r.text("id"))
            .collect::<std::result::Result<_, _>>()?
    } else {
        let e = mneme_substrate::embed(query)?;
        let found = search::candidates(sql, &[graph::CORPUS], query, &e, Mode::Hybrid).await?;
        found
            .fused
            .iter()
            .filter_map(|(seq, _)| {
                let (id, cos) = found.get(*seq)?;
                (found.text.contains(seq) || *cos >= EPISODE_RECALL_COSINE).then(|| id.clone())
            })
            .take(3)
            .collect()
    };
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let params: Vec<Value> = ids.iter().map(|i| Value::from(i.as_str())).collect();
    let rows = sql
        .query(
            &format!("SELECT id, gist, outcome, salience FROM episodes WHERE id IN ({})", in_list(1, ids.len())),
            &params,
        )
        .await?;
    let mut params = params;
    params.push(Value::Int(now as i64));
    sql.execute(
        &format!(
            "UPDATE episodes SET access_count = access_count + 1, last_accessed_ms = ${} WHERE id IN ({})",
            ids.len() + 1,
            in_list(1, ids.len())
        ),
        &params,
    )
    .await?;
    rows.iter()
        .map(|r| {
            let (gist, outcome) = (r.text("gist")?, r.text("outcome")?);
            let text = if outcome.is_empty() { gist } else { format!("{gist} (outcome: {outcome})") };
            Ok(Hit { layer: "episode", text, confidence: 0.5 + 0.04 * r.i64("salience")? as f64 })
        })
        .collect()
}

/// Concepts the query names (whole words), strongest first.
async fn recall_concepts(sql: &Sql, query: &str) -> Result<Vec<Hit>> {
    Ok(graph::named_concepts(sql, query, 5)
        .await?
        .into_iter()
        .map(|(name, definition, strength)| Hit {
            layer: "concept",
            text: format!("{name}: {definition}"),
            confidence: (0.4 + strength / 20.0).min(0.9),
        })
        .collect())
}

async fn memorize(stores: &Stores, p: &Map<String, J>, req: &DispatchRequest) -> Result<String> {
    let mut stored = Vec::new();
    for f in p.get("facts").and_then(J::as_array).into_iter().flatten() {
        let (Some(k), Some(v)) = (f.get("key").and_then(J::as_str), f.get("value").and_then(J::as_str)) else {
            continue;
        };
        if k.trim().is_empty() || v.trim().is_empty() {
            continue;
        }
        let c = f.get("confidence").and_then(J::as_f64).unwrap_or(0.7);
        if records::store_fact(&stores.kv, &req.topic, k, v.trim(), c, "memorize", req.now_ms).await? {
            stored.push(format!("fact {k}"));
        }
    }
    for g in p.get("gists").and_then(J::as_array).into_iter().flatten() {
        let Some(content) = g.get("content").and_then(J::as_str).filter(|c| !c.trim().is_empty()) else { continue };
        let kind = g.get("type").and_then(J::as_str).unwrap_or("general");
        let c = g.get("confidence").and_then(J::as_u64).unwrap_or(7).min(10) as u8;
        let outcome = records::store_gist(
            &stores.kv,
            &req.topic,
            content.trim(),
            kind,
            c,
            records::GIST_MIN_CONFIDENCE,
            req.now_ms,
        )
        .await?;
        stored.push(format!("gist {}", json_text(&outcome).trim_matches('"')));
    }
    if stored.is_empty() {
        return Err(Fail::invalid("memorize needs `facts` [{key, value}] or `gists` [{content}]"));
    }
    Ok(format!("stored: {}", stored.join(", ")))
}

async fn introspect(stores: &Stores, req: &DispatchRequest) -> Result<String> {
    let gists = records::gists(&stores.kv, &req.topic, req.now_ms).await?.len();
    let facts = records::facts(&stores.kv, &req.topic, req.now_ms).await?.len();
    let turns = wm::turn_count(&wm::read(&stores.sql, &req.thread_id, req.now_ms).await?);
    let fok = records::fok(&stores.kv, &req.topic).await?;
    // The introspect skill's own warmth: 0.4·gists + 0.3·facts + 0.3·working memory.
    let warmth = 0.4 * (gists as f64 / 5.0).min(1.0)
        + 0.3 * (facts as f64 / 10.0).min(1.0)
        + 0.3 * (turns as f64 / 4.0).min(1.0);
    let focus = records::focus(&stores.kv, &req.thread_id, req.now_ms).await?.map(|f| f.focus.description);
    let modes = stores
        .sql
        .query(
            "SELECT selected_mode FROM routing_decisions WHERE thread_id = $1 ORDER BY id DESC LIMIT 5",
            &[req.thread_id.as_str().into()],
        )
        .await?
        .iter()
        .map(|r| r.text("selected_mode"))
        .collect::<std::result::Result<Vec<_>, _>>()?;
    let world = mneme_substrate::world::world_state(&stores.sql, None, req.now_ms).await?;
    let memory = stores
        .sql
        .query(
            "SELECT (SELECT count(*) FROM episodes) AS episodes, (SELECT count(*) FROM semantic_concepts) AS concepts, \
             (SELECT count(*) FROM semantic_relationships) AS relationships",
            &[],
        )
        .await?;
    let m = memory.first().ok_or_else(|| Fail::new("internal", "the memory query returned no row"))?;
    let pending = mneme_substrate::jobs::pending(&stores.sql).await?;
    Ok(json!({
        "topic": req.topic,
        "gists": gists,
        "facts": facts,
        "working_memory_turns": turns,
        "warmth": (warmth * 1000.0).round() / 1000.0,
        "fok": fok,
        "focus": focus,
        "recent_modes": modes,
        "world_state": world,
        "episodes": m.i64("episodes")?,
        "concepts": m.i64("concepts")?,
        "relationships": m.i64("relationships")?,
        "consolidation_pending": pending,
    })
    .to_string())
}

async fn associate(stores: &Stores, p: &Map<String, J>) -> Result<String> {
    let seeds: Vec<String> = p
        .get("seeds")
        .and_then(J::as_array)
        .into_iter()
        .flatten()
        .filter_map(|v| v.as_str().map(String::from))
        .collect();
    if seeds.is_empty() {
        return Err(Fail::invalid("associate needs `seeds`"));
    }
    let depth = p.get("depth").and_then(J::as_u64).unwrap_or(2).clamp(1, 2);
    // Over the concept graph consolidation built (D-B4): the reference's
    // spreading activation; `include_weak` (default true) follows every
    // weak edge, where the drift engine follows one in seven.
    let include_weak = p.get("include_weak").and_then(J::as_bool).unwrap_or(true);
    let found = graph::concept_seeds(&stores.sql, &seeds).await?;
    if !found.is_empty() {
        let ids: Vec<String> = found.iter().map(|(id, _)| id.clone()).collect();
        let edges = graph::neighbourhood(&stores.sql, &ids, depth as u32, include_weak).await?;
        let mut active = mneme_background::consolidate::spread(&ids, &edges, depth as u32, || include_weak);
        active.truncate(mneme_background::consolidate::SPREAD_TOP);
        let active_ids: Vec<String> = active.iter().map(|(id, _)| id.clone()).collect();
        let names = graph::concept_names(&stores.sql, &active_ids).await?;
        let seeds_named: Vec<&str> = found.iter().map(|(_, n)| n.as_str()).collect();
        if active.is_empty() {
            return Ok(format!("concepts {}: nothing is associated with them yet", seeds_named.join(", ")));
        }
        let listed: Vec<String> = active
            .iter()
            .filter_map(|(id, a)| Some(format!("{} ({a:.2})", names.iter().find(|(i, _)| i == id)?.1)))
            .collect();
        return Ok(format!("concepts associated with {}: {}", seeds_named.join(", "), listed.join(", ")));
    }
    // No concept yet: spread over topic similarity instead.
    let rows =
        stores.sql.query("SELECT name, embedding FROM topics ORDER BY last_active_ms DESC LIMIT 200", &[]).await?;
    let topics: Vec<(String, Vec<f32>)> = rows
        .iter()
        .map(|r| Ok((r.text("name")?, mneme_substrate::bytes_f32(&r.blob("embedding")?))))
        .collect::<std::result::Result<_, mneme_store::StoreError>>()?;
    // Spreading activation over topic similarity: seeds activate their
    // nearest topics (weight = cosine), which pass 0.5 of it on one level more.
    let mut activation: Vec<(String, f64)> = Vec::new();
    let mut frontier: Vec<(Vec<f32>, f64)> = Vec::new();
    for seed in &seeds {
        frontier.push((mneme_substrate::embed(seed)?, 1.0));
    }
    for level in 0..depth {
        let mut next = Vec::new();
        for (e, strength) in &frontier {
            for (name, te) in &topics {
                let a = mneme_text::cosine(e, te) * strength;
                if a >= 0.3 {
                    match activation.iter_mut().find(|(n, _)| n == name) {
                        Some((_, v)) => *v = v.max(a),
                        None => {
                            activation.push((name.clone(), a));
                            if level + 1 < depth {
                                next.push((te.clone(), a * 0.5));
                            }
                        }
                    }
                }
            }
        }
        frontier = next;
    }
    activation.sort_by(|a, b| b.1.total_cmp(&a.1));
    activation.truncate(5);
    if activation.is_empty() {
        return Ok(format!("no topic is associated with {}", seeds.join(", ")));
    }
    let listed: Vec<String> = activation.iter().map(|(n, a)| format!("{n} ({a:.2})")).collect();
    Ok(format!("topics (no concepts yet): {}", listed.join(", ")))
}

async fn schedule(sql: &Sql, p: &Map<String, J>, now: u64) -> Result<String> {
    match s(p, "action").or(act::default_verb("schedule")).unwrap_or_default() {
        "create" => {
            let message = s(p, "message").ok_or_else(|| Fail::invalid("schedule needs a `message`"))?;
            if message.chars().count() > 1000 {
                return Err(Fail::invalid("a reminder message is at most 1000 characters"));
            }
            let due_raw = s(p, "due_at").ok_or_else(|| {
                Fail::invalid(format!(
                    "When should I remind you to {message}? Say, for example, \"tomorrow at 9\", \"in 20 minutes\" or \"every Sunday evening\" (a model gives `due_at` as ISO-8601)."
                ))
            })?;
            // A time without an offset is the principal's local time.
            let zone = mneme_substrate::principal_zone().await?;
            let due = zone
                .parse_datetime(due_raw)
                .ok_or_else(|| Fail::invalid(format!("`due_at` is not ISO-8601: {due_raw}")))?;
            if due <= now as i64 {
                return Err(Fail::invalid("`due_at` is in the past"));
            }
            let recurrence = s(p, "recurrence");
            if let Some(r) = recurrence.filter(|r| mneme_time::Recurrence::parse(r).is_none()) {
                return Err(Fail::invalid(format!(
                    "unknown recurrence `{r}` (hourly, daily, weekly, weekdays, monthly or interval:N minutes)"
                )));
            }
            let dup = sql
                .query(
                    "SELECT id FROM scheduled_items WHERE message = $1 AND status = 'pending' AND created_ms >= $2",
                    &[message.into(), Value::Int(now as i64 - 60_000)],
                )
                .await?;
            if let Some(r) = dup.first() {
                return Ok(format!("Already set: \"{message}\" (reminder {})", r.text("id")?));
            }
            let id = mneme_substrate::random_hex(4);
            let item_type = if s(p, "item_type") == Some("prompt") { "prompt" } else { "notification" };
            sql.execute(
                "INSERT INTO scheduled_items (id, message, due_ms, recurrence, item_type, status, created_ms) VALUES ($1,$2,$3,$4,$5,'pending',$6)",
                &[id.as_str().into(), message.into(), Value::Int(due), recurrence.into(), item_type.into(), Value::Int(now as i64)],
            )
            .await?;
            Ok(format!(
                "Reminder set: \"{message}\" for {} ({}){}; reminder {id}",
                zone.describe(due),
                zone.format(due),
                recurrence.map(|r| format!(", repeating {}", repeats(r))).unwrap_or_default()
            ))
        }
        "list" => {
            let rows = sql
                .query(
                    "SELECT id, message, due_ms, recurrence FROM scheduled_items WHERE status = 'pending' ORDER BY due_ms LIMIT 20",
                    &[],
                )
                .await?;
            if rows.is_empty() {
                return Ok("You have no pending reminders.".into());
            }
            let zone = mneme_substrate::principal_zone().await?;
            let listed = rows
                .iter()
                .map(|r| {
                    let due = r.i64("due_ms")?;
                    let repeats = r.opt_text("recurrence")?.map(|x| format!(", {}", repeats(&x))).unwrap_or_default();
                    Ok(format!(
                        "\"{}\" {} (in {} min{repeats}; reminder {})",
                        r.text("message")?,
                        zone.describe(due),
                        (due - now as i64).max(0) / 60_000,
                        r.text("id")?
                    ))
                })
                .collect::<std::result::Result<Vec<_>, mneme_store::StoreError>>()?;
            Ok(format!("Pending reminders: {}", listed.join("; ")))
        }
        "cancel" => {
            let id = s(p, "id").ok_or_else(|| Fail::invalid("cancel needs the reminder's `id`"))?;
            let n = sql
                .execute(
                    "UPDATE scheduled_items SET status = 'cancelled' WHERE id = $1 AND status = 'pending'",
                    &[id.into()],
                )
                .await?;
            if n == 0 {
                Err(Fail::new("not-found", format!("no pending reminder {id}")))
            } else {
                Ok(format!("cancelled {id}"))
            }
        }
        other => Err(Fail::invalid(format!("schedule has no action `{other}`"))),
    }
}

/// A recurrence as the principal reads it: `daily`, `every 15 minutes`.
fn repeats(recurrence: &str) -> String {
    match recurrence.strip_prefix("interval:") {
        Some(n) => format!("every {n} minutes"),
        None => recurrence.to_string(),
    }
}

async fn list(sql: &Sql, p: &Map<String, J>, now: u64) -> Result<String> {
    let name = s(p, "list").or_else(|| s(p, "name")).unwrap_or("Shopping List").to_string();
    let items: Vec<String> = match p.get("items") {
        Some(J::Array(a)) => {
            a.iter().filter_map(|v| v.as_str().map(|x| x.trim().to_string())).filter(|x| !x.is_empty()).collect()
        }
        Some(J::String(x)) => vec![x.trim().to_string()],
        _ => s(p, "item").map(|x| vec![x.to_string()]).unwrap_or_default(),
    };
    let view = async |sql: &Sql| -> Result<String> {
        let rows = sql
            .query("SELECT content, checked FROM list_items WHERE list_name = $1 ORDER BY id", &[name.as_str().into()])
            .await?;
        let lines = rows
            .iter()
            .map(|r| Ok(format!("[{}] {}", if r.i64("checked")? == 1 { "x" } else { " " }, r.text("content")?)))
            .collect::<std::result::Result<Vec<_>, mneme_store::StoreError>>()?;
        Ok(if lines.is_empty() { format!("{name} is empty") } else { format!("{name}: {}", lines.join(", ")) })
    };
    match s(p, "action").or(act::default_verb("list")).unwrap_or_default() {
        "add" | "create" => {
            sql.execute(
                "INSERT INTO lists (name, created_ms) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING",
                &[name.as_str().into(), Value::Int(now as i64)],
            )
            .await?;
            for i in &items {
                sql.execute(
                    "INSERT INTO list_items (list_name, content, checked, created_ms) VALUES ($1, $2, 0, $3)",
                    &[name.as_str().into(), i.as_str().into(), Value::Int(now as i64)],
                )
                .await?;
            }
            view(sql).await
        }
        "remove" => {
            for i in &items {
                sql.execute(
                    "DELETE FROM list_items WHERE list_name = $1 AND lower(content) = lower($2)",
                    &[name.as_str().into(), i.as_str().into()],
                )
                .await?;
            }
            view(sql).await
        }
        a @ ("check" | "uncheck") => {
            for i in &items {
                sql.execute(
                    "UPDATE list_items SET checked = $3 WHERE list_name = $1 AND lower(content) = lower($2)",
                    &[name.as_str().into(), i.as_str().into(), Value::Int((a == "check") as i64)],
                )
                .await?;
            }
            view(sql).await
        }
        "clear" => {
            sql.execute("DELETE FROM list_items WHERE list_name = $1", &[name.as_str().into()]).await?;
            Ok(format!("cleared {name}"))
        }
        "list_all" => {
            let rows = sql.query("SELECT name FROM lists ORDER BY name", &[]).await?;
            let names = rows.iter().map(|r| r.text("name")).collect::<std::result::Result<Vec<_>, _>>()?;
            Ok(if names.is_empty() { "no lists yet".into() } else { names.join(", ") })
        }
        "view" => view(sql).await,
        other => Err(Fail::invalid(format!("list has no action `{other}`"))),
    }
}

async fn focus(stores: &Stores, p: &Map<String, J>, req: &DispatchRequest) -> Result<String> {
    match s(p, "action").or(act::default_verb("focus")).unwrap_or_default() {
        "set" => {
            let description = s(p, "description").ok_or_else(|| Fail::invalid("focus set needs a `description`"))?;
            let minutes = p.get("minutes").and_then(J::as_u64).unwrap_or(120).clamp(5, 24 * 60);
            let f = records::StoredFocus {
                focus: Focus {
                    description: description.into(),
                    topic: req.topic.clone(),
                    source: FocusSource::Explicit,
                },
                embedding: mneme_substrate::embed(description)?,
            };
            records::set_focus(&stores.kv, &req.thread_id, &f, req.now_ms, minutes * 60_000).await?;
            Ok(format!("focus set for {minutes} min: {description}"))
        }
        "clear" => {
            records::clear_focus(&stores.kv, &req.thread_id).await?;
            Ok("focus cleared".into())
        }
        "check" => Ok(match records::focus(&stores.kv, &req.thread_id, req.now_ms).await? {
            Some(f) => format!(
                "focus: {} ({}); boundary modifier {}",
                f.focus.description,
                if f.focus.source == FocusSource::Explicit { "explicit" } else { "inferred" },
                if f.focus.source == FocusSource::Explicit { 1.0 } else { 0.5 }
            ),
            None => "no focus session".into(),
        }),
        other => Err(Fail::invalid(format!("focus has no action `{other}`"))),
    }
}

async fn persistent_task(sql: &Sql, p: &Map<String, J>, now: u64) -> Result<String> {
    match s(p, "action").or(act::default_verb("persistent_task")).unwrap_or_default() {
        "create" => {
            let goal = s(p, "goal").ok_or_else(|| Fail::invalid("persistent_task create needs a `goal`"))?;
            let priority = p.get("priority").and_then(J::as_i64).unwrap_or(mneme_background::tasks::DEFAULT_PRIORITY);
            let priority = priority
                .clamp(*mneme_background::tasks::PRIORITIES.start(), *mneme_background::tasks::PRIORITIES.end());
            // No plan yet: the worker decomposes it in the task's first cycle.
            let progress = mneme_background::cycle::Progress::default();
            let inserted = sql
                .transaction(async |sql: &Sql| {
                    mneme_substrate::task_rows::insert(sql, goal, priority, "user", &progress, now)
                        .await
                        .map_err(mneme_substrate::as_store_error)
                })
                .await?;
            Ok(match inserted {
                mneme_substrate::task_rows::Inserted::Created(id) => format!("created task {id}: {goal}"),
                mneme_substrate::task_rows::Inserted::Refused(mneme_background::tasks::Refusal::Duplicate(id)) => {
                    format!("already working on it as task {id}")
                }
                mneme_substrate::task_rows::Inserted::Refused(mneme_background::tasks::Refusal::Full) => format!(
                    "not created: {} tasks are open already; finish or cancel one first",
                    mneme_background::tasks::MAX_ACTIVE
                ),
            })
        }
        "status" => {
            let id = s(p, "id").ok_or_else(|| Fail::invalid("status needs the task's `id`"))?;
            let rows =
                sql.query("SELECT goal, status, coverage FROM persistent_tasks WHERE id = $1", &[id.into()]).await?;
            let r = rows.first().ok_or_else(|| Fail::new("not-found", format!("no task {id}")))?;
            Ok(format!(
                "task {id}: {} — {} ({:.0}% covered)",
                r.text("goal")?,
                r.text("status")?,
                r.f64("coverage")? * 100.0
            ))
        }
        "cancel" => {
            let id = s(p, "id").ok_or_else(|| Fail::invalid("cancel needs the task's `id`"))?;
            let n = mneme_substrate::task_rows::cancel(sql, id, now).await?;
            if n == 0 {
                Err(Fail::new("not-found", format!("no open task {id}")))
            } else {
                Ok(format!("cancelled task {id}"))
            }
        }
        "list" => {
            let rows = sql.query("SELECT id, goal, status FROM persistent_tasks WHERE status NOT IN ('cancelled', 'expired') ORDER BY created_ms DESC LIMIT 10", &[]).await?;
            let v = rows
                .iter()
                .map(|r| Ok(format!("{} [{}] {}", r.text("id")?, r.text("status")?, r.text("goal")?)))
                .collect::<std::result::Result<Vec<_>, mneme_store::StoreError>>()?;
            Ok(if v.is_empty() { "no tasks".into() } else { v.join("; ") })
        }
        other => Err(Fail::invalid(format!("persistent_task has no action `{other}`"))),
    }
}

/// One ACT iteration, for its row.
#[derive(Debug)]
pub struct IterationLog {
    pub loop_id: String,
    pub exchange_id: String,
    pub iteration_number: u32,
    pub actions: Vec<Action>,
    pub results: Vec<ActResult>,
    pub execution_time_ms: u64,
    pub cost: f64,
    pub fatigue: f64,
    pub mode: String,
    pub termination_reason: Option<Termination>,
    pub now_ms: u64,
}

pub async fn log_iteration(log: IterationLog) -> Result<()> {
    let stores = Stores::open().await?;
    let executed: Vec<J> = log
        .actions
        .iter()
        .zip(log.results.iter().map(Some).chain(std::iter::repeat(None)))
        .map(|(a, r)| json!({"type": a.kind, "params": a.params, "status": r.map(|r| r.status.clone()), "result": r.map(|r| r.result.clone())}))
        .collect();
    stores
        .sql
        .execute(
            "INSERT INTO cortex_iterations (loop_id, exchange_id, iteration_number, actions_executed, execution_time_ms, cost, fatigue, mode, termination_reason, created_ms) \
             VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10)",
            &[
                log.loop_id.as_str().into(),
                log.exchange_id.as_str().into(),
                Value::Int(log.iteration_number as i64),
                json_text(&executed).into(),
                Value::Int(log.execution_time_ms as i64),
                log.cost.into(),
                log.fatigue.into(),
                log.mode.as_str().into(),
                log.termination_reason.map(|t| json_text(&t).trim_matches('"').to_string()).into(),
                Value::Int(log.now_ms as i64),
            ],
        )
        .await?;
    Ok(())
}
