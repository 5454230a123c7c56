//! The cognitive drift engine's rules (002 §8): its schedule and idle gate,
//! the weighted seed categories, the thought's prompt and shape, the
//! principal's engagement with what drift told them, the deferred queue
//! for quiet hours, and the action router with each action's gates and
//! score. The `drift` stage gathers a [`Situation`] and hands it here.

use mneme_text::jaccard;
use mneme_time::Zone;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The drift period, with ±30% jitter…
pub const PERIOD_MS: i64 = 300_000;
/// …or, one time in ten, a long gap of 1.8–2.5 periods.
pub const LONG_GAP_P: f64 = 0.1;
/// Episodes must exist within this lookback.
pub const LOOKBACK_MS: i64 = 168 * 3_600_000;
/// Drift fatigue: the activations of the last 30 minutes may not sum to 2.5.
pub const FATIGUE_WINDOW_MS: i64 = 30 * 60_000;
pub const FATIGUE_BUDGET: f64 = 2.5;
/// A concept that took part in a drift rests this long.
pub const CONCEPT_COOLDOWN_MS: i64 = 3_600_000;
/// The insight category is tried at most once in five periods.
pub const INSIGHT_THROTTLE_MS: i64 = 5 * PERIOD_MS;
/// Seed attempts a cycle (a seed on cooldown means another draw).
pub const SEED_ATTEMPTS: usize = 3;
/// A drift needs this much activation energy to go on.
pub const MIN_ENERGY: f64 = 0.4;
/// A decaying seed lies strictly between these strengths.
pub const DECAYING: (f64, f64) = (0.2, 2.0);
/// Concepts below this confidence are never insight or random seeds.
pub const SEED_MIN_CONFIDENCE: f64 = 0.4;

/// When the engine may run next: `now + 300 s × U(0.7, 1.3)`, or with
/// probability 0.1 (`r_gap` < 0.1) `now + 300 s × U(1.8, 2.5)`.
pub fn next_run(now_ms: i64, r_gap: f64, r_len: f64) -> i64 {
    let r = crate::unit(r_len);
    let factor = if crate::unit(r_gap) < LONG_GAP_P { 1.8 + 0.7 * r } else { 0.7 + 0.6 * r };
    now_ms + (PERIOD_MS as f64 * factor).round() as i64
}

/// What the idle gate reads.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Conditions {
    /// Jobs queued or running on any queue.
    pub pending_jobs: i64,
    pub last_episode_ms: Option<i64>,
    /// A focus session is live on some thread.
    pub deep_focus: bool,
    /// Activations recorded in the last 30 minutes.
    pub recent_activation: f64,
}

/// Why a cycle did not run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Skip {
    QueuesBusy,
    NoRecentEpisodes,
    DeepFocus,
    Fatigued,
    NoSeed,
    LowEnergy,
}

/// The design's preconditions, then the reference's fatigue check: every
/// queue idle, an episode within 168 h, no deep focus, and under 2.5 of
/// activation in 30 minutes.
pub fn preconditions(c: &Conditions, now_ms: i64) -> Result<(), Skip> {
    if c.pending_jobs > 0 {
        return Err(Skip::QueuesBusy);
    }
    if c.last_episode_ms.is_none_or(|t| now_ms - t > LOOKBACK_MS) {
        return Err(Skip::NoRecentEpisodes);
    }
    if c.deep_focus {
        return Err(Skip::DeepFocus);
    }
    if c.recent_activation >= FATIGUE_BUDGET {
        return Err(Skip::Fatigued);
    }
    Ok(())
}

/// The seed categories and their weights (the design's).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SeedKind {
    Decaying,
    Recent,
    Salient,
    Insight,
    Random,
}

pub const SEED_WEIGHTS: [(SeedKind, f64); 5] = [
    (SeedKind::Decaying, 0.35),
    (SeedKind::Recent, 0.25),
    (SeedKind::Salient, 0.15),
    (SeedKind::Insight, 0.15),
    (SeedKind::Random, 0.10),
];

/// A category by weight; insight only when its throttle allows (its share
/// then goes to the others in proportion).
pub fn seed_kind(r: f64, insight_allowed: bool) -> SeedKind {
    let kinds: Vec<(SeedKind, f64)> =
        SEED_WEIGHTS.iter().copied().filter(|(k, _)| insight_allowed || *k != SeedKind::Insight).collect();
    let weights: Vec<f64> = kinds.iter().map(|k| k.1).collect();
    kinds[weighted(&weights, r).unwrap_or(0)].0
}

