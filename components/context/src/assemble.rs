//! Phase A: context assembly (design 002 §2).

use mneme_conversation::context::{self, Assembled, STREAK_TTL_MS};
use mneme_conversation::{Mode, identity, topic};
use mneme_store::{Sql, Stores, Value};
use mneme_substrate::{Fail, Result, embed, records, wm};

/// One message to assemble context for.
#[derive(Debug)]
pub struct Request {
    pub thread_id: String,
    pub text: String,
    pub now_ms: u64,
    /// A social exit: skip the embedding and topic classification.
    pub light: bool,
}

/// Topics compared against a message: the most recently active ones.
const TOPIC_CANDIDATES: i64 = 200;

pub async fn assemble(req: Request) -> Result<Assembled> {
    let started = mneme_time::clock::system_ms();
    let stores = Stores::open().await?;
    let (sql, kv) = (&stores.sql, &stores.kv);
    let now = req.now_ms;

    // The thread's state and the principal's name in one round trip, and the
    // thread's topic streak and focus beside it.
    let (mut rows, mut prior_streak, mut stored_focus) = (Vec::new(), None, None);
    sql.all::<Fail>(vec![
        Box::pin(async {
            rows = sql
                .query(
                    "SELECT (SELECT value FROM user_traits WHERE key = 'name') AS name, \
                     (SELECT last_activity_ms FROM threads WHERE id = $1) AS last_activity_ms, \
                     (SELECT exchange_count FROM threads WHERE id = $1) AS exchange_count, \
                     (SELECT previous_mode FROM threads WHERE id = $1) AS previous_mode, \
                     (SELECT previous_tools FROM threads WHERE id = $1) AS previous_tools",
                    &[req.thread_id.as_str().into()],
                )
                .await?;
            Ok(())
        }),
        Box::pin(async {
            prior_streak = records::streak(kv, &req.thread_id, now).await?;
            Ok(())
        }),
        Box::pin(async {
            if !req.light {
                stored_focus = records::focus(kv, &req.thread_id, now).await?;
            }
            Ok(())
        }),
    ])
    .await?;
    let r = rows.first().ok_or_else(|| Fail::new("internal", "the state query returned no row"))?;
    let last_activity = r.opt_i64("last_activity_ms")?.map(|v| v as u64);
    let exchange_count = r.opt_i64("exchange_count")?.unwrap_or(0) as u32;
    let previous_mode = r.opt_text("previous_mode")?.and_then(|m| Mode::parse(&m));
    let previous_tools =
        r.opt_text("previous_tools")?.and_then(|t| serde_json::from_str::<Vec<String>>(&t).ok()).unwrap_or_default();
    let returning = context::returning_from_silence(last_activity, now);

    // Step 1: the IIP hook, before anything else reads identity.
    let stated = identity::stated_name(&req.text);
    if let Some(name) = &stated {
        save_trait(sql, "name", name, "core", "explicit", identity::NAME_CONFIDENCE, now).await?;
    }
    let name = stated.clone().or(r.opt_text("name")?);

    let mut embed_us = 0;
    let mut embedding = Vec::new();
    let (mut new_streak, mut new_focus) = (None, None);
    let (topic_name, is_new_topic, topic_confidence, streak, distracted) = if req.light {
        let t = prior_streak.as_ref().map_or(mneme_conversation::topic::GENERAL_TOPIC.to_string(), |s| s.topic.clone());
        (t, false, 0.0, prior_streak.as_ref().map_or(0, |s| s.count), false)
    } else {
        let t0 = std::time::Instant::now();
        embedding = embed(&req.text)?;
        embed_us = t0.elapsed().as_micros() as u64;
        let c =
            classify_topic(sql, &embedding, &req.text, prior_streak.as_ref().map(|s| s.topic.as_str()), now).await?;
        let streak = context::next_streak(prior_streak.as_ref(), &c.topic);
        let mut distracted = false;
        if let Some(f) = &stored_focus {
            distracted =
                !f.embedding.is_empty() && mneme_text::cosine(&embedding, &f.embedding) < context::DISTRACTION_COSINE;
        }
        if let Some(f) = context::infer_focus(stored_focus.as_ref().map(|f| &f.focus), &streak) {
            let e = embed(&c.topic.replace('-', " "))?;
            new_focus = Some(records::StoredFocus { focus: f, embedding: e });
        }
        let count = streak.count;
        new_streak = Some(streak);
        (c.topic, c.is_new_topic, c.similarity, count, distracted)
    };
    if req.light {
        // A social exit needs identity and the thread's topic, nothing more:
        // it is answered by rule and must stay within its 3 ms budget.
        return Ok(Assembled {
            thread_id: req.thread_id,
            name,
            name_stated: stated.is_some(),
            topic: topic_name.clone(),
            previous_topic: Some(topic_name),
            streak,
            returning_from_silence: returning,
            previous_mode,
            previous_tools,
            session_exchange_count: exchange_count,
            salience: context::salience(&req.text),
            took_ms: mneme_time::clock::system_ms().saturating_sub(started),
            ..Default::default()
        });
    }
    // The focus as this request leaves it.
    let focus = new_focus.as_ref().or(stored_focus.as_ref()).map(|f| f.focus.clone());
    let (mut turns, mut gists, mut facts, mut fok) = (Vec::new(), Vec::new(), Vec::new(), 0.0);
    let (mut world_state, mut memories, mut recent) = (String::new(), Vec::new(), Vec::new());
    sql.all::<Fail>(vec![
        Box::pin(async {
            if let Some(s) = &new_streak {
                records::set_streak(kv, &req.thread_id, s, now).await?;
            }
            if let Some(f) = &new_focus {
                records::set_focus(kv, &req.thread_id, f, now, STREAK_TTL_MS).await?;
            }
            Ok(())
        }),
        Box::pin(async {
            turns = wm::read(sql, &req.thread_id, now).await?;
            Ok(())
        }),
        Box::pin(async {
            gists = records::gists(kv, &topic_name, now).await?;
            Ok(())
        }),
        Box::pin(async {
            facts = records::facts(kv, &topic_name, now).await?;
            Ok(())
        }),
        Box::pin(async {
            fok = records::fok(kv, &topic_name).await?;
            Ok(())
        }),
        Box::pin(async {
            world_state = mneme_substrate::world::world_state(sql, focus.as_ref(), now).await?;
            Ok(())
        }),
        Box::pin(async {
            memories = mneme_substrate::graph::memories(sql, &req.text, &embedding).await?;
            Ok(())
        }),
        Box::pin(async {
            recent = sql
                .query(
                    "SELECT router_confidence FROM routing_decisions WHERE topic = $1 ORDER BY id DESC LIMIT 3",
                    &[topic_name.as_str().into()],
                )
                .await?;
            Ok(())
        }),
    ])
    .await?;
    let wm_turns = wm::turn_count(&turns);
    let warmth = context::warmth(wm_turns, gists.len(), !world_state.is_empty());
    let density = context::density(gists.len(), facts.len());
    let memory_confidence = context::memory_confidence(fok, warmth.warmth, density, is_new_topic);
    let mut recent_router_confidences =
        recent.iter().map(|r| r.f64("router_confidence")).collect::<std::result::Result<Vec<_>, _>>()?;
    recent_router_confidences.reverse();

    Ok(Assembled {
        thread_id: req.thread_id,
        name,
        name_stated: stated.is_some(),
        turns,
        wm_turns,
        gists: gists
            .iter()
            .map(|g| context::Gist { content: g.content.clone(), kind: g.kind.clone(), confidence: g.confidence })
            .collect(),
        facts: records::plain_facts(&facts),
        memories,
        world_state,
        fok,
        warmth: warmth.warmth,
        density,
        memory_confidence,
        topic: topic_name,
        previous_topic: prior_streak.map(|s| s.topic),
        is_new_topic,
        topic_confidence,
        streak,
        focus,
        distracted,
        returning_from_silence: returning,
        previous_mode,
        previous_tools,
        recent_router_confidences,
        session_exchange_count: exchange_count,
        salience: context::salience(&req.text),
        took_ms: mneme_time::clock::system_ms().saturating_sub(started),
        embed_us,
    })
}

