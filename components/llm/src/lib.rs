//! The `llm` stage component (`mneme:llm`): sends chat completions to the
//! OpenAI-compatible endpoint named by the variables `llm_url` (a base URL
//! ending in `/v1`), `llm_api_key`, `llm_model` and `llm_light_model`.
//! Request and response formats are `mneme-llm`'s; this is the I/O.
//! With no `llm_url`, every call fails fast with `model-unavailable` so the
//! caller takes its labelled rule-based fallback.

spin_sdk::wit_bindgen::generate!({
    path: ["../../wit/types", "../../wit/llm"],
    world: "mneme:llm/stage-llm",
    runtime_path: "::spin_sdk::wit_bindgen::rt",
    generate_all,
});

use std::time::{Duration, Instant};

use exports::mneme::llm::llm::{Completion, CompletionRequest, Guest, ModelStatus, Tier};
use futures::future::{Either, select};
use mneme::types::types::StageError;
use mneme_llm::{ChatRequest, Message, Role};
use spin_sdk::http::body::IncomingBodyExt;

struct Stage;

fn error(code: &str, message: impl Into<String>) -> StageError {
    StageError { code: code.into(), message: message.into() }
}

async fn var(name: &str) -> Option<String> {
    spin_sdk::variables::get(name).await.ok().filter(|v| !v.trim().is_empty())
}

struct Config {
    url: Option<String>,
    key: Option<String>,
    primary: String,
    light: String,
}

async fn config() -> Config {
    let primary = var("llm_model").await.unwrap_or_default();
    let light = var("llm_light_model").await.unwrap_or_else(|| primary.clone());
    Config { url: var("llm_url").await, key: var("llm_api_key").await, primary, light }
}

impl Guest for Stage {
    async fn status() -> ModelStatus {
        let c = config().await;
        ModelStatus { configured: c.url.is_some() && !c.primary.is_empty(), primary: c.primary, light: c.light }
    }

    async fn complete(req: CompletionRequest) -> Result<Completion, StageError> {
        let c = config().await;
        let Some(url) = c.url else {
            return Err(error("model-unavailable", "no model is configured (set the Spin variable llm_url)"));
        };
        let model = match req.tier {
            Tier::Primary => c.primary,
            Tier::Light => c.light,
        };
        if model.is_empty() {
            return Err(error("model-unavailable", "no model name is configured (set the Spin variable llm_model)"));
        }
        let messages = req
            .messages
            .into_iter()
            .map(|m| {
                let role = match m.role.as_str() {
                    "system" => Role::System,
                    "assistant" => Role::Assistant,
                    _ => Role::User,
                };
                Message::new(role, m.content)
            })
            .collect();
        let body = ChatRequest {
            model: model.clone(),
            messages,
            max_tokens: req.max_tokens,
            temperature: req.temperature,
            json: req.json,
            stream: false,
        }
        .body();
        let mut http = spin_sdk::http::Request::post(mneme_llm::completions_url(&url))
            .header("content-type", "application/json")
            .header("content-length", body.len());
        if let Some(key) = c.key {
            http = http.header("authorization", format!("Bearer {key}"));
        }
        let http = http.body(body).map_err(|e| error("model-error", e.to_string()))?;

        let started = Instant::now();
        let call = async {
            let resp =
                spin_sdk::http::send(http).await.map_err(|e| error("model-error", format!("model endpoint: {e:?}")))?;
            let status = resp.status();
            let bytes = resp
                .into_body()
                .bytes()
                .await
                .map_err(|e| error("model-error", format!("model endpoint body: {e:?}")))?;
            if !status.is_success() {
                let snippet: String = String::from_utf8_lossy(&bytes).chars().take(200).collect();
                return Err(error("model-error", format!("model endpoint answered {status}: {snippet}")));
            }
            mneme_llm::parse_answer(&bytes).map_err(|e| error("model-error", e.to_string()))
        };
        let timeout = spin_sdk::time::sleep(Duration::from_millis(u64::from(req.timeout_ms.max(1))));
        let answer = match select(Box::pin(call), Box::pin(timeout)).await {
            Either::Left((answer, _)) => answer?,
            Either::Right(_) => return Err(error("model-timeout", format!("no answer within {} ms", req.timeout_ms))),
        };
        Ok(Completion {
            text: answer.text,
            model: if answer.model.is_empty() { model } else { answer.model },
            prompt_tokens: answer.prompt_tokens,
            completion_tokens: answer.completion_tokens,
            took_ms: started.elapsed().as_millis() as u32,
        })
    }
}

export!(Stage);
