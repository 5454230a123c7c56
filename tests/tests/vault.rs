//! The vault sync, `mneme vault pull|push`, against the app through the
//! runner over HTTP, on both storage backends: a pull writes the knowledge
//! entries and rx artifacts and a second pull touches nothing; push sends
//! a rec's status edits through the rec API and its rules, and everything
//! else in a file goes back to what the store says; refused edits stay in
//! the file with the API's reason and a failing exit.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, SystemTime};

use mneme_e2e::{App, BACKENDS, BackendEnv, TEST_KEY, repo_root, test_env};
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
    let mut cmd = Command::new(repo_root().join("target/release/mneme"));
    cmd.args(["vault", verb]).arg(dir).args(["--url", &app.url]).env_remove("MNEME_API_KEY");
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
