//! The seam values of the message flow (`mneme:types/conversation`) and
//! their pure counterparts in `mneme-conversation`.
//!
//! A stage answers with the generated type and an entry reads it, so the
//! WIT file is the one contract both compile against. The rules live on
//! the pure types (a mode's name, an intent's warmth adjustment, the
//! stored JSON of a focus), so each side converts at the seam with `into`
//! (D-C26). The conversions are field by field, and a field one side lacks
//! fails to compile.

use mneme_conversation as pure;

pub use crate::mneme::types::conversation::*;

pub use crate::conv::Conv;
use crate::{pair, serialize_as};

use pure::Mode as PureMode;
use pure::act::{Action as PureAction, Termination as PureTermination};
use pure::context::{
    Assembled as PureAssembled, Fact as PureFact, Focus as PureFocus, FocusSource as PureFocusSource, Gist as PureGist,
    Turn as PureWmTurn,
};
use pure::generate::ActResult as PureActResult;
use pure::intent::{
    Complexity as PureComplexity, Intent as PureIntent, IntentType as PureIntentType, Register as PureRegister,
};
use pure::router::{Decision as PureDecision, Signals as PureSignals, Weights as PureWeights};
use pure::social::SocialMode as PureSocialMode;
use pure::tools::{Tool as PureTool, ToolReply as PureToolReply};
use pure::triage::{
    Branch as PureBranch, Input as PureTriageInput, Source as PureTriageSource, Triage as PureTriage,
    Turn as PureRecentTurn,
};
use std::collections::BTreeMap;

pair!(enum Mode, PureMode { Respond, Clarify, Act, Acknowledge, Ignore, Cancel });
impl Mode {
    /// The mode's name (`RESPOND`, `ACT`…), as rows and events store it.
    pub fn as_str(self) -> &'static str {
        PureMode::from(self).as_str()
    }
}

impl Delivery {
    /// `chat` or `events`, as the tick's report names it.
    pub fn name(self) -> &'static str {
        match self {
            Delivery::Chat => "chat",
            Delivery::Events => "events",
        }
    }
}

pair!(enum IntentType, PureIntentType { Empty, Greeting, Feedback, Command, Question, Continuation, Statement });
pair!(enum Complexity, PureComplexity { Simple, Moderate, Complex });
pair!(enum Register, PureRegister { Casual, Formal, Neutral });
pair!(record Intent, PureIntent { intent_type, complexity, confidence, register, is_cancel, is_self_resolved });
pair!(enum SocialMode, PureSocialMode { Acknowledge, Cancel, Ignore });

pair!(record WmTurn, PureWmTurn { role, content, at_ms });
pair!(record Gist, PureGist { content, kind, confidence });
pair!(record Fact, PureFact { key, value, confidence });
pair!(enum FocusSource, PureFocusSource { Explicit, Inferred });
pair!(record Focus, PureFocus { description, topic, source });
pair!(record Assembled, PureAssembled {
    thread_id, name, name_stated, turns, wm_turns, gists, facts, memories, world_state, fok, warmth, density,
    memory_confidence, topic, previous_topic, is_new_topic, topic_confidence, streak, focus, distracted,
    returning_from_silence, previous_mode, previous_tools, recent_router_confidences, session_exchange_count,
    salience, took_ms, embed_us,
});

pair!(enum Branch, PureBranch { Respond, Clarify, Act });
pair!(record RecentTurn, PureRecentTurn { role, content });
pair!(enum TriageSource, PureTriageSource { Model, Heuristic });
pair!(record Triage, PureTriage {
    branch, mode, tools, skills, confidence_internal, confidence_tool_need, freshness_risk, decision_entropy,
    reasoning, source, fallback_reason, overrides,
});

impl Conv<(String, String)> for ToolSummary {
    fn conv(self) -> (String, String) {
        (self.name, self.summary)
    }
}

impl Conv<ToolSummary> for (String, String) {
    fn conv(self) -> ToolSummary {
        ToolSummary { name: self.0, summary: self.1 }
    }
}

pair!(record TriageInput, PureTriageInput {
    text, previous_mode, previous_tools, recent_turns, warmth, memory_confidence, gist_count, fact_count, tools,
});

pair!(record Signals, PureSignals {
    context_warmth, topic_confidence, has_question_mark, working_memory_turns, fok_score, interrogative_words,
    gist_count, is_new_topic, greeting_pattern, fact_count, world_state_present, explicit_feedback, intent_type,
    intent_complexity, intent_confidence, information_density, implicit_reference, prompt_token_count,
    memory_confidence, session_exchange_count, focus_distraction,
});

/// Scores by mode travel as a list in the router's tie order, which is the
/// order of the pure side's map.
impl Conv<Vec<ModeScore>> for BTreeMap<PureMode, f64> {
    fn conv(self) -> Vec<ModeScore> {
        self.into_iter().map(|(mode, score)| ModeScore { mode: mode.into(), score }).collect()
    }
}

