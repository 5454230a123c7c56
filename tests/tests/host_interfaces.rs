//! Spin's host interfaces through the runner, with the probe fixture app
//! (`tests/fixtures/probe.toml`): every interface and its error paths, the
//! dependency inheritance rules, streaming, limits, traps and load errors.

use std::io::Read;
use std::time::Duration;

use mneme_e2e::fake_model::{FakeModel, Script};
use mneme_e2e::{App, PgDatabase, edited_manifest, require_redis};

const PROBE: &str = "tests/fixtures/probe.toml";

fn probe(env: &[(&str, String)]) -> App {
    let env: Vec<(String, String)> = env.iter().map(|(k, v)| (k.to_string(), v.clone())).collect();
    App::start(PROBE, &env)
}

#[test]
fn key_value_counts_and_refuses_undeclared_stores() {
    let app = probe(&[]);
    assert_eq!(app.get("/kv?store=default").body, "n=1 keys=1");
    assert_eq!(app.get("/kv?store=default").body, "n=2 keys=1", "state must persist across instances");
    let denied = app.get("/kv?store=other");
    assert_eq!(
        (denied.status, denied.body.as_str()),
        (502, "Error::AccessDenied"),
        "a label the component does not list"
    );
}

#[test]
fn sqlite_runs_statements_and_reports_bad_sql() {
    let app = probe(&[]);
    assert_eq!(app.get("/sqlite?sql=CREATE+TABLE+t(x)").body, "rows=0");
    assert_eq!(app.get("/sqlite?sql=INSERT+INTO+t+VALUES(1),(2)").body, "rows=0");
    assert_eq!(app.get("/sqlite?sql=SELECT+*+FROM+t").body, "rows=2");
    let bad = app.get("/sqlite?sql=SELEC+1");
    assert_eq!(bad.status, 502);
    assert!(bad.body.contains("syntax error"), "{}", bad.body);
    assert_eq!(app.get("/sqlite?db=other&sql=SELECT+1").body, "Error::AccessDenied");
}

#[test]
fn postgres_queries_and_reports_bad_sql_and_unreachable_servers() {
    let db = PgDatabase::create();
    let app = probe(&[("SPIN_VARIABLE_PG_URL", db.url())]);
    assert_eq!(app.get("/pg?sql=SELECT+generate_series(1,3)").body, "rows=3");
    let bad = app.get("/pg?sql=SELEC+1");
    assert!(bad.body.contains("42601"), "Postgres' SQLSTATE must reach the guest: {}", bad.body);

    let down = probe(&[(
        "SPIN_VARIABLE_PG_URL",
        "host=127.0.0.1 port=5432 user=nobody_here dbname=nope sslmode=disable".into(),
    )]);
    let r = down.get("/pg?sql=SELECT+1");
    assert!(r.body.contains("ConnectionFailed"), "{}", r.body);
}

