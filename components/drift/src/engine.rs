//! The I/O of the drift stage (`mneme:drift`): the cognitive drift engine
//! (002 §8, D-B5). The rules are `mneme_background::drift`'s; the thought
//! needs the model, which a stage cannot call (a dependency has no
//! dependencies), so the tick entry asks it between `begin` and `finish`.
//!
//! A cycle's life: `begin` delivers deferred thoughts to a principal who
//! came back, claims the engine's schedule when it is due, checks the idle
//! gate, draws a seed concept by category and spreads activation from it →
//! the entry synthesises the thought → `finish` routes it to an action and,
//! in one transaction under the claim, logs the drift, rests its concepts,
//! applies the action and sets the next jittered time. A crash before
//! `finish` writes nothing; the lease ends and a later tick drifts afresh.

use mneme_background::Draws;
use mneme_background::consolidate as graph;
use mneme_background::cycle::Progress;
use mneme_background::drift::{self as rules, Action, Activated, Conditions, SeedKind, Sent, Situation, Skip, Thought};
use mneme_background::tasks::{DEFAULT_PRIORITY, Refusal};
use mneme_store::{Kv, Row, Sql, Value};
use mneme_substrate::events::{publish_with, publishing};
use mneme_substrate::graph::{self as stored_graph, CORPUS};
use mneme_substrate::schedule;
use mneme_substrate::task_rows::{self as task_store, Inserted};
use mneme_substrate::{Result, Stores, as_store_error, bytes_f32, embed, f32_bytes, in_list, json_text, random_hex};
use mneme_text::cosine;
use mneme_types::NotDue;
use mneme_types::consolidation::GistStored;
use mneme_types::drift::{
    Applied, Delivered, DriftBegun, DriftDone, DriftReady, DriftStart, DriftThought, Grounding, Seed, SeedTry,
    SituationBrief, SkippedCycle, TaskProposed, WeakSeed,
};
use serde_json::json;

/// The engine's row in `engine_schedule`.
pub const ENGINE: &str = "drift";
const H: i64 = 3_600_000;
const DAY: i64 = 24 * H;
/// The insight category's throttle, kept where every tick sees it.
const INSIGHT_KEY: &str = "drift:insight_seed:last_used";
/// A curiosity thread stays open this long.
pub const THREAD_TTL_MS: i64 = 7 * DAY;
/// An episode this close to the thought backs SEED_THREAD's salience.
const EPISODE_MATCH_COSINE: f32 = 0.55;
/// The recent and salient categories sample from this many episodes, the
/// salient one within a week; an episode's seed is one of its 5 strongest
/// concepts.
const EPISODE_SAMPLE: i64 = 20;
const SALIENT_WINDOW_MS: i64 = 7 * DAY;
const SEED_POOL: i64 = 5;
/// Insight: topics seen at least 3 times in a week.
const INSIGHT_MIN_SIGNALS: i64 = 3;
/// The drifts the COMMUNICATE bar's median is taken over.
const MEDIAN_WINDOW: i64 = 100;

struct Concept {
    id: String,
    name: String,
    strength: f64,
    episodes: Vec<String>,
}

impl Concept {
    fn from_row(r: &Row) -> Result<Concept> {
        Ok(Concept {
            id: r.text("id")?,
            name: r.text("name")?,
            strength: r.f64("strength")?,
            episodes: serde_json::from_str(&r.text("source_episodes")?).unwrap_or_default(),
        })
    }
}

const CONCEPT_COLUMNS: &str = "id, name, strength, source_episodes";

fn skip_name(s: Skip) -> String {
    json_text(&s).trim_matches('"').to_string()
}

async fn scalar_i64(sql: &Sql, query: &str, params: &[Value]) -> Result<Option<i64>> {
    let rows = sql.query(query, params).await?;
    Ok(match rows.first() {
        Some(r) => r.opt_i64("v")?,
        None => None,
    })
}

