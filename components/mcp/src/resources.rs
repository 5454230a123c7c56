//! Resources: each knowledge entry and each recommendation's artifact as
//! markdown, at a stable URI (`mneme://knowledge/{id}`, `mneme://rx/{id}`),
//! the same text the vault writes.

use crate::mneme::knowledge::knowledge;
use crate::mneme::rx::rx;
use crate::{Outcome, stage_failure};
use mneme_mcp::{Era, Failure, code};
use serde_json::{Value, json};

const KNOWLEDGE: &str = "mneme://knowledge/";
const RX: &str = "mneme://rx/";
/// Resources a page of `resources/list`.
const PAGE: u32 = 100;

pub fn templates() -> Value {
    json!([
        {"uriTemplate": format!("{KNOWLEDGE}{{id}}"), "name": "knowledge-entry", "title": "A knowledge entry",
         "description": "One of the principal's knowledge entries (a standard, decision, framework, philosophy or reaction) as markdown",
         "mimeType": "text/markdown"},
        {"uriTemplate": format!("{RX}{{id}}"), "name": "recommendation", "title": "A recommendation",
         "description": "A recommendation's artifact as markdown: thesis, counter-thesis, evidence and status",
         "mimeType": "text/markdown"},
    ])
}

/// A stage failure as a protocol error: reading a resource that does not
/// exist is the protocol's not-found, anything the principal could fix is
/// invalid params, a service down is the API's 503.
fn failed(era: Era, id: &Value, e: mneme_types::StageError) -> Outcome {
    let not_found = e.code == mneme_types::ErrorCode::NotFound;
    match stage_failure(e) {
        Err(o) => o,
        Ok(why) => {
            let c = if not_found { era.not_found_code() } else { code::INVALID_PARAMS };
            Outcome::Protocol(Failure::new(id.clone(), c, why))
        }
    }
}

/// The knowledge entries then the recommendations, a page at a time; the
/// cursor is where the next page starts (`k:<offset>` or `rx`).
pub async fn list(era: Era, id: &Value, params: &Value) -> Result<Value, Outcome> {
    let cursor = params["cursor"].as_str().unwrap_or("k:0");
    let bad =
        || Outcome::Protocol(Failure::new(id.clone(), code::INVALID_PARAMS, "`cursor` is not one this server gave"));
    if let Some(offset) = cursor.strip_prefix("k:") {
        let offset: u32 = offset.parse().map_err(|_| bad())?;
        let page = knowledge::list(PAGE, offset, None, None, false).await.map_err(|e| failed(era, id, e))?;
        let resources: Vec<Value> = page
            .entries
            .iter()
            .map(|e| {
                let title = format!("{}: {}", e.topic, e.position);
                json!({"uri": format!("{KNOWLEDGE}{}", e.id), "name": format!("knowledge-{}", e.id),
                       "title": title.chars().take(120).collect::<String>(), "mimeType": "text/markdown"})
            })
            .collect();
        let next = offset + page.entries.len() as u32;
        let more = (next as i64) < page.total && !page.entries.is_empty();
        return Ok(json!({"resources": resources, "nextCursor": if more { format!("k:{next}") } else { "rx".into() }}));
    }
    if cursor != "rx" {
        return Err(bad());
    }
    let now = mneme_entry::clock::system_ms() as i64;
    let recs = rx::list_recs(None, None, 200, now).await.map_err(|e| failed(era, id, e))?;
    let resources: Vec<Value> = recs
        .iter()
        .map(|r| {
            json!({"uri": format!("{RX}{}", r.id), "name": format!("rec-{}", r.id),
                   "title": r.tldr.chars().take(120).collect::<String>(), "mimeType": "text/markdown"})
        })
        .collect();
    Ok(json!({"resources": resources}))
}

pub async fn read(era: Era, id: &Value, params: &Value) -> Result<Value, Outcome> {
    let Some(uri) = params["uri"].as_str().filter(|u| !u.contains('\0')) else {
        return Err(Outcome::Protocol(Failure::new(
            id.clone(),
            code::INVALID_PARAMS,
            "`params.uri` must be a string without NUL",
        )));
    };
    let markdown = if let Some(entry) = uri.strip_prefix(KNOWLEDGE).filter(|s| !s.is_empty()) {
        knowledge::markdown(entry.to_string()).await.map_err(|e| failed(era, id, e))?.markdown
    } else if let Some(rec) = uri.strip_prefix(RX).filter(|s| !s.is_empty()) {
        rx::rec_markdown(rec.to_string()).await.map_err(|e| failed(era, id, e))?.markdown
    } else {
        let f = Failure::new(id.clone(), era.not_found_code(), format!("no resource at {uri}"));
        return Err(Outcome::Protocol(f));
    };
    Ok(json!({"contents": [{"uri": uri, "mimeType": "text/markdown", "text": markdown}]}))
}
