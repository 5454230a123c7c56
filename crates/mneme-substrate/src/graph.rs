//! Episodes and the concept graph as the stages that read them see them:
//! the context's memories, recall's concepts, the seeds and neighbourhood
//! spreading activation walks (the `associate` skill and the drift engine).
//! Consolidation writes the graph; forgetting an episode, a concept or a
//! topic also forgets what the drift engine kept of it.

use mneme_background::consolidate as rules;
use mneme_store::{Sql, Value};

use crate::{Result, embed_many, in_list, search};

/// The search-index corpus of episodes.
pub const CORPUS: &str = "episode";

/// Concepts compared with a seed by embedding when no name matches.
const SEED_CANDIDATES: i64 = 2_000;
/// A seed names a concept whose embedding is at least this close.
pub const SEED_COSINE: f32 = 0.6;

/// The concepts a list of seeds stands for: a concept named by the seed or
/// by one of its keywords; a seed that names none takes its nearest
/// concept by embedding (at least 0.6). Returns `(id, name)`.
pub async fn concept_seeds(sql: &Sql, seeds: &[String]) -> Result<Vec<(String, String)>> {
    let per_seed: Vec<(String, Vec<String>)> = seeds
        .iter()
        .map(|s| {
            let mut names = vec![rules::concept_name(s)];
            names.extend(mneme_conversation::generate::keywords(s));
            names.retain(|n| !n.is_empty());
            (s.clone(), names)
        })
        .collect();
    let mut names: Vec<&String> = per_seed.iter().flat_map(|(_, n)| n).collect();
    names.dedup();
    if names.is_empty() {
        return Ok(Vec::new());
    }
    let params: Vec<Value> = names.iter().map(|n| Value::from(n.as_str())).collect();
    let mut found: Vec<(String, String)> = sql
        .query(&format!("SELECT id, name FROM semantic_concepts WHERE name IN ({})", in_list(1, names.len())), &params)
        .await?
        .iter()
        .map(|r| Ok((r.text("id")?, r.text("name")?)))
        .collect::<Result<_>>()?;
    let unmatched: Vec<String> = per_seed
        .into_iter()
        .filter(|(_, n)| !n.iter().any(|n| found.iter().any(|(_, f)| f == n)))
        .map(|(s, _)| s)
        .collect();
    if unmatched.is_empty() {
        return Ok(found);
    }
    let rows = sql
        .query(
            "SELECT id, name, embedding FROM semantic_concepts ORDER BY strength DESC, id LIMIT $1",
            &[SEED_CANDIDATES.into()],
        )
        .await?;
    if rows.is_empty() {
        return Ok(found);
    }
    let concepts: Vec<(String, String, Vec<f32>)> = rows
        .iter()
        .map(|r| Ok((r.text("id")?, r.text("name")?, crate::bytes_f32(&r.blob("embedding")?))))
        .collect::<Result<_>>()?;
    for e in embed_many(&unmatched)? {
        let best = concepts
            .iter()
            .map(|(id, name, v)| (id, name, mneme_text::cosine(&e, v) as f32))
            .filter(|x| x.2 >= SEED_COSINE)
            .max_by(|a, b| a.2.total_cmp(&b.2));
        if let Some((id, name, _)) = best
            && !found.iter().any(|(f, _)| f == id)
        {
            found.push((id.clone(), name.clone()));
        }
    }
    Ok(found)
}

/// Edges read per hop of [`neighbourhood`], strongest first: a bound on
/// one walk however dense the graph grows.
pub const EDGES_PER_HOP: i64 = 2_000;

/// The relationships within `depth` hops of the seeds (by concept id), as
/// the edges spreading activation walks; without `weak`, only edges strong
/// enough to carry activation on their own (0.5 and up).
pub async fn neighbourhood(sql: &Sql, seeds: &[String], depth: u32, weak: bool) -> Result<Vec<rules::Edge>> {
    let mut edges: Vec<rules::Edge> = Vec::new();
    let mut have: std::collections::HashSet<(String, String)> = std::collections::HashSet::new();
    let mut frontier: Vec<String> = seeds.to_vec();
    let mut seen: std::collections::HashSet<String> = seeds.iter().cloned().collect();
    let floor = if weak { 0.0 } else { rules::WEAK_EDGE };
    for _ in 0..depth {
        if frontier.is_empty() {
            break;
        }
        let mut params: Vec<Value> = frontier.iter().map(|f| Value::from(f.as_str())).collect();
        let list = in_list(1, frontier.len());
        params.push(floor.into());
        params.push(EDGES_PER_HOP.into());
        let (f, l) = (frontier.len() + 1, frontier.len() + 2);
        let rows = sql
            .query(
                &format!(
                    "SELECT source_id, target_id, max(strength) AS strength FROM semantic_relationships
                     WHERE (source_id IN ({list}) OR target_id IN ({list})) AND strength >= ${f}
                     GROUP BY source_id, target_id ORDER BY max(strength) DESC, source_id, target_id LIMIT ${l}"
                ),
                &params,
            )
            .await?;
        let mut next = Vec::new();
        for r in &rows {
            let e = rules::Edge { a: r.text("source_id")?, b: r.text("target_id")?, strength: r.f64("strength")? };
            for end in [&e.a, &e.b] {
                if seen.insert(end.clone()) {
                    next.push(end.clone());
                }
            }
            if have.insert((e.a.clone(), e.b.clone())) {
                edges.push(e);
            }
        }
        frontier = next;
    }
    Ok(edges)
}

