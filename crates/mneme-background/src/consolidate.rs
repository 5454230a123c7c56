//! Memory consolidation (002 §6, Phase D's three queues): what the memory
//! chunker, the episode builder and semantic consolidation keep, as parsers
//! of the model's answers, the labelled rules used when no model is
//! configured, and the salience, strength and trigger formulas.

use mneme_conversation::generate::keywords;
use mneme_text::words;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// The design's three queues, which the commit and the episode worker fill.
pub const CHUNKER_QUEUE: &str = "memory-chunker-queue";
pub const EPISODIC_QUEUE: &str = "episodic-memory-queue";
pub const SEMANTIC_QUEUE: &str = "semantic_consolidation_queue";
pub const CHUNKER_PROMPT: &str = include_str!("../../../prompts/memory-chunker.md");
pub const EPISODE_PROMPT: &str = include_str!("../../../prompts/episodic-memory.md");
pub const SEMANTIC_PROMPT: &str = include_str!("../../../prompts/semantic-extract.md");

fn closed(properties: serde_json::Value) -> serde_json::Value {
    let required: Vec<String> = properties.as_object().map(|o| o.keys().cloned().collect()).unwrap_or_default();
    serde_json::json!({"type": "object", "properties": properties, "required": required, "additionalProperties": false})
}

fn bounded_text(max: usize) -> serde_json::Value {
    serde_json::json!({"type": "string", "maxLength": max})
}

/// The JSON Schema of the chunker's answer (D-L2).
pub fn chunk_schema() -> String {
    closed(serde_json::json!({
        "gists": {"type": "array", "maxItems": 6, "items": closed(serde_json::json!({
            "type": {"enum": ["decision", "intent", "preference", "uncertainty", "fact", "commitment"]},
            "content": bounded_text(300),
            "confidence": {"type": "integer"},
        }))},
        "facts": {"type": "array", "maxItems": 6, "items": closed(serde_json::json!({
            "key": bounded_text(60),
            "value": bounded_text(200),
            "confidence": {"type": "integer"},
        }))},
        "emotion": closed(serde_json::json!({"type": bounded_text(30), "intensity": {"type": "number"}})),
    }))
    .to_string()
}

/// The JSON Schema of the episode builder's answer (D-L2).
pub fn episode_schema() -> String {
    closed(serde_json::json!({
        "intent": closed(serde_json::json!({"type": bounded_text(40), "direction": bounded_text(200)})),
        "context": closed(serde_json::json!({
            "situational": bounded_text(300),
            "conversational": bounded_text(300),
            "constraints": {"type": "array", "items": bounded_text(120), "maxItems": 5},
        })),
        "action": bounded_text(300),
        "emotion": closed(serde_json::json!({
            "type": bounded_text(30), "valence": {"type": "number"}, "intensity": {"type": "number"}, "arc": bounded_text(30),
        })),
        "outcome": bounded_text(300),
        "gist": bounded_text(400),
        "salience_factors": closed(serde_json::json!({
            "novelty": {"type": "integer"}, "emotional": {"type": "integer"},
            "commitment": {"type": "integer"}, "unresolved": {"type": "boolean"},
        })),
        "open_loops": {"type": "array", "items": bounded_text(120), "maxItems": 5},
    }))
    .to_string()
}

/// The JSON Schema of semantic extraction's answer (D-L2).
pub fn semantic_schema() -> String {
    closed(serde_json::json!({
        "concepts": {"type": "array", "maxItems": 10, "items": closed(serde_json::json!({
            "name": bounded_text(60),
            "type": {"enum": ["person", "place", "project", "idea", "preference", "skill", "object", "event"]},
            "definition": bounded_text(300),
            "domain": {"enum": ["work", "health", "family", "finance", "learning", "leisure", "general"]},
            "abstraction_level": {"type": "integer"},
        }))},
        "relationships": {"type": "array", "maxItems": 15, "items": closed(serde_json::json!({
            "source": bounded_text(60),
            "target": bounded_text(60),
            "type": {"enum": ["part_of", "causes", "supports", "contrasts", "used_for", "related_to"]},
            "strength": {"type": "number"},
        }))},
    }))
    .to_string()
}
/// The chunker's confidence gate for gists (0–10); the reference's
/// memory-chunker setting.
pub const CHUNKER_MIN_CONFIDENCE: u8 = 5;
/// A chunker fact (0–10 from the model, stored as 0–1) is kept from this on.
pub const FACT_MIN_CONFIDENCE: f64 = 0.5;
/// The gist types the chunker writes.
pub const GIST_TYPES: [&str; 6] = ["decision", "intent", "preference", "uncertainty", "fact", "commitment"];
/// Every consolidation call's temperature (the reference's).
pub const TEMPERATURE: f32 = 0.3;
/// The most gists or facts one exchange yields.
pub const MAX_PER_EXCHANGE: usize = 6;
/// Semantic consolidation waits for this many unconsolidated episodes…
pub const SEMANTIC_EVERY: i64 = 20;
/// …or an episode this many times as salient as the running mean…
pub const SEMANTIC_SALIENCE_RATIO: f64 = 1.4;
/// …at most once in this long (ms).
pub const SEMANTIC_COOLDOWN_MS: u64 = 5 * 60_000;
/// Episodes one semantic job reads.
pub const SEMANTIC_BATCH: usize = 20;
/// A new concept's strength (1–10), and what each later episode that
/// names it again adds.
pub const CONCEPT_START: f64 = 1.0;
pub const CONCEPT_REINFORCE: f64 = 1.0;
pub const CONCEPT_MAX: f64 = 10.0;
/// A relationship the rules infer from two concepts in one episode, and
/// what each repeat adds (strength 0–1).
pub const CO_OCCURRENCE: f64 = 0.3;
pub const RELATION_REINFORCE: f64 = 0.1;

