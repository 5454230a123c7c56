//! Path C, step 4b: the ACT loop's rules (design 002 §4b). Each iteration
//! plans actions with the primary model, checks the termination conditions,
//! dispatches the actions, grows fatigue and logs the iteration. Limits are
//! the design's (60 s cumulative, 10 s per action, 5 iterations); the fatigue
//! budget, growth rate and base costs, which the design leaves open, are the
//! reference implementation's (D-C8).

use serde::{Deserialize, Serialize};

/// The ACT planning prompt (design: `frontal-cortex-act.md`).
pub const PROMPT: &str = include_str!("../../../prompts/frontal-cortex-act.md");

/// The innate actions an ACT plan may name.
pub const ACTIONS: [&str; 8] =
    ["recall", "memorize", "introspect", "associate", "schedule", "list", "focus", "persistent_task"];

/// The JSON Schema of an ACT plan (D-L2): `{"actions": [{type, params}]}`,
/// at most five actions; each action's parameters are its own (the prompt
/// lists them), so `params` is any object.
pub fn schema() -> String {
    serde_json::json!({
        "type": "object",
        "properties": {
            "actions": {
                "type": "array",
                "maxItems": 5,
                "items": {
                    "type": "object",
                    "properties": {
                        "type": {"enum": ACTIONS},
                        "params": {"type": "object", "additionalProperties": true},
                    },
                    "required": ["type", "params"],
                    "additionalProperties": false,
                },
            },
        },
        "required": ["actions"],
        "additionalProperties": false,
    })
    .to_string()
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Limits {
    pub cumulative_timeout_ms: u64,
    pub per_action_timeout_ms: u64,
    pub max_iterations: u32,
    pub fatigue_budget: f64,
    pub fatigue_growth_rate: f64,
    /// The same action this many times in a row ends the loop.
    pub max_repeats: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            cumulative_timeout_ms: 60_000,
            per_action_timeout_ms: 10_000,
            max_iterations: 5,
            fatigue_budget: 10.0,
            fatigue_growth_rate: 0.3,
            max_repeats: 3,
        }
    }
}

/// One planned action: a type and its parameters.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Action {
    #[serde(rename = "type")]
    pub kind: String,
    #[serde(default)]
    pub params: serde_json::Map<String, serde_json::Value>,
}

/// Why the loop stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Termination {
    FatigueExhausted,
    Timeout,
    MaxIterations,
    NoActions,
    RepeatedAction,
    PlanFailed,
}

/// Base fatigue cost of one action.
pub fn base_cost(kind: &str) -> f64 {
    match kind {
        "introspect" => 0.5,
        "memorize" => 0.8,
        _ => 1.0,
    }
}

/// An action result's confidence, by the dispatcher's heuristic: none for a
/// failure; 0.92 for `memorize` and `introspect`; for `recall` and
/// `associate` by how much they found (over 100 characters 0.75, over 20
/// 0.60, else 0.40); 0.50 for any other action or tool.
pub fn result_confidence(kind: &str, status: &str, result: &str) -> f64 {
    if status != "success" {
        return 0.0;
    }
    match kind {
        "memorize" | "introspect" => 0.92,
        "recall" | "associate" => match result.chars().count() {
            n if n > 100 => 0.75,
            n if n > 20 => 0.60,
            _ => 0.40,
        },
        _ => 0.50,
    }
}

/// The verb (`params.action`) an innate action takes when its plan names
/// none: a reminder is created, a list shown, a focus session and the
/// tasks looked at.
pub fn default_verb(kind: &str) -> Option<&'static str> {
    match kind {
        "schedule" => Some("create"),
        "list" => Some("view"),
        "focus" => Some("check"),
        "persistent_task" => Some("list"),
        _ => None,
    }
}

/// The verb `action` runs with: its `params.action`, else its default.
pub fn verb(action: &Action) -> Option<String> {
    action
        .params
        .get("action")
        .and_then(|v| v.as_str())
        .map(|v| v.trim().to_ascii_lowercase())
        .or_else(|| default_verb(&action.kind).map(String::from))
}

/// Maps the aliases models use to the innate action names.
pub fn canonical(kind: &str) -> String {
    let k = kind.trim().to_ascii_lowercase();
    match k.as_str() {
        "memory_query" | "internal_reasoning" | "semantic_query" => "recall".into(),
        "memory_write" => "memorize".into(),
        "world_state_read" => "introspect".into(),
        _ => k,
    }
}

