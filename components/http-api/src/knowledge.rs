//! The knowledge endpoints: ingest (its own token), jobs, entries and their
//! markdown mirror, patterns, `/retrieve`, the vault search `/search`,
//! documents, and the vault archive. Validation happens here; the work is
//! the `knowledge` stage's.

use crate::mneme::knowledge::knowledge;
use crate::{Reply, err, num, reply, stage_error, stage_value};
use mneme_entry::clock;
use mneme_http::{ApiError, json, parse_json_body};
use mneme_knowledge::fusion::Mode;
use mneme_time::calendar::parse_date;
use mneme_types::VaultFile;
use mneme_types::knowledge::{JobView, KnowledgeType, NewDocument, SearchMode, SourceType, Transcript};
use serde_json::{Value, json};
use spin_sdk::http::{IntoResponse, Method, Request, StatusCode};
use std::collections::HashMap;

/// Largest ingest body: a long meeting transcript.
pub const MAX_INGEST_BYTES: usize = 1024 * 1024;
pub const MAX_TRANSCRIPT_CHARS: usize = 400_000;
/// Largest `/documents` body and batch.
pub const MAX_DOCUMENTS_BYTES: usize = 4 * 1024 * 1024;
pub const MAX_DOCUMENTS: usize = 256;
pub const MAX_QUERY_CHARS: usize = 2_000;
/// The corpora `/search` covers.
pub const CORPORA: [&str; 3] = ["knowledge", "document", "episode"];

pub(crate) fn bad(code: &str, message: impl Into<String>) -> ApiError {
    ApiError::new(StatusCode::BAD_REQUEST, code, message)
}

pub(crate) async fn body_json(req: Request, max: usize) -> Result<Value, ApiError> {
    let bytes = mneme_entry::body::read(req, max).await?;
    let v: Value = parse_json_body(&bytes)?;
    if !v.is_object() {
        return Err(bad("invalid", "the body must be a JSON object"));
    }
    Ok(v)
}

/// An optional string field: absent or null is `None`; anything but a
/// string, or longer than `max` characters, is an error.
fn opt_str(v: &Value, key: &str, max: usize) -> Result<Option<String>, ApiError> {
    match v.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) if s.chars().count() <= max => Ok(Some(s.trim().to_string()).filter(|s| !s.is_empty())),
        Some(Value::String(_)) => Err(bad("invalid", format!("`{key}` is at most {max} characters"))),
        Some(_) => Err(bad("invalid", format!("`{key}` must be a string"))),
    }
}

/// Rejects fields the endpoint does not know (a typo must not be ignored).
pub(crate) fn known_fields(v: &Value, known: &[&str]) -> Result<(), ApiError> {
    match v.as_object().and_then(|o| o.keys().find(|k| !known.contains(&k.as_str()))) {
        Some(k) => Err(bad("invalid", format!("unknown field `{k}`; fields: {}", known.join(", ")))),
        None => Ok(()),
    }
}

fn url(v: &Value, key: &str) -> Result<Option<String>, ApiError> {
    let u = opt_str(v, key, 2048)?;
    if let Some(u) = &u
        && !(u.starts_with("https://") || u.starts_with("http://"))
    {
        return Err(bad("invalid", format!("`{key}` must be an http(s) URL")));
    }
    Ok(u)
}

/// `source_date` as `YYYY-MM-DD` (a date-time is cut to its date).
fn date(v: &Value, key: &str, required: bool) -> Result<Option<String>, ApiError> {
    match opt_str(v, key, 40)? {
        Some(d) => match parse_date(&d) {
            Some(_) => Ok(Some(d[..10].to_string())),
            None => Err(bad("invalid", format!("`{key}` must be a calendar date, YYYY-MM-DD"))),
        },
        None if required => Err(bad("invalid", format!("`{key}` is required (YYYY-MM-DD)"))),
        None => Ok(None),
    }
}