/// An index drawn in proportion to non-negative weights; `None` when they
/// sum to nothing.
pub fn weighted(weights: &[f64], r: f64) -> Option<usize> {
    let total: f64 = weights.iter().filter(|w| w.is_finite() && **w > 0.0).sum();
    if total <= 0.0 {
        return None;
    }
    let mut x = crate::unit(r) * total;
    for (i, w) in weights.iter().enumerate() {
        let w = if w.is_finite() && *w > 0.0 { *w } else { 0.0 };
        if x < w {
            return Some(i);
        }
        x -= w;
    }
    weights.iter().rposition(|w| w.is_finite() && *w > 0.0)
}

/// An episode's weight for the recent category: `exp(−0.02 × age in hours)`.
pub fn recency_weight(age_ms: i64) -> f64 {
    (-0.02 * age_ms.max(0) as f64 / 3_600_000.0).exp()
}

/// A decaying seed that led to a drift is reinforced by 0.1, up to 10.
pub fn revived(strength: f64) -> f64 {
    (strength + 0.1).min(10.0)
}

/// The kinds of thought a drift produces.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ThoughtKind {
    Reflection,
    Question,
    Hypothesis,
    Insight,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Thought {
    #[serde(rename = "type")]
    pub kind: ThoughtKind,
    pub content: String,
}

impl Thought {
    /// The drift gist's text: `[type] content`.
    pub fn gist(&self) -> String {
        format!(
            "[{}] {}",
            serde_json::to_value(self.kind).ok().and_then(|v| v.as_str().map(String::from)).unwrap_or_default(),
            self.content
        )
    }
}

/// The thought prompt (the user message; soul is the system prompt) and
/// its temperature (the reference's).
pub const PROMPT: &str = include_str!("../../../prompts/cognitive-drift.md");

/// The JSON Schema of a drift thought (D-L2).
pub fn schema() -> String {
    serde_json::json!({
        "type": "object",
        "properties": {
            "type": {"enum": ["reflection", "question", "hypothesis", "insight"]},
            "content": {"type": "string", "maxLength": 400},
        },
        "required": ["type", "content"],
        "additionalProperties": false,
    })
    .to_string()
}
pub const TEMPERATURE: f32 = 0.8;
pub const MAX_TOKENS: u32 = 300;

/// An activated concept as the thought prompt sees it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Activated {
    pub id: String,
    pub name: String,
    #[serde(default)]
    pub definition: String,
    pub activation: f64,
}

/// The thought prompt's user message: the template, then the seed, the
/// activated concepts and the grounding episode as JSON.
pub fn thought_message(seed: &str, concepts: &[Activated], episode: Option<&str>) -> String {
    let concepts: Vec<Value> = concepts
        .iter()
        .map(|c| {
            serde_json::json!({"name": c.name, "definition": c.definition,
                               "activation": (c.activation * 100.0).round() / 100.0})
        })
        .collect();
    format!("{PROMPT}\n{}", serde_json::json!({"seed": seed, "concepts": concepts, "episode": episode}))
}

/// Parses the thought model's answer: a known type and at least 5
/// characters of content.
pub fn parse_thought(answer: &str) -> Result<Thought, String> {
    let v = mneme_llm::extract_json(answer).map_err(|e| e.to_string())?;
    let kind = match v.get("type").and_then(Value::as_str).map(str::to_lowercase).as_deref() {
        Some("reflection") => ThoughtKind::Reflection,
        Some("question") => ThoughtKind::Question,
        Some("hypothesis") => ThoughtKind::Hypothesis,
        Some("insight") => ThoughtKind::Insight,
        other => {
            return Err(format!("the thought's type {other:?} is not reflection, question, hypothesis or insight"));
        }
    };
    let content = v.get("content").and_then(Value::as_str).map(str::trim).unwrap_or_default();
    if content.chars().count() < 5 {
        return Err("the thought has under 5 characters".into());
    }
    Ok(Thought { kind, content: content.chars().take(600).collect() })
}

/// The labelled rules' thought: a question linking the seed to what it
/// activated.
pub fn rule_thought(seed: &str, activated: &[String]) -> Thought {
    let content = match activated {
        [] => format!("What else is there to {seed}?"),
        [a] => format!("How does {seed} connect to {a}?"),
        [a, b, ..] => format!("How do {seed}, {a} and {b} fit together?"),
    };
    Thought { kind: ThoughtKind::Question, content }
}

/// The actions a thought can lead to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Action {
    Communicate,
    Suggest,
    Nurture,
    Plan,
    SeedThread,
    Reflect,
    Nothing,
}

