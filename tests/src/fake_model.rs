//! A scripted OpenAI-compatible endpoint on loopback, for tests: answers
//! `POST …/chat/completions` with a chosen reply, after a chosen delay, with
//! a chosen status, and records every request body it received. A request
//! with `"stream": true` gets a `text/event-stream` answer, one word per
//! chunk. Routes pick a different script by a marker in the request body
//! (the triage prompt's wording, say), so one server plays every model call.
//! `GET …/models` lists the models set with [`FakeModel::set_models`]
//! (`scripted-model` until then).

use std::io::Write;
use std::net::TcpListener;
use std::sync::{Arc, Mutex};
use std::time::Duration;

#[derive(Clone)]
pub struct Script {
    pub reply: String,
    /// Before the answer's headers.
    pub delay: Duration,
    pub status: u16,
    /// Between streamed chunks.
    pub chunk_delay: Duration,
}

impl Default for Script {
    fn default() -> Self {
        Self { reply: "scripted answer".into(), delay: Duration::ZERO, status: 200, chunk_delay: Duration::ZERO }
    }
}

impl Script {
    /// Answers with `reply` as JSON text.
    pub fn json(reply: serde_json::Value) -> Script {
        Script { reply: reply.to_string(), ..Script::default() }
    }
}

/// A triage answer choosing `mode` with no tools or skills.
pub fn triage_answer(mode: &str) -> Script {
    Script::json(serde_json::json!({"branch": mode.to_lowercase(), "mode": mode, "tools": [], "skills": [],
        "confidence_internal": 0.8, "confidence_tool_need": 0.1, "freshness_risk": 0.1, "reasoning": "scripted"}))
}

/// Markers of the app's model calls, found in their request bodies.
pub mod marker {
    pub const TRIAGE: &str = "You triage one message";
    pub const TIEBREAK: &str = "Two response modes";
    pub const ACT_PLAN: &str = "Mode: ACT.";
    /// Memory consolidation's three prompts.
    pub const CHUNKER: &str = "You read one exchange between the principal";
    pub const EPISODE: &str = "You turn a stretch of conversation";
    pub const SEMANTIC: &str = "You read episodes from the principal";
    /// The narrative of one recommendation (rx step 6).
    pub const RX_COMPOSE: &str = "You write the narrative of one recommendation";
}

type Routes = Arc<Mutex<Vec<(String, Script)>>>;

pub struct FakeModel {
    /// `host:port` it listens on.
    pub addr: String,
    pub script: Arc<Mutex<Script>>,
    pub routes: Routes,
    pub requests: Arc<Mutex<Vec<String>>>,
    /// The request heads, in the order of `requests`.
    pub heads: Arc<Mutex<Vec<String>>>,
    /// What `GET …/models` lists.
    pub models: Arc<Mutex<Vec<String>>>,
}

impl FakeModel {
    pub fn start(script: Script) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let script = Arc::new(Mutex::new(script));
        let requests = Arc::new(Mutex::new(Vec::new()));
        let routes: Routes = Arc::new(Mutex::new(Vec::new()));
        let heads = Arc::new(Mutex::new(Vec::new()));
        let models = Arc::new(Mutex::new(vec!["scripted-model".to_string()]));
        let (s, r, ro, h, m) = (script.clone(), requests.clone(), routes.clone(), heads.clone(), models.clone());
        std::thread::spawn(move || {
            for stream in listener.incoming().take(1_000_000) {
                let Ok(stream) = stream else { continue };
                let (s, r, ro, h, m) = (s.clone(), r.clone(), ro.clone(), h.clone(), m.clone());
                std::thread::spawn(move || serve(stream, &s, &ro, &r, &h, &m));
            }
        });
        Self { addr, script, routes, requests, heads, models }
    }

    /// What `GET …/models` lists from now on.
    pub fn set_models(&self, ids: &[&str]) {
        *self.models.lock().unwrap() = ids.iter().map(|s| s.to_string()).collect();
    }

    /// Answers requests whose body contains `marker` with `script`.
    pub fn route(&self, marker: &str, script: Script) {
        let mut r = self.routes.lock().unwrap();
        r.retain(|(m, _)| m != marker);
        r.push((marker.to_string(), script));
    }

    /// Requests whose body contains `marker`.
    pub fn requests_with(&self, marker: &str) -> Vec<String> {
        self.requests().into_iter().filter(|b| b.contains(marker)).collect()
    }

    /// Base URL ending in `/v1`.
    pub fn url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    pub fn set(&self, script: Script) {
        *self.script.lock().unwrap() = script;
    }

    pub fn requests(&self) -> Vec<String> {
        self.requests.lock().unwrap().clone()
    }

    pub fn heads(&self) -> Vec<String> {
        self.heads.lock().unwrap().clone()
    }

    /// The bodies of the completions asked for (`POST …/chat/completions`),
    /// not of a probe's or a lookup's `GET …/models`.
    pub fn completions(&self) -> Vec<String> {
        // Taken under the lock order `serve` writes in, so the pairs match.
        let requests = self.requests.lock().unwrap();
        let heads = self.heads.lock().unwrap();
        heads
            .iter()
            .zip(requests.iter())
            .filter(|(h, _)| {
                h.starts_with("POST ") && h.split(' ').nth(1).is_some_and(|p| p.ends_with("/chat/completions"))
            })
            .map(|(_, b)| b.clone())
            .collect()
    }
}