/// Parses a plan: `{"actions":[{type, …params}]}` or a bare list. Keys
/// other than `type` and `params` are folded into the parameters.
pub fn parse_plan(text: &str) -> Result<Vec<Action>, String> {
    let v = mneme_llm::extract_json(text).map_err(|e| e.to_string())?;
    let list = match &v {
        serde_json::Value::Array(a) => a.clone(),
        serde_json::Value::Object(o) => match o.get("actions") {
            Some(serde_json::Value::Array(a)) => a.clone(),
            Some(_) => return Err("`actions` is not a list".into()),
            None => return Err("the plan has no `actions`".into()),
        },
        _ => return Err("the plan is not an object or a list".into()),
    };
    let mut out = Vec::new();
    for item in list {
        let serde_json::Value::Object(mut o) = item else { return Err("an action is not an object".into()) };
        let Some(kind) = o.remove("type").and_then(|t| t.as_str().map(canonical)) else {
            return Err("an action has no `type`".into());
        };
        let mut params = match o.remove("params") {
            Some(serde_json::Value::Object(p)) => p,
            _ => serde_json::Map::new(),
        };
        params.extend(o);
        out.push(Action { kind, params });
    }
    Ok(out)
}

#[cfg(test)]
mod reconcile_tests {
    use super::*;