fn text(v: &Value, k: &str) -> String {
    v.get(k).and_then(Value::as_str).map(str::trim).unwrap_or_default().to_string()
}

fn clip(s: &str, n: usize) -> String {
    let s = s.trim();
    if s.chars().count() <= n {
        return s.to_string();
    }
    let mut out: String = s.chars().take(n - 1).collect();
    out.push('…');
    out
}

fn object(text: &str) -> Result<Value, String> {
    let v = mneme_llm::extract_json(text).map_err(|e| e.to_string())?;
    if v.is_object() { Ok(v) } else { Err("the answer is not a JSON object".into()) }
}

// ---------------------------------------------------------------- chunker

/// A gist the chunker offers for storage.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GistDraft {
    #[serde(rename = "type")]
    pub kind: String,
    pub content: String,
    /// 0–10.
    pub confidence: u8,
}

/// A fact the chunker offers; confidence 0–1.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FactDraft {
    pub key: String,
    pub value: String,
    pub confidence: f64,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Chunk {
    pub gists: Vec<GistDraft>,
    pub facts: Vec<FactDraft>,
}

/// The chunker's user message.
pub fn chunker_message(topic: &str, prompt: &str, response: &str) -> String {
    json!({"topic": topic, "principal": prompt, "assistant": response}).to_string()
}

/// Parses the chunker's answer. Gists of an unknown type, empty ones and
/// facts under 0.5 are dropped; confidences are clamped.
pub fn parse_chunk(answer: &str) -> Result<Chunk, String> {
    let v = object(answer)?;
    let mut chunk = Chunk::default();
    for g in v.get("gists").and_then(Value::as_array).into_iter().flatten() {
        let (kind, content) = (text(g, "type").to_lowercase(), text(g, "content"));
        if content.is_empty() || !GIST_TYPES.contains(&kind.as_str()) {
            continue;
        }
        let confidence = g.get("confidence").and_then(Value::as_f64).unwrap_or(0.0).clamp(0.0, 10.0).round() as u8;
        chunk.gists.push(GistDraft { kind, content: clip(&content, 300), confidence });
    }
    for f in v.get("facts").and_then(Value::as_array).into_iter().flatten() {
        let (key, value) = (text(f, "key"), text(f, "value"));
        let confidence = f.get("confidence").and_then(Value::as_f64).unwrap_or(0.0).clamp(0.0, 10.0) / 10.0;
        if key.is_empty() || value.is_empty() || confidence < FACT_MIN_CONFIDENCE {
            continue;
        }
        chunk.facts.push(FactDraft { key: clip(&key, 60), value: clip(&value, 300), confidence });
    }
    chunk.gists.truncate(MAX_PER_EXCHANGE);
    chunk.facts.truncate(MAX_PER_EXCHANGE);
    Ok(chunk)
}

/// The principal's sentences.
fn sentences(text: &str) -> Vec<String> {
    text.split(['.', '!', '?', '\n', ';']).map(str::trim).filter(|s| words(s).len() >= 3).map(String::from).collect()
}

/// Cue phrases of each gist type, checked in this order.
const CUES: [(&str, &[&str]); 6] = [
    ("commitment", &["i will ", "i'll ", "i promise", "i promised", "i'm going to", "i am going to", "i committed"]),
    (
        "decision",
        &["i decided", "i've decided", "we decided", "i chose", "we'll go with", "i'm going with", "i settled on"],
    ),
    (
        "preference",
        &[
            "i prefer",
            "i like",
            "i love",
            "i hate",
            "i dislike",
            "i'd rather",
            "i enjoy",
            "my favourite",
            "my favorite",
        ],
    ),
    ("intent", &["i want", "i need", "i plan", "i'm planning", "i hope", "i'd like", "i intend", "i'm trying"]),
    ("uncertainty", &["not sure", "i wonder", "i don't know", "maybe", "unsure", "undecided", "can't decide"]),
    ("fact", &["i am ", "i'm a", "i work", "i live", "my ", "i have "]),
];