/// Step 0–2 of a cycle: deliver deferred thoughts, claim the schedule,
/// check the idle gate, select a seed and spread activation from it.
pub async fn begin(now_ms: u64, lease_ms: u64, seed: u64) -> Result<DriftBegun> {
    let zone = mneme_substrate::principal_zone().await?;
    let stores = Stores::open().await?;
    let (sql, kv) = (&stores.sql, &stores.kv);
    let now = now_ms as i64;
    let flushed = flush(sql, kv, now, &zone).await?;
    let mut d = Draws::new(seed);
    let next_ms = rules::next_run(now, d.draw(), d.draw());
    let claim = random_hex(8);
    if let Err(n) = schedule::claim(sql, ENGINE, &claim, now, lease_ms as i64).await? {
        let not_due = NotDue { held: n.held, next_ms: n.next_ms, at_ms: n.at_ms() };
        return Ok(DriftBegun { flushed, start: DriftStart::NotDue(not_due) });
    }
    let c = conditions(sql, kv, now).await?;
    let skip = async |why: Skip, tried: Vec<SeedTry>, weak_seed: Option<WeakSeed>| -> Result<DriftBegun> {
        release(sql, &claim, next_ms, now, &skip_name(why)).await?;
        let cycle = SkippedCycle { why: why.into(), conditions: c.clone().into(), tried, weak_seed, next_ms };
        Ok(DriftBegun { flushed: flushed.clone(), start: DriftStart::Skipped(cycle) })
    };
    if let Err(why) = rules::preconditions(&c, now) {
        return skip(why, Vec::new(), None).await;
    }
    let mut insight_open = match kv.get(INSIGHT_KEY).await? {
        Some(b) => String::from_utf8_lossy(&b).parse::<i64>().map_or(true, |t| now - t >= rules::INSIGHT_THROTTLE_MS),
        None => true,
    };
    let mut tried = Vec::new();
    let mut chosen = None;
    for _ in 0..rules::SEED_ATTEMPTS {
        let kind = rules::seed_kind(d.draw(), insight_open);
        if kind == SeedKind::Insight {
            insight_open = false;
            kv.set(INSIGHT_KEY, now.to_string().as_bytes(), Some(rules::INSIGHT_THROTTLE_MS as u64)).await?;
        }
        let found = select(sql, kind, now, &mut d).await?;
        let resting = match &found {
            Some((c, _)) => !resting(sql, std::slice::from_ref(&c.id), now).await?.is_empty(),
            None => false,
        };
        tried.push(SeedTry { kind: kind.into(), concept: found.as_ref().map(|(c, _)| c.name.clone()), resting });
        if let Some(found) = found.filter(|_| !resting) {
            chosen = Some((kind, found));
            break;
        }
    }
    let Some((kind, (concept, topic_hint))) = chosen else {
        return skip(Skip::NoSeed, tried, None).await;
    };
    let ids = [concept.id.clone()];
    let edges = stored_graph::neighbourhood(sql, &ids, graph::SPREAD_DEPTH, true).await?;
    let spread = graph::spread(&ids, &edges, graph::SPREAD_DEPTH, || d.draw() < graph::WEAK_FOLLOW_P);
    let reached: Vec<String> = spread.iter().map(|(id, _)| id.clone()).collect();
    let resting_ids = resting(sql, &reached, now).await?;
    let kept: Vec<(String, f64)> =
        spread.into_iter().filter(|(id, _)| !resting_ids.contains(id)).take(graph::SPREAD_TOP).collect();
    let energy = kept.first().map_or(0.0, |k| k.1);
    if energy < rules::MIN_ENERGY {
        let weak = WeakSeed { name: concept.name, kind: kind.into(), energy };
        return skip(Skip::LowEnergy, tried, Some(weak)).await;
    }
    let concepts = activated(sql, &kept).await?;
    let topic = match topic_hint {
        Some(t) => t,
        None => concept_topic(sql, &concept).await?,
    };
    let mut query: Vec<&str> = vec![concept.name.as_str()];
    query.extend(concepts.iter().take(2).map(|c| c.name.as_str()));
    let grounding = grounding(sql, &query.join(" ")).await?;
    let ready = DriftReady {
        claim,
        next_ms,
        conditions: c.into(),
        tried,
        seed: Seed { id: concept.id, name: concept.name, kind: kind.into(), strength: concept.strength, topic },
        concepts: concepts.into_iter().map(Into::into).collect(),
        energy,
        grounding,
    };
    Ok(DriftBegun { flushed, start: DriftStart::Ready(ready) })
}

/// Gives the schedule back with its next time and the cycle's outcome.
async fn release(sql: &Sql, claim: &str, next_ms: i64, now: i64, outcome: &str) -> Result<u64> {
    Ok(schedule::release(sql, ENGINE, claim, Some(next_ms), Some((now, outcome))).await?)
}

/// What the idle gate reads: queued or running jobs on every queue, the
/// newest episode, a live focus on any thread, and the activation of the
/// last 30 minutes' drifts.
async fn conditions(sql: &Sql, kv: &Kv, now: i64) -> Result<Conditions> {
    let jobs = scalar_i64(sql, "SELECT count(*) AS v FROM jobs WHERE status IN ('queued', 'running')", &[]).await?;
    let knowledge =
        scalar_i64(sql, "SELECT count(*) AS v FROM knowledge_jobs WHERE status IN ('queued', 'running')", &[]).await?;
    let last_episode_ms = scalar_i64(sql, "SELECT max(created_ms) AS v FROM episodes", &[]).await?;
    Ok(Conditions {
        pending_jobs: jobs.unwrap_or(0) + knowledge.unwrap_or(0),
        last_episode_ms,
        deep_focus: focus_live(kv, now).await?,
        recent_activation: recent_activation(sql, now).await?,
    })
}