impl Conv<BTreeMap<PureMode, f64>> for Vec<ModeScore> {
    fn conv(self) -> BTreeMap<PureMode, f64> {
        self.into_iter().map(|s| (s.mode.into(), s.score)).collect()
    }
}

pair!(record Weights, PureWeights {
    base, respond_warmth_boost, respond_fact_density, respond_gist_density, respond_question_warm,
    respond_cold_penalty, respond_greeting_penalty, respond_feedback_penalty, clarify_cold_boost,
    clarify_question_cold, clarify_question_no_facts, clarify_new_topic_question, clarify_warm_penalty,
    act_question_moderate_context, act_interrogative_few_facts, act_implicit_reference, act_very_cold_penalty,
    act_warm_facts_penalty, act_low_memory_confidence, act_some_memory_confidence, acknowledge_greeting,
    acknowledge_positive_feedback, acknowledge_question_penalty, ignore_empty, prior_act_penalty,
    prior_clarify_respond_boost, tiebreaker_base_margin, tiebreaker_min_margin,
});
// The routing log's snapshot and the reflection prompt's input.
serialize_as!(Signals => PureSignals);

pair!(record Decision, PureDecision { mode, scores, margin, effective_margin, tiebreak, excluded });

/// An action's parameters cross the seam as the JSON object's text; text
/// that is not an object (no producer writes one) reads as no parameters.
impl Conv<String> for serde_json::Map<String, serde_json::Value> {
    fn conv(self) -> String {
        serde_json::Value::Object(self).to_string()
    }
}

impl Conv<serde_json::Map<String, serde_json::Value>> for String {
    fn conv(self) -> serde_json::Map<String, serde_json::Value> {
        serde_json::from_str(&self).unwrap_or_default()
    }
}

pair!(record Action, PureAction { kind, params });
pair!(record ActResult, PureActResult { action_type, status, result, execution_time_ms, confidence });
pair!(enum Termination, PureTermination {
    FatigueExhausted, Timeout, MaxIterations, NoActions, RepeatedAction, PlanFailed,
});
pair!(record ToolReply, PureToolReply { text, topic, mode, confidence, exchange_id, thread_id, source, tools });
pair!(record Tool, PureTool { name, description, url, timeout_ms, consequential });

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_triage_input_survives_the_seam_both_ways() {
        let pure = PureTriageInput {
            text: "what did I say about the cello?".into(),
            previous_mode: Some(PureMode::Clarify),
            previous_tools: vec!["weather".into()],
            recent_turns: vec![PureRecentTurn { role: "user".into(), content: "hi".into() }],
            warmth: 0.4,
            memory_confidence: 0.7,
            gist_count: 3,
            fact_count: 12,
            tools: vec![("weather".into(), "today's forecast".into())],
        };
        let wit: TriageInput = pure.clone().into();
        assert_eq!(wit.gist_count, 3);
        assert_eq!(wit.tools[0].summary, "today's forecast");
        assert_eq!(PureTriageInput::from(wit), pure);
    }

    #[test]
    fn the_weights_and_a_decision_survive_the_seam_in_tie_order() {
        let w = PureWeights::default();
        let wit: Weights = w.clone().into();
        let modes: Vec<Mode> = wit.base.iter().map(|s| s.mode).collect();
        assert_eq!(modes, [Mode::Respond, Mode::Clarify, Mode::Act, Mode::Acknowledge, Mode::Ignore]);
        assert_eq!(PureWeights::from(wit), w);

        let d = PureDecision {
            mode: PureMode::Clarify,
            scores: w.base.clone(),
            margin: 0.05,
            effective_margin: 0.2,
            tiebreak: Some((PureMode::Clarify, PureMode::Respond)),
            excluded: vec![PureMode::Act],
        };
        let wit: Decision = d.clone().into();
        assert_eq!(wit.tiebreak, Some((Mode::Clarify, Mode::Respond)));
        assert_eq!(PureDecision::from(wit), d);
    }

    #[test]
    fn an_actions_parameters_cross_as_json_text() {
        let mut params = serde_json::Map::new();
        params.insert("query".into(), "cello".into());
        params.insert("limit".into(), 3.into());
        let pure = PureAction { kind: "recall".into(), params };
        let wit: Action = pure.clone().into();
        assert_eq!(wit.params, r#"{"limit":3,"query":"cello"}"#);
        assert_eq!(PureAction::from(wit), pure);
        let odd = Action { kind: "recall".into(), params: "[1]".into() };
        assert!(PureAction::from(odd).params.is_empty());
    }

    #[test]
    fn a_count_past_u32_saturates_at_the_seam() {
        assert_eq!(Conv::<u32>::conv(usize::MAX), u32::MAX);
    }
}
