//! The tools `/mcp` offers (#51 item 3): what a model reads when it
//! chooses one (name, description, input and output schemas, and the
//! spec's annotations, set to what each tool really does), and each call's
//! arguments checked into a typed [`Call`] before anything runs. A bad
//! argument is an [`ArgError`] naming its field, which the entry answers
//! as a tool error (`isError`), never as a protocol error and never after
//! a write.

use serde_json::{Map, Value, json};

/// A check that failed: the argument's name and what was wrong with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArgError {
    pub field: String,
    pub message: String,
}

impl ArgError {
    fn new(field: &str, message: impl Into<String>) -> Self {
        ArgError { field: field.into(), message: message.into() }
    }
}

impl std::fmt::Display for ArgError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "`{}`: {}", self.field, self.message)
    }
}

/// The search modes of the hybrid search and of knowledge retrieval.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Hybrid,
    Text,
    Vector,
}

/// What a recommendation's decision is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Acted on (`acted_as_prescribed` or `acted_modified`), skipped or
    /// dismissed: the rx lifecycle's dispositions, by their API names.
    Dispose { disposition: String, fit: Option<i64>, note: Option<String> },
    /// Snoozed for 1 to 7 days.
    Snooze { days: i64 },
}

/// What can be forgotten, as `POST /memory/forget` scopes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Forget {
    Exchange(String),
    /// A fact by its key, in one topic or in all.
    Fact {
        key: String,
        topic: Option<String>,
    },
    Topic(String),
}

/// A tool call whose arguments passed their checks.
#[derive(Debug, Clone, PartialEq)]
pub enum Call {
    Remember { text: String, title: Option<String> },
    Search { query: String, k: u32, mode: Mode },
    Recall { topic: String, limit: u32 },
    RetrieveKnowledge { query: String, k: u32, mode: Mode },
    Ingest { text: String, source_type: String, source_date: Option<String>, principal: Option<String> },
    IngestStatus { job_id: String },
    ListRecommendations { door: Option<String>, status: Option<String>, limit: u32 },
    ReadRecommendation { id: String },
    DecideRecommendation { id: String, decision: Decision },
    CreateReminder { message: String, due_at: String, recurrence: Option<String> },
    ListReminders,
    CreateTask { goal: String, priority: Option<i64> },
    ListTasks { status: Option<String>, limit: u32 },
    CancelTask { id: String },
    Forget(Forget),
}

/// One tool as `tools/list` shows it.
struct Tool {
    name: &'static str,
    title: &'static str,
    description: &'static str,
    input: Value,
    output: Value,
    read_only: bool,
    destructive: bool,
    idempotent: bool,
}

fn object(properties: Value, required: &[&str]) -> Value {
    json!({"type": "object", "properties": properties, "required": required, "additionalProperties": false})
}

fn string(description: &str, max: usize) -> Value {
    json!({"type": "string", "minLength": 1, "maxLength": max, "description": description})
}

fn count(description: &str, min: u32, max: u32, default: u32) -> Value {
    json!({"type": "integer", "minimum": min, "maximum": max, "default": default, "description": description})
}

fn mode() -> Value {
    json!({"type": "string", "enum": ["hybrid", "text", "vector"], "default": "hybrid",
           "description": "hybrid (words and meaning, the default), text (words only, BM25) or vector (meaning only, embeddings)"})
}

/// An output whose every field is listed but whose shape may grow.
fn out(properties: Value, required: &[&str]) -> Value {
    json!({"type": "object", "properties": properties, "required": required})
}

fn list_of(description: &str) -> Value {
    json!({"type": "array", "items": {"type": "object"}, "description": description})
}

/// The most text one `remember` takes (a document, as `POST /documents`
/// takes it).
pub const MAX_DOCUMENT: usize = 100_000;
/// The most text one `ingest_transcript` takes (as `POST /knowledge/ingest`).
pub const MAX_TRANSCRIPT: usize = 400_000;

