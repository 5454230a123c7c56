//! The web app (#7) through the runner, on both storage backends: its
//! assets and their headers, the session cookie's rules over HTTP, and the
//! whole app in Debian's Chromium (`web/tests/app.test.mjs`, driven by
//! playwright-core): sign in, a streamed answer, a proactive event live and
//! after a dropped connection, a door run with its trace, a rec snoozed and
//! acted on, a transcript ingested and found, a task created and cancelled,
//! the Status screen, a phone-width screen, sign-out; and a new user's
//! first sign-in with no model (`web/tests/first-hour.test.mjs`).

use std::process::Command;

use mneme_e2e::fake_model::{FakeModel, Script, marker, triage_answer};
use mneme_e2e::json_server::JsonServer;
use mneme_e2e::{App, BACKENDS, BackendEnv, CRON_TOKEN, TEST_KEY, repo_root, test_env};
use serde_json::{Value, json};

const INGEST: &str = "test-ingest-token";
/// In the rx composer's and the plan decomposition's system prompts.
const COMPOSE: &str = "You write the narrative of one recommendation";
const PLAN: &str = "You break one of the principal's long-running goals";
const EXTRACT: &str = "You extract the principal's judgement";

fn start(b: &BackendEnv, model: Option<&FakeModel>) -> App {
    start_with(b, model, &[])
}

fn start_with(b: &BackendEnv, model: Option<&FakeModel>, extra: &[(&str, String)]) -> App {
    let mut env = test_env(b, model);
    env.push(("SPIN_VARIABLE_INGEST_TOKEN".into(), INGEST.into()));
    env.extend(extra.iter().map(|(k, v)| (k.to_string(), v.clone())));
    App::start("spin.toml", &env)
}

fn now_ms() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as u64
}

#[test]
fn assets_are_built_in_revalidate_by_etag_and_forbid_foreign_code() {
    let b = BackendEnv::new(mneme_e2e::Backend::Embedded);
    let app = start(&b, None);
    let page = app.get("/");
    assert_eq!(page.status, 200);
    assert!(page.header("content-type").unwrap().starts_with("text/html"));
    assert!(page.body.contains("/app/app.js"), "{}", page.body);
    assert!(!page.body.contains("http://") && !page.body.contains("https://"), "no CDN: {}", page.body);
    let csp = page.header("content-security-policy").unwrap();
    assert!(csp.contains("script-src 'self'") && csp.contains("frame-ancestors 'none'"), "{csp}");
    for (path, kind) in [
        ("/app/app.js", "text/javascript"),
        ("/app/md.js", "text/javascript"),
        ("/app/app.css", "text/css"),
        ("/app/icon.svg", "image/svg+xml"),
        ("/openapi.yaml", "application/yaml"),
    ] {
        let r = app.get(path);
        assert_eq!(r.status, 200, "{path}");
        assert!(r.header("content-type").unwrap().starts_with(kind), "{path}");
        let on_disk = match path {
            "/openapi.yaml" => repo_root().join("openapi.yaml"),
            p => repo_root().join("web").join(p.trim_start_matches("/app/")),
        };
        assert_eq!(r.body, std::fs::read_to_string(on_disk).unwrap(), "{path} is the file as built");
        let tag = r.header("etag").unwrap().to_string();
        let again = app.request("GET", path, &[("if-none-match", tag.as_str())], None);
        assert_eq!((again.status, again.body.as_str()), (304, ""), "{path}");
    }
    app.get("/app/nope.js").assert_error(404, "not-found");
    app.request("POST", "/", &[], Some(b"x")).assert_error(405, "method-not-allowed");
    // Exact routes beat the API's `/...`, and the API still answers beside them.
    assert_eq!(app.get("/health").status, 200);
    assert_eq!(app.get("/chat").status, 401, "the API's routes still want a key");
}

/// `(status, set-cookie)` of a sign-in with `key`.
fn pairs(h: &[(String, String)]) -> Vec<(&str, &str)> {
    h.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect()
}

fn sign_in(app: &App, key: &str) -> (u16, Option<String>) {
    let body = json!({"api_key": key}).to_string();
    let r = app.request("POST", "/session", &[("content-type", "application/json")], Some(body.as_bytes()));
    (r.status, r.header("set-cookie").map(str::to_string))
}