/// `POST /knowledge/ingest`, after the ingest token was checked.
pub async fn ingest(req: Request) -> Reply {
    let now = clock::request_ms(req.headers()).await;
    let v = match body_json(req, MAX_INGEST_BYTES).await {
        Ok(v) => v,
        Err(e) => return err(e),
    };
    let parsed = (|| {
        known_fields(&v, &["source_type", "source_channel", "source_date", "source_url", "principal", "text"])?;
        let source_type = match v.get("source_type").and_then(Value::as_str) {
            Some("chat") => SourceType::Chat,
            Some("meeting") => SourceType::Meeting,
            _ => return Err(bad("invalid", "`source_type` must be \"chat\" or \"meeting\"")),
        };
        let text = match v.get("text") {
            Some(Value::String(t)) if !t.trim().is_empty() => t.clone(),
            Some(Value::String(_)) | None | Some(Value::Null) => {
                return Err(bad("invalid", "`text` is required and must not be empty"));
            }
            Some(_) => return Err(bad("invalid", "`text` must be a string")),
        };
        if text.chars().count() > MAX_TRANSCRIPT_CHARS {
            return Err(bad("invalid", format!("`text` is at most {MAX_TRANSCRIPT_CHARS} characters")));
        }
        Ok(Transcript {
            source_type,
            source_channel: opt_str(&v, "source_channel", 200)?,
            source_date: date(&v, "source_date", true)?.unwrap_or_default(),
            source_url: url(&v, "source_url")?,
            principal: opt_str(&v, "principal", 80)?,
            text,
        })
    })();
    let source = match parsed {
        Ok(r) => r,
        Err(e) => return err(e),
    };
    match knowledge::enqueue(source, now).await {
        Ok(q) => {
            let mut v = json!({"job_id": q.job_id, "status": q.status, "duplicate": q.duplicate});
            if q.duplicate {
                v["requeued"] = json!(q.requeued);
            }
            reply(json(if q.duplicate { StatusCode::OK } else { StatusCode::ACCEPTED }, &v))
        }
        Err(e) => reply(stage_error(e)),
    }
}

/// Whether a path is one of this module's (behind the API key).
pub fn handles(path: &str) -> bool {
    path.starts_with("/knowledge/")
        || path.starts_with("/documents")
        || matches!(path, "/retrieve" | "/search" | "/vault/export")
}

/// Routes under `/knowledge/`, `/retrieve`, `/search`, `/documents` and
/// `/vault/export`; `None` for a path none of them serves.
pub async fn route(req: Request, path: &str, query: &HashMap<String, String>) -> Option<Reply> {
    let method = req.method().clone();
    let allowed = |m: &str| Some(err(ApiError::method_not_allowed(m)));
    if let Some(id) = path.strip_prefix("/knowledge/jobs/") {
        if method != Method::GET {
            return allowed("GET");
        }
        return Some(reply(stage_value(knowledge::job(id.to_string()).await.map(job_view))));
    }
    if let Some(rest) = path.strip_prefix("/knowledge/entries/") {
        if method != Method::GET {
            return allowed("GET");
        }
        return Some(match rest.strip_suffix(".md") {
            Some(id) => match knowledge::markdown(id.to_string()).await {
                Ok(m) => spin_sdk::http::Response::builder()
                    .status(200)
                    .header("content-type", "text/markdown; charset=utf-8")
                    .body(m.markdown)
                    .expect("static parts")
                    .into_response(),
                Err(e) => reply(stage_error(e)),
            },
            None => reply(stage_value(knowledge::get(rest.to_string()).await.map(|d| {
                let active = d.entry.superseded_by.is_none();
                let mut v = json!(d.entry);
                v["supersedes"] = json!(d.supersedes);
                v["active"] = json!(active);
                v
            }))),
        });
    }
    if let Some(id) = path.strip_prefix("/documents/") {
        if method != Method::DELETE {
            return allowed("DELETE");
        }
        let deleted = knowledge::delete_document(id.to_string()).await.map(|()| json!({"deleted": id}));
        return Some(reply(stage_value(deleted)));
    }
    Some(match path {
        "/knowledge/entries" if method == Method::GET => list(query).await,
        "/knowledge/patterns" if method == Method::GET => {
            reply(stage_value(knowledge::patterns().await.map(|p| json!({"patterns": p}))))
        }
        "/knowledge/timeline" if method == Method::GET => {
            let days = match num(query, "days", 90, 1, 730) {
                Ok(d) => d as i64,
                Err(e) => return Some(err(e)),
            };
            let today = clock::request_ms(req.headers()).await as i64 / 86_400_000;
            let first = today - (days - 1);
            let timeline = knowledge::timeline(first).await;
            reply(stage_value(timeline.map(|t| timeline_json(&t, first, days))))
        }
        "/retrieve" if method == Method::POST => retrieve(req).await,
        "/search" if method == Method::GET => search(query).await,
        "/documents" if method == Method::POST => documents(req).await,
        "/vault/export" if method == Method::GET => vault().await,
        "/knowledge/entries" | "/knowledge/patterns" | "/knowledge/timeline" | "/search" | "/vault/export" => {
            return allowed("GET");
        }
        "/retrieve" | "/documents" => return allowed("POST"),
        _ => return None,
    })
}