fn tools() -> Vec<Tool> {
    let id = |what: &str| string(what, 200);
    vec![
        Tool {
            name: "remember",
            title: "Remember a note or document",
            description: "Store a note or document in the principal's long-term memory so later searches find it. Use for anything the principal wants kept verbatim (a note, a page, meeting notes). Not for decisions or standards the principal holds: use ingest_transcript for those.",
            input: object(
                json!({"text": string("The note or document, as it should be kept", MAX_DOCUMENT),
                       "title": string("A short title; the first line is used when absent", 300)}),
                &["text"],
            ),
            output: out(json!({"id": {"type": "string"}, "title": {"type": ["string", "null"]}}), &["id"]),
            read_only: false,
            destructive: false,
            idempotent: false,
        },
        Tool {
            name: "search",
            title: "Search notes, documents and knowledge",
            description: "Hybrid search (keywords and meaning) over the documents and notes the principal stored and their knowledge entries. Returns the best matches with their scores. Use to find a stored text; use recall for what was said in conversation.",
            input: object(
                json!({"query": string("What to look for", 2000), "k": count("How many results", 1, 50, 10), "mode": mode()}),
                &["query"],
            ),
            output: out(
                json!({"results": list_of("Matches, best first: id, corpus, title, snippet, score")}),
                &["results"],
            ),
            read_only: true,
            destructive: false,
            idempotent: true,
        },
        Tool {
            name: "recall",
            title: "Recall what was said about a topic",
            description: "What the principal and the assistant said about a topic: recent exchanges, conversation gists, remembered facts and the principal's traits that match it. Use when the principal asks what they said, told you or decided in conversation.",
            input: object(
                json!({"topic": string("The topic or question", 500), "limit": count("How many memories", 1, 100, 10)}),
                &["topic"],
            ),
            output: out(
                json!({"memories": list_of("Matches: kind (exchange, gist, fact, trait) and its fields")}),
                &["memories"],
            ),
            read_only: true,
            destructive: false,
            idempotent: true,
        },
        Tool {
            name: "retrieve_knowledge",
            title: "Retrieve the principal's knowledge",
            description: "The principal's captured judgement (standards, decisions, preferences, lessons, reactions, philosophies) most relevant to a question, ranked by relevance, confidence and recency with each score shown. Use before advising or deciding on the principal's behalf.",
            input: object(
                json!({"query": string("The question or situation", 2000), "k": count("How many entries", 1, 50, 8), "mode": mode()}),
                &["query"],
            ),
            output: out(json!({"entries": list_of("Entries, best first, with their scores")}), &["entries"]),
            read_only: true,
            destructive: false,
            idempotent: true,
        },
        Tool {
            name: "ingest_transcript",
            title: "Capture knowledge from a transcript",
            description: "Queue a meeting or chat transcript for knowledge extraction: the principal's standards, decisions and other positions become knowledge entries, merged with what is already known. Runs in the background; returns a job id to check with ingest_status.",
            input: object(
                json!({"text": string("The transcript, one turn per line as `Name: words`", MAX_TRANSCRIPT),
                       "source_type": {"type": "string", "enum": ["meeting", "chat"], "default": "meeting",
                                       "description": "Where the text comes from"},
                       "source_date": {"type": "string", "pattern": "^[0-9]{4}-[0-9]{2}-[0-9]{2}$",
                                       "description": "The day it was said (YYYY-MM-DD); today when absent"},
                       "principal": string("The principal's name as the transcript writes it, so only their positions are kept", 80)}),
                &["text"],
            ),
            output: out(json!({"job_id": {"type": "string"}, "status": {"type": "string"}}), &["job_id"]),
            read_only: false,
            destructive: false,
            idempotent: false,
        },
        Tool {
            name: "ingest_status",
            title: "Check a transcript's extraction",
            description: "The state of an ingest_transcript job: queued, running, done or failed, and when done what each extracted candidate became (a new entry, a merge, a supersession, or dropped and why).",
            input: object(json!({"job_id": id("The job id ingest_transcript returned")}), &["job_id"]),
            output: out(json!({"job_id": {"type": "string"}, "status": {"type": "string"}}), &["job_id", "status"]),
            read_only: true,
            destructive: false,
            idempotent: true,
        },
        Tool {
            name: "list_recommendations",
            title: "List recommendations",
            description: "The recommendations Mneme drafted from the principal's drift signals (each with its thesis and mandatory counter-thesis), newest first, optionally for one door or one status.",
            input: object(
                json!({"door": string("Only this door (for example fitness)", 100),
                       "status": {"type": "string", "enum": ["open", "snoozed", "acted", "dismissed"],
                                  "description": "Only recommendations in this state"},
                       "limit": count("How many", 1, 100, 20)}),
                &[],
            ),
            output: out(
                json!({"recommendations": list_of("Recommendations: id, door, status, title, flags")}),
                &["recommendations"],
            ),
            read_only: true,
            destructive: false,
            idempotent: true,
        },
        Tool {
            name: "read_recommendation",
            title: "Read a recommendation",
            description: "One recommendation in full: its thesis, counter-thesis, evidence and status, with its artifact as markdown.",
            input: object(json!({"id": id("The recommendation's id")}), &["id"]),
            output: out(
                json!({"recommendation": {"type": "object"}, "markdown": {"type": "string"}}),
                &["recommendation"],
            ),
            read_only: true,
            destructive: false,
            idempotent: true,
        },
        Tool {
            name: "decide_recommendation",
            title: "Decide on a recommendation",
            description: "Record the principal's decision on an open recommendation: acted_as_prescribed or acted_modified (with a fit from 1 to 5), skipped, dismissed, or snoozed for 1 to 7 days. Only the principal's own decision: never decide for them.",
            input: object(
                json!({"id": id("The recommendation's id"),
                       "decision": {"type": "string", "enum": ["acted_as_prescribed", "acted_modified", "skipped", "dismissed", "snoozed"]},
                       "fit": {"type": "integer", "minimum": 1, "maximum": 5,
                               "description": "How well it fitted, 1 to 5: required when acted on"},
                       "days": {"type": "integer", "minimum": 1, "maximum": 7, "description": "Snooze length: required when snoozed"},
                       "note": string("What happened, in the principal's words", 4000)}),
                &["id", "decision"],
            ),
            output: out(json!({"recommendation": {"type": "object"}}), &["recommendation"]),
            read_only: false,
            destructive: false,
            idempotent: false,
        },
        Tool {
            name: "create_reminder",
            title: "Set a reminder",
            description: "Set a reminder for the principal at a time, once or repeating. The time is ISO-8601; without an offset it is the principal's local time.",
            input: object(
                json!({"message": string("What to remind them of", 1000),
                       "due_at": string("When, ISO-8601 (2026-12-02T09:00 or with an offset)", 60),
                       "recurrence": {"type": "string", "description": "hourly, daily, weekly, weekdays, monthly or interval:N (minutes)"}}),
                &["message", "due_at"],
            ),
            output: out(json!({"result": {"type": "string"}}), &["result"]),
            read_only: false,
            destructive: false,
            idempotent: false,
        },
        Tool {
            name: "list_reminders",
            title: "List pending reminders",
            description: "The principal's pending reminders, soonest first.",
            input: object(json!({}), &[]),
            output: out(json!({"result": {"type": "string"}}), &["result"]),
            read_only: true,
            destructive: false,
            idempotent: true,
        },
        Tool {
            name: "create_task",
            title: "Start a background task",
            description: "Give Mneme a goal to work on in the background over several cycles (research, comparison, a shortlist), planned into steps and reported when done. Not for things only the principal can do: use create_reminder for those.",
            input: object(
                json!({"goal": string("The goal, in a sentence or two", 2000),
                       "priority": {"type": "integer", "minimum": 1, "maximum": 10, "description": "1 (most urgent) to 10"}}),
                &["goal"],
            ),
            output: out(json!({"task": {"type": "object"}}), &["task"]),
            read_only: false,
            destructive: false,
            idempotent: false,
        },
        Tool {
            name: "list_tasks",
            title: "List background tasks",
            description: "The background tasks, with their state, plan and progress.",
            input: object(
                json!({"status": {"type": "string", "enum": ["proposed", "accepted", "in_progress", "paused", "completed", "cancelled", "expired"]},
                       "limit": count("How many", 1, 100, 20)}),
                &[],
            ),
            output: out(json!({"tasks": list_of("Tasks")}), &["tasks"]),
            read_only: true,
            destructive: false,
            idempotent: true,
        },
        Tool {
            name: "cancel_task",
            title: "Cancel a background task",
            description: "Stop a background task; what it found so far is kept.",
            input: object(json!({"id": id("The task's id")}), &["id"]),
            output: out(json!({"task": {"type": "object"}}), &["task"]),
            read_only: false,
            destructive: true,
            idempotent: true,
        },
        Tool {
            name: "forget",
            title: "Forget part of the memory",
            description: "Permanently delete an exchange, a remembered fact, or everything said about a topic. Irreversible: call it only when the principal asked to forget, and pass confirm: true.",
            input: object(
                json!({"scope": {"type": "string", "enum": ["exchange", "fact", "topic"]},
                       "id": string("The exchange id (scope exchange)", 200),
                       "key": string("The fact's key (scope fact)", 200),
                       "topic": string("The topic (scope topic; with scope fact, only that topic's fact)", 200),
                       "confirm": {"type": "boolean", "description": "Must be true: the principal asked for this deletion"}}),
                &["scope", "confirm"],
            ),
            output: out(json!({"forgotten": {"type": "object"}}), &["forgotten"]),
            read_only: false,
            destructive: true,
            idempotent: true,
        },
    ]
}