/// Whether a focus session is live on any thread.
async fn focus_live(kv: &Kv, now: i64) -> Result<bool> {
    for key in kv.keys("focus:").await? {
        if mneme_substrate::records::focus(kv, key.trim_start_matches("focus:"), now as u64).await?.is_some() {
            return Ok(true);
        }
    }
    Ok(false)
}

async fn recent_activation(sql: &Sql, now: i64) -> Result<f64> {
    let rows = sql
        .query(
            "SELECT CAST(COALESCE(sum(activation), 0) AS DOUBLE PRECISION) AS v FROM drift_log WHERE created_ms > $1",
            &[Value::Int(now - rules::FATIGUE_WINDOW_MS)],
        )
        .await?;
    Ok(rows.first().map(|r| r.f64("v")).transpose()?.unwrap_or(0.0))
}

/// The concepts among `ids` that rest after a drift.
async fn resting(sql: &Sql, ids: &[String], now: i64) -> Result<Vec<String>> {
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let mut params: Vec<Value> = ids.iter().map(|i| Value::from(i.as_str())).collect();
    params.push(Value::Int(now));
    sql.query(
        &format!(
            "SELECT concept_id FROM drift_cooldowns WHERE concept_id IN ({}) AND until_ms > ${}",
            in_list(1, ids.len()),
            ids.len() + 1
        ),
        &params,
    )
    .await?
    .iter()
    .map(|r| Ok(r.text("concept_id")?))
    .collect()
}

/// One seed of a category, and the topic it came by (episode categories).
async fn select(sql: &Sql, kind: SeedKind, now: i64, d: &mut Draws) -> Result<Option<(Concept, Option<String>)>> {
    let concepts = |rows: Vec<Row>| rows.iter().map(Concept::from_row).collect::<Result<Vec<_>>>();
    match kind {
        SeedKind::Decaying => {
            let pool = concepts(
                sql.query(
                    &format!(
                        "SELECT {CONCEPT_COLUMNS} FROM semantic_concepts WHERE strength > $1 AND strength < $2 \
                         ORDER BY strength, last_reinforced_ms, id LIMIT $3"
                    ),
                    &[rules::DECAYING.0.into(), rules::DECAYING.1.into(), SEED_POOL.into()],
                )
                .await?,
            )?;
            Ok(one_of(pool, d).map(|c| (c, None)))
        }
        SeedKind::Recent | SeedKind::Salient => {
            let rows = if kind == SeedKind::Recent {
                sql.query(
                    "SELECT id, topic, salience, created_ms FROM episodes WHERE created_ms >= $1 \
                     ORDER BY created_ms DESC, id LIMIT $2",
                    &[Value::Int(now - rules::LOOKBACK_MS), EPISODE_SAMPLE.into()],
                )
                .await?
            } else {
                sql.query(
                    "SELECT id, topic, salience, created_ms FROM episodes WHERE created_ms >= $1 \
                     ORDER BY salience DESC, created_ms DESC, id LIMIT $2",
                    &[Value::Int(now - SALIENT_WINDOW_MS), EPISODE_SAMPLE.into()],
                )
                .await?
            };
            let mut weights = Vec::new();
            for r in &rows {
                let w = rules::recency_weight(now - r.i64("created_ms")?);
                weights.push(if kind == SeedKind::Salient { w * r.i64("salience")? as f64 } else { w });
            }
            let Some(i) = rules::weighted(&weights, d.draw()) else { return Ok(None) };
            let (episode, topic) = (rows[i].text("id")?, rows[i].text("topic")?);
            let pool = concepts_of(sql, std::slice::from_ref(&episode), None).await?;
            Ok(one_of(pool, d).map(|c| (c, Some(topic))))
        }
        SeedKind::Insight => {
            let rows = sql
                .query(
                    "SELECT topic, count(*) AS n FROM exchanges WHERE created_ms >= $1 AND topic <> $2 \
                     GROUP BY topic HAVING count(*) >= $3 ORDER BY topic",
                    &[
                        Value::Int(now - SALIENT_WINDOW_MS),
                        mneme_conversation::topic::GENERAL_TOPIC.into(),
                        INSIGHT_MIN_SIGNALS.into(),
                    ],
                )
                .await?;
            let weights: Vec<f64> =
                rows.iter().map(|r| r.i64("n").map(|n| n as f64)).collect::<std::result::Result<_, _>>()?;
            let Some(i) = rules::weighted(&weights, d.draw()) else { return Ok(None) };
            let topic = rows[i].text("topic")?;
            let episodes: Vec<String> = sql
                .query(
                    "SELECT id FROM episodes WHERE topic = $1 ORDER BY created_ms DESC, id LIMIT $2",
                    &[topic.as_str().into(), SEED_POOL.into()],
                )
                .await?
                .iter()
                .map(|r| r.text("id"))
                .collect::<std::result::Result<_, _>>()?;
            let pool = concepts_of(sql, &episodes, Some(&topic)).await?;
            Ok(one_of(pool, d).map(|c| (c, Some(topic))))
        }
        SeedKind::Random => {
            let n = scalar_i64(
                sql,
                "SELECT count(*) AS v FROM semantic_concepts WHERE confidence >= $1",
                &[rules::SEED_MIN_CONFIDENCE.into()],
            )
            .await?
            .unwrap_or(0);
            if n == 0 {
                return Ok(None);
            }
            let offset = rules::pick(n as usize, d.draw()) as i64;
            let pool = concepts(
                sql.query(
                    &format!(
                        "SELECT {CONCEPT_COLUMNS} FROM semantic_concepts WHERE confidence >= $1 ORDER BY id LIMIT 1 OFFSET $2"
                    ),
                    &[rules::SEED_MIN_CONFIDENCE.into(), Value::Int(offset)],
                )
                .await?,
            )?;
            Ok(pool.into_iter().next().map(|c| (c, None)))
        }
    }
}