fn serve(
    mut s: std::net::TcpStream,
    script: &Mutex<Script>,
    routes: &Mutex<Vec<(String, Script)>>,
    log: &Mutex<Vec<String>>,
    heads: &Mutex<Vec<String>>,
    models: &Mutex<Vec<String>>,
) {
    let Some((head, body)) = crate::wire::read_request(&mut s) else { return };
    let lists = head.starts_with("GET ") && head.split(' ').nth(1).is_some_and(|p| p.ends_with("/models"));
    {
        // One lock order for both logs, so their entries stay in step.
        let mut log = log.lock().unwrap();
        heads.lock().unwrap().push(head);
        log.push(body.clone());
    }
    let chosen = routes.lock().unwrap().iter().find(|(m, _)| body.contains(m.as_str())).map(|(_, s)| s.clone());
    let Script { reply, delay, status, chunk_delay } = chosen.unwrap_or_else(|| script.lock().unwrap().clone());
    std::thread::sleep(delay);
    // The list answers as the default script does: late, failing or listing.
    if lists && status == 200 {
        let data: Vec<serde_json::Value> = models
            .lock()
            .unwrap()
            .iter()
            .map(|id| serde_json::json!({"id": id, "object": "model", "owned_by": "test"}))
            .collect();
        let payload = serde_json::json!({"object": "list", "data": data}).to_string();
        let _ = write!(
            s,
            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{payload}",
            payload.len()
        );
        return;
    }
    let streamed = serde_json::from_str::<serde_json::Value>(&body).is_ok_and(|v| v["stream"] == true);
    if streamed && status == 200 {
        if write!(s, "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n").is_err() {
            return;
        }
        let mut first = true;
        for word in reply.split_inclusive(' ') {
            if !first {
                std::thread::sleep(chunk_delay);
            }
            first = false;
            let chunk = serde_json::json!({"id": "cmpl-test", "object": "chat.completion.chunk", "model": "scripted-model",
                "choices": [{"index": 0, "delta": {"content": word}, "finish_reason": null}]});
            if write!(s, "data: {chunk}\n\n").and_then(|_| s.flush()).is_err() {
                return;
            }
        }
        let _ = write!(s, "data: [DONE]\n\n");
        return;
    }
    let payload = if status == 200 {
        serde_json::json!({
            "id": "cmpl-test", "object": "chat.completion", "model": "scripted-model",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": reply}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 7, "completion_tokens": 2, "total_tokens": 9}
        })
    } else {
        serde_json::json!({"error": {"message": reply}})
    };
    let payload = payload.to_string();
    let _ = write!(
        s,
        "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{payload}",
        payload.len()
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn completions_are_the_posts_not_the_model_lists() {
        let model = FakeModel::start(Script::json(serde_json::json!({"mode": "RESPOND"})));
        let _ = ureq::get(&format!("{}/models", model.url())).call();
        let _ = ureq::post(&format!("{}/chat/completions", model.url()))
            .header("content-type", "application/json")
            .send(r#"{"messages":[{"role":"user","content":"marker-1"}]}"#);
        assert_eq!(model.requests().len(), 2);
        let asked = model.completions();
        assert_eq!(asked.len(), 1);
        assert!(asked[0].contains("marker-1"));
    }
}