/// `tools/list`'s tools.
pub fn catalogue() -> Vec<Value> {
    tools()
        .into_iter()
        .map(|t| {
            json!({
                "name": t.name, "title": t.title, "description": t.description,
                "inputSchema": t.input, "outputSchema": t.output,
                "annotations": {"title": t.title, "readOnlyHint": t.read_only, "destructiveHint": t.destructive,
                                "idempotentHint": t.idempotent, "openWorldHint": false},
            })
        })
        .collect()
}

/// The names of every tool.
pub fn names() -> Vec<&'static str> {
    tools().into_iter().map(|t| t.name).collect()
}

/// Reads a call's arguments under the tool's input schema (the same
/// checks, done here so that the message names the field).
struct Args<'a> {
    map: &'a Map<String, Value>,
}

impl<'a> Args<'a> {
    fn text(&self, field: &str, max: usize) -> Result<Option<String>, ArgError> {
        match self.map.get(field) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) if s.trim().is_empty() => Err(ArgError::new(field, "must not be empty")),
            // The one rule for text the stores cannot keep (D-F21), as the API has it.
            Some(Value::String(s)) if s.contains('\0') => {
                Err(ArgError::new(field, "must not contain U+0000 (NUL), which no store can keep"))
            }
            Some(Value::String(s)) if s.chars().count() > max => {
                Err(ArgError::new(field, format!("is at most {max} characters")))
            }
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(_) => Err(ArgError::new(field, "must be a string")),
        }
    }

    fn required(&self, field: &str, max: usize) -> Result<String, ArgError> {
        self.text(field, max)?.ok_or_else(|| ArgError::new(field, "is required"))
    }

    fn int(&self, field: &str, min: i64, max: i64) -> Result<Option<i64>, ArgError> {
        match self.map.get(field) {
            None | Some(Value::Null) => Ok(None),
            Some(v) => match v.as_i64().or_else(|| v.as_f64().filter(|f| f.fract() == 0.0).map(|f| f as i64)) {
                Some(n) if (min..=max).contains(&n) => Ok(Some(n)),
                _ => Err(ArgError::new(field, format!("must be an integer from {min} to {max}"))),
            },
        }
    }

    fn count(&self, field: &str, max: u32, default: u32) -> Result<u32, ArgError> {
        Ok(self.int(field, 1, max as i64)?.map_or(default, |n| n as u32))
    }

    fn choice(&self, field: &str, choices: &[&str]) -> Result<Option<String>, ArgError> {
        match self.text(field, 100)? {
            None => Ok(None),
            Some(s) if choices.contains(&s.as_str()) => Ok(Some(s)),
            Some(s) => Err(ArgError::new(field, format!("is one of {} (not `{s}`)", choices.join(", ")))),
        }
    }

    fn mode(&self) -> Result<Mode, ArgError> {
        Ok(match self.choice("mode", &["hybrid", "text", "vector"])?.as_deref() {
            Some("text") => Mode::Text,
            Some("vector") => Mode::Vector,
            _ => Mode::Hybrid,
        })
    }
}

