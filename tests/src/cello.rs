//! The cello conversation the memory tests (consolidation, drift) replay,
//! and the scripted episode the model makes of it.

use crate::fake_model::Script;
use serde_json::json;

/// Five plain exchanges (a low-salience episode).
pub const PLAIN: [&str; 5] = [
    "The cello has four strings tuned in perfect fifths",
    "Cello bows are usually strung with horsehair",
    "The cello repertoire includes the Bach suites",
    "A cello endpin rests on the floor",
    "Cello rosin comes in light and dark kinds",
];

/// Five personal ones (a salient episode after a plain one, which queues
/// semantic consolidation).
pub const PERSONAL: [&str; 5] = [
    "I decided to learn the cello and I am so excited",
    "I will practise the cello every morning before work",
    "I am a bit worried about my cello posture",
    "My cello teacher is Ana Moreira",
    "Which cello bow should I buy first?",
];

/// The episode of a stretch of the conversation, with these salience
/// factors and open loops.
pub fn episode_answer(novelty: u8, emotional: u8, open_loops: &[&str]) -> Script {
    Script::json(json!({
        "intent": {"type": "learning", "direction": "learn the cello"},
        "context": {"situational": "evening", "conversational": "planning", "constraints": []},
        "action": "planned practice", "emotion": {"type": "joy", "valence": 0.6, "intensity": 0.5, "arc": "rising"},
        "outcome": "a practice plan", "gist": "The principal planned cello practice with Ana.",
        "salience_factors": {"novelty": novelty, "emotional": emotional, "commitment": 0, "unresolved": false},
        "open_loops": open_loops
    }))
}