impl Action {
    /// The design's priorities (NOTHING 0).
    pub fn priority(self) -> u8 {
        match self {
            Action::Communicate => 10,
            Action::Suggest => 8,
            Action::Nurture | Action::Plan => 7,
            Action::SeedThread => 6,
            Action::Reflect => 5,
            Action::Nothing => 0,
        }
    }
}

/// One action's verdict.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Verdict {
    pub action: Action,
    pub score: f64,
    pub eligible: bool,
    /// The first gate that failed, or what made it eligible.
    pub why: String,
}

/// The highest-scoring eligible action; ties go to the higher priority,
/// then to the earlier verdict; NOTHING when none is eligible.
pub fn route(verdicts: &[Verdict]) -> Action {
    let mut best: Option<&Verdict> = None;
    for v in verdicts.iter().filter(|v| v.eligible) {
        let better = best
            .is_none_or(|b| v.score.total_cmp(&b.score).then(v.action.priority().cmp(&b.action.priority())).is_gt());
        if better {
            best = Some(v);
        }
    }
    best.map_or(Action::Nothing, |v| v.action)
}

/// Quiet hours: 23:00–08:00 in the principal's time.
pub fn quiet(local_hour: u32) -> bool {
    !(8..23).contains(&local_hour)
}

/// When the quiet hours around `at_ms` end (08:00 local), or `at_ms`
/// itself outside them. Local time follows the zone's daylight saving.
pub fn quiet_end(at_ms: i64, zone: &Zone) -> i64 {
    if quiet(zone.local_hour(at_ms)) { zone.next_local_hour(at_ms, QUIET_END_HOUR) } else { at_ms }
}

/// Quiet hours end at 08:00 local time.
pub const QUIET_END_HOUR: u8 = 8;

/// A deferred COMMUNICATE thought waits at most this long…
pub const DEFERRED_TTL_MS: i64 = 48 * H;
/// …and at most this many wait (the oldest goes first).
pub const DEFERRED_MAX: usize = 3;
/// A proactive message unanswered this long was ignored.
pub const PENDING_MS: i64 = 4 * H;
/// Two ignored of the last three pause proactive messages this long.
pub const PAUSE_MS: i64 = 8 * H;
/// The proactive backoff doubles per ignored message, up to this.
pub const MAX_BACKOFF: f64 = 16.0;

/// A proactive message drift sent, and when the principal next wrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sent {
    pub at_ms: i64,
    pub replied_ms: Option<i64>,
}

impl Sent {
    fn answered(&self) -> bool {
        self.replied_ms.is_some_and(|r| r >= self.at_ms && r - self.at_ms <= PENDING_MS)
    }

    fn ignored(&self, now_ms: i64) -> bool {
        !self.answered() && now_ms - self.at_ms > PENDING_MS
    }
}

/// What the principal's answers to proactive messages allow next.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Engagement {
    /// 2 to the number of messages ignored in a row, 1–16.
    pub backoff: f64,
    /// The circuit breaker: two of the last three settled messages were
    /// ignored, the latest of them within the last 8 h.
    pub paused: bool,
    /// The newest message is under 4 h old and unanswered.
    pub pending: bool,
    /// Messages ignored in a row, newest first.
    pub ignored_in_a_row: u32,
}

/// Engagement from the messages sent, newest first.
pub fn engagement(sent: &[Sent], now_ms: i64) -> Engagement {
    let pending = sent.first().is_some_and(|s| !s.answered() && now_ms - s.at_ms <= PENDING_MS);
    let settled: Vec<&Sent> = sent.iter().filter(|s| s.answered() || s.ignored(now_ms)).collect();
    let ignored_in_a_row = settled.iter().take_while(|s| s.ignored(now_ms)).count() as u32;
    let last3: Vec<&&Sent> = settled.iter().take(3).collect();
    let ignored: Vec<&&&Sent> = last3.iter().filter(|s| s.ignored(now_ms)).collect();
    let paused = ignored.len() >= 2 && ignored.first().is_some_and(|s| now_ms - (s.at_ms + PENDING_MS) < PAUSE_MS);
    Engagement {
        backoff: 2f64.powi(ignored_in_a_row.min(4) as i32).min(MAX_BACKOFF),
        paused,
        pending,
        ignored_in_a_row,
    }
}

/// The median of the values (the COMMUNICATE bar after 20 drifts).
pub fn median(values: &[f64]) -> Option<f64> {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    Some(if n % 2 == 1 { v[n / 2] } else { (v[n / 2 - 1] + v[n / 2]) / 2.0 })
}

