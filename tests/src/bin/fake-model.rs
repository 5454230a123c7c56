//! The scripted OpenAI-compatible model as a process, for benchmarks:
//! answers instantly; triage gets a RESPOND decision, the tie-breaker picks
//! A, everything else gets the reply given as the first argument (streamed
//! word by word when asked to stream). `--delay-ms N` makes every answer
//! wait N ms first (a slow model, for the exhaustion runs of
//! `scripts/chaos.sh`). Prints `listening <host:port>`.

use mneme_e2e::fake_model::{FakeModel, Script, marker};

fn main() {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let mut delay = std::time::Duration::ZERO;
    if let Some(i) = args.iter().position(|a| a == "--delay-ms") {
        let ms = args.get(i + 1).and_then(|v| v.parse().ok()).expect("--delay-ms takes a number of milliseconds");
        delay = std::time::Duration::from_millis(ms);
        args.drain(i..i + 2);
    }
    let reply = args.first().cloned().unwrap_or_else(|| "A short scripted answer for the benchmark.".into());
    let model = FakeModel::start(Script { reply, delay, ..Default::default() });
    model.route(
        marker::TRIAGE,
        Script { reply: r#"{"branch":"respond","mode":"RESPOND","tools":[],"skills":[],"confidence_internal":0.8,"confidence_tool_need":0.1,"freshness_risk":0.1}"#.into(), ..Default::default() },
    );
    model.route(marker::TIEBREAK, Script { reply: r#"{"choice":"A"}"#.into(), ..Default::default() });
    println!("listening {}", model.addr);
    loop {
        std::thread::sleep(std::time::Duration::from_secs(3600));
        // Keep the request log from growing without bound over long runs.
        model.requests.lock().unwrap().clear();
    }
}