/// The timeline as the web app draws it: one date per day from `first`
/// (days since 1970-01-01) for `days` days, and per type the number of
/// entries recorded by the end of each day.
fn timeline_json(t: &mneme_types::knowledge::EntryTimeline, first: i64, days: i64) -> Value {
    let kinds = [
        KnowledgeType::Framework,
        KnowledgeType::Decision,
        KnowledgeType::Standard,
        KnowledgeType::Philosophy,
        KnowledgeType::Reaction,
    ];
    let mut series = serde_json::Map::new();
    let mut total = 0;
    for kind in kinds {
        let mut running: u64 = t.before.iter().filter(|(k, _)| *k == kind).map(|(_, n)| n).sum();
        let mut per_day = Vec::with_capacity(days as usize);
        for day in first..first + days {
            running += t.days.iter().filter(|d| d.kind == kind && d.day == day).map(|d| d.count).sum::<u64>();
            per_day.push(running);
        }
        total += running;
        series.insert(json!(kind).as_str().unwrap_or_default().to_string(), json!(per_day));
    }
    let dates: Vec<String> = (first..first + days).map(mneme_time::calendar::format_date).collect();
    json!({"days": days, "dates": dates, "series": series, "total": total})
}

fn mode(raw: Option<&str>) -> Result<SearchMode, ApiError> {
    match raw {
        None => Ok(SearchMode::Hybrid),
        Some(m) => {
            Mode::parse(m).map(Into::into).ok_or_else(|| bad("invalid", "`mode` must be hybrid, text or vector"))
        }
    }
}

/// A job as `GET /knowledge/jobs/{id}` shows it: the report's fields beside
/// the job's own, once it is done.
fn job_view(j: JobView) -> Value {
    let mut v = json!({
        "id": j.id, "status": j.status, "attempts": j.attempts, "created_at": j.created_at,
        "updated_at": j.updated_at, "source": j.source, "error": j.error,
    });
    if let Some(Value::Object(o)) = j.outcome.map(|o| json!(o)) {
        for (k, x) in o {
            v[k] = x;
        }
    }
    v
}

async fn list(q: &HashMap<String, String>) -> Reply {
    let parsed = (|| {
        let limit = num(q, "limit", 50, 1, 500)?;
        let offset = num(q, "offset", 0, 0, 1_000_000)?;
        let kind = match q.get("type").filter(|t| !t.trim().is_empty()) {
            None => None,
            Some(t) => Some(mneme_knowledge::KnowledgeType::parse(t).map(KnowledgeType::from).ok_or_else(|| {
                bad("invalid", "`type` must be framework, decision, standard, philosophy or reaction")
            })?),
        };
        let include = match q.get("include_superseded").map(String::as_str) {
            None | Some("false") => false,
            Some("true") => true,
            Some(_) => return Err(bad("invalid", "`include_superseded` must be true or false")),
        };
        Ok((limit, offset, kind, include))
    })();
    let (limit, offset, kind, include) = match parsed {
        Ok(r) => r,
        Err(e) => return err(e),
    };
    let page = knowledge::list(limit, offset, kind, q.get("pattern").cloned(), include).await;
    reply(stage_value(page.map(|p| json!({"entries": p.entries, "total": p.total, "limit": limit, "offset": offset}))))
}

fn query_text(raw: Option<&str>, name: &str) -> Result<String, ApiError> {
    let q =
        raw.map(str::trim).filter(|q| !q.is_empty()).ok_or_else(|| bad("invalid", format!("`{name}` is required")))?;
    if q.chars().count() > MAX_QUERY_CHARS {
        return Err(bad("invalid", format!("`{name}` is at most {MAX_QUERY_CHARS} characters")));
    }
    Ok(q.to_string())
}

async fn retrieve(req: Request) -> Reply {
    let now = clock::request_ms(req.headers()).await;
    let v = match body_json(req, 64 * 1024).await {
        Ok(v) => v,
        Err(e) => return err(e),
    };
    let parsed = (|| {
        known_fields(&v, &["query", "k", "mode"])?;
        let query = match v.get("query") {
            Some(Value::String(s)) => query_text(Some(s), "query")?,
            Some(x) if !x.is_null() => return Err(bad("invalid", "`query` must be a string")),
            _ => return Err(bad("invalid", "`query` is required")),
        };
        let k: u64 = match v.get("k") {
            None | Some(Value::Null) => 10,
            Some(k) => k
                .as_u64()
                .filter(|k| (1..=50).contains(k))
                .ok_or_else(|| bad("invalid", "`k` must be an integer from 1 to 50"))?,
        };
        let m = match v.get("mode") {
            None | Some(Value::Null) => SearchMode::Hybrid,
            Some(Value::String(s)) => mode(Some(s))?,
            Some(_) => return Err(bad("invalid", "`mode` must be hybrid, text or vector")),
        };
        Ok((query, k as u32, m))
    })();
    let (query, k, m) = match parsed {
        Ok(r) => r,
        Err(e) => return err(e),
    };
    reply(stage_value(knowledge::retrieve(query, k, m, now).await.map(|r| {
        let results: Vec<Value> = r
            .results
            .into_iter()
            .map(|x| {
                let mut v = json!(x.entry);
                v["relevance_score"] = json!(x.relevance_score);
                v["final_score"] = json!(x.final_score);
                v
            })
            .collect();
        json!({"results": results, "mode": r.mode, "took_ms": r.took_ms, "signatures_read": r.signatures_read})
    })))
}