/// An index in `0..n` from a draw.
pub fn pick(n: usize, r: f64) -> usize {
    ((crate::unit(r) * n as f64) as usize).min(n.saturating_sub(1))
}

/// Verbs that make a thought a plan.
pub const ACTIONABLE: [&str; 10] =
    ["research", "find", "compare", "learn", "build", "prepare", "compile", "analyze", "investigate", "explore"];

/// Everything the action gates read, gathered by the stage.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Situation {
    pub now_ms: i64,
    pub local_hour: u32,
    pub thought: Option<Thought>,
    pub seed_kind: Option<SeedKind>,
    /// The drift's activation energy (the strongest activated concept).
    pub activation: f64,
    /// Mean activation of the kept concepts.
    pub mean_activation: f64,
    /// Drifts so far, and the median of their recorded activations.
    pub drifts: u64,
    pub median_activation: Option<f64>,
    /// Cosine of the thought to the principal's recent topics.
    pub relevance: f64,
    /// Recent proactive and drift texts, for novelty.
    pub recent_texts: Vec<String>,
    /// Since the principal's last message; `None` if they never wrote.
    pub idle_ms: Option<i64>,
    /// Proactive backoff multiplier, 1–16.
    pub backoff: f64,
    pub proactive_paused: bool,
    pub pending_proactive: bool,
    /// Lengths of the principal's last two messages (newest first).
    pub last_reply_chars: Option<(usize, usize)>,
    /// PLAN.
    pub topic_signals: u32,
    pub duplicate_task: bool,
    pub active_tasks: usize,
    pub last_plan_ms: Option<i64>,
    /// REFLECT.
    pub episode_similarity: f64,
    pub reflection_similarity: f64,
    pub same_type_on_topic: bool,
    /// NURTURE.
    pub exchanges: i64,
    pub last_nurture_ms: Option<i64>,
    pub unanswered_nurtures: u32,
    /// SEED_THREAD.
    pub thread_on_topic: bool,
    pub active_threads: usize,
    pub last_thread_ms: Option<i64>,
    pub episodic_matches: usize,
    pub semantic_strength: f64,
}

const H: i64 = 3_600_000;

fn verdict(action: Action, score: f64, gates: &[(bool, &str)]) -> Verdict {
    match gates.iter().find(|(ok, _)| !ok) {
        Some((_, why)) => Verdict { action, score: 0.0, eligible: false, why: (*why).into() },
        None => Verdict { action, score, eligible: true, why: "every gate passed".into() },
    }
}

fn since(now: i64, t: Option<i64>, at_least: i64) -> bool {
    t.is_none_or(|t| now - t >= at_least)
}

/// COMMUNICATE (10): quality (activation over the bootstrap 0.6 or the
/// median, ×1.25 for reflections; relevance ≥ 0.4; novelty Jaccard < 0.7),
/// timing (an interaction happened; idle ≥ 30 min × backoff and ≤ 24 h),
/// engagement (not paused, nothing pending) and cognitive load. Quiet
/// hours do not block it: the stage defers the message instead.
pub fn communicate(s: &Situation) -> Verdict {
    let Some(t) = &s.thought else { return verdict(Action::Communicate, 0.0, &[(false, "no thought")]) };
    let base = if s.drifts < 20 { 0.6 } else { s.median_activation.unwrap_or(0.6) };
    let needed = if t.kind == ThoughtKind::Reflection { base * 1.25 } else { base };
    let novel = s.recent_texts.iter().all(|r| jaccard(r, &t.content) < 0.7);
    let idle = s.idle_ms.unwrap_or(0);
    let overload = s.last_reply_chars.is_some_and(|(last, prev)| last < 25 && (last as f64) < 0.3 * prev as f64);
    let bonus = match t.kind {
        ThoughtKind::Question => 1.3,
        ThoughtKind::Hypothesis => 1.2,
        ThoughtKind::Insight => 1.4,
        ThoughtKind::Reflection => 0.8,
    };
    verdict(
        Action::Communicate,
        s.activation * bonus * s.relevance,
        &[
            (s.activation >= needed, "activation under the quality bar"),
            (s.relevance >= 0.4, "not relevant to the principal's topics"),
            (novel, "too close to something said recently"),
            (s.idle_ms.is_some(), "the principal has never written"),
            (idle as f64 >= 1_800_000.0 * s.backoff.clamp(1.0, 16.0), "the principal was active too recently"),
            (idle <= 24 * H, "the principal has been away over 24 h"),
            (!s.proactive_paused, "proactive messages are paused"),
            (!s.pending_proactive, "a proactive message is still pending"),
            (!overload, "the principal's last reply was short: cognitive load"),
        ],
    )
}