fn one_of(mut pool: Vec<Concept>, d: &mut Draws) -> Option<Concept> {
    if pool.is_empty() {
        return None;
    }
    let i = rules::pick(pool.len(), d.draw());
    Some(pool.swap_remove(i))
}

/// The 5 strongest concepts drawn from any of the episodes; for an insight
/// topic, also a concept named for it or in its domain, at confidence 0.4
/// or more.
async fn concepts_of(sql: &Sql, episodes: &[String], topic: Option<&str>) -> Result<Vec<Concept>> {
    let mut params: Vec<Value> = episodes.iter().map(|e| Value::from(format!("%\"{e}\"%"))).collect();
    let mut ors: Vec<String> = (1..=episodes.len()).map(|i| format!("source_episodes LIKE ${i}")).collect();
    let mut filter = String::new();
    if let Some(t) = topic {
        let name = graph::concept_name(&t.replace('-', " "));
        params.push(name.into());
        params.push(t.into());
        ors.push(format!("name = ${}", params.len() - 1));
        ors.push(format!("domain = ${}", params.len()));
        params.push(rules::SEED_MIN_CONFIDENCE.into());
        filter = format!(" AND confidence >= ${}", params.len());
    }
    if ors.is_empty() {
        return Ok(Vec::new());
    }
    params.push(SEED_POOL.into());
    let rows = sql
        .query(
            &format!(
                "SELECT {CONCEPT_COLUMNS} FROM semantic_concepts WHERE ({}){filter} ORDER BY strength DESC, id LIMIT ${}",
                ors.join(" OR "),
                params.len()
            ),
            &params,
        )
        .await?;
    rows.iter().map(Concept::from_row).collect()
}

/// The topic of the newest episode a concept was drawn from, or `general`.
async fn concept_topic(sql: &Sql, c: &Concept) -> Result<String> {
    if c.episodes.is_empty() {
        return Ok(mneme_conversation::topic::GENERAL_TOPIC.into());
    }
    let params: Vec<Value> = c.episodes.iter().map(|e| Value::from(e.as_str())).collect();
    let rows = sql
        .query(
            &format!(
                "SELECT topic FROM episodes WHERE id IN ({}) ORDER BY created_ms DESC LIMIT 1",
                in_list(1, c.episodes.len())
            ),
            &params,
        )
        .await?;
    Ok(match rows.first() {
        Some(r) => r.text("topic")?,
        None => mneme_conversation::topic::GENERAL_TOPIC.into(),
    })
}

