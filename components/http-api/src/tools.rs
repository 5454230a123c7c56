//! Path B's tool registry: `GET /tools`, `PUT /tools/{name}` and
//! `DELETE /tools/{name}`. A tool is configuration only (D-C19): the
//! dispatcher calls every tool the same way, on the host the `tool_host`
//! variable allows.

use crate::knowledge::{bad, body_json};
use crate::mneme::act::act;
use crate::{Reply, err, reply, stage_value};
use mneme_conversation::tools::Tool;
use mneme_entry::clock;
use mneme_http::ApiError;
use serde_json::json;
use spin_sdk::http::{Method, Request};

const MAX_BODY: usize = 16 * 1024;

pub fn handles(path: &str) -> bool {
    path == "/tools" || path.starts_with("/tools/")
}

pub async fn route(req: Request, path: &str) -> Reply {
    let method = req.method().clone();
    if path == "/tools" {
        return match method {
            Method::GET => reply(stage_value(
                act::list_tools().await.map(|t| json!({"tools": t.into_iter().map(Tool::from).collect::<Vec<_>>()})),
            )),
            _ => err(ApiError::method_not_allowed("GET")),
        };
    }
    let name = path.trim_start_matches("/tools/");
    match method {
        Method::PUT => {
            if !mneme_conversation::tools::valid_name(name) {
                return err(bad(
                    "invalid",
                    "a tool name is 1 to 40 lowercase letters, digits, _ and -, starts with a letter and is not an innate action",
                ));
            }
            let now = clock::request_ms(req.headers()).await;
            let config = match body_json(req, MAX_BODY).await {
                Ok(v) => v,
                Err(e) => return err(e),
            };
            let host = spin_sdk::variables::get("tool_host").await.unwrap_or_default();
            let put = act::put_tool(name.to_string(), config.to_string(), host.trim().to_string(), now).await;
            reply(stage_value(put.map(Tool::from)))
        }
        Method::DELETE if mneme_conversation::tools::valid_name(name) => {
            reply(stage_value(act::delete_tool(name.to_string()).await.map(|()| json!({"deleted": name}))))
        }
        Method::DELETE => err(ApiError::not_found(format!("no tool `{name}` is configured"))),
        _ => err(ApiError::method_not_allowed("PUT, DELETE")),
    }
}
