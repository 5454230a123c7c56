//! `openapi.yaml` against the running app (#7): it is served as written,
//! and schemathesis (from PyPI, installed by `scripts/install.sh`) sends
//! generated valid and invalid requests to every operation and finds no
//! 5xx, no undocumented status, no response off its schema, no valid
//! request refused and no invalid one accepted.

use std::path::PathBuf;
use std::process::Command;

use mneme_e2e::{App, BACKENDS, BackendEnv, TEST_KEY, repo_root, test_env};

const INGEST: &str = "test-ingest-token";
const RX_INGEST: &str = "test-rx-ingest-token";

fn schemathesis() -> PathBuf {
    let venv = std::env::var("MNEME_TOOLS_VENV")
        .map(PathBuf::from)
        .unwrap_or_else(|_| PathBuf::from(std::env::var("HOME").expect("HOME is set")).join(".cache/mneme/venv"));
    let bin = venv.join("bin/schemathesis");
    assert!(bin.exists(), "{} is missing: run scripts/install.sh", bin.display());
    bin
}

fn start(b: &BackendEnv) -> App {
    let mut env = test_env(b, None);
    env.push(("SPIN_VARIABLE_INGEST_TOKEN".into(), INGEST.into()));
    env.push(("SPIN_VARIABLE_RX_INGEST_TOKEN".into(), RX_INGEST.into()));
    App::start("spin.toml", &env)
}

#[test]
fn the_description_is_served_as_written() {
    let b = BackendEnv::new(mneme_e2e::Backend::Embedded);
    let app = start(&b);
    let r = app.get("/openapi.yaml");
    assert_eq!(r.status, 200);
    assert_eq!(r.body, std::fs::read_to_string(repo_root().join("openapi.yaml")).unwrap());
    assert!(r.body.starts_with("openapi: 3.0.3"));
}

#[test]
fn schemathesis_finds_no_server_error_and_no_response_off_the_schema() {
    let st = schemathesis();
    for backend in BACKENDS {
        let b = BackendEnv::new(backend);
        let app = start(&b);
        let report = app.state.path().join("schemathesis");
        let out = Command::new(&st)
            // Its cache goes in the working directory: the app's state, not the repo.
            .current_dir(app.state.path())
            .arg("--config-file")
            .arg(repo_root().join("tests/schemathesis.toml"))
            .arg("run")
            .arg(repo_root().join("openapi.yaml"))
            .args(["--url", &app.url])
            .args(["--header", &format!("Authorization: Bearer {TEST_KEY}")])
            .args(["--header", &format!("X-Ingest-Token: {INGEST}")])
            .args(["--header", &format!("X-RX-Ingest-Token: {RX_INGEST}")])
            // Every check: no 5xx, statuses, content types, headers and
            // bodies as documented, schema-valid requests accepted and
            // invalid ones refused (with the exceptions in
            // tests/schemathesis.toml), 405 for an undocumented method,
            // and no operation open without its credentials.
            .args(["--checks", "all"])
            .args(["--phases", "examples,coverage,fuzzing", "--max-examples", "12", "--seed", "7", "--workers", "1"])
            .args(["--request-timeout", "60", "--no-color", "--report-dir"])
            .arg(&report)
            // The ticks run jobs on the cron's token, which this run does
            // not hold (tests/tests/errors.rs reaches their errors).
            .args(["--exclude-path-regex", "^/tick/"])
            .output()
            .expect("schemathesis runs");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{backend:?}: schemathesis found problems\n{stdout}\n{}\n--- runner log (tail)\n{}",
            String::from_utf8_lossy(&out.stderr),
            app.log().lines().rev().take(40).collect::<Vec<_>>().join("\n")
        );
        assert!(stdout.contains("No issues found") || stdout.contains("passed"), "{stdout}");
    }
}