/// The labelled rules' chunk: each of the principal's sentences that
/// carries a cue phrase becomes a gist of that type, at the chunker's
/// gate (5), and `my X is Y` becomes a fact at 0.6.
pub fn rule_chunk(prompt: &str) -> Chunk {
    let mut chunk = Chunk::default();
    for s in sentences(prompt) {
        let l = format!("{} ", s.to_lowercase().replace('’', "'"));
        if let Some((kind, _)) =
            CUES.iter().find(|(_, cues)| cues.iter().any(|c| l.starts_with(c) || l.contains(&format!(" {c}"))))
        {
            chunk.gists.push(GistDraft {
                kind: (*kind).into(),
                content: clip(&format!("The principal said: {s}"), 300),
                confidence: CHUNKER_MIN_CONFIDENCE,
            });
        }
        // ASCII lower-casing keeps every byte offset, so they index `s`.
        let la = s.to_ascii_lowercase();
        let start = if la.starts_with("my ") { Some(0) } else { la.find(" my ").map(|p| p + 1) };
        if let Some(i) = start
            && let Some(j) = la[i + 2..].find(" is ").filter(|j| *j >= 1)
        {
            // `j` counts from the space after "my".
            let key = la[i + 3..i + 2 + j].trim().replace(char::is_whitespace, "_");
            let value = s[i + 2 + j + 4..].trim().trim_end_matches(['.', '!']).to_string();
            if !key.is_empty() && key.split('_').count() <= 4 && !value.is_empty() {
                chunk.facts.push(FactDraft { key, value: clip(&value, 300), confidence: 0.6 });
            }
        }
    }
    chunk.gists.truncate(MAX_PER_EXCHANGE);
    chunk.facts.truncate(MAX_PER_EXCHANGE);
    chunk
}

// ---------------------------------------------------------------- episodes

/// One exchange of an episode's window.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Exchange {
    pub id: String,
    pub topic: String,
    pub prompt: String,
    pub response: String,
}

/// Salience factors, each 0–3.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Factors {
    pub novelty: u8,
    pub emotional: u8,
    pub commitment: u8,
    pub unresolved: bool,
}

impl Factors {
    /// `0.4·novelty + 0.4·emotional + 0.2·commitment` over 3, ×1.25 when
    /// something is unresolved, clamped to [0.1, 1].
    pub fn salience(&self) -> f64 {
        let f = |x: u8| f64::from(x.min(3)) / 3.0;
        let s = 0.4 * f(self.novelty) + 0.4 * f(self.emotional) + 0.2 * f(self.commitment);
        let s = if self.unresolved { s * 1.25 } else { s };
        s.clamp(0.1, 1.0)
    }