/// SUGGEST (8): suggests one of the principal's installable skills. Mneme
/// has only innate skills, so there is never one to suggest.
pub fn suggest(_: &Situation) -> Verdict {
    verdict(Action::Suggest, 0.0, &[(false, "no installable skill to suggest")])
}

/// The relationship phase, by exchanges so far.
pub fn spark_phase(exchanges: i64) -> &'static str {
    match exchanges {
        ..3 => "first_contact",
        3..15 => "surface",
        15..50 => "exploratory",
        50..150 => "connected",
        _ => "graduated",
    }
}

/// NURTURE (7): in the surface phase after 6 h idle, in exploratory after
/// 2 h; 24 h × backoff between nurtures (backoff doubles after 3
/// unanswered, capped at 4); never in quiet hours. Fixed score 0.35.
pub fn nurture(s: &Situation) -> Verdict {
    let phase = spark_phase(s.exchanges);
    let min_idle = match phase {
        "surface" => Some(6 * H),
        "exploratory" => Some(2 * H),
        _ => None,
    };
    let backoff = if s.unanswered_nurtures >= 3 { 2f64.powi(s.unanswered_nurtures as i32 - 2).min(4.0) } else { 1.0 };
    verdict(
        Action::Nurture,
        0.35,
        &[
            (min_idle.is_some(), "the relationship is not in a nurturing phase"),
            (s.idle_ms.unwrap_or(0) >= min_idle.unwrap_or(i64::MAX), "not idle long enough"),
            (since(s.now_ms, s.last_nurture_ms, (24.0 * H as f64 * backoff) as i64), "nurtured too recently"),
            (!quiet(s.local_hour), "quiet hours"),
            (s.thought.is_some(), "no thought"),
        ],
    )
}

/// PLAN (7): a question or hypothesis with an actionable verb, activation
/// ≥ 0.7, its topic seen at least twice, no duplicate and under 5 open
/// tasks, 48 h since the last proposal. Score activation × 0.7.
pub fn plan(s: &Situation) -> Verdict {
    let (kind_ok, verb) = s.thought.as_ref().map_or((false, false), |t| {
        let words = mneme_text::words(&t.content);
        (
            matches!(t.kind, ThoughtKind::Question | ThoughtKind::Hypothesis | ThoughtKind::Insight),
            words.iter().any(|w| ACTIONABLE.iter().any(|v| w.starts_with(v))),
        )
    });
    verdict(
        Action::Plan,
        s.activation * 0.7,
        &[
            (kind_ok, "not a question, hypothesis or insight"),
            (s.activation >= 0.7, "activation under 0.7"),
            (s.topic_signals >= 2, "the topic was seen fewer than 2 times"),
            (verb, "no actionable verb"),
            (!s.duplicate_task, "a task like it is open"),
            (s.active_tasks < crate::tasks::MAX_ACTIVE, "5 tasks are open"),
            (since(s.now_ms, s.last_plan_ms, 48 * H), "a plan was proposed in the last 48 h"),
        ],
    )
}

/// SEED_THREAD (6): an insight seed with no thread on its topic, activation
/// ≥ 0.6, 24 h since the last, under 5 threads, and salience alignment
/// (2 episodes at ≥ 0.55 or a concept strength ≥ 0.5). Score activation × 0.8.
pub fn seed_thread(s: &Situation) -> Verdict {
    verdict(
        Action::SeedThread,
        s.activation * 0.8,
        &[
            (s.seed_kind == Some(SeedKind::Insight), "not an insight seed"),
            (!s.thread_on_topic, "a thread on the topic is open"),
            (s.activation >= 0.6, "activation under 0.6"),
            (since(s.now_ms, s.last_thread_ms, 24 * H), "a thread was seeded in the last 24 h"),
            (s.active_threads < 5, "5 threads are open"),
            (s.episodic_matches >= 2 || s.semantic_strength >= 0.5, "no salience alignment"),
        ],
    )
}

