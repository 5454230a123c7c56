//! `mneme mcp`: a stdio MCP server for clients that launch a local command
//! (Claude Desktop's `mcpServers`), each message forwarded to a running
//! Mneme's `/mcp` with the API key, each answer written back (#51 item 2).
//! One message a line each way, as the stdio transport frames them; what
//! goes on the wire is `mneme_mcp::bridge`'s rule. Nothing but the
//! protocol goes to stdout; what the bridge has to say goes to stderr.

use std::io::{BufRead, Write};

use anyhow::Result;
use mneme_mcp::bridge;
use serde_json::{Value, json};

pub fn run(url: Option<String>) -> Result<()> {
    let remote = mneme_vault::Remote::from_env(url)?;
    eprintln!("mneme mcp: forwarding to {}/mcp", remote.url());
    let mut out = std::io::stdout().lock();
    let mut settled: Option<String> = None;
    for line in std::io::stdin().lock().lines() {
        let line = line?;
        if line.trim().is_empty() {
            continue;
        }
        let message: Value = match serde_json::from_str(&line) {
            Ok(v) => v,
            Err(e) => {
                let parse = json!({"jsonrpc": "2.0", "id": null,
                                   "error": {"code": mneme_mcp::code::PARSE_ERROR, "message": format!("not JSON: {e}")}});
                writeln!(out, "{parse}")?;
                out.flush()?;
                continue;
            }
        };
        let id = message.get("id").cloned();
        let headers = bridge::headers(&message, settled.as_deref());
        let answer = match remote.request("POST", "/mcp", &headers, Some(line.into_bytes())) {
            Ok((202, _)) => None,
            Ok((_, body)) if id.is_none() => {
                // A notification has no answer to write; a refusal is said here.
                eprintln!("mneme mcp: a notification was refused: {}", String::from_utf8_lossy(&body));
                None
            }
            Ok((status, body)) if status == 200 => Some(
                serde_json::from_slice(&body)
                    .unwrap_or_else(|_| bridge::http_failure(id.clone().unwrap_or(Value::Null), status, &body)),
            ),
            Ok((status, body)) => Some(bridge::http_failure(id.clone().unwrap_or(Value::Null), status, &body)),
            Err(e) => {
                eprintln!("mneme mcp: {e:#}");
                id.clone().map(|id| {
                    json!({"jsonrpc": "2.0", "id": id, "error": {"code": mneme_mcp::code::INTERNAL_ERROR,
                           "message": format!("Mneme could not be reached at {}: {e:#}", remote.url())}})
                })
            }
        };
        if let Some(a) = answer {
            if let Some(v) = bridge::negotiated(&message, &a) {
                settled = Some(v);
            }
            writeln!(out, "{a}")?;
            out.flush()?;
        }
    }
    Ok(())
}
