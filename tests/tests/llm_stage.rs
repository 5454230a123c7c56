//! The `llm` stage through the runner, against a scripted OpenAI-compatible
//! endpoint on loopback: tiers, timeouts, endpoint failures, and the fast
//! `model-unavailable` answer when no model is configured.

use std::time::{Duration, Instant};

use mneme_e2e::App;
use mneme_e2e::fake_model::{FakeModel, Script};

fn app_with(model: &FakeModel) -> App {
    let env = [
        ("SPIN_VARIABLE_UPSTREAM", model.addr.clone()),
        ("SPIN_VARIABLE_LLM_URL", model.url()),
        ("SPIN_VARIABLE_LLM_MODEL", "big-model".into()),
        ("SPIN_VARIABLE_LLM_LIGHT_MODEL", "small-model".into()),
    ];
    let env: Vec<(String, String)> = env.iter().map(|(k, v)| (k.to_string(), v.clone())).collect();
    App::start("tests/fixtures/probe.toml", &env)
}

#[test]
fn completions_use_the_model_of_their_tier() {
    let model = FakeModel::start(Script { reply: "pong".into(), ..Default::default() });
    let app = app_with(&model);
    let status = app.get("/llm/status").json();
    assert_eq!(status, serde_json::json!({"configured": true, "primary": "big-model", "light": "small-model"}));
    let r = app.get("/llm/complete?prompt=ping&tier=light&json=1").json();
    assert_eq!(r["text"], "pong", "{r}");
    assert_eq!(r["prompt_tokens"], 7);
    let sent: serde_json::Value = serde_json::from_str(&model.requests()[0]).unwrap();
    assert_eq!(sent["model"], "small-model");
    assert_eq!(sent["messages"][0]["content"], "ping");
    assert_eq!(sent["response_format"]["type"], "json_object");
    app.get("/llm/complete?prompt=ping");
    let sent: serde_json::Value = serde_json::from_str(&model.requests()[1]).unwrap();
    assert_eq!(sent["model"], "big-model");
}

#[test]
fn a_slow_model_times_out_at_the_budget() {
    let model = FakeModel::start(Script { delay: Duration::from_millis(1500), ..Default::default() });
    let app = app_with(&model);
    let started = Instant::now();
    let r = app.get("/llm/complete?prompt=x&timeout=300").json();
    let took = started.elapsed();
    assert_eq!(r["error"]["code"], "model-timeout", "{r}");
    assert!(took < Duration::from_millis(1200), "the stage waited {took:?} on a 300 ms budget");
    let r = app.get("/llm/complete?prompt=x&timeout=3000").json();
    assert_eq!(r["text"], "scripted answer", "within budget the answer arrives: {r}");
}

#[test]
fn endpoint_failures_are_model_errors() {
    let model = FakeModel::start(Script { reply: "overloaded".into(), status: 503, ..Default::default() });
    let app = app_with(&model);
    let r = app.get("/llm/complete?prompt=x").json();
    assert_eq!(r["error"]["code"], "model-error", "{r}");
    assert!(r["error"]["message"].as_str().unwrap().contains("503"), "{r}");
}

#[test]
fn with_no_model_configured_calls_fail_fast_as_unavailable() {
    let app = App::start("tests/fixtures/probe.toml", &[]);
    assert_eq!(app.get("/llm/status").json()["configured"], false);
    let started = Instant::now();
    let r = app.get("/llm/complete?prompt=x").json();
    assert_eq!(r["error"]["code"], "model-unavailable", "{r}");
    assert!(started.elapsed() < Duration::from_millis(500));
}