#[test]
fn postgres_host_outside_allowed_outbound_hosts_is_refused() {
    let app = probe(&[(
        "SPIN_VARIABLE_PG_URL",
        "host=localhost port=5432 user=postgres dbname=postgres sslmode=disable".into(),
    )]);
    // localhost is not 127.0.0.1 in allowed_outbound_hosts; Spin's words
    // (crates/factor-outbound-pg) and its warning on stderr.
    let r = app.get("/pg?sql=SELECT+1");
    assert_eq!(r.body, r#"PgError(Error::ConnectionFailed("address postgres://localhost:5432 is not permitted"))"#);
    assert!(
        app.log().contains(
            "Warning: A component tried to make an outbound network connection to disallowed destination 'postgres://localhost:5432'.\n\
             To allow this request, add 'allowed_outbound_hosts = [\"postgres://localhost:5432\"]' to the manifest component section."
        ),
        "{}",
        app.log()
    );
}

#[test]
fn redis_counts_and_refuses_hosts_not_allowed_and_reports_down_servers() {
    require_redis();
    let app = probe(&[]);
    let key_before = mneme_e2e::redis_cmd(&["GET", "probe:counter"]);
    let r = app.get("/redis?addr=redis://127.0.0.1:6379");
    assert!(r.body.starts_with("incr="), "{} (before: {key_before})", r.body);
    assert_eq!(app.get("/redis?addr=redis://localhost:6379").body, "Error::InvalidAddress");
    let dir = tempfile::tempdir().unwrap();
    let m = edited_manifest(dir.path(), PROBE, |t| t.replace("\"redis://127.0.0.1:6379\"", "\"redis://127.0.0.1:1\""));
    let down = App::start(m.to_str().unwrap(), &[]);
    let r = down.get("/redis?addr=redis://127.0.0.1:1");
    assert!(r.body.starts_with("Error::Other"), "{}", r.body);
}

#[test]
fn variables_resolve_from_env_and_defaults_and_refuse_undeclared_names() {
    let app = probe(&[]);
    assert_eq!(app.get("/var?name=secret").body, "s3cret");
    let overridden = probe(&[("SPIN_VARIABLE_SECRET", "from-env".into())]);
    assert_eq!(overridden.get("/var?name=secret").body, "from-env");
    // Spin's words (crates/expressions): the component and the key, each quoted.
    assert_eq!(app.get("/var?name=undeclared").body, r#"Error::Undefined("no variable for \"probe\".\"undeclared\"")"#);
    assert_eq!(
        app.get("/var?name=Bad-Name").body,
        r#"Error::InvalidName("\"Bad-Name\": invalid character 'B'. Variable names may contain only lower-case letters, numbers, and underscores.")"#
    );
    assert_eq!(
        app.get("/var?name=a__b").body,
        r#"Error::InvalidName("\"a__b\": must not contain multiple consecutive underscores")"#
    );
    assert!(!app.log().contains("s3cret"), "a secret value reached the log");
}

#[test]
fn spin_up_flags_set_variables_and_environment() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("vars.json");
    std::fs::write(&file, r#"{"secret": "from-file"}"#).unwrap();
    let env = [("SPIN_VARIABLE_SECRET".to_string(), "from-env".to_string())];
    // --variable comes before the environment provider; the last one wins.
    let app = App::start_with(
        PROBE,
        &env,
        &["--variable", "secret=first", "--variable", "secret=from-cli", "-e", "GREETING=a=b"],
    )
    .unwrap();
    assert_eq!(app.get("/var?name=secret").body, "from-cli");
    assert_eq!(app.get("/env?name=GREETING").body, "a=b", "--env reaches every component, split at the first =");
    let app = App::start_with(PROBE, &env, &["--variable", &format!("@{}", file.display())]).unwrap();
    assert_eq!(app.get("/var?name=secret").body, "from-file");
}

#[test]
fn mneme_up_refuses_flags_in_spins_words_and_names_its_own() {
    mneme_e2e::runner_only!("its own flag parsing");
    for (args, want) in [
        (vec!["--variable", "novalue"], "variables must be in the form 'key=value' or '@file'"),
        (vec!["-e", "NOEQUALS"], "Environment variable must be of the form `key=value`"),
        (vec!["--tls-cert", "c.pem"], "`--tls-cert` is a `spin up` flag that `mneme up` does not support"),
        (vec!["--max-memory-mb", "32"], "unexpected argument '--max-memory-mb'"),
    ] {
        let log = App::start_with(PROBE, &[], &args).err().unwrap_or_else(|| panic!("{args:?}: the runner started"));
        assert!(log.contains(want), "{args:?}: expected `{want}` in:\n{log}");
    }
}

#[test]
fn outbound_http_is_limited_to_allowed_hosts() {
    let model = FakeModel::start(Script::default());
    let addr = model.addr.clone();
    let app = probe(&[("SPIN_VARIABLE_UPSTREAM", addr.clone())]);
    assert_eq!(app.get(&format!("/http?url=http://{addr}/v1/models")).body, "status=200");
    assert_eq!(app.get("/http?url=http://127.0.0.2:80/").body, "ErrorCode::HttpRequestDenied");
}

#[test]
fn embeddings_match_the_reference_model() {
    mneme_e2e::runner_only!("its native all-MiniLM-L6-v2 (Spin's own embeddings give the pair 0.7500, not 0.7553)");
    let app = probe(&[]);
    let r = app.get("/embed?text=A+man+is+eating+a+piece+of+bread.");
    assert_eq!(r.status, 200, "{}\n{}", r.body, app.log());
    assert_reference_cosine(&r.body);
}

/// The probe's `/embed` answer for "A man is eating a piece of bread.":
/// all-MiniLM-L6-v2's reference gives cos("A man is eating food.", it) =
/// 0.7553; bfloat16 products (D-K23) move it by under 1e-3.
fn assert_reference_cosine(body: &str) {
    let cosine: f64 = body
        .strip_prefix("dims=384 cosine=")
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("not `dims=384 cosine=…`: {body}"));
    assert!((cosine - 0.7553).abs() < 1e-3, "cosine {cosine}, reference 0.7553");
}

#[test]
fn models_are_read_where_spin_reads_them() {
    mneme_e2e::runner_only!("its reference embeddings, `MNEME_MODELS_DIR` and its error naming the model directory");
    // `<state-dir>/ai-models/<model>/`, with no override: what `spin up`
    // reads, and where scripts/install.sh links the weights.
    let weights =
        std::path::PathBuf::from(std::env::var_os("MNEME_MODELS_DIR").expect("scripts/test.sh sets MNEME_MODELS_DIR"))
            .join("all-minilm-l6-v2");
    let state = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(state.path().join("ai-models")).unwrap();
    std::os::unix::fs::symlink(&weights, state.path().join("ai-models/all-minilm-l6-v2")).unwrap();
    let no_override = [("MNEME_MODELS_DIR".to_string(), String::new())];
    let app = match App::launch_in(state, PROBE, &no_override, &[]) {
        mneme_e2e::Started::Serving(app) => app,
        mneme_e2e::Started::Exited { log, .. } => panic!("the runner did not start:\n{log}"),
    };
    assert_reference_cosine(&app.get("/embed?text=A+man+is+eating+a+piece+of+bread.").body);

    let bare = App::start(PROBE, &no_override);
    let r = bare.get("/embed?text=x");
    let want = bare.state.path().join("ai-models/all-minilm-l6-v2");
    assert!(r.body.contains(&want.display().to_string()), "the error names where the model was looked for: {}", r.body);
}

#[test]
fn inference_goes_to_the_configured_endpoint_or_fails_clearly() {
    mneme_e2e::runner_only!("its `[llm_compute]` forwarding to an OpenAI-compatible endpoint");
    let app = probe(&[]);
    let r = app.get("/infer?model=test-model&prompt=hi");
    assert!(r.body.contains("no inference endpoint is configured"), "{}", r.body);
    assert!(
        app.get("/infer?model=llama2-chat&prompt=hi").body.contains("ai_models"),
        "a model the component does not list"
    );

    let model = FakeModel::start(Script::default());
    let addr = &model.addr;
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("rc.toml");
    std::fs::write(
        &cfg,
        format!("[llm_compute]\ntype = \"remote_http\"\nurl = \"http://{addr}/v1\"\nauth_token = \"tok\"\n"),
    )
    .unwrap();
    let app = App::start_with(PROBE, &[], &["--runtime-config-file", cfg.to_str().unwrap()]).unwrap();
    assert_eq!(app.get("/infer?model=test-model&prompt=hello+there").body, "scripted answer");
    let sent = model.requests().join("\n");
    assert!(sent.contains("\"model\":\"test-model\"") && sent.contains("hello there"), "{sent}");
}

#[test]
fn dependencies_get_only_the_capabilities_they_inherit() {
    let app = probe(&[]);
    let table = [
        ("/dep/kv?store=default", "stage-ok"),
        ("/dep/var?name=secret", "s3cret"),
        ("/noinherit/dep/kv?store=default", "Error::AccessDenied"),
        // Spin's deny adapter (crates/capabilities/deny-adapter) names the key alone.
        ("/noinherit/dep/var?name=secret", "Error::Undefined(\"secret\")"),
        ("/partial/dep/kv?store=default", "stage-ok"),
        ("/partial/dep/var?name=secret", "Error::Undefined(\"secret\")"),
    ];
    for (path, want) in table {
        assert_eq!(app.get(path).body, want, "{path}");
    }
}

#[test]
fn responses_stream_event_by_event() {
    let app = probe(&[]);
    let chunks = app.stream("/stream?n=3&ms=400");
    let text: String = chunks.iter().map(|(_, c)| c.as_str()).collect();
    assert_eq!(text, "data: 0\n\ndata: 1\n\ndata: 2\n\n");
    let first = chunks.first().unwrap().0;
    let last = chunks.last().unwrap().0;
    assert!(chunks.len() >= 3, "events were batched: {chunks:?}");
    assert!(last - first >= Duration::from_millis(700), "events did not arrive as they were written: {chunks:?}");
}

#[test]
fn oversize_bodies_are_refused_before_the_component_runs() {
    mneme_e2e::runner_only!("its body cap (`--mneme-max-body-bytes`)");
    let app = App::start_with(PROBE, &[], &["--mneme-max-body-bytes", "1000"]).unwrap();
    assert_eq!(app.request("POST", "/echo", &[], Some(&[b'x'; 1000])).body, "1000");
    app.request("POST", "/echo", &[], Some(&[b'x'; 1001])).assert_error(413, "payload-too-large");
}

#[test]
fn a_trap_answers_500_with_a_request_id_and_the_server_keeps_serving() {
    mneme_e2e::runner_only!("its JSON answer to a trap");
    let app = probe(&[]);
    let r = app.get("/trap");
    r.assert_error(500, "internal");
    let id = r.json()["error"]["message"]
        .as_str()
        .unwrap()
        .split("request id ")
        .nth(1)
        .unwrap()
        .split(' ')
        .next()
        .unwrap()
        .to_string();
    assert!(app.log().contains(&format!("request {id}")), "the log must carry the request id {id}");
    assert_eq!(app.get("/kv?store=default").status, 200, "the runner must keep serving after a trap");
}

#[test]
fn a_request_over_its_time_limit_is_stopped() {
    mneme_e2e::runner_only!("its JSON answer to a request over its time limit");
    let app = App::start_with(PROBE, &[], &["--request-timeout", "1s"]).unwrap();
    let started = std::time::Instant::now();
    app.get("/sleep?ms=30000").assert_error(500, "internal");
    assert!(started.elapsed() < Duration::from_secs(10), "the epoch deadline did not stop the guest");
    assert_eq!(app.get("/sleep?ms=1").body, "slept");
}

#[test]
fn spin_request_headers_are_set() {
    let app = probe(&[]);
    let h = app.get("/partial/headers").body;
    for want in ["spin-matched-route=/partial/...", "spin-path-info=/headers", "spin-component-route=/partial"] {
        assert!(h.lines().any(|l| l == want), "missing {want} in:\n{h}");
    }
    assert!(h.contains("spin-full-url=http://127.0.0.1"), "{h}");
}

#[test]
fn each_request_logs_method_path_component_status_and_duration() {
    mneme_e2e::runner_only!("its request log line");
    let app = probe(&[]);
    app.get("/kv?store=default");
    // The log is written by a thread of its own: the line follows the
    // response within moments.
    app.wait_log("GET /kv probe 200 ", std::time::Duration::from_secs(2));
    let log = app.log();
    let line = log
        .lines()
        .find(|l| l.starts_with("GET /kv probe 200 "))
        .unwrap_or_else(|| panic!("no request line in:\n{log}"));
    assert!(
        line.contains("ms inst=") && (line.contains("us id=") || line.contains("inst=reused id=")),
        "duration, instantiation time (or reuse) and request id: {line}"
    );
}

#[test]
fn a_guests_lines_reach_the_log_whole_while_other_instances_write() {
    mneme_e2e::runner_only!("its line-at-a-time guest output");
    // One request per instance, so each line has one writer; twelve at once,
    // each writing its line in four pieces.
    let app = App::start_with(PROBE, &[], &["--max-instance-concurrent-reuse-count", "1"]).unwrap();
    std::thread::scope(|s| {
        for i in 0..12 {
            let app = &app;
            s.spawn(move || assert_eq!(app.get(&format!("/say?id={i}")).body, "said"));
        }
    });
    app.wait_log("say 11: one two three end", Duration::from_secs(2));
    let log = app.log();
    for i in 0..12 {
        let whole = format!("say {i}: one two three end");
        assert_eq!(log.lines().filter(|l| *l == whole).count(), 1, "`{whole}` as a line of its own in:\n{log}");
    }
}

#[test]
fn apps_spin_would_refuse_are_refused_at_load() {
    mneme_e2e::runner_only!("its load-time wording (checked against Spin's source, D-F27)");
    let dir = tempfile::tempdir().unwrap();
    type Edit = Box<dyn Fn(String) -> String>;
    let cases: [(&str, Edit, &str); 5] = [
        (
            "unknown key-value store",
            Box::new(|t| {
                t.replace(
                    "key_value_stores = [\"default\"]\nsqlite",
                    "key_value_stores = [\"default\", \"nosuch\"]\nsqlite",
                )
            }),
            r#"unknown key_value_stores label "nosuch" for component "probe""#,
        ),
        (
            "unknown SQLite database",
            Box::new(|t| {
                t.replace(
                    "sqlite_databases = [\"default\"]\nai_models",
                    "sqlite_databases = [\"default\", \"nosuch\"]\nai_models",
                )
            }),
            "One or more components use SQLite databases which are not defined.\n\
             Check the spelling, or pass a runtime configuration file that defines these stores.\n\
             See https://spinframework.dev/dynamic-configuration#sqlite-storage-runtime-configuration\n\
             Details:\n- Component probe uses database 'nosuch'",
        ),
        (
            "dependency with its own permissions",
            Box::new(|t| {
                t.replace("[component.probe-stage]\n", "[component.probe-stage]\nkey_value_stores = [\"default\"]\n")
            }),
            "Dependencies may not have their own resources or permissions",
        ),
        (
            "required variable without a value",
            Box::new(|t| t.replace("secret = { default = \"s3cret\", secret = true }", "secret = { required = true }")),
            r#"provider error: no provider resolved required variable(s): ["secret"]"#,
        ),
        (
            "bad outbound host",
            Box::new(|t| t.replace("\"http://{{ upstream }}\"", "\"not-a-url\"")),
            "allowed_outbound_hosts",
        ),
    ];
    for (what, edit, want) in cases {
        let m = edited_manifest(dir.path(), PROBE, edit);
        let log = App::start_with(m.to_str().unwrap(), &[], &[])
            .err()
            .unwrap_or_else(|| panic!("{what}: the runner started"));
        assert!(log.contains(want), "{what}: expected `{want}` in:\n{log}");
    }
}

#[test]
fn a_warm_restart_reuses_compiled_components() {
    mneme_e2e::runner_only!("its compiled-component cache");
    let first = probe(&[]);
    drop(first);
    let second = probe(&[]);
    let ready: u64 = second
        .stdout()
        .iter()
        .find_map(|l| l.strip_prefix("Ready in ")?.strip_suffix(" ms")?.parse().ok())
        .expect("a Ready line");
    assert!(ready < 2000, "a warm start took {ready} ms");
    let log = second.log();
    let compile_ms: Vec<u64> =
        log.lines().filter_map(|l| l.split(" ready in ").nth(1)?.split(" ms").next()?.parse().ok()).collect();
    assert!(!compile_ms.is_empty(), "one line per HTTP component:\n{log}");
    assert!(
        compile_ms.iter().all(|&ms| ms < 300),
        "a cached component loads in well under its compile time: {compile_ms:?}"
    );
}

#[test]
fn key_value_can_live_in_redis_through_runtime_config() {
    require_redis();
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("rc.toml");
    std::fs::write(&cfg, "[key_value_store.default]\ntype = \"redis\"\nurl = \"redis://127.0.0.1:6379\"\n").unwrap();
    let app = App::start_with(PROBE, &[], &["--runtime-config-file", cfg.to_str().unwrap()]).unwrap();
    let before: u64 = mneme_e2e::redis_cmd(&["GET", "n"]).lines().nth(1).and_then(|l| l.parse().ok()).unwrap_or(0);
    let r = app.get("/kv?store=default");
    assert!(r.body.starts_with(&format!("n={} ", before + 1)), "{}", r.body);
    let raw = mneme_e2e::redis_cmd(&["GET", "n"]);
    assert!(raw.contains(&(before + 1).to_string()), "Spin writes key-value keys raw into Redis: {raw}");
}

#[test]
fn an_instance_over_its_memory_cap_fails_alone() {
    mneme_e2e::runner_only!("its JSON answer to an instance over its memory cap");
    let app = App::start_with(PROBE, &[], &["--max-instance-memory", "33554432"]).unwrap();
    assert_eq!(app.get("/alloc?mb=8").body, "allocated 8 MiB");
    app.get("/alloc?mb=64").assert_error(500, "internal");
    assert_eq!(app.get("/alloc?mb=8").body, "allocated 8 MiB", "the next request gets a fresh instance");
}

#[test]
fn shutdown_lets_in_flight_streams_finish_then_exits() {
    mneme_e2e::runner_only!("its graceful drain on SIGTERM");
    let mut app = probe(&[]);
    let url = app.url.clone();
    let reader = std::thread::spawn(move || {
        let resp = ureq::get(&format!("{url}/stream?n=4&ms=300")).call().expect("stream request");
        let mut body = String::new();
        resp.into_body().into_reader().read_to_string(&mut body).map(|_| body)
    });
    std::thread::sleep(Duration::from_millis(350));
    app.terminate();
    let body = reader.join().unwrap().expect("the in-flight stream must complete");
    assert_eq!(body, "data: 0\n\ndata: 1\n\ndata: 2\n\ndata: 3\n\n");
    let status = app.wait_exit(Duration::from_secs(15)).expect("the runner must exit after draining");
    assert!(status.success(), "clean exit expected, got {status}");
    assert!(app.log().contains("shutting down"));
}