/// `name`'s call with `arguments` checked, or why not. An unknown tool is
/// `None` (a protocol error, not a tool error).
pub fn parse(name: &str, arguments: Option<&Value>) -> Option<Result<Call, ArgError>> {
    let tool = tools().into_iter().find(|t| t.name == name)?;
    let empty = Map::new();
    let map = match arguments {
        None | Some(Value::Null) => &empty,
        Some(Value::Object(m)) => m,
        Some(_) => return Some(Err(ArgError::new("arguments", "must be an object"))),
    };
    let allowed: Vec<&str> =
        tool.input["properties"].as_object().map(|p| p.keys().map(String::as_str).collect()).unwrap_or_default();
    if let Some(extra) = map.keys().find(|k| !allowed.contains(&k.as_str())) {
        let known = if allowed.is_empty() { "none".to_string() } else { allowed.join(", ") };
        return Some(Err(ArgError::new(extra, format!("is not an argument of {name} (its arguments: {known})"))));
    }
    Some(call(name, &Args { map }))
}

fn call(name: &str, a: &Args<'_>) -> Result<Call, ArgError> {
    Ok(match name {
        "remember" => Call::Remember { text: a.required("text", MAX_DOCUMENT)?, title: a.text("title", 300)? },
        "search" => Call::Search { query: a.required("query", 2000)?, k: a.count("k", 50, 10)?, mode: a.mode()? },
        "recall" => Call::Recall { topic: a.required("topic", 500)?, limit: a.count("limit", 100, 10)? },
        "retrieve_knowledge" => {
            Call::RetrieveKnowledge { query: a.required("query", 2000)?, k: a.count("k", 50, 8)?, mode: a.mode()? }
        }
        "ingest_transcript" => {
            let source_date = a.text("source_date", 10)?;
            if let Some(d) = &source_date
                && !is_day(d)
            {
                return Err(ArgError::new("source_date", "is a day as YYYY-MM-DD"));
            }
            Call::Ingest {
                text: a.required("text", MAX_TRANSCRIPT)?,
                source_type: a.choice("source_type", &["meeting", "chat"])?.unwrap_or_else(|| "meeting".into()),
                source_date,
                principal: a.text("principal", 80)?,
            }
        }
        "ingest_status" => Call::IngestStatus { job_id: a.required("job_id", 200)? },
        "list_recommendations" => Call::ListRecommendations {
            door: a.text("door", 100)?,
            status: a.choice("status", &["open", "snoozed", "acted", "dismissed"])?,
            limit: a.count("limit", 100, 20)?,
        },
        "read_recommendation" => Call::ReadRecommendation { id: a.required("id", 200)? },
        "decide_recommendation" => {
            let id = a.required("id", 200)?;
            let decision = a
                .choice("decision", &["acted_as_prescribed", "acted_modified", "skipped", "dismissed", "snoozed"])?
                .ok_or_else(|| ArgError::new("decision", "is required"))?;
            let fit = a.int("fit", 1, 5)?;
            let days = a.int("days", 1, 7)?;
            let note = a.text("note", 4000)?;
            let decision = if decision == "snoozed" {
                if fit.is_some() || note.is_some() {
                    return Err(ArgError::new(if fit.is_some() { "fit" } else { "note" }, "is not taken by a snooze"));
                }
                Decision::Snooze { days: days.ok_or_else(|| ArgError::new("days", "is required to snooze (1 to 7)"))? }
            } else {
                if days.is_some() {
                    return Err(ArgError::new("days", "is taken only by a snooze"));
                }
                if decision.starts_with("acted") && fit.is_none() {
                    return Err(ArgError::new("fit", format!("is required when {decision} (1 to 5)")));
                }
                Decision::Dispose { disposition: decision, fit, note }
            };
            Call::DecideRecommendation { id, decision }
        }
        "create_reminder" => Call::CreateReminder {
            message: a.required("message", 1000)?,
            due_at: a.required("due_at", 60)?,
            recurrence: a.text("recurrence", 40)?,
        },
        "list_reminders" => Call::ListReminders,
        "create_task" => Call::CreateTask { goal: a.required("goal", 2000)?, priority: a.int("priority", 1, 10)? },
        "list_tasks" => Call::ListTasks {
            status: a.choice(
                "status",
                &["proposed", "accepted", "in_progress", "paused", "completed", "cancelled", "expired"],
            )?,
            limit: a.count("limit", 100, 20)?,
        },
        "cancel_task" => Call::CancelTask { id: a.required("id", 200)? },
        "forget" => {
            if a.map.get("confirm") != Some(&Value::Bool(true)) {
                return Err(ArgError::new(
                    "confirm",
                    "must be true: forgetting is permanent, so it runs only when the principal asked for it",
                ));
            }
            let scope = a
                .choice("scope", &["exchange", "fact", "topic"])?
                .ok_or_else(|| ArgError::new("scope", "is required"))?;
            let (needs, other): (&str, &[&str]) = match scope.as_str() {
                "exchange" => ("id", &["key", "topic"]),
                "fact" => ("key", &["id"]),
                _ => ("topic", &["id", "key"]),
            };
            if let Some(o) = other.iter().find(|o| a.map.get(**o).is_some_and(|v| !v.is_null())) {
                return Err(ArgError::new(o, format!("is not taken by scope {scope} (it takes `{needs}`)")));
            }
            let value =
                a.text(needs, 200)?.ok_or_else(|| ArgError::new(needs, format!("is required for scope {scope}")))?;
            Call::Forget(match scope.as_str() {
                "exchange" => Forget::Exchange(value),
                "fact" => Forget::Fact { key: value, topic: a.text("topic", 200)? },
                _ => Forget::Topic(value),
            })
        }
        other => unreachable!("{other} is listed in tools() but has no parser"),
    })
}

