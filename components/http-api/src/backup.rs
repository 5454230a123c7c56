//! `GET /privacy/export`, streamed a page at a time, and
//! `POST /privacy/import`, which restores one export, or one part of a
//! large one as `mneme restore` sends it (#51). The format and the store's
//! side are the `memory` stage's (`mneme-backup`).

use futures::SinkExt;
use mneme_entry::clock;
use mneme_http::{ApiError, BODY_LIMIT};
use mneme_types::memory::{ExportCursor, ImportReport, RestoreMode};
use serde_json::json;
use spin_sdk::http::{Request, StatusCode};
use std::collections::HashMap;

use crate::mneme::memory::memory;
use crate::{Reply, err, reply, stage_error};

/// The export, written as the stage reads it. The first page is read
/// before the answer starts, so a store that is down gets its 503; a
/// failure after that leaves the document unfinished, which every JSON
/// reader (and `mneme restore`) refuses as cut short.
pub async fn export(req: &Request) -> Reply {
    let now = clock::request_ms(req.headers()).await;
    let export_id = format!("{now}-{}", &mneme_http::new_id()[..12]);
    let cursor = ExportCursor { export_id, section: 0, after: String::new() };
    let first = match memory::export_from(cursor, now).await {
        Ok(p) => p,
        Err(e) => return reply(stage_error(e)),
    };
    let (mut tx, body) = spin_sdk::http::body::stream::<String>();
    spin_sdk::wasip3::spawn(async move {
        let mut page = first;
        loop {
            if tx.send(page.text).await.is_err() {
                return;
            }
            let Some(next) = page.next else { return };
            page = match memory::export_from(next, now).await {
                Ok(p) => p,
                Err(e) => {
                    eprintln!("privacy export cut short: {}: {}", e.code.name(), e.message);
                    return;
                }
            };
        }
    });
    reply(
        spin_sdk::http::Response::builder()
            .status(200)
            .header("content-type", "application/json")
            .header("content-disposition", "attachment; filename=\"mneme-export.json\"")
            .body(body)
            .expect("static parts"),
    )
}

/// Restores the export (or part) in the body: into an empty store, or with
/// `?merge=true` beside what the store holds.
pub async fn import(req: Request, query: &HashMap<String, String>) -> Reply {
    let mode = match query.get("merge").map(String::as_str) {
        None | Some("false") => RestoreMode::Fresh,
        Some("true") => RestoreMode::Merge,
        Some(_) => return err(ApiError::new(StatusCode::BAD_REQUEST, "invalid", "`merge` is `true` or `false`")),
    };
    let now = clock::request_ms(req.headers()).await;
    let bytes = match mneme_entry::body::read(req, BODY_LIMIT).await {
        Ok(b) => b,
        Err(mut e) => {
            if e.status == StatusCode::PAYLOAD_TOO_LARGE {
                e.message.push_str(
                    ": a larger export is restored in parts by `mneme restore FILE`, which sends it to this endpoint",
                );
            }
            return err(e);
        }
    };
    let document = match String::from_utf8(bytes) {
        Ok(d) if !d.trim().is_empty() => d,
        Ok(_) => return err(ApiError::new(StatusCode::BAD_REQUEST, "invalid", "the body is empty: send an export")),
        Err(_) => return err(ApiError::new(StatusCode::BAD_REQUEST, "invalid", "the body is not UTF-8 text")),
    };
    match memory::import_part(document, mode, now).await {
        Ok(r) => reply(mneme_http::json(StatusCode::OK, &report(&r))),
        Err(e) => reply(stage_error(e)),
    }
}

fn report(r: &ImportReport) -> serde_json::Value {
    json!({
        "export_id": r.export_id,
        "version": r.version,
        "mode": match r.mode { RestoreMode::Fresh => "fresh", RestoreMode::Merge => "merge" },
        "part": r.part,
        "rows": r.rows,
        "kept": r.kept,
        "search_items": r.search_items,
        "memory_keys": r.memory_keys,
        "finished": r.finished,
    })
}