/// The kept concepts with their names and definitions, strongest first.
async fn activated(sql: &Sql, kept: &[(String, f64)]) -> Result<Vec<Activated>> {
    if kept.is_empty() {
        return Ok(Vec::new());
    }
    let params: Vec<Value> = kept.iter().map(|(id, _)| Value::from(id.as_str())).collect();
    let rows = sql
        .query(
            &format!("SELECT id, name, definition FROM semantic_concepts WHERE id IN ({})", in_list(1, kept.len())),
            &params,
        )
        .await?;
    let mut out = Vec::new();
    for (id, a) in kept {
        if let Some(r) = rows.iter().find(|r| r.text("id").is_ok_and(|i| &i == id)) {
            out.push(Activated {
                id: id.clone(),
                name: r.text("name")?,
                definition: r.text("definition")?,
                activation: *a,
            });
        }
    }
    Ok(out)
}

/// The one episode the seed and its first two concepts recall (hybrid
/// search over the episodes).
async fn grounding(sql: &Sql, query: &str) -> Result<Option<Grounding>> {
    let e = embed(query)?;
    let found =
        mneme_substrate::search::candidates(sql, &[CORPUS], query, &e, mneme_knowledge::fusion::Mode::Hybrid).await?;
    let Some(id) = found.fused.first().and_then(|(seq, _)| found.get(*seq)).map(|(id, _)| id.clone()) else {
        return Ok(None);
    };
    let rows = sql.query("SELECT id, gist FROM episodes WHERE id = $1", &[id.as_str().into()]).await?;
    rows.first().map(|r| Ok(Grounding { id: r.text("id")?, gist: r.text("gist")? })).transpose()
}

/// Delivers the newest deferred COMMUNICATE thought once quiet hours are
/// over and the principal has written since they ended ("returns from
/// absence"), unless they are in a focus session; the older ones waiting
/// are dropped, so a return brings one message, not a backlog. Expires
/// those older than 48 h. Delivered once however many ticks race for it.
async fn flush(sql: &Sql, kv: &Kv, now: i64, zone: &mneme_time::Zone) -> Result<Vec<Delivered>> {
    sql.execute(
        "UPDATE drift_log SET delivery = 'expired' WHERE delivery = 'deferred' AND created_ms < $1",
        &[Value::Int(now - rules::DEFERRED_TTL_MS)],
    )
    .await?;
    if rules::quiet(zone.local_hour(now)) {
        return Ok(Vec::new());
    }
    let rows = sql
        .query(
            "SELECT id, thought_type, content, topic, seed_name, source, created_ms FROM drift_log \
             WHERE delivery = 'deferred' ORDER BY created_ms DESC, id DESC",
            &[],
        )
        .await?;
    let Some(r) = rows.first() else { return Ok(Vec::new()) };
    let deferred_at = r.i64("created_ms")?;
    let last_exchange = scalar_i64(sql, "SELECT max(created_ms) AS v FROM exchanges", &[]).await?;
    if last_exchange.is_none_or(|t| t < rules::quiet_end(deferred_at, zone)) || focus_live(kv, now).await? {
        return Ok(Vec::new());
    }
    let id = r.text("id")?;
    let payload = json!({"drift_id": id, "action": Action::Communicate, "type": r.text("thought_type")?,
                         "text": r.text("content")?, "topic": r.text("topic")?, "seed": r.text("seed_name")?,
                         "source": r.text("source")?, "deferred_since_ms": deferred_at});
    let dropped = publishing(sql, async |sql: &Sql| {
        let n = sql
            .execute(
                "UPDATE drift_log SET delivery = 'sent', delivered_ms = $2 WHERE id = $1 AND delivery = 'deferred'",
                &[id.as_str().into(), Value::Int(now)],
            )
            .await?;
        if n == 0 {
            return Ok(None);
        }
        publish_with(sql, "drift", &payload, now as u64).await?;
        let dropped = sql.execute("UPDATE drift_log SET delivery = 'dropped' WHERE delivery = 'deferred'", &[]).await?;
        Ok(Some(dropped))
    })
    .await?;
    Ok(match dropped {
        Some(d) => vec![Delivered { drift_id: id, older_dropped: d }],
        None => Vec::new(),
    })
}

/// A ready cycle's thought, its rules' types in hand.
struct Finish {
    claim: String,
    now_ms: u64,
    next_ms: i64,
    seed: Seed,
    seed_kind: SeedKind,
    concepts: Vec<Activated>,
    energy: f64,
    grounding: Option<Grounding>,
    thought: Thought,
    source: String,
}

/// The proactive messages drift sent, newest first, with the principal's
/// next message after each: `(action, sent)`.
async fn sent(sql: &Sql) -> Result<Vec<(String, Sent)>> {
    let rows = sql
        .query(
            "SELECT d.action, d.delivered_ms, (SELECT min(e.created_ms) FROM exchanges e WHERE e.created_ms > d.delivered_ms) AS replied \
             FROM drift_log d WHERE d.delivery = 'sent' ORDER BY d.delivered_ms DESC, d.id LIMIT 20",
            &[],
        )
        .await?;
    rows.iter()
        .map(|r| {
            Ok((
                r.text("action")?,
                Sent { at_ms: r.opt_i64("delivered_ms")?.unwrap_or(0), replied_ms: r.opt_i64("replied")? },
            ))
        })
        .collect()
}