async fn classify_topic(
    sql: &Sql,
    embedding: &[f32],
    text: &str,
    recent: Option<&str>,
    now: u64,
) -> Result<topic::Classification> {
    let rows = sql
        .query(
            "SELECT name, embedding, messages FROM topics ORDER BY last_active_ms DESC LIMIT $1",
            &[Value::Int(TOPIC_CANDIDATES)],
        )
        .await?;
    let mut topics = Vec::with_capacity(rows.len());
    for r in &rows {
        topics.push(topic::Topic {
            name: r.text("name")?,
            embedding: mneme_substrate::bytes_f32(&r.blob("embedding")?),
            messages: r.i64("messages")? as u32,
        });
    }
    let c = topic::classify(embedding, &topics, recent, &topic::name_from(text, now));
    if c.is_new_topic {
        sql.execute(
            "INSERT INTO topics (name, embedding, messages, created_ms, last_active_ms) VALUES ($1, $2, 1, $3, $3) \
             ON CONFLICT (name) DO UPDATE SET last_active_ms = excluded.last_active_ms",
            &[c.topic.as_str().into(), mneme_substrate::f32_bytes(embedding).into(), Value::Int(now as i64)],
        )
        .await?;
    } else if let Some(mut t) = topics.into_iter().find(|t| t.name == c.topic) {
        topic::fold(&mut t, embedding);
        sql.execute(
            "UPDATE topics SET embedding = $2, messages = $3, last_active_ms = $4 WHERE name = $1",
            &[
                t.name.as_str().into(),
                mneme_substrate::f32_bytes(&t.embedding).into(),
                Value::Int(t.messages as i64),
                Value::Int(now as i64),
            ],
        )
        .await?;
    }
    Ok(c)
}

/// Writes a trait (the IIP hook and the `memorize` action use it).
pub async fn save_trait(
    sql: &Sql,
    key: &str,
    value: &str,
    category: &str,
    source: &str,
    confidence: f64,
    now: u64,
) -> Result<()> {
    sql.execute(
        "INSERT INTO user_traits (key, value, category, source, confidence, speaker_confidence, updated_ms) \
         VALUES ($1, $2, $3, $4, $5, 1.0, $6) ON CONFLICT (key) DO UPDATE SET value = excluded.value, \
         category = excluded.category, source = excluded.source, confidence = excluded.confidence, \
         speaker_confidence = excluded.speaker_confidence, updated_ms = excluded.updated_ms",
        &[key.into(), value.into(), category.into(), source.into(), confidence.into(), Value::Int(now as i64)],
    )
    .await?;
    Ok(())
}
