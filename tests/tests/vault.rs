//! The vault sync, `mneme vault pull|push`, against the app through the
//! runner over HTTP, on both storage backends: a pull writes the knowledge
//! entries and rx artifacts and a second pull touches nothing; push sends
//! a rec's status edits through the rec API and its rules, and everything
//! else in a file goes back to what the store says; refused edits stay in
//! the file with the API's reason and a failing exit. Skipping and
//! dismissing go through the same way; without `--url` both commands find
//! the app at `MNEME_URL`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, SystemTime};

use mneme_e2e::{App, BACKENDS, Backend, BackendEnv, TEST_KEY, repo_root, test_env};
use serde_json::{Value, json};

const INGEST: &str = "test-ingest-token";

/// Ingests the same decision (said by `who` on `date`) by the rules and
/// waits for it.
fn ingest(app: &App, who: &str, date: &str) {
    let text = format!("{who}: We decided to move billing to Postgres because we need real transactions.");
    let body = json!({"source_type": "meeting", "source_date": date, "text": text});
    let r = app.request("POST", "/knowledge/ingest", &[("x-ingest-token", INGEST)], Some(body.to_string().as_bytes()));
    assert_eq!(r.status, 202, "{}", r.body);
    let job = app.knowledge_job(r.json()["job_id"].as_str().unwrap());
    assert_eq!(job["status"], "done", "{job}");
}

/// `mneme vault <verb> <dir>` against `app`: `(succeeded, stdout + stderr)`.
fn vault(app: &App, verb: &str, dir: &Path, key: Option<&str>) -> (bool, String) {
    vault_at(verb, dir, key, Some(&app.url), None)
}

/// `mneme vault <verb> <dir>` with `--url url` when given and `MNEME_URL`
/// set to `env_url` when given (and unset otherwise).
fn vault_at(verb: &str, dir: &Path, key: Option<&str>, url: Option<&str>, env_url: Option<&str>) -> (bool, String) {
    let mut cmd = Command::new(repo_root().join("target/release/mneme"));
    cmd.args(["vault", verb]).arg(dir).env_remove("MNEME_API_KEY").env_remove("MNEME_URL");
    if let Some(u) = url {
        cmd.args(["--url", u]);
    }
    if let Some(u) = env_url {
        cmd.env("MNEME_URL", u);
    }
    if let Some(k) = key {
        cmd.env("MNEME_API_KEY", k);
    }
    let out = cmd.output().expect("running mneme vault");
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    (out.status.success(), text)
}

fn pull(app: &App, dir: &Path) -> String {
    let (ok, out) = vault(app, "pull", dir, Some(TEST_KEY));
    assert!(ok, "pull failed:\n{out}");
    out
}

fn push(app: &App, dir: &Path) -> (bool, String) {
    vault(app, "push", dir, Some(TEST_KEY))
}

fn read(dir: &Path, path: &str) -> String {
    std::fs::read_to_string(dir.join(path)).unwrap()
}