/// REFLECT (5): activation ≥ 0.35; relevant (episode similarity ≥ 0.3 or
/// mean concept activation ≥ 0.35); novel (cosine to recent reflections
/// < 0.75); drift fatigue at most 40% of the budget. Score activation ×
/// type bonus × repeat decay × relevance.
pub fn reflect(s: &Situation, fatigue: f64) -> Verdict {
    let Some(t) = &s.thought else { return verdict(Action::Reflect, 0.0, &[(false, "no thought")]) };
    let bonus = match t.kind {
        ThoughtKind::Reflection => 1.3,
        ThoughtKind::Hypothesis => 1.2,
        ThoughtKind::Question => 0.9,
        ThoughtKind::Insight => 1.0,
    };
    let decay = if s.same_type_on_topic { 0.8 } else { 1.0 };
    let relevance = s.episode_similarity.max(s.mean_activation);
    verdict(
        Action::Reflect,
        s.activation * bonus * decay * relevance,
        &[
            (s.activation >= 0.35, "activation under 0.35"),
            (s.episode_similarity >= 0.3 || s.mean_activation >= 0.35, "not relevant"),
            (s.reflection_similarity < 0.75, "too close to a recent reflection"),
            (fatigue <= 0.4 * FATIGUE_BUDGET, "drift fatigue over 40% of the budget"),
        ],
    )
}