    fn action(v: serde_json::Value) -> Action {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn the_rules_fill_what_the_model_left_out_and_fix_a_reminders_time() {
        let rules = vec![
            action(serde_json::json!({"type": "recall", "params": {"query": "x"}})),
            action(
                serde_json::json!({"type": "schedule", "params": {"action": "create", "message": "call the dentist",
                "due_at": "2026-11-30T09:00:00Z"}}),
            ),
        ];
        // The model planned nothing: the reminder is added, the recall not.
        let (plan, notes) = reconcile(vec![], &rules, true);
        assert_eq!(plan, vec![rules[1].clone()]);
        assert_eq!(notes, vec!["added the rules' schedule (create)"]);
        // The model's reminder with a guessed date takes the rules' time.
        let model = vec![action(serde_json::json!({"type": "schedule", "params": {"message": "Call dentist",
            "due_at": "2023-05-01T09:00:00", "recurrence": "daily"}}))];
        let (plan, notes) = reconcile(model, &rules, true);
        assert_eq!(plan[0].params["due_at"], "2026-11-30T09:00:00Z");
        assert_eq!(plan[0].params["message"], "call the dentist");
        assert!(!plan[0].params.contains_key("recurrence"));
        assert_eq!(notes.len(), 3, "{notes:?}");
        // A listing is not a creation: the rules' reminder is added beside it.
        let model = vec![action(serde_json::json!({"type": "schedule", "params": {"action": "list"}}))];
        assert_eq!(reconcile(model.clone(), &rules, true).0.len(), 2);
        assert_eq!(reconcile(model, &rules, false).0.len(), 1, "later iterations add nothing");
        // Agreement changes nothing.
        let (plan, notes) = reconcile(vec![rules[1].clone()], &rules, true);
        assert_eq!((plan, notes.len()), (vec![rules[1].clone()], 0));
    }
}

static LIST_ADD: std::sync::LazyLock<regex_lite::Regex> = std::sync::LazyLock::new(|| {
    regex_lite::Regex::new(r"(?i)\badd\s+(.+?)\s+to\s+(?:my|the)\s+(.+?\s+)?list\b").unwrap()
});
static REMIND_LEAD: std::sync::LazyLock<regex_lite::Regex> = std::sync::LazyLock::new(|| {
    regex_lite::Regex::new(
        r"(?i)\b(?:please\s+)?(?:remind\s+me|(?:set|add|create|make)\s+(?:me\s+)?an?\s+reminder|reminder)\b\s*[:,-]?",
    )
    .unwrap()
});
static REMIND_CONNECTOR: std::sync::LazyLock<regex_lite::Regex> = std::sync::LazyLock::new(|| {
    regex_lite::Regex::new(r"(?i)^(?:(?:(?:to|that|about|for|of|please|i\s+(?:need|have)\s+to)\b|[:,;-])\s*)+").unwrap()
});
static REMIND_TAIL: std::sync::LazyLock<regex_lite::Regex> = std::sync::LazyLock::new(|| {
    regex_lite::Regex::new(r"(?i)(?:(?:^|\s)(?:please|at|on|by|for)|\s*[.!?,;:-])+$").unwrap()
});
static CANCEL_REMINDER: std::sync::LazyLock<regex_lite::Regex> = std::sync::LazyLock::new(|| {
    regex_lite::Regex::new(r"(?i)\b(?:cancel|delete|remove|drop|clear)\b.{0,40}\breminders?\b").unwrap()
});
static LIST_REMINDERS: std::sync::LazyLock<regex_lite::Regex> = std::sync::LazyLock::new(|| {
    regex_lite::Regex::new(
        r"(?i)\b(?:(?:what|which|any|show|list|see|view)\b.{0,30}\breminders?|reminders?\s+(?:do\s+i\s+have|are\s+(?:there|pending|set))|(?:my|pending|upcoming)\s+reminders)\b",
    )
    .unwrap()
});
static FOCUS_ON: std::sync::LazyLock<regex_lite::Regex> = std::sync::LazyLock::new(|| {
    regex_lite::Regex::new(r"(?i)\b(?:focus(?: session)? on|deep work on|help me focus on)\s+(.+?)\s*[.!]?$").unwrap()
});
static REMEMBER: std::sync::LazyLock<regex_lite::Regex> = std::sync::LazyLock::new(|| {
    regex_lite::Regex::new(
        r"(?i)^\s*(?:please\s+)?remember(?:\s+that)?\s+(?:my\s+)?(.+?)\s+(?:is|are)\s+(.+?)\s*[.!]?$",
    )
    .unwrap()
});

/// The ACT plan when no model is configured (D-C9): the first iteration
/// recalls on the message and runs each contextual skill whose parameters
/// can be read off the message ("add X to my Y list", a reminder with its
/// time in the principal's `zone` (D-C31), "focus on X", "remember that my
/// X is Y", a background task for the message); later iterations plan
/// nothing, which ends the loop.
pub fn rule_plan(text: &str, skills: &[String], iteration: u32, now_ms: u64, zone: &mneme_time::Zone) -> Vec<Action> {
    if iteration > 0 {
        return Vec::new();
    }
    let obj = |v: serde_json::Value| v.as_object().cloned().unwrap_or_default();
    let mut plan = vec![Action { kind: "recall".into(), params: obj(serde_json::json!({"query": text, "limit": 5})) }];
    if let Some(c) = REMEMBER.captures(text) {
        plan.push(Action {
            kind: "memorize".into(),
            params: obj(serde_json::json!({"facts": [{"key": c[1].trim(), "value": c[2].trim(), "confidence": 0.7}]})),
        });
    }
    for skill in skills {
        match skill.as_str() {
            "list" => {
                if let Some(c) = LIST_ADD.captures(text) {
                    let list = c.get(2).map_or("Shopping List".to_string(), |m| format!("{} list", m.as_str().trim()));
                    let items: Vec<String> = c[1]
                        .split([','])
                        .flat_map(|x| x.split(" and "))
                        .map(|x| x.trim().to_string())
                        .filter(|x| !x.is_empty())
                        .collect();
                    plan.push(Action {
                        kind: "list".into(),
                        params: obj(serde_json::json!({"action": "add", "list": list, "items": items})),
                    });
                } else {
                    plan.push(Action { kind: "list".into(), params: obj(serde_json::json!({"action": "list_all"})) });
                }
            }
            "schedule" => plan.push(schedule_plan(text, now_ms, zone)),
            "focus" => match FOCUS_ON.captures(text) {
                Some(c) => plan.push(Action {
                    kind: "focus".into(),
                    params: obj(serde_json::json!({"action": "set", "description": c[1].trim()})),
                }),
                None => plan.push(Action { kind: "focus".into(), params: obj(serde_json::json!({"action": "check"})) }),
            },
            "persistent_task" => plan.push(Action {
                kind: "persistent_task".into(),
                params: obj(serde_json::json!({"action": "create", "goal": text.trim()})),
            }),
            _ => {}
        }
    }
    plan
}

/// A model's first plan set against the rules' reading of the same
/// message (D-L4): an action the rules read off the message that the
/// model left out is added, and a reminder the model plans to create takes
/// the rules' time, text and recurrence when the rules read a time, since
/// a model's date arithmetic is not to be trusted and the rules read in the
/// principal's zone. Only the first iteration adds what was left out (the
/// rules' actions have run by the next); every iteration's reminders take
/// the rules' reading. Returns the plan and what was changed, for the log.
pub fn reconcile(model: Vec<Action>, rules: &[Action], first: bool) -> (Vec<Action>, Vec<String>) {
    let mut plan = model;
    let mut notes = Vec::new();
    for r in rules.iter().filter(|r| r.kind != "recall") {
        let rule_verb = verb(r);
        let same = plan.iter().position(|a| a.kind == r.kind && verb(a) == rule_verb);
        match same {
            None if !first => {}
            None => {
                notes.push(format!("added the rules' {} ({})", r.kind, rule_verb.as_deref().unwrap_or("-")));
                plan.push(r.clone());
            }
            Some(i)
                if r.kind == "schedule"
                    && rule_verb.as_deref() == Some("create")
                    && r.params.contains_key("due_at") =>
            {
                let a = &mut plan[i];
                for key in ["due_at", "message", "recurrence"] {
                    match r.params.get(key) {
                        Some(v) if a.params.get(key) != Some(v) => {
                            a.params.insert(key.into(), v.clone());
                            notes.push(format!("the reminder's {key} as the rules read it"));
                        }
                        None if key == "recurrence" && a.params.remove(key).is_some() => {
                            notes.push("the reminder does not repeat".into());
                        }
                        _ => {}
                    }
                }
            }
            Some(_) => {}
        }
    }
    (plan, notes)
}

/// The `schedule` action a message asks for without a model (D-C31): the
/// pending reminders when it asks about them; a reminder when it names a
/// time ("tomorrow at 9", "every Sunday evening"), its text what is left
/// once the time and the "remind me to" are cut; a reminder with no
/// `due_at` when it asks for one but names no time, which the skill
/// answers by asking when.
pub fn schedule_plan(text: &str, now_ms: u64, zone: &mneme_time::Zone) -> Action {
    let obj = |v: serde_json::Value| v.as_object().cloned().unwrap_or_default();
    let when = mneme_time::when::parse(text, now_ms as i64, zone);
    // Cancelling needs the reminder's id, which the list shows.
    let asks_to_list =
        (LIST_REMINDERS.is_match(text) && !text.to_lowercase().contains("remind me")) || CANCEL_REMINDER.is_match(text);
    if asks_to_list || (when.is_none() && !REMIND_LEAD.is_match(text)) {
        return Action { kind: "schedule".into(), params: obj(serde_json::json!({"action": "list"})) };
    }
    let rest = match &when {
        Some(w) => mneme_time::when::without(text, &w.spans),
        None => text.trim().to_string(),
    };
    let message = reminder_text(&rest);
    let mut params = obj(serde_json::json!({"action": "create", "message": message}));
    if let Some(w) = when {
        params.insert("due_at".into(), zone.format(w.due_ms).into());
        if let Some(r) = w.recurrence {
            params.insert("recurrence".into(), r.name().into());
        }
    }
    Action { kind: "schedule".into(), params }
}

/// What to be reminded of, from a message with its time cut out: what
/// follows "remind me (to)", else the whole message, without connectors
/// and closing punctuation.
fn reminder_text(rest: &str) -> String {
    let body = match REMIND_LEAD.find(rest) {
        Some(m) if !rest[m.end()..].trim().is_empty() => &rest[m.end()..],
        Some(m) => &rest[..m.start()],
        None => rest,
    };
    let body = REMIND_CONNECTOR.replace(body.trim(), "");
    let body = REMIND_TAIL.replace(body.trim(), "");
    let body = body.trim();
    if body.is_empty() { "Reminder".to_string() } else { body.to_string() }
}

/// The loop's running state.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LoopState {
    /// Iterations completed so far.
    pub iteration: u32,
    pub fatigue: f64,
    pub elapsed_ms: u64,
    /// Action types dispatched, in order.
    pub history: Vec<String>,
}