#[test]
fn a_session_cookie_stands_in_for_the_key_with_its_rules() {
    for backend in BACKENDS {
        let b = BackendEnv::new(backend);
        let app = start(&b, None);
        let (status, cookie) = sign_in(&app, "wrong");
        assert_eq!((status, cookie), (401, None));
        for bad in [&b"{}"[..], b"not json", br#"{"api_key": 5}"#, br#"{"api_key": "k", "extra": 1}"#] {
            let r = app.request("POST", "/session", &[], Some(bad));
            assert_eq!(r.status, 400, "{}", String::from_utf8_lossy(bad));
        }
        let (status, cookie) = sign_in(&app, TEST_KEY);
        assert_eq!(status, 204);
        let cookie = cookie.unwrap();
        for attr in ["HttpOnly", "SameSite=Strict", "Path=/", "Max-Age=1209600"] {
            assert!(cookie.contains(attr), "{cookie}");
        }
        assert!(!cookie.contains("Secure"), "plain HTTP on loopback: {cookie}");
        assert!(!cookie.contains(TEST_KEY), "{cookie}");
        let pair = cookie.split(';').next().unwrap().to_string();
        let with = |extra: &[(&'static str, &str)]| -> Vec<(String, String)> {
            let mut h = vec![("cookie".to_string(), pair.clone())];
            h.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
            h
        };
        let s = app.request("GET", "/session", &pairs(&with(&[])), None);
        assert_eq!(s.status, 200, "{}", s.body);
        let expires = s.json()["expires_at"].as_u64().unwrap();
        assert!(expires.abs_diff(now_ms() / 1000 + 14 * 86_400) < 120, "{expires}");
        // Reads work by cookie alone; the SSE stream too.
        assert_eq!(app.request("GET", "/tasks", &pairs(&with(&[])), None).status, 200);
        let ev = app.request("GET", "/events?wait=0", &pairs(&with(&[])), None);
        assert_eq!(ev.status, 200);
        assert!(ev.body.starts_with("retry:"), "{}", ev.body);
        // A change needs the CSRF header as well.
        let goal = json!({"goal": "Read about soil health"}).to_string();
        app.request("POST", "/tasks", &pairs(&with(&[])), Some(goal.as_bytes())).assert_error(403, "csrf");
        assert_eq!(app.call("GET", "/tasks", None, 0).json()["tasks"], json!([]), "nothing was created");
        let made = app.request("POST", "/tasks", &pairs(&with(&[("x-mneme-csrf", "1")])), Some(goal.as_bytes()));
        assert_eq!(made.status, 201, "{}", made.body);
        // A forged or expired cookie is refused, a wrong bearer is not rescued by a good cookie.
        app.request("GET", "/tasks", &[("cookie", "mneme_session=1.abc")], None).assert_error(401, "session-expired");
        let late = (now_ms() + 15 * 86_400_000).to_string();
        app.request("GET", "/tasks", &pairs(&with(&[("x-mneme-clock", late.as_str())])), None)
            .assert_error(401, "session-expired");
        app.request("GET", "/tasks", &pairs(&with(&[("authorization", "Bearer nope")])), None)
            .assert_error(401, "unauthorized");
        // Sign-out clears the cookie.
        let out = app.request("DELETE", "/session", &[], None);
        assert_eq!(out.status, 204);
        assert!(out.header("set-cookie").unwrap().contains("Max-Age=0"));
        assert!(!app.log().contains(TEST_KEY), "the key is never logged");
        drop(app);
        // The key unset: no one can sign in, and a cookie opens nothing.
        let closed_env: Vec<(String, String)> =
            test_env(&b, None).into_iter().filter(|(k, _)| k != "SPIN_VARIABLE_API_KEY").collect();
        let closed = App::start("spin.toml", &closed_env);
        assert_eq!(sign_in(&closed, TEST_KEY).0, 503);
        closed.request("GET", "/tasks", &pairs(&with(&[])), None).assert_error(503, "not-configured");
    }
}

/// A three-step plan for the task the browser creates.
fn plan() -> Script {
    let step =
        |i: u32, what: &str, deps: &[&str]| json!({"id": format!("s{i}"), "description": what, "depends_on": deps});
    Script::json(json!({"steps": [
        step(1, "List the desks within budget that suit a small room", &[]),
        step(2, "Compare their height range, stability and noise", &["s1"]),
        step(3, "Recommend one desk with the reasons for it", &["s2"]),
    ], "confidence": 0.7}))
}

/// The scripted model: triage asks for the `schedule` skill on a reminder
/// and RESPOND otherwise; the ACT plan and the rx composer fail (so the
/// labelled rules and template take over); a task gets a three-step plan;
/// extraction finds one decision; the reply after a reminder is set says
/// so; everything else streams a sentence a word at a time.
fn model() -> FakeModel {
    let words = "Tea keeps best in a sealed tin away from light and strong smells.";
    let stream =
        Script { reply: words.into(), chunk_delay: std::time::Duration::from_millis(120), ..Script::default() };
    let model = FakeModel::start(stream.clone());
    let fail = Script { status: 500, ..Script::default() };
    model.route(marker::ACT_PLAN, fail.clone());
    model.route(COMPOSE, fail);
    model.route(PLAN, plan());
    model.route(
        EXTRACT,
        Script::json(json!({"candidates": [{"type": "decision", "topic": "Ledger storage",
            "position": "The ledger lives in Postgres", "reasoning": "it gives us transactions"}]})),
    );
    // A reply that follows the schedule skill says what it did; its
    // generation carries the skill's result, which triage never sees.
    model.route(
        "Reminder set: ",
        Script { reply: "Done: I have set that reminder and will nudge you when it is due.".into(), ..stream.clone() },
    );
    // Generation carries the soul prompt, and the message too: it must not
    // match the reminder's triage route below.
    model.route("You are Mneme, a personal cognitive assistant", stream.clone());
    // The train question goes to the `trains` tool (Path B). Triage
    // requests carry the recent turns, so this route comes before the
    // reminder's, which an earlier turn would match.
    model.route(
        "next train to Leeds",
        Script::json(json!({"branch": "act", "mode": "ACT", "tools": ["trains"], "skills": [],
            "confidence_internal": 0.2, "confidence_tool_need": 0.9, "freshness_risk": 0.8, "reasoning": "scripted"})),
    );
    model.route(
        "remind me to",
        Script::json(json!({"branch": "act", "mode": "ACT", "tools": [], "skills": ["schedule"],
            "confidence_internal": 0.8, "confidence_tool_need": 0.1, "freshness_risk": 0.1, "reasoning": "scripted"})),
    );
    model.route(marker::TRIAGE, triage_answer("RESPOND"));
    model
}

/// Where a browser test's screenshots go: `$MNEME_SCREENSHOTS` (relative to
/// the repo) or the app's state directory; `names` are removed first, so
/// the checks see this run's.
fn screenshots(app: &App, names: &[&str]) -> std::path::PathBuf {
    let shots = match std::env::var("MNEME_SCREENSHOTS") {
        Ok(dir) => repo_root().join(dir),
        Err(_) => app.state.path().join("screenshots"),
    };
    for name in names {
        let _ = std::fs::remove_file(shots.join(format!("{name}.png")));
    }
    shots
}

/// One browser at a time: two Chromiums and two apps at once would crowd
/// two cores past the tests' waits.
static ONE_BROWSER: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Runs `web/tests/{script}` in Debian's Chromium against `app`; returns
/// what it printed, having asserted that it passed.
fn in_chromium(script: &str, app: &App, shots: &std::path::Path, what: &str) -> String {
    let chromium = std::env::var("CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".into());
    assert!(
        std::path::Path::new(&chromium).exists(),
        "{chromium} is missing: run scripts/install.sh (apt-get install chromium chromium-driver)"
    );
    let web = repo_root().join("web");
    assert!(
        web.join("node_modules/playwright-core").exists(),
        "playwright-core is missing: run scripts/install.sh (npm ci in web/)"
    );
    let out = Command::new("node")
        .arg(format!("tests/{script}"))
        .current_dir(&web)
        .env("MNEME_URL", &app.url)
        .env("MNEME_API_KEY", TEST_KEY)
        .env("MNEME_CRON_TOKEN", CRON_TOKEN)
        .env("MNEME_SCREENSHOTS", shots)
        .env("CHROMIUM", &chromium)
        .output()
        .expect("node runs (apt-get install nodejs)");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{what}: the browser test failed\n{stdout}\n{stderr}\n--- runner log\n{}", app.log());
    stdout
}

/// The screenshots the whole-app test takes, each required.
const SCREENS: [&str; 9] =
    ["sign-in", "chat", "inbox-run", "rec", "knowledge", "entry", "tasks", "status", "chat-phone"];

#[test]
fn the_web_app_in_chromium() {
    let _one = ONE_BROWSER.lock().unwrap_or_else(|p| p.into_inner());
    for backend in BACKENDS {
        let b = BackendEnv::new(backend);
        let model = model();
        // A tool slower than the chat waits: its reply comes through /events.
        let tools = JsonServer::start();
        tools.set_delayed(
            "POST",
            "/trains",
            200,
            &json!({"result": "Leeds: 9:40 from platform 2"}),
            std::time::Duration::from_millis(3_000),
        );
        let app = start_with(
            &b,
            Some(&model),
            &[("SPIN_VARIABLE_TOOL_HOST", tools.addr.clone()), ("SPIN_VARIABLE_CHAT_TOOL_WAIT_MS", "1000".into())],
        );
        let now = now_ms();
        let trains = json!({"description": "Looks up train departures.", "url": tools.url("/trains")});
        assert_eq!(app.call("PUT", "/tools/trains", Some(trains), now).status, 200);
        // Signals for the fitness door and a document its evidence cites.
        let seed = |path: &str, body: Value| {
            let r = app.call("POST", path, Some(body), now);
            assert_eq!(r.status, 201, "{path}: {}", r.body);
        };
        seed(
            "/documents",
            json!({"title": "Training consistency", "text": "Training consistency beats intensity: missed workouts decide progress."}),
        );
        let day = 86_400_000;
        seed(
            "/rx/fitness/observations",
            json!({"observations": [
                {"kind": "checkin", "energy": 2, "sleep": 2, "waist_cm": 84, "body_fat_pct": 18, "target_sessions_per_week": 4, "at": now - 3 * day},
                {"kind": "checkin", "energy": 3, "sleep": 2, "waist_cm": 85, "body_fat_pct": 18.5, "at": now - day},
                {"kind": "workout", "type": "strength", "minutes": 50, "rpe_actual": 8, "rpe_prescribed": 7,
                 "load_kg": 95, "prev_load_kg": 100, "hard_lower": true, "at": now - 2 * day}
            ]}),
        );
        let shots = screenshots(&app, &SCREENS);
        let stdout = in_chromium("app.test.mjs", &app, &shots, &format!("{backend:?}"));
        assert!(stdout.contains("signing out ends the session"), "every step ran:\n{stdout}");
        for name in SCREENS {
            assert!(shots.join(format!("{name}.png")).exists(), "screenshot {name}");
        }
        assert!(!app.log().contains(TEST_KEY) && !app.log().contains(INGEST), "no secret is logged");
    }
}

/// A new user's first sign-in with no model (#26 items 1 and 4): the setup
/// note, the honest no-model reply, the Status screen saying what to set.
#[test]
fn the_first_sign_in_without_a_model_in_chromium() {
    let _one = ONE_BROWSER.lock().unwrap_or_else(|p| p.into_inner());
    for backend in BACKENDS {
        let b = BackendEnv::new(backend);
        let app = start(&b, None);
        let shots = screenshots(&app, &["first-sign-in", "status-no-model"]);
        let stdout = in_chromium("first-hour.test.mjs", &app, &shots, &format!("{backend:?}"));
        assert!(stdout.contains("the first hour is done"), "every step ran:\n{stdout}");
        for name in ["first-sign-in", "status-no-model"] {
            assert!(shots.join(format!("{name}.png")).exists(), "screenshot {name}");
        }
    }
}