fn is_day(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() == 10
        && b[4] == b'-'
        && b[7] == b'-'
        && b.iter().enumerate().all(|(i, c)| i == 4 || i == 7 || c.is_ascii_digit())
}

/// A tool's result: its text for a model to read and its structured
/// content for a program, or a tool error with its message.
pub fn result(structured: Value, text: String) -> Value {
    json!({"content": [{"type": "text", "text": text}], "structuredContent": structured, "isError": false})
}

/// A tool error (`isError`): the call reached the tool and was refused
/// or failed, with why.
pub fn error(message: impl Into<String>) -> Value {
    json!({"content": [{"type": "text", "text": message.into()}], "isError": true})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_tool_has_schemas_annotations_and_a_parser() {
        let list = catalogue();
        assert_eq!(list.len(), names().len());
        for t in &list {
            let name = t["name"].as_str().unwrap();
            assert_eq!(t["inputSchema"]["type"], "object", "{name}");
            assert_eq!(t["outputSchema"]["type"], "object", "{name}");
            assert!(t["description"].as_str().unwrap().len() > 40, "{name} needs a description a model can choose by");
            for hint in ["readOnlyHint", "destructiveHint", "idempotentHint"] {
                assert!(t["annotations"][hint].is_boolean(), "{name} {hint}");
            }
            // A read-only tool is never destructive.
            assert!(!(t["annotations"]["readOnlyHint"] == true && t["annotations"]["destructiveHint"] == true));
            // Each tool parses its own minimal arguments or names a field.
            assert!(parse(name, Some(&json!({}))).is_some(), "{name}");
        }
        assert!(parse("no_such_tool", None).is_none());
    }

    #[test]
    fn bad_arguments_name_their_field() {
        let e = parse("search", Some(&json!({"query": "x", "k": 0}))).unwrap().unwrap_err();
        assert_eq!(e.field, "k");
        let e = parse("search", Some(&json!({"query": "x", "limit": 3}))).unwrap().unwrap_err();
        assert_eq!(e.field, "limit");
        assert!(e.message.contains("k, mode, query") || e.message.contains("query"), "{e}");
        let e = parse("remember", Some(&json!({"text": "   "}))).unwrap().unwrap_err();
        assert_eq!(e.field, "text");
        let e = parse("ingest_transcript", Some(&json!({"text": "A: b", "source_date": "14/10/2026"})))
            .unwrap()
            .unwrap_err();
        assert_eq!(e.field, "source_date");
        let e = parse("remember", Some(&json!({"text": "a\u{0}b"}))).unwrap().unwrap_err();
        assert_eq!(e.field, "text");
        assert!(e.message.contains("NUL"), "{e}");
        let e = parse("remember", Some(&json!(["text"]))).unwrap().unwrap_err();
        assert_eq!(e.field, "arguments");
        assert_eq!(
            parse("search", Some(&json!({"query": "laptops", "k": 3, "mode": "text"}))).unwrap(),
            Ok(Call::Search { query: "laptops".into(), k: 3, mode: Mode::Text })
        );
    }

    #[test]
    fn a_decision_follows_the_lifecycle() {
        let decide = |v: Value| parse("decide_recommendation", Some(&v)).unwrap();
        assert_eq!(decide(json!({"id": "r1", "decision": "acted_modified"})).unwrap_err().field, "fit");
        assert_eq!(decide(json!({"id": "r1", "decision": "snoozed"})).unwrap_err().field, "days");
        assert_eq!(decide(json!({"id": "r1", "decision": "snoozed", "days": 8})).unwrap_err().field, "days");
        assert_eq!(decide(json!({"id": "r1", "decision": "skipped", "days": 2})).unwrap_err().field, "days");
        assert_eq!(decide(json!({"id": "r1", "decision": "acted_as_prescribed", "fit": 6})).unwrap_err().field, "fit");
        assert_eq!(
            decide(json!({"id": "r1", "decision": "snoozed", "days": 3})).unwrap(),
            Call::DecideRecommendation { id: "r1".into(), decision: Decision::Snooze { days: 3 } }
        );
        assert_eq!(
            decide(json!({"id": "r1", "decision": "acted_as_prescribed", "fit": 4, "note": "went twice"})).unwrap(),
            Call::DecideRecommendation {
                id: "r1".into(),
                decision: Decision::Dispose {
                    disposition: "acted_as_prescribed".into(),
                    fit: Some(4),
                    note: Some("went twice".into())
                }
            }
        );
    }

    #[test]
    fn forgetting_needs_an_explicit_confirmation_and_one_target() {
        let forget = |v: Value| parse("forget", Some(&v)).unwrap();
        assert_eq!(forget(json!({"scope": "topic", "topic": "jobs"})).unwrap_err().field, "confirm");
        assert_eq!(forget(json!({"scope": "topic", "topic": "jobs", "confirm": "yes"})).unwrap_err().field, "confirm");
        assert_eq!(forget(json!({"scope": "fact", "confirm": true})).unwrap_err().field, "key");
        assert_eq!(
            forget(json!({"scope": "topic", "topic": "x", "key": "city", "confirm": true})).unwrap_err().field,
            "key"
        );
        assert_eq!(
            forget(json!({"scope": "fact", "key": "city", "confirm": true})).unwrap(),
            Call::Forget(Forget::Fact { key: "city".into(), topic: None })
        );
        assert_eq!(
            forget(json!({"scope": "topic", "topic": "jobs", "confirm": true})).unwrap(),
            Call::Forget(Forget::Topic("jobs".into()))
        );
    }
}