/// Every file under `dir` but the sync's own state, with its mtime.
fn files(dir: &Path) -> Vec<(String, std::time::SystemTime)> {
    fn walk(root: &Path, at: &Path, out: &mut Vec<(String, std::time::SystemTime)>) {
        for e in std::fs::read_dir(at).unwrap() {
            let p: PathBuf = e.unwrap().path();
            let rel = p.strip_prefix(root).unwrap().to_string_lossy().to_string();
            if rel.starts_with(".mneme") {
                continue;
            }
            if p.is_dir() {
                walk(root, &p, out);
            } else {
                out.push((rel, std::fs::metadata(&p).unwrap().modified().unwrap()));
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, dir, &mut out);
    out.sort();
    out
}

/// The store's copy of one vault file, through the export.
fn exported(app: &App, path: &str) -> String {
    let r = app.call_as(TEST_KEY, "GET", "/vault/export", None, None);
    assert_eq!(r.status, 200);
    let tar = mneme_knowledge::tar::entries(r.body.as_bytes()).unwrap();
    let (_, c) = tar.into_iter().find(|(p, _)| p == path).unwrap_or_else(|| panic!("{path} in the export"));
    String::from_utf8(c).unwrap()
}

fn rec(app: &App, id: &str) -> Value {
    let r = app.call_as(TEST_KEY, "GET", &format!("/v1/rx/recs/{id}"), None, None);
    assert_eq!(r.status, 200, "{}", r.body);
    r.json()
}

/// Replaces `from` with `to` in a vault file, asserting it was there.
fn edit(dir: &Path, path: &str, from: &str, to: &str) {
    let md = read(dir, path);
    assert!(md.contains(from), "{from:?} in {md}");
    std::fs::write(dir.join(path), md.replacen(from, to, 1)).unwrap();
}

#[test]
fn pull_touches_only_what_changed_and_push_sends_status_edits_through_the_api() {
    for backend in BACKENDS {
        let b = BackendEnv::new(backend);
        let mut env = test_env(&b, None);
        env.push(("SPIN_VARIABLE_INGEST_TOKEN".into(), INGEST.into()));
        let app = App::start("spin.toml", &env);
        // One knowledge entry (the rules) and one fitness rec.
        ingest(&app, "Alice", "2026-11-20");
        let obs = json!({"observations": [{"kind": "checkin", "energy": 2, "sleep": 2},
                                          {"kind": "workout", "type": "strength", "minutes": 40}]});
        assert_eq!(app.call_as(TEST_KEY, "POST", "/rx/fitness/observations", Some(&obs), None).status, 201);
        let run = app.call_as(TEST_KEY, "POST", "/rx/fitness", None, None).json();
        let (id, art) = (run["rec_id"].as_str().unwrap().to_string(), run["path"].as_str().unwrap().to_string());
        let ke = "Knowledge/KE-0001.md";

        // No key, a wrong key: clear errors, nothing written.
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().join("vault");
        let (ok, out) = vault(&app, "pull", &d, None);
        assert!(!ok && out.contains("MNEME_API_KEY"), "{out}");
        let (ok, out) = vault(&app, "pull", &d, Some("wrong"));
        assert!(!ok && out.contains("401 unauthorized"), "{out}");
        let (ok, out) = push(&app, &d);
        assert!(!ok && out.contains("run `mneme vault pull"), "{out}");

        // The first pull writes both; the second touches nothing.
        let out = pull(&app, &d);
        assert!(out.contains(&format!("wrote    {art}")) && out.contains(&format!("wrote    {ke}")), "{out}");
        assert_eq!(read(&d, &art), exported(&app, &art));
        assert!(read(&d, ke).contains("Postgres"));
        // Mtimes set far back: a pull that rewrote a file would move them.
        let old = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000_000);
        for (p, _) in files(&d) {
            std::fs::File::options().write(true).open(d.join(p)).unwrap().set_modified(old).unwrap();
        }
        let before = files(&d);
        assert_eq!(before.len(), 2, "{before:?}");
        let out = pull(&app, &d);
        assert!(out.contains("0 written, 2 unchanged, 0 removed, 0 kept"), "{out}");
        assert_eq!(files(&d), before, "unchanged files keep their mtime");
        assert!(before.iter().all(|(_, t)| *t == old));

        // Snooze through the frontmatter; a body edit rides along and is
        // undone by the store.
        edit(&d, &art, "status: \"open\"", "status: snoozed\nsnooze_days: 3");
        edit(&d, &art, "## Counter-thesis", "## My own heading");
        // A pull keeps a file changed here.
        let out = pull(&app, &d);
        assert!(out.contains(&format!("kept     {art}")), "{out}");
        let state: Value = serde_json::from_str(&read(&d, ".mneme/vault.json")).unwrap();
        assert_eq!(state["files"][&art]["status"], "open", "the kept file's entry is still the pulled one: {state}");
        let (ok, out) = push(&app, &d);
        assert!(ok, "{out}");
        assert!(out.contains(&format!("sent     {art}: {id} is snoozed")), "{out}");
        let r = rec(&app, &id);
        assert_eq!((r["status"].as_str(), r["snooze_count"].as_i64()), (Some("snoozed"), Some(1)), "{r}");
        let now = read(&d, &art);
        assert_eq!(now, exported(&app, &art), "the store's content, the edit of the body gone");
        assert!(now.contains("status: \"snoozed\"") && now.contains("## Counter-thesis"), "{now}");
        assert!(!now.contains("snooze_days"), "{now}");

        // An entry changed here goes back to the store's copy.
        let entry = read(&d, ke);
        edit(&d, ke, "Postgres", "MySQL");
        let (ok, out) = push(&app, &d);
        assert!(ok && out.contains(&format!("restored {ke}")), "{out}");
        assert_eq!(read(&d, ke), entry);
        assert!(read(&d, &format!(".mneme/replaced/{ke}")).contains("MySQL"), "the principal's version is kept");

        // A file not changed here follows the store: a corroboration
        // rewrites the entry.
        ingest(&app, "Bob", "2026-11-21");
        let out = pull(&app, &d);
        assert!(out.contains(&format!("wrote    {ke}")), "{out}");
        assert_ne!(read(&d, ke), entry);
        assert_eq!(read(&d, ke), exported(&app, ke));

        // Acting needs a fit score: refused with the API's reason, the edit
        // kept, the rec unchanged; with the score it goes through.
        edit(&d, &art, "status: \"snoozed\"", "status: acted");
        let (ok, out) = push(&app, &d);
        assert!(!ok && out.contains(&format!("failed   {art}: 400 invalid")), "{out}");
        assert!(read(&d, &art).contains("status: acted"));
        assert_eq!(rec(&app, &id)["status"], "snoozed");
        edit(&d, &art, "status: acted", "status: acted\ndisposition: acted_modified\nsubjective_fit_1_5: 4");
        let (ok, out) = push(&app, &d);
        assert!(ok && out.contains(&format!("{id} is acted")), "{out}");
        let r = rec(&app, &id);
        assert_eq!((r["status"].as_str(), r["acted_disposition"].as_str()), (Some("acted"), Some("acted_modified")));
        assert!(read(&d, &art).contains("status: \"acted\""));

        // A terminal rec's status is not the principal's to change.
        edit(&d, &art, "status: \"acted\"", "status: open");
        let (ok, out) = push(&app, &d);
        assert!(!ok && out.contains("only an open or snoozed rec's status can change"), "{out}");
        assert_eq!(rec(&app, &id)["status"], "acted");

        // What the store forgets leaves the vault, unless it was changed
        // here.
        let r = app.call_as(TEST_KEY, "DELETE", "/privacy/delete-all?confirm=true", None, None);
        assert_eq!(r.status, 200, "{}", r.body);
        let out = pull(&app, &d);
        assert!(out.contains(&format!("removed  {ke}")) && out.contains(&format!("kept     {art}")), "{out}");
        assert!(!d.join(ke).exists() && d.join(&art).exists());
    }
}

/// A fitness rec and a finance rec, each run once; `(rec id, artifact
/// path)` of each.
fn two_recs(app: &App) -> [(String, String); 2] {
    let doors = [
        (
            "fitness",
            json!({"observations": [{"kind": "checkin", "energy": 2, "sleep": 2},
                                           {"kind": "workout", "type": "strength", "minutes": 40}]}),
        ),
        (
            "finance",
            json!({"observations": [
            {"kind": "position", "symbol": "AAPL", "value": 900, "cost_basis": 1000, "target_weight": 0.5},
            {"kind": "position", "symbol": "MSFT", "value": 100, "cost_basis": 100, "target_weight": 0.5},
            {"kind": "alert", "ref": "a1", "severity": "low", "message": "earnings"}]}),
        ),
    ];
    doors.map(|(door, obs)| {
        let r = app.call_as(TEST_KEY, "POST", &format!("/rx/{door}/observations"), Some(&obs), None);
        assert_eq!(r.status, 201, "{door}: {}", r.body);
        let r = app.call_as(TEST_KEY, "POST", &format!("/rx/{door}"), None, None);
        assert_eq!(r.status, 201, "{door}: {}", r.body);
        let run = r.json();
        let id = run["rec_id"].as_str().unwrap_or_else(|| panic!("{door} keeps its recs in the store: {run}"));
        (id.to_string(), run["path"].as_str().unwrap().to_string())
    })
}

/// `status: skipped` and `status: dismissed` in the frontmatter go through
/// the rec API as those dispositions (a skip is a kind of acting, and
/// needs no fit score), with the outcome note beside them; the files then
/// show what the store says, and a second push has nothing to send.
#[test]
fn push_sends_skipped_and_dismissed_through_the_rec_api() {
    for backend in BACKENDS {
        let b = BackendEnv::new(backend);
        let app = App::start("spin.toml", &test_env(&b, None));
        let [(skip_id, skip_art), (dismiss_id, dismiss_art)] = two_recs(&app);
        for id in [&skip_id, &dismiss_id] {
            let r = rec(&app, id);
            assert_eq!((r["status"].as_str(), r["acted_disposition"].as_str()), (Some("open"), None), "{r}");
        }
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().join("vault");
        pull(&app, &d);
        edit(&d, &skip_art, "status: \"open\"", "status: skipped\noutcome_note: travelling all week");
        edit(&d, &dismiss_art, "status: \"open\"", "status: dismissed");
        let (ok, out) = push(&app, &d);
        assert!(ok, "{out}");
        assert!(out.contains(&format!("sent     {skip_art}: {skip_id} is acted")), "{out}");
        assert!(out.contains(&format!("sent     {dismiss_art}: {dismiss_id} is dismissed")), "{out}");
        assert!(out.contains("2 sent, 0 restored, 0 failed"), "{out}");

        let skipped = rec(&app, &skip_id);
        assert_eq!(
            (skipped["status"].as_str(), skipped["acted_disposition"].as_str(), skipped["outcome_note"].as_str()),
            (Some("acted"), Some("skipped"), Some("travelling all week")),
            "{skipped}"
        );
        assert!(skipped["acted_at"].is_string(), "{skipped}");
        assert_eq!(skipped["subjective_fit_1_5"], Value::Null, "a skip carries no fit score: {skipped}");
        let dismissed = rec(&app, &dismiss_id);
        assert_eq!(
            (dismissed["status"].as_str(), dismissed["acted_disposition"].as_str()),
            (Some("dismissed"), Some("dismissed")),
            "{dismissed}"
        );
        // The list by status agrees.
        for (id, status) in [(&skip_id, "acted"), (&dismiss_id, "dismissed")] {
            let r = app.call_as(TEST_KEY, "GET", &format!("/v1/rx/recs?status={status}"), None, None);
            assert_eq!(r.status, 200, "{}", r.body);
            let listed: Vec<Value> = r.json()["recs"].as_array().unwrap().clone();
            assert_eq!(listed.len(), 1, "{listed:?}");
            assert_eq!(listed[0]["id"], id.as_str(), "{listed:?}");
        }

        // Each file is the store's copy again, with the status it now has.
        for (art, status) in [(&skip_art, "acted"), (&dismiss_art, "dismissed")] {
            let now = read(&d, art);
            assert_eq!(now, exported(&app, art), "{art}");
            assert!(now.contains(&format!("status: \"{status}\"")), "{now}");
        }
        let (ok, out) = push(&app, &d);
        assert!(ok && out.contains("0 sent, 0 restored, 0 failed"), "{out}");
        assert_eq!(rec(&app, &skip_id)["status"], "acted");
        assert_eq!(rec(&app, &dismiss_id)["status"], "dismissed");
    }
}

/// An edit saved the way Obsidian on Windows saves it (a byte-order mark,
/// CRLF line endings, plain and block YAML values) goes through; a file
/// whose frontmatter is not YAML fails by its name and line, and is kept.
#[test]
fn push_reads_frontmatter_as_editors_save_it() {
    for backend in BACKENDS {
        let b = BackendEnv::new(backend);
        let app = App::start("spin.toml", &test_env(&b, None));
        let [(skip_id, skip_art), (_, broken_art)] = two_recs(&app);
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().join("vault");
        pull(&app, &d);
        let windows = |text: String| format!("\u{feff}{}", text.replace('\n', "\r\n"));
        let md = read(&d, &skip_art)
            .replace("status: \"open\"", "status: skipped\noutcome_note: |\n  Travelling all week.\n  Back on Monday.");
        std::fs::write(d.join(&skip_art), windows(md)).unwrap();
        let broken = read(&d, &broken_art).replace("status: \"open\"", "status: dismissed\nnote: a: b");
        let line = broken.lines().position(|l| l == "note: a: b").unwrap() + 1;
        std::fs::write(d.join(&broken_art), windows(broken)).unwrap();
        let (ok, out) = push(&app, &d);
        assert!(!ok, "a failed file fails the push: {out}");
        assert!(out.contains(&format!("sent     {skip_art}: {skip_id} is acted")), "{backend:?}: {out}");
        assert!(
            out.contains(&format!("{broken_art}: its frontmatter could not be read (line {line}:")),
            "{backend:?}: {out}"
        );
        let skipped = rec(&app, &skip_id);
        assert_eq!(
            (skipped["acted_disposition"].as_str(), skipped["outcome_note"].as_str()),
            (Some("skipped"), Some("Travelling all week.\nBack on Monday.")),
            "{skipped}"
        );
        assert!(read(&d, &broken_art).contains("note: a: b"), "the broken file is kept as the principal left it");
    }
}

/// A loopback address nothing listens on.
fn dead_url() -> String {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    format!("http://{}", l.local_addr().unwrap())
}

/// Without `--url`, pull and push reach the app at `MNEME_URL` (a trailing
/// slash is fine); `--url` wins over it. (The embedded backend: the
/// address is the client's business, not the store's.)
#[test]
fn without_url_pull_and_push_use_mneme_url() {
    let b = BackendEnv::new(Backend::Embedded);
    let mut env = test_env(&b, None);
    env.push(("SPIN_VARIABLE_INGEST_TOKEN".into(), INGEST.into()));
    let app = App::start("spin.toml", &env);
    ingest(&app, "Alice", "2026-11-20");
    let ke = "Knowledge/KE-0001.md";
    let dead = dead_url();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().join("vault");

    // MNEME_URL pointing nowhere: the pull fails naming that address, and
    // writes nothing.
    let (ok, out) = vault_at("pull", &d, Some(TEST_KEY), None, Some(&dead));
    assert!(!ok && out.contains(&format!("{dead}/vault/export")), "{out}");
    assert!(!d.join(ke).exists());
    // At the app: the pull writes the vault.
    let (ok, out) = vault_at("pull", &d, Some(TEST_KEY), None, Some(&format!("{}/", app.url)));
    assert!(ok && out.contains(&format!("wrote    {ke}")), "{out}");
    assert_eq!(read(&d, ke), exported(&app, ke));
    // `--url` wins over MNEME_URL.
    let (ok, out) = vault_at("pull", &d, Some(TEST_KEY), Some(&app.url), Some(&dead));
    assert!(ok && out.contains("0 written, 1 unchanged"), "{out}");
    let (ok, out) = vault_at("pull", &d, Some(TEST_KEY), Some(&dead), Some(&app.url));
    assert!(!ok && out.contains(&format!("{dead}/vault/export")), "{out}");

    // Push too: an edit of an entry goes back to the store's copy, which
    // push reads from MNEME_URL.
    let entry = read(&d, ke);
    edit(&d, ke, "Postgres", "MySQL");
    let (ok, out) = vault_at("push", &d, Some(TEST_KEY), None, Some(&dead));
    assert!(!ok && out.contains(&dead), "{out}");
    assert!(read(&d, ke).contains("MySQL"), "nothing reached the app, nothing changed here");
    let (ok, out) = vault_at("push", &d, Some(TEST_KEY), None, Some(&app.url));
    assert!(ok && out.contains(&format!("restored {ke}")), "{out}");
    assert_eq!(read(&d, ke), entry);
}
