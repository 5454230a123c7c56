//! The response modes of the message flow.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Mode {
    Respond,
    Clarify,
    Act,
    Acknowledge,
    Ignore,
    Cancel,
}

impl Mode {
    /// The modes the router scores, in its tie order (earlier wins a tie).
    pub const ROUTED: [Mode; 5] = [Mode::Respond, Mode::Clarify, Mode::Act, Mode::Acknowledge, Mode::Ignore];

    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Respond => "RESPOND",
            Mode::Clarify => "CLARIFY",
            Mode::Act => "ACT",
            Mode::Acknowledge => "ACKNOWLEDGE",
            Mode::Ignore => "IGNORE",
            Mode::Cancel => "CANCEL",
        }
    }

    pub fn parse(s: &str) -> Option<Mode> {
        Some(match s.trim().to_ascii_uppercase().as_str() {
            "RESPOND" => Mode::Respond,
            "CLARIFY" => Mode::Clarify,
            "ACT" => Mode::Act,
            "ACKNOWLEDGE" => Mode::Acknowledge,
            "IGNORE" => Mode::Ignore,
            "CANCEL" => Mode::Cancel,
            _ => return None,
        })
    }

    /// What the mode is for, as the tie-breaker prompt describes it.
    pub fn describe(self) -> &'static str {
        match self {
            Mode::Respond => "answer directly from what is already known",
            Mode::Clarify => "ask one clarifying question before answering",
            Mode::Act => "gather information or take an action first (recall, memorize, schedule, …)",
            Mode::Acknowledge => "a short, warm acknowledgement; nothing to answer",
            Mode::Ignore => "no reply is needed",
            Mode::Cancel => "stop what was in progress",
        }
    }
}

impl std::fmt::Display for Mode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}