/// Concept names by id.
pub async fn concept_names(sql: &Sql, ids: &[String]) -> Result<Vec<(String, String)>> {
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let params: Vec<Value> = ids.iter().map(|i| Value::from(i.as_str())).collect();
    sql.query(&format!("SELECT id, name FROM semantic_concepts WHERE id IN ({})", in_list(1, ids.len())), &params)
        .await?
        .iter()
        .map(|r| Ok((r.text("id")?, r.text("name")?)))
        .collect()
}

/// Episodes whose embedding is at least this close to a message reach its
/// context.
pub const CONTEXT_EPISODE_COSINE: f32 = 0.45;

/// What consolidation built that bears on a message, for its context (the
/// design's episodes for the frontal cortex, concepts for context
/// assembly): the 2 closest episodes by embedding (at least 0.45) and the
/// concepts the message names.
pub async fn memories(sql: &Sql, text: &str, embedding: &[f32]) -> Result<Vec<String>> {
    let found = search::candidates(sql, &[CORPUS], text, embedding, mneme_knowledge::fusion::Mode::Vector).await?;
    let mut close: Vec<(String, f32)> =
        found.found.values().filter(|(_, c)| *c >= CONTEXT_EPISODE_COSINE).cloned().collect();
    close.sort_by(|a, b| b.1.total_cmp(&a.1));
    close.truncate(2);
    let mut out = Vec::new();
    if !close.is_empty() {
        let params: Vec<Value> = close.iter().map(|(id, _)| Value::from(id.as_str())).collect();
        let rows = sql
            .query(
                &format!(
                    "SELECT id, gist, outcome, open_loops FROM episodes WHERE id IN ({})",
                    in_list(1, close.len())
                ),
                &params,
            )
            .await?;
        for (id, _) in &close {
            let Some(r) = rows.iter().find(|r| r.text("id").is_ok_and(|i| &i == id)) else { continue };
            let mut line = format!("[episode] {}", r.text("gist")?);
            let outcome = r.text("outcome")?;
            if !outcome.is_empty() {
                line.push_str(&format!(" Outcome: {outcome}."));
            }
            let open: Vec<String> = serde_json::from_str(&r.text("open_loops")?).unwrap_or_default();
            if !open.is_empty() {
                line.push_str(&format!(" Still open: {}.", open.join("; ")));
            }
            out.push(line);
        }
    }
    for (name, definition, _) in named_concepts(sql, text, 3).await? {
        out.push(format!("[concept] {name}: {definition}"));
    }
    Ok(out)
}

/// Words of a text looked at for concept names (at most 8,000 runs, well
/// inside both backends' parameter limits).
const NAMED_WORDS: usize = 2_000;

/// The concepts a text names as whole words, strongest first: `(name,
/// definition, strength)`. Recall and the context read them. One indexed
/// lookup of the text's 1–4-word runs, not a scan of every concept.
pub async fn named_concepts(sql: &Sql, text: &str, limit: i64) -> Result<Vec<(String, String, f64)>> {
    let words = mneme_text::words(text);
    let words = &words[..words.len().min(NAMED_WORDS)];
    let mut runs: std::collections::BTreeSet<String> = std::collections::BTreeSet::new();
    for n in 1..=rules::CONCEPT_NAME_WORDS {
        for w in words.windows(n) {
            let run = w.join(" ");
            if run.chars().count() >= 3 {
                runs.insert(run);
            }
        }
    }
    if runs.is_empty() {
        return Ok(Vec::new());
    }
    let mut params: Vec<Value> = runs.iter().map(|r| Value::from(r.as_str())).collect();
    params.push(limit.into());
    let rows = sql
        .query(
            &format!(
                "SELECT name, definition, strength FROM semantic_concepts WHERE name IN ({}) \
                 ORDER BY strength DESC, name LIMIT ${}",
                in_list(1, runs.len()),
                runs.len() + 1
            ),
            &params,
        )
        .await?;
    rows.iter().map(|r| Ok((r.text("name")?, r.text("definition")?, r.f64("strength")?))).collect()
}

/// Forgetting a concept forgets the drifts that started from it or
/// reached it, the threads it seeded and its rest.
pub async fn forget_concept(sql: &Sql, id: &str) -> std::result::Result<(), mneme_store::StoreError> {
    let reached = format!("%\"id\":\"{id}\"%");
    sql.execute(
        "DELETE FROM curiosity_threads WHERE seed_id = $1 OR drift_id IN \
         (SELECT id FROM drift_log WHERE seed_id = $1 OR concepts LIKE $2)",
        &[id.into(), reached.as_str().into()],
    )
    .await?;
    sql.execute("DELETE FROM drift_log WHERE seed_id = $1 OR concepts LIKE $2", &[id.into(), reached.as_str().into()])
        .await?;
    sql.execute("DELETE FROM drift_cooldowns WHERE concept_id = $1", &[id.into()]).await?;
    Ok(())
}

/// Forgetting an episode forgets the drifts that recalled it, and their
/// threads.
pub async fn forget_episode(sql: &Sql, id: &str) -> std::result::Result<(), mneme_store::StoreError> {
    sql.execute(
        "DELETE FROM curiosity_threads WHERE drift_id IN (SELECT id FROM drift_log WHERE grounding_id = $1)",
        &[id.into()],
    )
    .await?;
    sql.execute("DELETE FROM drift_log WHERE grounding_id = $1", &[id.into()]).await?;
    Ok(())
}

/// Forgetting a topic forgets the drifts and threads on it.
pub async fn forget_topic(sql: &Sql, topic: &str) -> std::result::Result<(), mneme_store::StoreError> {
    sql.execute("DELETE FROM drift_log WHERE topic = $1", &[topic.into()]).await?;
    sql.execute("DELETE FROM curiosity_threads WHERE topic = $1", &[topic.into()]).await?;
    Ok(())
}
