//! OpenTelemetry from `mneme up` (#24): with `OTEL_EXPORTER_OTLP_ENDPOINT`
//! pointing at a real OTLP/HTTP receiver on loopback, one `POST /chat`
//! arrives as one span tree — the server span under the caller's
//! `traceparent`, the component, each stage call across the WIT seam, each
//! host call under the stage that made it, the model call with its token
//! counts and the `traceparent` the model received — and the request and
//! tick metrics arrive too. On both storage backends.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use mneme_e2e::fake_model::{FakeModel, Script, marker, triage_answer};
use mneme_e2e::otlp::{Receiver, attr};
use mneme_e2e::{App, BACKENDS, Backend, BackendEnv, TEST_KEY, parse_sse, test_env};
use opentelemetry_proto::tonic::metrics::v1::metric;
use opentelemetry_proto::tonic::trace::v1::Span;

const CLIENT_TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const CLIENT_SPAN: &str = "00f067aa0ba902b7";

fn start(b: &BackendEnv, model: &FakeModel, otlp: &Receiver) -> App {
    let mut env = test_env(b, Some(model));
    env.push(("SPIN_VARIABLE_LLM_LIGHT_MODEL".into(), "small-model".into()));
    env.push(("OTEL_EXPORTER_OTLP_ENDPOINT".into(), otlp.endpoint()));
    env.push(("OTEL_BSP_SCHEDULE_DELAY".into(), "100".into()));
    env.push(("OTEL_METRIC_EXPORT_INTERVAL".into(), "300".into()));
    App::start("spin.toml", &env)
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

#[test]
fn one_chat_is_one_span_tree_with_stages_host_calls_and_the_model() {
    mneme_e2e::runner_only!("OpenTelemetry spans per stage call (Spin traces host calls only)");
    for backend in BACKENDS {
        let b = BackendEnv::new(backend);
        let otlp = Receiver::start();
        let model =
            FakeModel::start(Script { reply: "Photosynthesis turns light into sugar.".into(), ..Default::default() });
        model.route(marker::TRIAGE, triage_answer("RESPOND"));
        model.route(marker::TIEBREAK, Script { reply: r#"{"choice":"A"}"#.into(), ..Default::default() });
        let app = start(&b, &model, &otlp);
        let auth = format!("Bearer {TEST_KEY}");
        let traceparent = format!("00-{CLIENT_TRACE}-{CLIENT_SPAN}-01");
        let r = app.request(
            "POST",
            "/chat",
            &[("authorization", &auth), ("content-type", "application/json"), ("traceparent", &traceparent)],
            Some(br#"{"text":"Tell me about photosynthesis."}"#),
        );
        assert_eq!(r.status, 200, "{}", r.body);
        let events = parse_sse(&r.body);
        let message = &events.iter().find(|(n, _)| n == "message").expect("a message event").1;
        assert_eq!(message["source"], "model", "{message}");

        // The trace is complete once the server span (ended with the
        // stream) and the model calls are in.
        let ours = |spans: &[Span]| -> Vec<Span> {
            spans.iter().filter(|s| hex(&s.trace_id) == CLIENT_TRACE).cloned().collect()
        };
        let complete = otlp.wait_for(Duration::from_secs(15), |spans, _| {
            let t = ours(spans);
            t.iter().any(|s| s.kind == 2)
                && t.iter().filter(|s| s.name == "spin_outbound_http.send_request").count() >= 2
        });
        let trace = ours(&otlp.spans());
        assert!(
            complete,
            "{backend:?}: the trace did not arrive; got {:?}",
            trace.iter().map(|s| &s.name).collect::<Vec<_>>()
        );
        assert!(otlp.rejected().is_empty(), "not OTLP protobuf: {:?}", otlp.rejected());

        let by_id: HashMap<String, &Span> = trace.iter().map(|s| (hex(&s.span_id), s)).collect();
        // Spin's name: the method and the matched route (the API's is `/...`).
        let root = trace.iter().find(|s| s.kind == 2).unwrap();
        assert_eq!(root.name, "POST /...");
        assert_eq!(attr(&root.attributes, "url.path").as_deref(), Some("/chat"));
        assert_eq!(hex(&root.parent_span_id), CLIENT_SPAN, "the server span continues the caller's trace");
        assert_eq!(attr(&root.attributes, "http.route").as_deref(), Some("/..."));
        assert_eq!(attr(&root.attributes, "http.response.status_code").as_deref(), Some("200"));
        // Every other span hangs off the tree, starts while its parent is
        // open, and ends before the response does (a streamed model call
        // outlives `complete-stream`, which returns the stream at once).
        for s in &trace {
            if std::ptr::eq(s, root) {
                continue;
            }
            let parent =
                by_id.get(&hex(&s.parent_span_id)).unwrap_or_else(|| panic!("{} has no parent in the trace", s.name));
            assert!(
                (parent.start_time_unix_nano..=parent.end_time_unix_nano).contains(&s.start_time_unix_nano),
                "{} starts outside {}",
                s.name,
                parent.name
            );
            assert!(s.end_time_unix_nano <= root.end_time_unix_nano, "{} ends after the response", s.name);
        }
        let parent_name = |s: &Span| by_id[&hex(&s.parent_span_id)].name.clone();
        let exec = trace.iter().find(|s| s.name == "execute_wasm_component api").expect("the component span");
        assert_eq!(hex(&exec.parent_span_id), hex(&root.span_id));

        // Stage calls across the WIT seam, directly under the component.
        let stages: Vec<&Span> = trace.iter().filter(|s| s.name.starts_with("mneme:")).collect();
        let names: Vec<&str> = stages.iter().map(|s| s.name.as_str()).collect();
        for want in [
            "mneme:context/context.assemble",
            "mneme:triage/triage.decide",
            "mneme:llm/llm.complete-stream",
            "mneme:commit/commit.commit",
        ] {
            assert!(names.contains(&want), "{want} missing: {names:?}");
        }
        assert!(
            stages
                .iter()
                .all(|s| parent_name(s) == "execute_wasm_component api" || parent_name(s).starts_with("mneme:"))
        );

        // Host calls sit under the stage (or component) that made them.
        let db = match backend {
            Backend::Embedded => "spin_sqlite.execute",
            Backend::Hosted => "spin_outbound_pg.query",
        };
        let db_spans: Vec<&Span> = trace.iter().filter(|s| s.name == db).collect();
        assert!(!db_spans.is_empty(), "{backend:?}: no {db} span");
        assert!(db_spans.iter().any(|s| parent_name(s).starts_with("mneme:")), "{db} under a stage");
        assert!(db_spans.iter().all(|s| attr(&s.attributes, "db.query.text").is_some_and(|q| !q.is_empty())));
        assert!(db_spans.iter().all(|s| s.kind == 3), "CLIENT");

        // The model calls: traceparent sent, token counts read.
        let calls: Vec<&Span> = trace.iter().filter(|s| s.name == "spin_outbound_http.send_request").collect();
        assert!(calls.iter().all(|s| parent_name(s).starts_with("mneme:llm/")), "model calls come from the llm stage");
        let counted = calls
            .iter()
            .find(|s| attr(&s.attributes, "gen_ai.usage.input_tokens").is_some())
            .expect("a model call with token counts");
        assert_eq!(attr(&counted.attributes, "gen_ai.usage.input_tokens").as_deref(), Some("7"));
        assert_eq!(attr(&counted.attributes, "gen_ai.usage.output_tokens").as_deref(), Some("2"));
        let sent: Vec<String> = model
            .heads()
            .iter()
            .filter_map(|h| {
                h.lines()
                    .find_map(|l| l.to_ascii_lowercase().strip_prefix("traceparent:").map(|v| v.trim().to_string()))
            })
            .collect();
        assert_eq!(sent.len(), model.heads().len(), "every model request carries traceparent");
        for call in &calls {
            let want = format!("00-{CLIENT_TRACE}-{}-01", hex(&call.span_id));
            assert!(sent.contains(&want), "{want} not among {sent:?}");
        }
        let service = otlp.resources()[0].iter().find(|kv| kv.key == "service.name").cloned();
        assert!(service.is_some(), "the resource names the service");

        // Metrics: the request's duration by route and status.
        let got = otlp.wait_for(Duration::from_secs(10), |_, metrics| {
            metrics.iter().any(|m| {
                m.name == "http.server.request.duration"
                    && matches!(&m.data, Some(metric::Data::Histogram(h)) if h.data_points.iter().any(|p| {
                        attr(&p.attributes, "http.route").as_deref() == Some("/...")
                            && attr(&p.attributes, "http.request.method").as_deref() == Some("POST")
                            && attr(&p.attributes, "http.response.status_code").as_deref() == Some("200")
                            && p.count >= 1
                    }))
            })
        });
        assert!(
            got,
            "{backend:?}: no request duration for POST /...: {:?}",
            otlp.metrics().iter().map(|m| &m.name).collect::<Vec<_>>()
        );
        // The scheduler's runs arrive as tick outcomes, the drains' queues
        // as depths.
        let ticks = otlp.wait_for(Duration::from_secs(20), |_, metrics| {
            metrics.iter().any(|m| m.name == "mneme.tick.runs") && metrics.iter().any(|m| m.name == "mneme.queue.depth")
        });
        assert!(
            ticks,
            "{backend:?}: no tick runs or queue depths: {:?}",
            otlp.metrics().iter().map(|m| &m.name).collect::<Vec<_>>()
        );
    }
}

#[test]
fn with_the_sdk_disabled_nothing_is_exported() {
    mneme_e2e::runner_only!("its OpenTelemetry switch");
    let otlp = Receiver::start();
    let b = BackendEnv::new(Backend::Embedded);
    let model = FakeModel::start(Script::default());
    let mut env = test_env(&b, Some(&model));
    // An exporter configured but switched off, as Spin reads it.
    env.push(("OTEL_EXPORTER_OTLP_ENDPOINT".into(), otlp.endpoint()));
    env.push(("OTEL_SDK_DISABLED".into(), "true".into()));
    let app = App::start("spin.toml", &env);
    let auth = format!("Bearer {TEST_KEY}");
    let r = app.request("POST", "/chat", &[("authorization", &auth)], Some(br#"{"text":"hi!"}"#));
    assert_eq!(r.status, 200);
    std::thread::sleep(Duration::from_millis(500));
    assert!(otlp.spans().is_empty() && otlp.metrics().is_empty() && otlp.rejected().is_empty());
    assert!(!app.log().contains("OpenTelemetry:"), "{}", app.log());
}

#[test]
fn a_protocol_it_does_not_speak_is_refused_at_startup() {
    mneme_e2e::runner_only!("its OpenTelemetry protocol check");
    let env = vec![
        ("OTEL_EXPORTER_OTLP_ENDPOINT".to_string(), "http://127.0.0.1:4317".to_string()),
        ("OTEL_EXPORTER_OTLP_PROTOCOL".to_string(), "grpc".to_string()),
    ];
    let err = App::start_with("tests/fixtures/probe.toml", &env, &[]).err().expect("startup refused");
    assert!(err.contains("http/protobuf only"), "{err}");
}

/// A model answer that stays malformed falls back to the rules, and the
/// fallback is on the request's trace: the app logs it, and each line an
/// app logs while tracing is an `app_log` event on the span open at the
/// time (Spin's attribute name), so the runner's and Spin's traces both
/// carry it. The same fallback is on `/status` with its reason.
#[test]
fn a_fallback_is_an_event_on_the_requests_trace() {
    for backend in BACKENDS {
        let b = BackendEnv::new(backend);
        let otlp = Receiver::start();
        let model = FakeModel::start(Script { reply: "Noted.".into(), ..Default::default() });
        model.route(marker::TRIAGE, Script { reply: "{\"mode\": ACT".into(), ..Default::default() });
        let app = start(&b, &model, &otlp);
        let auth = format!("Bearer {TEST_KEY}");
        let trace_id = "0af7651916cd43dd8448eb211c80319c";
        let traceparent = format!("00-{trace_id}-b7ad6b7169203331-01");
        let r = app.request(
            "POST",
            "/chat",
            &[("authorization", &auth), ("content-type", "application/json"), ("traceparent", &traceparent)],
            Some(br#"{"text":"I keep going back and forth on the new job offer in Porto"}"#),
        );
        assert_eq!(r.status, 200, "{}", r.body);
        let status = app.call_as(TEST_KEY, "GET", "/status", None, None).json();
        let fallbacks = status["model"]["usage"]["fallbacks"].as_array().cloned().unwrap_or_default();
        let triage = fallbacks.iter().find(|f| f["path"] == "triage");
        assert!(triage.is_some(), "{backend:?}: triage did not fall back: {}", status["model"]["usage"]);
        let reasons = &status["model"]["usage"]["paths"]["triage"]["fallback_reasons"];
        assert_eq!(reasons["malformed"], 1, "{backend:?}: counted per path and reason: {}", status["model"]["usage"]);
        if mneme_e2e::foreign_runner().is_some() {
            // Spin runs a `wasi:http@0.3` handler in a worker task that is
            // in no span, so what the app writes reaches no trace; it
            // exports each write as an OTLP log record of the entry
            // component instead, tied to no trace (D-L8). What a user of
            // Spin sees is that record: assert it and the message's cost.
            let kinds = &status["model"]["usage"]["messages"];
            let (kind, counted) = kinds.as_object().and_then(|o| o.iter().next()).expect("a message kind on /status");
            let calls = counted["calls"].as_u64().expect("calls per kind on /status");
            let cost = format!("a {kind} message: {calls} calls,");
            let found = |t: &str| t.contains("fell back") && t.contains("malformed") && t.contains(&cost);
            let limit = Instant::now() + Duration::from_secs(15);
            while !found(&otlp.logged_text("api")) && Instant::now() < limit {
                std::thread::sleep(Duration::from_millis(100));
            }
            let text = otlp.logged_text("api");
            assert!(found(&text), "{backend:?}: the fallback and `{cost}` not in the log records: {text:?}");
            continue;
        }
        // The lines the app logged on this request's trace that hold `needle`.
        let logged = |spans: &[Span], needle: &str| -> Vec<String> {
            spans
                .iter()
                .filter(|s| hex(&s.trace_id) == trace_id)
                .flat_map(|s| s.events.iter())
                .filter_map(|e| attr(&e.attributes, "app_log"))
                .filter(|l| l.contains(needle))
                .collect()
        };
        let arrived = otlp.wait_for(Duration::from_secs(15), |spans, _| !logged(spans, "fell back").is_empty());
        let lines = logged(&otlp.spans(), "fell back");
        assert!(arrived, "{backend:?}: no fallback event on the trace; log:\n{}", app.log());
        assert!(lines.iter().any(|l| l.contains("triage") && l.contains("malformed")), "{backend:?}: {lines:?}");
        // The message's kind and cost are on the same trace (D-L10), as on
        // `/status`.
        let kinds = &status["model"]["usage"]["messages"];
        let (kind, counted) = kinds.as_object().and_then(|o| o.iter().next()).expect("a message kind on /status");
        let needle = format!("a {kind} message:");
        assert!(
            otlp.wait_for(Duration::from_secs(15), |spans, _| !logged(spans, &needle).is_empty()),
            "{backend:?}: {kinds}"
        );
        let line = logged(&otlp.spans(), &needle).remove(0);
        let calls = counted["calls"].as_u64().expect("calls per kind on /status");
        assert!(line.contains(&format!(": {calls} calls,")), "{backend:?}: {line} against {counted}");
    }
}