fn best_cosine(e: &[f32], rows: &[Row]) -> Result<f64> {
    let mut best = 0.0f64;
    for r in rows {
        best = best.max(cosine(e, &bytes_f32(&r.blob("embedding")?)));
    }
    Ok(best)
}

/// Everything the action gates read.
async fn situation(sql: &Sql, r: &Finish, embedding: &[f32], hour: u32) -> Result<Situation> {
    let now = r.now_ms as i64;
    let t = &r.thought;
    let last_exchange = scalar_i64(sql, "SELECT max(created_ms) AS v FROM exchanges", &[]).await?;
    let prompts: Vec<usize> = sql
        .query("SELECT prompt FROM exchanges ORDER BY created_ms DESC, id LIMIT 2", &[])
        .await?
        .iter()
        .map(|r| r.text("prompt").map(|p| p.chars().count()))
        .collect::<std::result::Result<_, _>>()?;
    let topics = sql
        .query("SELECT embedding FROM topics WHERE last_active_ms >= $1", &[Value::Int(now - SALIENT_WINDOW_MS)])
        .await?;
    let recent_texts: Vec<String> = sql
        .query(
            "SELECT content FROM drift_log WHERE delivery IN ('sent', 'deferred') ORDER BY created_ms DESC, id LIMIT 10",
            &[],
        )
        .await?
        .iter()
        .map(|r| r.text("content"))
        .collect::<std::result::Result<_, _>>()?;
    let sent = sent(sql).await?;
    let all: Vec<Sent> = sent.iter().map(|(_, s)| *s).collect();
    let nurtures: Vec<Sent> = sent.iter().filter(|(a, _)| a == "NURTURE").map(|(_, s)| *s).collect();
    let engagement = rules::engagement(&all, now);
    let activations: Vec<f64> = sql
        .query("SELECT activation FROM drift_log ORDER BY created_ms DESC, id LIMIT $1", &[MEDIAN_WINDOW.into()])
        .await?
        .iter()
        .map(|r| r.f64("activation"))
        .collect::<std::result::Result<_, _>>()?;
    let drifts = scalar_i64(sql, "SELECT count(*) AS v FROM drift_log", &[]).await?.unwrap_or(0);
    let last_of = async |action: Action| {
        scalar_i64(
            sql,
            "SELECT max(created_ms) AS v FROM drift_log WHERE action = $1",
            &[json_text(&action).trim_matches('"').into()],
        )
        .await
    };
    let topic_signals = scalar_i64(
        sql,
        "SELECT count(*) AS v FROM exchanges WHERE topic = $1 AND created_ms >= $2",
        &[r.seed.topic.as_str().into(), Value::Int(now - SALIENT_WINDOW_MS)],
    )
    .await?
    .unwrap_or(0);
    let refusal = task_store::refused(sql, &t.content).await?;
    let active_tasks = task_store::open_count(sql).await?;
    let episode_similarity = match &r.grounding {
        Some(g) => best_cosine(
            embedding,
            &sql.query("SELECT embedding FROM episodes WHERE id = $1", &[g.id.as_str().into()]).await?,
        )?,
        None => 0.0,
    };
    let reflections = sql
        .query("SELECT embedding FROM drift_log WHERE action = 'REFLECT' ORDER BY created_ms DESC, id LIMIT 20", &[])
        .await?;
    let same_type = sql
        .query(
            "SELECT thought_type FROM drift_log WHERE topic = $1 ORDER BY created_ms DESC, id LIMIT 1",
            &[r.seed.topic.as_str().into()],
        )
        .await?;
    let same_type_on_topic =
        same_type.first().map(|x| x.text("thought_type")).transpose()?.is_some_and(|k| k == kind_name(t));
    let threads = sql
        .query(
            "SELECT topic, created_ms FROM curiosity_threads WHERE status = 'active' AND created_ms >= $1",
            &[Value::Int(now - THREAD_TTL_MS)],
        )
        .await?;
    let found = mneme_substrate::search::candidates(
        sql,
        &[CORPUS],
        &t.content,
        embedding,
        mneme_knowledge::fusion::Mode::Vector,
    )
    .await?;
    Ok(Situation {
        now_ms: now,
        local_hour: hour,
        thought: Some(t.clone()),
        seed_kind: Some(r.seed_kind),
        activation: r.energy,
        mean_activation: mean(&r.concepts),
        drifts: drifts.max(0) as u64,
        median_activation: rules::median(&activations),
        relevance: best_cosine(embedding, &topics)?,
        recent_texts,
        idle_ms: last_exchange.map(|l| now - l),
        backoff: engagement.backoff,
        proactive_paused: engagement.paused,
        pending_proactive: engagement.pending,
        last_reply_chars: (prompts.len() == 2).then(|| (prompts[0], prompts[1])),
        topic_signals: topic_signals.clamp(0, u32::MAX as i64) as u32,
        duplicate_task: matches!(refusal, Some(Refusal::Duplicate(_))),
        active_tasks: active_tasks as usize,
        last_plan_ms: last_of(Action::Plan).await?,
        episode_similarity,
        reflection_similarity: best_cosine(embedding, &reflections)?,
        same_type_on_topic,
        exchanges: scalar_i64(sql, "SELECT count(*) AS v FROM exchanges", &[]).await?.unwrap_or(0),
        last_nurture_ms: last_of(Action::Nurture).await?,
        unanswered_nurtures: rules::engagement(&nurtures, now).ignored_in_a_row,
        thread_on_topic: threads.iter().any(|x| x.text("topic").is_ok_and(|tp| tp == r.seed.topic)),
        active_threads: threads.len(),
        last_thread_ms: scalar_i64(sql, "SELECT max(created_ms) AS v FROM curiosity_threads", &[]).await?,
        episodic_matches: found.found.values().filter(|(_, c)| *c >= EPISODE_MATCH_COSINE).count(),
        semantic_strength: r.seed.strength / graph::CONCEPT_MAX,
    })
}