async fn search(q: &HashMap<String, String>) -> Reply {
    let parsed = (|| {
        let text = query_text(q.get("q").map(String::as_str), "q")?;
        let k = num(q, "k", 10, 1, 50)?;
        let corpora: Vec<String> = match q.get("corpus") {
            None => CORPORA.iter().map(|c| c.to_string()).collect(),
            Some(list) => {
                let picked: Vec<String> = list.split(',').map(|c| c.trim().to_string()).collect();
                if picked.is_empty() || picked.iter().any(|c| !CORPORA.contains(&c.as_str())) {
                    return Err(bad("invalid", "`corpus` is a comma list of knowledge, document, episode"));
                }
                picked
            }
        };
        Ok((text, k, mode(q.get("mode").map(String::as_str))?, corpora))
    })();
    let (text, k, m, corpora) = match parsed {
        Ok(r) => r,
        Err(e) => return err(e),
    };
    let hits = knowledge::search(text, k, m, corpora, false).await;
    reply(stage_value(hits.map(|results| json!({"results": results, "mode": m}))))
}

async fn documents(req: Request) -> Reply {
    let now = clock::request_ms(req.headers()).await;
    let v = match body_json(req, MAX_DOCUMENTS_BYTES).await {
        Ok(v) => v,
        Err(e) => return err(e),
    };
    // One document, or `{documents: [...]}`.
    let list: Vec<Value> = match v.get("documents") {
        Some(Value::Array(a)) => a.clone(),
        Some(_) => return err(bad("invalid", "`documents` must be a list")),
        None => vec![v.clone()],
    };
    if list.is_empty() || list.len() > MAX_DOCUMENTS {
        return err(bad("invalid", format!("send 1 to {MAX_DOCUMENTS} documents")));
    }
    let mut docs = Vec::new();
    for (i, d) in list.iter().enumerate() {
        let one = (|| {
            if !d.is_object() {
                return Err(bad("invalid", "a document must be a JSON object"));
            }
            known_fields(d, &["id", "title", "text", "context", "source_url", "source_date"])?;
            let text = opt_str(d, "text", 100_000)?.ok_or_else(|| bad("invalid", "`text` is required"))?;
            let id = opt_str(d, "id", 100)?;
            if let Some(id) = &id
                && !id.chars().all(|c| c.is_ascii_alphanumeric() || "-_.:".contains(c))
            {
                return Err(bad("invalid", "`id` may hold letters, digits and - _ . : only"));
            }
            Ok(NewDocument {
                id,
                title: opt_str(d, "title", 300)?,
                text,
                // Absent or null: the app builds it from the batch's
                // neighbours (D-K29); given, even empty, it is kept.
                context: match opt_str(d, "context", 20_000)? {
                    None if d.get("context").is_some_and(Value::is_string) => Some(String::new()),
                    given => given,
                },
                source_url: url(d, "source_url")?,
                source_date: date(d, "source_date", false)?,
            })
        })();
        match one {
            Ok(doc) => docs.push(doc),
            Err(e) => return err(ApiError::new(e.status, e.code, format!("documents[{i}]: {}", e.message))),
        }
    }
    match knowledge::add_documents(docs, now).await {
        Ok(ids) => reply(json(StatusCode::CREATED, &json!({"ids": ids}))),
        Err(e) => reply(stage_error(e)),
    }
}

/// The vault: knowledge entries and the rx artifacts.
async fn vault() -> Reply {
    let mut files: Vec<VaultFile> = Vec::new();
    for part in [knowledge::vault().await, crate::mneme::rx::rx::vault().await] {
        match part {
            Ok(f) => files.extend(f),
            Err(e) => return reply(stage_error(e)),
        }
    }
    let entries: Vec<mneme_knowledge::tar::File> = files
        .iter()
        .map(|f| mneme_knowledge::tar::File { path: &f.path, contents: f.content.as_bytes(), mtime_secs: f.mtime_secs })
        .collect();
    match mneme_knowledge::tar::archive(&entries) {
        Ok(tar) => spin_sdk::http::Response::builder()
            .status(200)
            .header("content-type", "application/x-tar")
            .header("content-disposition", "attachment; filename=\"mneme-vault.tar\"")
            .body(spin_sdk::http::FullBody::new(bytes::Bytes::from(tar)))
            .expect("static parts")
            .into_response(),
        Err(e) => err(ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", e)),
    }
}