    /// The salience as stored: an integer 1–10.
    pub fn stored(&self) -> i64 {
        ((self.salience() * 10.0).round() as i64).clamp(1, 10)
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EpisodeDraft {
    pub intent: Value,
    pub context: Value,
    pub action: String,
    pub emotion: Value,
    pub outcome: String,
    pub gist: String,
    pub factors: Factors,
    pub open_loops: Vec<String>,
}

impl EpisodeDraft {
    /// The text its embedding is computed from: gist, intent, outcome and
    /// emotion (the reference's choice).
    pub fn embedding_text(&self) -> String {
        let intent = self.intent.get("direction").and_then(Value::as_str).unwrap_or_default();
        let emotion = self.emotion.get("type").and_then(Value::as_str).unwrap_or_default();
        [self.gist.as_str(), intent, self.outcome.as_str(), emotion]
            .iter()
            .filter(|s| !s.is_empty())
            .copied()
            .collect::<Vec<_>>()
            .join(". ")
    }
}

/// The episode builder's user message.
pub fn episode_message(topic: &str, exchanges: &[Exchange]) -> String {
    let ex: Vec<Value> = exchanges
        .iter()
        .map(|e| json!({"principal": clip(&e.prompt, 1500), "assistant": clip(&e.response, 1500)}))
        .collect();
    json!({"topic": topic, "exchanges": ex}).to_string()
}

fn factor(v: &Value, k: &str) -> u8 {
    v.get(k).and_then(Value::as_f64).unwrap_or(0.0).clamp(0.0, 3.0).round() as u8
}

/// Parses the episode builder's answer; a gist is required.
pub fn parse_episode(answer: &str) -> Result<EpisodeDraft, String> {
    let v = object(answer)?;
    let gist = text(&v, "gist");
    if gist.is_empty() {
        return Err("the episode has no gist".into());
    }
    let f = v.get("salience_factors").cloned().unwrap_or(Value::Null);
    let or_obj = |k: &str| match v.get(k) {
        Some(o @ Value::Object(_)) => o.clone(),
        Some(Value::String(s)) => json!({"direction": s}),
        _ => json!({}),
    };
    Ok(EpisodeDraft {
        intent: or_obj("intent"),
        context: match v.get("context") {
            Some(o @ Value::Object(_)) => o.clone(),
            _ => json!({}),
        },
        action: clip(&text(&v, "action"), 500),
        emotion: match v.get("emotion") {
            Some(o @ Value::Object(_)) => o.clone(),
            _ => json!({"type": "neutral"}),
        },
        outcome: clip(&text(&v, "outcome"), 500),
        gist: clip(&gist, 600),
        factors: Factors {
            novelty: factor(&f, "novelty"),
            emotional: factor(&f, "emotional"),
            commitment: factor(&f, "commitment"),
            unresolved: f.get("unresolved").and_then(Value::as_bool).unwrap_or(false),
        },
        open_loops: v
            .get("open_loops")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|l| l.as_str().map(|s| clip(s, 200)))
            .filter(|s| !s.is_empty())
            .take(5)
            .collect(),
    })
}

const EMOTION_WORDS: [(&str, &str, f64); 16] = [
    ("happy", "joy", 0.7),
    ("glad", "joy", 0.6),
    ("excited", "joy", 0.8),
    ("love", "joy", 0.6),
    ("great", "joy", 0.4),
    ("thrilled", "joy", 0.9),
    ("sad", "sadness", -0.6),
    ("upset", "sadness", -0.6),
    ("disappointed", "sadness", -0.5),
    ("worried", "fear", -0.5),
    ("anxious", "fear", -0.6),
    ("scared", "fear", -0.7),
    ("nervous", "fear", -0.4),
    ("angry", "anger", -0.7),
    ("annoyed", "anger", -0.5),
    ("frustrated", "anger", -0.6),
];

/// The labelled rules' episode: the first request is the intent, the last
/// reply the outcome, the keywords the gist; salience factors from word
/// counts: distinct keywords (novelty), emotion words, commitment cues,
/// and a question left at the end (unresolved).
pub fn rule_episode(topic: &str, exchanges: &[Exchange]) -> EpisodeDraft {
    let prompts: Vec<&str> = exchanges.iter().map(|e| e.prompt.as_str()).collect();
    let all = prompts.join(". ");
    let mut keys: Vec<String> = Vec::new();
    for p in &prompts {
        for k in keywords(p) {
            if !keys.contains(&k) {
                keys.push(k);
            }
        }
    }
    let lower: Vec<String> = words(&all);
    let feelings: Vec<&(&str, &str, f64)> =
        EMOTION_WORDS.iter().filter(|(w, _, _)| lower.iter().any(|l| l == w)).collect();
    let commitments = sentences(&all)
        .iter()
        .filter(|s| {
            let l = format!("{} ", s.to_lowercase());
            CUES[..2].iter().any(|(_, cues)| cues.iter().any(|c| l.starts_with(c) || l.contains(&format!(" {c}"))))
        })
        .count();
    let last = prompts.last().copied().unwrap_or_default().trim();
    let open: Vec<String> = last
        .split_inclusive(['.', '!', '?', '\n'])
        .map(str::trim)
        .filter(|q| q.ends_with('?') && words(q).len() >= 2)
        .map(|q| clip(q, 200))
        .take(3)
        .collect();
    let first = sentences(prompts.first().copied().unwrap_or_default()).into_iter().next().unwrap_or_default();
    // A rule-based reply starts with its label, which is no outcome.
    let outcome = exchanges
        .last()
        .map(|e| {
            let r = e.response.trim_start();
            let r = if r.starts_with('[') { r.split_once(']').map_or(r, |x| x.1) } else { r };
            sentences(r).into_iter().next().unwrap_or_default()
        })
        .unwrap_or_default();
    let (emotion, valence) = feelings.first().map_or(("neutral", 0.0), |(_, t, v)| (*t, *v));
    let n = exchanges.len();
    let about = if keys.is_empty() {
        topic.replace('-', " ")
    } else {
        keys.iter().take(6).cloned().collect::<Vec<_>>().join(", ")
    };
    EpisodeDraft {
        intent: json!({"type": "conversation", "direction": clip(&first, 200)}),
        context: json!({"situational": topic, "conversational": format!("{n} exchange(s)"), "constraints": []}),
        action: format!("talked about {about}"),
        emotion: json!({"type": emotion, "valence": valence, "intensity": (feelings.len() as f64 / 3.0).min(1.0), "arc": "steady"}),
        outcome: clip(&outcome, 300),
        gist: clip(&format!("{about} ({n} exchange(s) on {})", topic.replace('-', " ")), 600),
        factors: Factors {
            novelty: match keys.len() {
                0..=3 => 0,
                4..=7 => 1,
                8..=14 => 2,
                _ => 3,
            },
            emotional: feelings.len().min(3) as u8,
            commitment: commitments.min(3) as u8,
            unresolved: !open.is_empty(),
        },
        open_loops: open,
    }
}

/// Whether an episode just built calls for semantic consolidation: 20
/// episodes wait for it, or this one's salience is at least 1.4 × the mean
/// of the waiting ones before it (with at least one) and no semantic job
/// was queued in the last 5 minutes. Never while a semantic job is still
/// open: it will take the waiting episodes.
pub fn semantic_due(
    waiting: i64,
    salience: f64,
    earlier_mean: Option<f64>,
    last_queued_ms: Option<u64>,
    open: bool,
    now_ms: u64,
) -> bool {
    if open {
        return false;
    }
    if waiting >= SEMANTIC_EVERY {
        return true;
    }
    let cooled = last_queued_ms.is_none_or(|t| now_ms.saturating_sub(t) >= SEMANTIC_COOLDOWN_MS);
    cooled && earlier_mean.is_some_and(|m| m > 0.0 && salience >= SEMANTIC_SALIENCE_RATIO * m)
}

// ---------------------------------------------------------------- semantic

/// An episode as semantic consolidation reads it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EpisodeBrief {
    pub id: String,
    pub topic: String,
    pub gist: String,
    pub intent: String,
    pub outcome: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ConceptDraft {
    pub name: String,
    #[serde(rename = "type")]
    pub kind: String,
    pub definition: String,
    pub domain: String,
    pub abstraction_level: u8,
    /// The episodes it came from.
    pub episodes: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RelationDraft {
    pub source: String,
    pub target: String,
    #[serde(rename = "type")]
    pub kind: String,
    pub strength: f64,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Semantic {
    pub concepts: Vec<ConceptDraft>,
    pub relationships: Vec<RelationDraft>,
}

/// A concept's name as it is stored and matched: lower case, single
/// spaces, at most four words and 60 characters.
pub fn concept_name(s: &str) -> String {
    clip(&words(s).into_iter().take(CONCEPT_NAME_WORDS).collect::<Vec<_>>().join(" "), 60)
}

/// A concept's name runs to four words (the semantic prompt's bound), so a
/// text's 1–4-word runs find every concept it names.
pub const CONCEPT_NAME_WORDS: usize = 4;

pub fn semantic_message(episodes: &[EpisodeBrief], known: &[String]) -> String {
    let ep: Vec<Value> = episodes
        .iter()
        .map(|e| json!({"topic": e.topic, "gist": e.gist, "intent": e.intent, "outcome": e.outcome}))
        .collect();
    json!({"episodes": ep, "known_concepts": known}).to_string()
}

/// Parses semantic extraction. Every concept is credited to every episode
/// of the batch that mentions its name, or to all of them when none does;
/// a relationship needs both ends among the concepts and two different ones.
pub fn parse_semantic(answer: &str, episodes: &[EpisodeBrief]) -> Result<Semantic, String> {
    let v = object(answer)?;
    let mut out = Semantic::default();
    for c in v.get("concepts").and_then(Value::as_array).into_iter().flatten() {
        let name = concept_name(&text(c, "name"));
        if name.is_empty() || out.concepts.iter().any(|k| k.name == name) {
            continue;
        }
        let mut from: Vec<String> = episodes
            .iter()
            .filter(|e| format!("{} {} {}", e.gist, e.intent, e.outcome).to_lowercase().contains(&name))
            .map(|e| e.id.clone())
            .collect();
        if from.is_empty() {
            from = episodes.iter().map(|e| e.id.clone()).collect();
        }
        out.concepts.push(ConceptDraft {
            name,
            kind: Some(text(c, "type").to_lowercase()).filter(|t| !t.is_empty()).unwrap_or_else(|| "idea".into()),
            definition: clip(&text(c, "definition"), 400),
            domain: Some(text(c, "domain").to_lowercase())
                .filter(|t| !t.is_empty())
                .unwrap_or_else(|| "general".into()),
            abstraction_level: c.get("abstraction_level").and_then(Value::as_f64).unwrap_or(2.0).clamp(1.0, 5.0) as u8,
            episodes: from,
        });
    }
    out.concepts.truncate(10);
    for r in v.get("relationships").and_then(Value::as_array).into_iter().flatten() {
        let (s, t) = (concept_name(&text(r, "source")), concept_name(&text(r, "target")));
        if s == t || !out.concepts.iter().any(|c| c.name == s) || !out.concepts.iter().any(|c| c.name == t) {
            continue;
        }
        let kind =
            Some(text(r, "type").to_lowercase()).filter(|t| !t.is_empty()).unwrap_or_else(|| "related_to".into());
        let strength = r.get("strength").and_then(Value::as_f64).unwrap_or(0.5).clamp(0.0, 1.0);
        out.relationships.push(RelationDraft { source: s, target: t, kind, strength });
    }
    out.relationships.truncate(15);
    Ok(out)
}

/// The labelled rules' extraction: an episode's keywords are its concepts
/// (type `idea`, defined by the episode's gist), and two concepts of one
/// episode are `related_to` at 0.3.
pub fn rule_semantic(episodes: &[EpisodeBrief]) -> Semantic {
    let mut out = Semantic::default();
    for e in episodes {
        let names: Vec<String> = keywords(&format!("{} {}", e.intent, e.gist)).into_iter().take(4).collect();
        for n in &names {
            match out.concepts.iter_mut().find(|c| &c.name == n) {
                Some(c) => {
                    if !c.episodes.contains(&e.id) {
                        c.episodes.push(e.id.clone());
                    }
                }
                None => out.concepts.push(ConceptDraft {
                    name: n.clone(),
                    kind: "idea".into(),
                    definition: clip(&format!("mentioned in: {}", e.gist), 400),
                    domain: "general".into(),
                    abstraction_level: 2,
                    episodes: vec![e.id.clone()],
                }),
            }
        }
        for (i, a) in names.iter().enumerate() {
            for b in &names[i + 1..] {
                if !out.relationships.iter().any(|r| (&r.source, &r.target) == (a, b)) {
                    out.relationships.push(RelationDraft {
                        source: a.clone(),
                        target: b.clone(),
                        kind: "related_to".into(),
                        strength: CO_OCCURRENCE,
                    });
                }
            }
        }
    }
    out
}

/// A concept's strength after it is extracted again from `episodes` new
/// episodes.
pub fn reinforced(strength: f64, episodes: usize) -> f64 {
    (strength + CONCEPT_REINFORCE * episodes.max(1) as f64).min(CONCEPT_MAX)
}

/// A relationship's strength when it is extracted again: the stronger of
/// the two, plus the repeat bonus, at most 1.
pub fn relation_reinforced(old: f64, new: f64) -> f64 {
    (old.max(new) + RELATION_REINFORCE).min(1.0)
}

// ---------------------------------------------------------------- activation

/// A concept graph's edge (relationships are followed both ways).
#[derive(Debug, Clone, PartialEq)]
pub struct Edge {
    pub a: String,
    pub b: String,
    /// 0–1.
    pub strength: f64,
}

/// Spreading activation's constants (the reference's).
pub const SPREAD_DECAY: f64 = 0.7;
pub const WEAK_EDGE: f64 = 0.5;
pub const WEAK_FOLLOW_P: f64 = 0.15;
pub const MIN_ACTIVATION: f64 = 0.3;
pub const SPREAD_DEPTH: u32 = 2;
pub const SPREAD_TOP: usize = 5;

/// Breadth-first spreading activation from seeds at 1.0 to `depth` hops:
/// each hop multiplies by 0.7 and by a strong edge's strength; a weak edge
/// (< 0.5) is followed only when `follow_weak` says so, without its
/// strength; activations under 0.3 are dropped; a concept reached twice
/// keeps the larger. Returns the activated concepts (seeds excluded),
/// strongest first.
pub fn spread(
    seeds: &[String],
    edges: &[Edge],
    depth: u32,
    mut follow_weak: impl FnMut() -> bool,
) -> Vec<(String, f64)> {
    // Each node's edges in the order given, so the draws for weak edges
    // come in a fixed order.
    let mut adjacent: std::collections::HashMap<&str, Vec<(&String, f64)>> = std::collections::HashMap::new();
    for e in edges {
        adjacent.entry(e.a.as_str()).or_default().push((&e.b, e.strength));
        if e.a != e.b {
            adjacent.entry(e.b.as_str()).or_default().push((&e.a, e.strength));
        }
    }
    let is_seed: std::collections::HashSet<&str> = seeds.iter().map(String::as_str).collect();
    let mut best: std::collections::BTreeMap<String, f64> = std::collections::BTreeMap::new();
    let mut frontier: Vec<(String, f64)> = seeds.iter().map(|s| (s.clone(), 1.0)).collect();
    for _ in 0..depth {
        let mut next = Vec::new();
        for (node, act) in &frontier {
            for &(other, strength) in adjacent.get(node.as_str()).map_or(&[][..], Vec::as_slice) {
                if is_seed.contains(other.as_str()) {
                    continue;
                }
                let a = if strength < WEAK_EDGE {
                    if !follow_weak() {
                        continue;
                    }
                    act * SPREAD_DECAY
                } else {
                    act * SPREAD_DECAY * strength
                };
                if a < MIN_ACTIVATION {
                    continue;
                }
                let entry = best.entry(other.clone()).or_insert(0.0);
                if a > *entry {
                    *entry = a;
                    next.push((other.clone(), a));
                }
            }
        }
        frontier = next;
    }
    let mut out: Vec<(String, f64)> = best.into_iter().collect();
    out.sort_by(|x, y| y.1.total_cmp(&x.1).then(x.0.cmp(&y.0)));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn salience_follows_the_formula_and_its_bounds() {
        let f = |n, e, c, u| Factors { novelty: n, emotional: e, commitment: c, unresolved: u };
        assert_eq!(f(0, 0, 0, false).salience(), 0.1);
        assert_eq!(f(0, 0, 0, false).stored(), 1);
        assert!((f(3, 0, 0, false).salience() - 0.4).abs() < 1e-12);
        assert!((f(3, 3, 3, false).salience() - 1.0).abs() < 1e-12);
        assert_eq!(f(3, 3, 3, true).salience(), 1.0, "clamped after the unresolved bonus");
        // 0.4·2/3 + 0.4·1/3 + 0.2·3/3 = 0.6, ×1.25 = 0.75 → 8.
        assert!((f(2, 1, 3, true).salience() - 0.75).abs() < 1e-12);
        assert_eq!(f(2, 1, 3, true).stored(), 8);
        assert_eq!(f(9, 9, 9, false).salience(), 1.0, "factors over 3 count as 3");
    }

    #[test]
    fn semantic_consolidation_triggers() {
        assert!(semantic_due(20, 0.1, Some(0.5), Some(1_000), false, 1_000), "20 waiting: always");
        assert!(!semantic_due(19, 0.5, Some(0.5), None, false, 0));
        assert!(semantic_due(2, 0.7, Some(0.5), None, false, 0), "1.4 × the mean");
        assert!(!semantic_due(2, 0.69, Some(0.5), None, false, 0));
        assert!(!semantic_due(1, 0.9, None, None, false, 0), "no earlier episode, no mean");
        assert!(!semantic_due(2, 0.7, Some(0.5), Some(1_000), false, 1_000 + SEMANTIC_COOLDOWN_MS - 1), "cooldown");
        assert!(semantic_due(2, 0.7, Some(0.5), Some(1_000), false, 1_000 + SEMANTIC_COOLDOWN_MS));
        assert!(!semantic_due(25, 0.7, Some(0.5), None, true, 0), "a semantic job is open");
    }

    #[test]
    fn the_chunker_parse_keeps_typed_gists_and_confident_facts() {
        let a = r#"<think>hm</think>```json
        {"gists":[{"type":"Decision","content":"The principal chose Rust.","confidence":8.6},
                  {"type":"gossip","content":"x","confidence":9},{"type":"intent","content":"  ","confidence":9},
                  {"type":"fact","content":"Lives in Porto","confidence":42}],
         "facts":[{"key":"city","value":"Porto","confidence":7},{"key":"pet","value":"cat","confidence":4}]}```"#;
        let c = parse_chunk(a).unwrap();
        assert_eq!(c.gists.len(), 2);
        assert_eq!((c.gists[0].kind.as_str(), c.gists[0].confidence), ("decision", 9));
        assert_eq!(c.gists[1].confidence, 10);
        assert_eq!(c.facts, vec![FactDraft { key: "city".into(), value: "Porto".into(), confidence: 0.7 }]);
        assert!(parse_chunk("no json here").is_err());
        assert!(parse_chunk("[1,2]").is_err());
    }

    #[test]
    fn the_rules_chunk_by_cue_phrases() {
        let c = rule_chunk(
            "I decided to learn the cello this winter. My sister is Ana! Nice weather? I prefer mornings for practice.",
        );
        let kinds: Vec<&str> = c.gists.iter().map(|g| g.kind.as_str()).collect();
        assert_eq!(kinds, ["decision", "fact", "preference"]);
        assert!(c.gists[0].content.starts_with("The principal said: I decided"));
        assert!(c.gists.iter().all(|g| g.confidence == CHUNKER_MIN_CONFIDENCE));
        assert_eq!(c.facts, vec![FactDraft { key: "sister".into(), value: "Ana".into(), confidence: 0.6 }]);
        assert_eq!(rule_chunk("hello there friend"), Chunk::default());
        // Offsets survive curly apostrophes and letters whose lower case is
        // longer; "enemy is" is no fact.
        let c = rule_chunk("İ’m told my café’s owner is Zoë Ørsted. Their enemy is time");
        assert_eq!(
            c.facts,
            vec![FactDraft { key: "café’s_owner".into(), value: "Zoë Ørsted".into(), confidence: 0.6 }]
        );
        assert_eq!(rule_chunk("My is broken, and my is what?").facts, vec![], "no key, no fact, no panic");
    }

    fn ex(p: &str, r: &str) -> Exchange {
        Exchange { id: "x".into(), topic: "cello".into(), prompt: p.into(), response: r.into() }
    }

    #[test]
    fn the_rules_build_an_episode_with_salience_factors() {
        let e = rule_episode(
            "cello-lessons",
            &[
                ex("I decided to learn the cello and I am excited about it", "Great choice. Lessons help."),
                ex(
                    "I will practise every morning. Which teacher should I pick?",
                    "[rule-based] Look for one near you. Ask around.",
                ),
            ],
        );
        assert_eq!(e.factors.emotional, 1, "excited");
        assert_eq!(e.factors.commitment, 2, "decided, will");
        assert!(e.factors.unresolved);
        assert_eq!(e.open_loops, ["Which teacher should I pick?"]);
        assert_eq!(e.outcome, "Look for one near you");
        assert!(e.gist.starts_with("decided, learn, cello"), "{}", e.gist);
        assert!(e.gist.ends_with("(2 exchange(s) on cello lessons)"), "{}", e.gist);
        assert_eq!(e.emotion["type"], "joy");
        assert!(e.embedding_text().contains("cello"));
    }

    #[test]
    fn the_episode_parse_needs_a_gist_and_bounds_factors() {
        let e = parse_episode(
            r#"{"intent":"plan a trip","gist":"Planned Lisbon.","salience_factors":{"novelty":5,"emotional":-1,"commitment":2.4,"unresolved":true},"open_loops":["book hotel",""]}"#,
        )
        .unwrap();
        assert_eq!(e.intent["direction"], "plan a trip");
        assert_eq!(e.factors, Factors { novelty: 3, emotional: 0, commitment: 2, unresolved: true });
        assert_eq!(e.open_loops, ["book hotel"]);
        assert!(parse_episode(r#"{"outcome":"x"}"#).is_err());
    }

    fn brief(id: &str, gist: &str) -> EpisodeBrief {
        EpisodeBrief {
            id: id.into(),
            topic: "t".into(),
            gist: gist.into(),
            intent: String::new(),
            outcome: String::new(),
        }
    }

    #[test]
    fn the_semantic_parse_credits_episodes_and_checks_relationships() {
        let eps = [brief("e1", "Practised the cello"), brief("e2", "Booked Lisbon flights")];
        let s = parse_semantic(
            r#"{"concepts":[{"name":"The  Cello","type":"Skill","domain":"leisure","abstraction_level":9},{"name":"travel"},{"name":"the cello"}],
               "relationships":[{"source":"the cello","target":"travel","strength":2},{"source":"travel","target":"travel"},{"source":"x","target":"travel"}]}"#,
            &eps,
        )
        .unwrap();
        assert_eq!(s.concepts.len(), 2, "the duplicate name is merged");
        assert_eq!((s.concepts[0].name.as_str(), s.concepts[0].kind.as_str()), ("the cello", "skill"));
        assert_eq!(s.concepts[0].abstraction_level, 5);
        assert_eq!(s.concepts[0].episodes, ["e1"]);
        assert_eq!(s.concepts[1].episodes, ["e1", "e2"], "named nowhere: every episode");
        assert_eq!(s.relationships.len(), 1);
        assert_eq!((s.relationships[0].kind.as_str(), s.relationships[0].strength), ("related_to", 1.0));
    }

    #[test]
    fn the_rules_relate_keywords_of_one_episode() {
        let s = rule_semantic(&[brief("e1", "cello practice mornings"), brief("e2", "cello teacher")]);
        let names: Vec<&str> = s.concepts.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["cello", "practice", "mornings", "teacher"]);
        assert_eq!(s.concepts[0].episodes, ["e1", "e2"]);
        assert_eq!(s.relationships.len(), 4);
        assert!(s.relationships.iter().all(|r| r.strength == CO_OCCURRENCE));
        assert_eq!(reinforced(9.5, 2), CONCEPT_MAX);
        assert_eq!(reinforced(1.0, 0), 2.0);
        assert!((relation_reinforced(0.3, 0.6) - 0.7).abs() < 1e-12);
        assert_eq!(relation_reinforced(0.95, 0.2), 1.0);
    }

    #[test]
    fn activation_spreads_two_hops_with_decay_and_weak_edges() {
        let e = |a: &str, b: &str, s| Edge { a: a.into(), b: b.into(), strength: s };
        let edges = [e("seed", "a", 1.0), e("a", "b", 0.8), e("seed", "w", 0.2), e("b", "c", 1.0), e("x", "seed", 0.6)];
        let seeds = ["seed".to_string()];
        let never = spread(&seeds, &edges, 2, || false);
        let get = |v: &[(String, f64)], k: &str| v.iter().find(|(n, _)| n == k).map(|x| x.1);
        assert_eq!(get(&never, "a"), Some(0.7));
        assert!((get(&never, "b").unwrap() - 0.7 * 0.7 * 0.8).abs() < 1e-12);
        assert_eq!(get(&never, "c"), None, "depth 2");
        assert_eq!(get(&never, "w"), None, "the weak edge was not followed");
        assert!((get(&never, "x").unwrap() - 0.42).abs() < 1e-12, "edges run both ways");
        let always = spread(&seeds, &edges, 2, || true);
        assert_eq!(get(&always, "w"), Some(0.7), "a followed weak edge ignores its strength");
        assert_eq!(always[0].0, "a", "strongest first, ties by name");
        // Under 0.3 is dropped: 0.7 × 0.7 × 0.5 = 0.245.
        let faint = spread(&seeds, &[e("seed", "a", 1.0), e("a", "z", 0.5)], 2, || false);
        assert_eq!(get(&faint, "z"), None);
    }
}