fn mean(c: &[Activated]) -> f64 {
    if c.is_empty() { 0.0 } else { c.iter().map(|a| a.activation).sum::<f64>() / c.len() as f64 }
}

fn kind_name(t: &Thought) -> String {
    json_text(&t.kind).trim_matches('"').to_string()
}

/// Step 3–6: routes the thought to an action and, in one transaction under
/// the claim, logs the drift, rests its concepts, revives a decaying
/// seed, applies the action and sets the next time; then stores the drift
/// gist (and a reflection's) on the seed's topic.
pub async fn finish(t: DriftThought, now_ms: u64) -> Result<DriftDone> {
    let r = Finish {
        claim: t.claim,
        now_ms,
        next_ms: t.next_ms,
        seed_kind: t.seed.kind.into(),
        seed: t.seed,
        concepts: t.concepts.into_iter().map(Into::into).collect(),
        energy: t.energy,
        grounding: t.grounding,
        thought: t.thought.into(),
        source: t.source,
    };
    let stores = Stores::open().await?;
    let (sql, kv) = (&stores.sql, &stores.kv);
    let now = r.now_ms as i64;
    let hour = mneme_substrate::principal_zone().await?.local_hour(now);
    let embedding = embed(&r.thought.content)?;
    let s = situation(sql, &r, &embedding, hour).await?;
    let fatigue = recent_activation(sql, now).await?;
    let (action, verdicts) = rules::decide(&s, fatigue);
    let id = format!("dr-{}", random_hex(6));
    let quiet = rules::quiet(hour);
    let delivery = match action {
        Action::Communicate if quiet => "deferred",
        Action::Communicate | Action::Nurture => "sent",
        _ => "",
    };
    let event = json!({"drift_id": id, "action": action, "type": kind_name(&r.thought), "text": r.thought.content,
                       "topic": r.seed.topic, "seed": r.seed.name, "source": r.source});
    let applied = publishing(sql, async |sql: &Sql| {
        let released = release(sql, &r.claim, r.next_ms, now, json_text(&action).trim_matches('"'))
            .await
            .map_err(as_store_error)?;
        if released == 0 {
            return Err(mneme_store::StoreError::new("lease-lost", "the drift engine's claim is gone"));
        }
        sql.execute(
            "INSERT INTO drift_log (id, seed_id, seed_name, seed_kind, topic, concepts, thought_type, content, source, \
             activation, action, verdicts, embedding, delivery, delivered_ms, created_ms, grounding_id) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17)",
            &[
                id.as_str().into(),
                r.seed.id.as_str().into(),
                r.seed.name.as_str().into(),
                json_text(&r.seed_kind).trim_matches('"').into(),
                r.seed.topic.as_str().into(),
                json_text(&r.concepts).into(),
                kind_name(&r.thought).into(),
                r.thought.content.as_str().into(),
                r.source.as_str().into(),
                r.energy.into(),
                json_text(&action).trim_matches('"').into(),
                json_text(&verdicts).into(),
                Value::Blob(f32_bytes(&embedding)),
                delivery.into(),
                if delivery == "sent" { Value::Int(now) } else { Value::Null },
                Value::Int(now),
                r.grounding.as_ref().map(|g| g.id.as_str()).into(),
            ],
        )
        .await?;
        let until = Value::Int(now + rules::CONCEPT_COOLDOWN_MS);
        for c in std::iter::once(&r.seed.id).chain(r.concepts.iter().map(|c| &c.id)) {
            sql.execute(
                "INSERT INTO drift_cooldowns (concept_id, until_ms) VALUES ($1, $2) \
                 ON CONFLICT (concept_id) DO UPDATE SET until_ms = excluded.until_ms",
                &[c.as_str().into(), until.clone()],
            )
            .await?;
        }
        let mut revive: Vec<&String> = Vec::new();
        if r.seed_kind == SeedKind::Decaying {
            revive.push(&r.seed.id);
        }
        if action == Action::Reflect {
            revive.extend(r.concepts.iter().take(3).map(|c| &c.id));
        }
        for c in revive {
            sql.execute(
                "UPDATE semantic_concepts SET strength = CASE WHEN strength + 0.1 > 10 THEN 10 ELSE strength + 0.1 END, \
                 last_reinforced_ms = $2 WHERE id = $1",
                &[c.as_str().into(), Value::Int(now)],
            )
            .await?;
        }
        let mut out = Applied::None;
        match action {
            Action::Communicate if quiet => {
                // At most 3 wait; the oldest gives way.
                let dropped = sql
                    .execute(
                        &format!(
                            "UPDATE drift_log SET delivery = 'dropped' WHERE delivery = 'deferred' AND id NOT IN \
                             (SELECT id FROM drift_log WHERE delivery = 'deferred' ORDER BY created_ms DESC, id DESC LIMIT {})",
                            rules::DEFERRED_MAX
                        ),
                        &[],
                    )
                    .await?;
                out = Applied::Deferred(dropped);
            }
            Action::Communicate | Action::Nurture => {
                let e = publish_with(sql, "drift", &event, now as u64).await?;
                out = Applied::Sent(e);
            }
            Action::Plan => {
                let made = task_store::insert(
                    sql,
                    &r.thought.content,
                    DEFAULT_PRIORITY,
                    "drift",
                    &Progress::default(),
                    now as u64,
                )
                .await
                .map_err(as_store_error)?;
                out = match made {
                    Inserted::Created(task) => {
                        let e = publish_with(
                            sql,
                            "task",
                            &json!({"task_id": task, "goal": r.thought.content, "status": "accepted",
                                    "origin": "drift", "drift_id": id}),
                            now as u64,
                        )
                        .await?;
                        Applied::Task(TaskProposed { task_id: task, event_id: e })
                    }
                    Inserted::Refused(Refusal::Duplicate(task)) => Applied::DuplicateTask(task),
                    Inserted::Refused(Refusal::Full) => Applied::NoRoom,
                };
            }
            Action::SeedThread => {
                let thread = format!("ct-{}", random_hex(6));
                sql.execute(
                    "INSERT INTO curiosity_threads (id, topic, seed_id, question, status, drift_id, created_ms) \
                     VALUES ($1, $2, $3, $4, 'active', $5, $6)",
                    &[
                        thread.as_str().into(),
                        r.seed.topic.as_str().into(),
                        r.seed.id.as_str().into(),
                        r.thought.content.as_str().into(),
                        id.as_str().into(),
                        Value::Int(now),
                    ],
                )
                .await?;
                out = Applied::Thread(thread);
            }
            _ => {}
        }
        Ok(out)
    })
    .await?;
    // The gist lives in the key-value store, after the transaction: a
    // crash in between loses a 30-minute gist, never the drift. A
    // reflection's gist is the same thought, typed as one.
    let kind = if action == Action::Reflect { "reflection" } else { "drift" };
    let gist = mneme_substrate::records::store_gist(kv, &r.seed.topic, &r.thought.gist(), kind, 8, 0, r.now_ms).await?;
    Ok(DriftDone {
        drift_id: id,
        action: action.into(),
        delivery: (!delivery.is_empty()).then(|| delivery.to_string()),
        applied,
        verdicts: verdicts.into_iter().map(Into::into).collect(),
        fatigue,
        gist: GistStored { kind: kind.to_string(), outcome: gist },
        situation: SituationBrief {
            relevance: s.relevance,
            idle_ms: s.idle_ms,
            local_hour: hour,
            backoff: s.backoff,
            exchanges: s.exchanges,
            topic_signals: s.topic_signals,
        },
    })
}