impl LoopState {
    /// Checks, before dispatching `plan`, whether the loop must stop: the
    /// fatigue budget, the cumulative timeout, the iteration cap, an empty
    /// plan, or the same action for the third time running.
    pub fn check(&self, plan: &[Action], limits: &Limits) -> Option<Termination> {
        if self.fatigue >= limits.fatigue_budget {
            return Some(Termination::FatigueExhausted);
        }
        if self.elapsed_ms >= limits.cumulative_timeout_ms {
            return Some(Termination::Timeout);
        }
        if self.iteration >= limits.max_iterations {
            return Some(Termination::MaxIterations);
        }
        if plan.is_empty() {
            return Some(Termination::NoActions);
        }
        if plan.len() == 1 && limits.max_repeats > 1 {
            let k = &plan[0].kind;
            let run = self.history.iter().rev().take_while(|h| *h == k).count();
            if run + 1 >= limits.max_repeats {
                return Some(Termination::RepeatedAction);
            }
        }
        None
    }

    /// Records a dispatched iteration: `cost = base × (1 + rate × i)` per
    /// action with the 0-based iteration index `i`; returns the iteration's cost.
    pub fn record(&mut self, plan: &[Action], took_ms: u64, limits: &Limits) -> f64 {
        let factor = 1.0 + limits.fatigue_growth_rate * self.iteration as f64;
        let cost: f64 = plan.iter().map(|a| base_cost(&a.kind) * factor).sum();
        self.fatigue = ((self.fatigue + cost) * 1000.0).round() / 1000.0;
        self.elapsed_ms += took_ms;
        self.iteration += 1;
        self.history.extend(plan.iter().map(|a| a.kind.clone()));
        (cost * 1000.0).round() / 1000.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn a(kind: &str) -> Action {
        Action { kind: kind.into(), params: Default::default() }
    }

    #[test]
    fn plans_parse_with_aliases_and_inline_params() {
        let p = parse_plan(r#"{"actions":[{"type":"memory_query","query":"tea"},{"type":"memorize","params":{"facts":[]}}],"response":""}"#)
            .unwrap();
        assert_eq!(p[0].kind, "recall");
        assert_eq!(p[0].params["query"], "tea");
        assert_eq!(p[1].kind, "memorize");
        assert!(parse_plan(r#"{"actions":[]}"#).unwrap().is_empty());
        assert!(parse_plan("no plan").is_err());
        assert!(parse_plan(r#"{"actions":[{"query":"x"}]}"#).is_err());
    }

    #[test]
    fn rule_plans_read_parameters_off_the_message() {
        let skills = |s: &[&str]| s.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        let utc = mneme_time::Zone::utc();
        let p = rule_plan("add milk, eggs and bread to my shopping list", &skills(&["list"]), 0, 0, &utc);
        assert_eq!(p[0].kind, "recall");
        assert_eq!(p[1].params["items"], serde_json::json!(["milk", "eggs", "bread"]));
        assert_eq!(p[1].params["list"], "shopping list");
        let p = rule_plan("remind me to stretch in 30 minutes", &skills(&["schedule"]), 0, 1_795_343_400_000, &utc);
        assert_eq!(p[1].params["message"], "stretch");
        assert_eq!(p[1].params["due_at"], "2026-11-22T11:00:00Z");
        let p = rule_plan("remember that my favourite tea is oolong", &[], 0, 0, &utc);
        assert_eq!(p[1].params["facts"][0]["key"], "favourite tea");
        assert!(rule_plan("anything", &[], 1, 0, &utc).is_empty());
    }

    #[test]
    fn reminders_are_read_off_the_message_in_the_principals_zone() {
        let ny = mneme_time::Zone::parse("America/New_York").unwrap();
        // Thursday 26 November 2026, 10:00 in New York.
        let now = ny.parse_datetime("2026-11-26T10:00").unwrap() as u64;
        let cases: &[(&str, serde_json::Value)] = &[
            (
                "Remind me tomorrow at 9 to call the dentist",
                serde_json::json!({"action": "create", "message": "call the dentist", "due_at": "2026-11-27T09:00:00-05:00"}),
            ),
            (
                "remind me to submit the report on Friday at 18:30.",
                serde_json::json!({"action": "create", "message": "submit the report", "due_at": "2026-11-27T18:30:00-05:00"}),
            ),
            (
                "Every Sunday evening, remind me to water the plants",
                serde_json::json!({"action": "create", "message": "water the plants", "due_at": "2026-11-29T18:00:00-05:00", "recurrence": "weekly"}),
            ),
            (
                "set a reminder for next Monday to renew my passport please",
                serde_json::json!({"action": "create", "message": "renew my passport", "due_at": "2026-11-30T09:00:00-05:00"}),
            ),
            (
                "remind me in 10 minutes that the tea is ready",
                serde_json::json!({"action": "create", "message": "the tea is ready", "due_at": "2026-11-26T10:10:00-05:00"}),
            ),
            ("remind me to call mum", serde_json::json!({"action": "create", "message": "call mum"})),
            (
                "remind me tomorrow to feed the cat",
                serde_json::json!({"action": "create", "message": "feed the cat", "due_at": "2026-11-27T09:00:00-05:00"}),
            ),
            (
                "remind me to top up my card and call Ron on Friday at 5pm",
                serde_json::json!({"action": "create", "message": "top up my card and call Ron", "due_at": "2026-11-27T17:00:00-05:00"}),
            ),
            (
                "tomorrow at 9 remind me to forward the email about the subscription, please",
                serde_json::json!({"action": "create", "message": "forward the email about the subscription", "due_at": "2026-11-27T09:00:00-05:00"}),
            ),
            ("cancel my reminder for tomorrow", serde_json::json!({"action": "list"})),
            ("delete the reminder to call mum", serde_json::json!({"action": "list"})),
            ("what reminders do I have?", serde_json::json!({"action": "list"})),
            ("show my reminders for tomorrow", serde_json::json!({"action": "list"})),
            ("any reminders pending?", serde_json::json!({"action": "list"})),
        ];
        for (text, want) in cases {
            let a = schedule_plan(text, now, &ny);
            assert_eq!(a.kind, "schedule");
            assert_eq!(serde_json::Value::Object(a.params), *want, "{text:?}");
        }
    }

    #[test]
    fn result_confidence_by_kind_status_and_length() {
        let long = "x".repeat(101);
        let cases: &[(&str, &str, &str, f64)] = &[
            ("recall", "error", "anything", 0.0),
            ("memorize", "success", "", 0.92),
            ("introspect", "success", "", 0.92),
            ("recall", "success", &long, 0.75),
            ("associate", "success", &"x".repeat(100), 0.60),
            ("recall", "success", &"x".repeat(21), 0.60),
            ("recall", "success", &"x".repeat(20), 0.40),
            ("schedule", "success", "scheduled", 0.50),
            ("trains", "success", "the 9:12 is on time", 0.50),
        ];
        for (kind, status, result, want) in cases {
            assert_eq!(result_confidence(kind, status, result), *want, "{kind} {status} {}", result.len());
        }
    }

    #[test]
    fn fatigue_grows_with_the_iteration_index() {
        let l = Limits::default();
        let mut s = LoopState::default();
        assert_eq!(s.record(&[a("recall"), a("introspect")], 10, &l), 1.5); // ×1.0
        assert_eq!(s.record(&[a("memorize")], 10, &l), 1.04); // 0.8 × 1.3
        assert_eq!(s.record(&[a("recall")], 10, &l), 1.6); // × 1.6
        assert_eq!(s.fatigue, 4.14);
        assert_eq!(s.iteration, 3);
    }

    #[test]
    fn termination_boundaries() {
        let l = Limits::default();
        let plan = [a("recall")];
        let at = |f: f64, e: u64, i: u32| {
            LoopState { fatigue: f, elapsed_ms: e, iteration: i, history: vec![] }.check(&plan, &l)
        };
        assert_eq!(at(9.99, 0, 0), None);
        assert_eq!(at(10.0, 0, 0), Some(Termination::FatigueExhausted));
        assert_eq!(at(0.0, 59_999, 0), None);
        assert_eq!(at(0.0, 60_000, 0), Some(Termination::Timeout));
        assert_eq!(at(0.0, 0, 4), None);
        assert_eq!(at(0.0, 0, 5), Some(Termination::MaxIterations));
        assert_eq!(LoopState::default().check(&[], &l), Some(Termination::NoActions));
    }

    #[test]
    fn the_third_identical_action_in_a_row_ends_the_loop() {
        let l = Limits::default();
        let s = |h: &[&str]| LoopState { history: h.iter().map(|x| x.to_string()).collect(), ..Default::default() };
        assert_eq!(s(&["recall"]).check(&[a("recall")], &l), None);
        assert_eq!(s(&["recall", "recall"]).check(&[a("recall")], &l), Some(Termination::RepeatedAction));
        assert_eq!(s(&["recall", "memorize"]).check(&[a("recall")], &l), None);
        // Two actions planned together are not a repetition.
        assert_eq!(s(&["recall", "recall"]).check(&[a("recall"), a("memorize")], &l), None);
    }
}