/// Every action's verdict and the winner.
pub fn decide(s: &Situation, fatigue: f64) -> (Action, Vec<Verdict>) {
    let v = vec![communicate(s), suggest(s), nurture(s), plan(s), seed_thread(s), reflect(s, fatigue)];
    (route(&v), v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_schedule_is_300_s_with_jitter_or_a_long_gap() {
        assert_eq!(next_run(0, 0.5, 0.0), 210_000);
        assert_eq!(next_run(0, 0.5, 1.0), 390_000, "unit() keeps 1.0 just under; it rounds to 390 s");
        assert_eq!(next_run(0, 0.1, 0.5), 300_000, "0.1 is not a long gap");
        assert_eq!(next_run(0, 0.099, 0.0), 540_000);
        assert_eq!(next_run(0, 0.0, 1.0), 750_000);
        let mut d = crate::Draws::new(3);
        let long = (0..10_000).filter(|_| next_run(0, d.draw(), d.draw()) > 390_000).count();
        assert!((800..1200).contains(&long), "about one in ten: {long}");
    }

    #[test]
    fn the_idle_gate_at_its_boundaries() {
        let now = 1_000 * H;
        let ok = Conditions {
            pending_jobs: 0,
            last_episode_ms: Some(now - LOOKBACK_MS),
            deep_focus: false,
            recent_activation: 2.49,
        };
        assert_eq!(preconditions(&ok, now), Ok(()), "exactly 168 h is inside the lookback");
        let c = |f: &dyn Fn(&mut Conditions)| {
            let mut c = ok.clone();
            f(&mut c);
            preconditions(&c, now)
        };
        assert_eq!(c(&|c| c.pending_jobs = 1), Err(Skip::QueuesBusy));
        assert_eq!(c(&|c| c.last_episode_ms = Some(now - LOOKBACK_MS - 1)), Err(Skip::NoRecentEpisodes));
        assert_eq!(c(&|c| c.last_episode_ms = None), Err(Skip::NoRecentEpisodes));
        assert_eq!(c(&|c| c.deep_focus = true), Err(Skip::DeepFocus));
        assert_eq!(c(&|c| c.recent_activation = 2.5), Err(Skip::Fatigued));
    }

    #[test]
    fn seed_categories_follow_their_weights() {
        assert_eq!(seed_kind(0.0, true), SeedKind::Decaying);
        assert_eq!(seed_kind(0.3499, true), SeedKind::Decaying);
        assert_eq!(seed_kind(0.35, true), SeedKind::Recent);
        assert_eq!(seed_kind(0.60, true), SeedKind::Salient);
        assert_eq!(seed_kind(0.75, true), SeedKind::Insight);
        assert_eq!(seed_kind(0.90, true), SeedKind::Random);
        assert_eq!(seed_kind(0.99, true), SeedKind::Random);
        // Without insight the other four share its weight in proportion.
        assert_eq!(seed_kind(0.80, false), SeedKind::Salient, "0.8 × 0.85 = 0.68");
        assert_eq!(seed_kind(0.90, false), SeedKind::Random);
        let mut d = crate::Draws::new(9);
        let n = 20_000;
        let decaying = (0..n).filter(|_| seed_kind(d.draw(), true) == SeedKind::Decaying).count() as f64 / n as f64;
        assert!((decaying - 0.35).abs() < 0.015, "{decaying}");
        assert_eq!(weighted(&[0.0, 0.0], 0.5), None);
        assert_eq!(weighted(&[0.0, 2.0, f64::NAN], 0.99), Some(1));
        assert!((recency_weight(50 * H) - (-1.0f64).exp()).abs() < 1e-12);
        assert_eq!(revived(9.95), 10.0);
    }

    #[test]
    fn thoughts_parse_and_the_rules_ask_a_question() {
        let t = parse_thought(r#"{"type":"Hypothesis","content":"  Mornings suit practice. "}"#).unwrap();
        assert_eq!((t.kind, t.content.as_str()), (ThoughtKind::Hypothesis, "Mornings suit practice."));
        assert_eq!(t.gist(), "[hypothesis] Mornings suit practice.");
        assert!(parse_thought(r#"{"type":"musing","content":"long enough"}"#).is_err());
        assert!(parse_thought(r#"{"type":"question","content":"why"}"#).is_err());
        let r = rule_thought("cello", &["bow".into(), "posture".into(), "rosin".into()]);
        assert_eq!(
            (r.kind, r.content.as_str()),
            (ThoughtKind::Question, "How do cello, bow and posture fit together?")
        );
    }

    fn situation() -> Situation {
        Situation {
            now_ms: 1_000 * H,
            local_hour: 14,
            thought: Some(Thought {
                kind: ThoughtKind::Question,
                content: "Should I research cello teachers nearby?".into(),
            }),
            seed_kind: Some(SeedKind::Insight),
            activation: 0.8,
            mean_activation: 0.5,
            drifts: 3,
            relevance: 0.8,
            idle_ms: Some(2 * H),
            backoff: 1.0,
            topic_signals: 2,
            episode_similarity: 0.4,
            exchanges: 20,
            episodic_matches: 2,
            ..Default::default()
        }
    }

    #[test]
    fn communicate_wins_over_plan_and_its_gates_hold_at_the_edges() {
        let s = situation();
        let (winner, v) = decide(&s, 0.0);
        assert_eq!(winner, Action::Communicate, "{v:?}");
        assert!((v[0].score - 0.8 * 1.3 * 0.8).abs() < 1e-12, "over SEED_THREAD's 0.64");
        let with = |f: &dyn Fn(&mut Situation)| {
            let mut s = situation();
            f(&mut s);
            communicate(&s)
        };
        assert!(with(&|s| s.idle_ms = Some(1_800_000)).eligible, "30 min exactly");
        assert!(!with(&|s| s.idle_ms = Some(1_799_999)).eligible);
        assert_eq!(
            with(&|s| {
                s.backoff = 2.0;
                s.idle_ms = Some(3_599_999)
            })
            .why,
            "the principal was active too recently"
        );
        assert!(!with(&|s| s.idle_ms = Some(24 * H + 1)).eligible);
        assert!(!with(&|s| s.relevance = 0.39).eligible);
        assert!(!with(&|s| s.activation = 0.59).eligible, "the bootstrap bar is 0.6");
        assert!(
            !with(&|s| {
                s.drifts = 20;
                s.median_activation = Some(0.85)
            })
            .eligible,
            "then the median"
        );
        assert!(!with(&|s| s.recent_texts = vec!["Should I research cello teachers nearby please?".into()]).eligible);
        assert!(!with(&|s| s.last_reply_chars = Some((10, 100))).eligible, "cognitive load");
        assert!(with(&|s| s.last_reply_chars = Some((10, 20))).eligible);
        let reflection = with(&|s| {
            s.thought = Some(Thought { kind: ThoughtKind::Reflection, content: "Practice is steady.".into() });
            s.activation = 0.74;
        });
        assert!(!reflection.eligible, "reflections need 1.25 × 0.6 = 0.75");
    }

    #[test]
    fn plan_reflect_nurture_and_seed_thread_gates() {
        let mut s = situation();
        s.relevance = 0.1; // COMMUNICATE out
        let (winner, v) = decide(&s, 0.0);
        // PLAN 0.8 × 0.7 = 0.56, SEED_THREAD 0.8 × 0.8 = 0.64, REFLECT 0.8 × 0.9 × 0.5 = 0.36.
        assert_eq!(winner, Action::SeedThread, "{v:?}");
        s.seed_kind = Some(SeedKind::Recent);
        assert_eq!(decide(&s, 0.0).0, Action::Plan);
        s.last_plan_ms = Some(s.now_ms - 48 * H + 1);
        assert_eq!(decide(&s, 0.0).0, Action::Reflect);
        assert_eq!(decide(&s, 1.01).0, Action::Nurture, "fatigue over 40% stops REFLECT; exploratory, idle 2 h");
        s.local_hour = 23;
        assert_eq!(decide(&s, 1.01).0, Action::Nothing, "quiet hours");
        let mut p = situation();
        p.thought = Some(Thought { kind: ThoughtKind::Question, content: "Why do strings squeak?".into() });
        assert_eq!(plan(&p).why, "no actionable verb");
        p.thought = Some(Thought { kind: ThoughtKind::Question, content: "Could I compare bows?".into() });
        assert!(plan(&p).eligible);
        p.active_tasks = 5;
        assert!(!plan(&p).eligible);
        assert!(!suggest(&p).eligible);
        assert_eq!(spark_phase(2), "first_contact");
        assert_eq!(spark_phase(3), "surface");
        assert_eq!(spark_phase(150), "graduated");
    }

    #[test]
    fn engagement_backs_off_pauses_and_waits() {
        let now = 1_000 * H;
        let sent = |ago: i64, reply_after: Option<i64>| Sent {
            at_ms: now - ago,
            replied_ms: reply_after.map(|r| now - ago + r),
        };
        let e = engagement(&[], now);
        assert_eq!((e.backoff, e.paused, e.pending), (1.0, false, false));
        // Under 4 h and unanswered: pending, not yet ignored.
        let e = engagement(&[sent(PENDING_MS, None)], now);
        assert_eq!((e.pending, e.backoff), (true, 1.0));
        let e = engagement(&[sent(PENDING_MS + 1, None)], now);
        assert_eq!((e.pending, e.backoff, e.paused), (false, 2.0, false));
        // A reply after 4 h does not answer it.
        let e = engagement(&[sent(10 * H, Some(PENDING_MS + 1)), sent(20 * H, Some(H))], now);
        assert_eq!((e.backoff, e.ignored_in_a_row), (2.0, 1));
        // Two of the last three ignored, the latest timing out under 8 h ago.
        let e = engagement(&[sent(5 * H, None), sent(6 * H, Some(H)), sent(7 * H, None)], now);
        assert!(e.paused);
        let e = engagement(&[sent(PENDING_MS + PAUSE_MS, None), sent(13 * H, None)], now);
        assert!(!e.paused, "the breaker holds 8 h after the latest timed out");
        assert_eq!(e.backoff, 4.0);
        let many: Vec<Sent> = (0..8).map(|i| sent(5 * H + i * H, None)).collect();
        assert_eq!(engagement(&many, now).backoff, MAX_BACKOFF);
    }

    #[test]
    fn hours_medians_picks_and_the_thought_message() {
        let (utc, west) = (Zone::utc(), Zone::fixed(-60).unwrap());
        let day = 1_000 * 24 * H;
        assert_eq!(quiet_end(day + 23 * H + 30 * 60_000, &utc), day + 32 * H, "23:30 → 08:00 the next day");
        assert_eq!(quiet_end(day + 3 * H, &utc), day + 8 * H);
        assert_eq!(quiet_end(day + 12 * H, &utc), day + 12 * H, "not quiet");
        assert_eq!(quiet_end(day + 24 * H + 30 * 60_000, &west), day + 33 * H, "23:30 at UTC−1 ends at 09:00 UTC");
        // Europe/London on 2027-03-28: 23:30 GMT on the eve, then 08:00 BST (07:00 UTC).
        let london = Zone::parse("Europe/London").unwrap();
        let eve = utc.parse_datetime("2027-03-27T23:30:00Z").unwrap();
        assert_eq!(utc.format(quiet_end(eve, &london)), "2027-03-28T07:00:00Z");
        assert_eq!(median(&[]), None);
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), Some(2.5));
        assert_eq!((pick(5, 0.0), pick(5, 0.999), pick(5, 1.0), pick(0, 0.5)), (0, 4, 4, 0));
        let m = thought_message(
            "cello",
            &[Activated { id: "c2".into(), name: "bow".into(), definition: "A stick".into(), activation: 0.5612 }],
            Some("Practice went well."),
        );
        assert!(m.starts_with(PROMPT));
        let input: Value = serde_json::from_str(m.lines().last().unwrap()).unwrap();
        assert_eq!(input["concepts"][0]["activation"], 0.56);
        assert_eq!(input["episode"], "Practice went well.");
    }

    #[test]
    fn ties_go_to_the_higher_priority() {
        let v = |a, s| Verdict { action: a, score: s, eligible: true, why: String::new() };
        assert_eq!(route(&[v(Action::Reflect, 0.5), v(Action::Plan, 0.5)]), Action::Plan);
        assert_eq!(route(&[v(Action::Plan, 0.5), v(Action::Nurture, 0.5)]), Action::Plan, "equal priority: the first");
        assert_eq!(route(&[]), Action::Nothing);
        assert_eq!(Action::Nothing.priority(), 0);
        assert!(quiet(23) && quiet(7) && !quiet(8) && !quiet(22));
    }
}
