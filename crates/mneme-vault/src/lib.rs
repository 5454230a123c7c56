//! `mneme vault pull <dir>` and `mneme vault push <dir>`: the vault
//! (knowledge entries and rx artifacts) as a local folder that opens as an
//! Obsidian vault, synced with a running Mneme through its API.
//!
//! The store is the source of truth. Pull writes what the store holds and
//! leaves files that are already the same untouched. It never overwrites a
//! file the principal changed since the last pull: that is what push is
//! for. Push sends back the one thing the design lets the principal change
//! in a file, a rec's `status` (snoozed, acted, skipped or dismissed) with
//! its details. It goes through the rec API and its rules, then pulls the
//! file again, so every other edit goes back to what the store says; the
//! principal's version of a file it replaces is kept under
//! `.mneme/replaced/`.
//!
//! `.mneme/vault.json` in the folder remembers, per file, the hash of the
//! content last pulled and the rec status it showed. That is how pull tells
//! a principal's edit from a stale copy and how push finds the edits. It is
//! saved after every change a push sends, so a push cut short never sends
//! the same change twice.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Component, Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

pub mod frontmatter;

const STATE: &str = ".mneme/vault.json";
const REPLACED: &str = ".mneme/replaced";

/// Where the app is and the key that opens it.
pub struct Remote {
    pub url: String,
    api_key: String,
    agent: ureq::Agent,
}

/// What the last pull wrote of one file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Pulled {
    pub sha256: String,
    /// The rec status in its frontmatter, for a rec artifact.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
}

#[derive(Debug, Default, Serialize, Deserialize)]
pub struct State {
    pub files: BTreeMap<String, Pulled>,
}

fn sha(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

fn pulled(content: &[u8]) -> Pulled {
    let status = std::str::from_utf8(content)
        .ok()
        .and_then(|md| frontmatter::parse(md).ok().flatten())
        .and_then(|f| f.get("status").and_then(Value::as_str).map(str::to_string));
    Pulled { sha256: sha(content), status }
}

/// A store path as a relative path inside the vault, or `None` when it
/// could leave the folder (absolute, `..`, empty) or hides in `.mneme`.
pub fn safe_path(path: &str) -> Option<PathBuf> {
    let p = Path::new(path);
    let ok = !path.is_empty()
        && p.components().all(|c| matches!(c, Component::Normal(_)))
        && p.components().next().is_some_and(|c| c.as_os_str() != ".mneme");
    ok.then(|| p.to_path_buf())
}

/// What pull does with one file the store holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PullAction {
    /// Missing locally, or an unedited older copy: write the store's.
    Write,
    /// Already the store's content: untouched.
    Same,
    /// Changed by the principal since the last pull: kept for push.
    KeepEdited,
}

/// `local` is the file on disk, `last` what the last pull wrote there,
/// `force` the hash of a local version push has dealt with (the file is
/// replaced only if it still holds that version).
pub fn pull_action(local: Option<&[u8]>, store: &[u8], last: Option<&Pulled>, force: Option<&str>) -> PullAction {
    match local {
        None => PullAction::Write,
        Some(l) if l == store => PullAction::Same,
        Some(l) if last.is_some_and(|p| p.sha256 == sha(l)) || force.is_some_and(|f| f == sha(l)) => PullAction::Write,
        Some(_) => PullAction::KeepEdited,
    }
}

/// The rec status a requested one leads to: skipping is a kind of acting.
fn resulting(status: &str) -> &str {
    if status == "skipped" { "acted" } else { status }
}

/// A rec id as the API accepts it in a path.
fn valid_id(id: &str) -> bool {
    (1..=64).contains(&id.len()) && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
}

/// One change for the rec API: `POST path` with `body`.
#[derive(Debug, Clone, PartialEq)]
pub struct Change {
    pub rec_id: String,
    pub path: String,
    pub body: Value,
}

/// The change an edited artifact asks for: `Ok(None)` when its status is
/// as pulled (only parts the store owns changed), `Err` when the edit is
/// not one the design allows or lacks a detail.
pub fn change_for(local_md: &str, last_status: Option<&str>) -> Result<Option<Change>, String> {
    let fields = match frontmatter::parse(local_md) {
        Ok(f) => f.unwrap_or_default(),
        Err(e) => return Err(format!("its frontmatter could not be read ({e})")),
    };
    let field = |k: &str| fields.get(k).cloned();
    // Trimmed: a YAML block value keeps its last line break.
    let text = |k: &str| field(k).and_then(|v| v.as_str().map(|t| t.trim().to_string()));
    let status = text("status");
    if status.as_deref().map(resulting) == last_status {
        return Ok(None);
    }
    let Some(status) = status else {
        return Err("the frontmatter lost its `status` line".into());
    };
    if !matches!(last_status, Some("open" | "snoozed")) {
        return Err(format!(
            "only an open or snoozed rec's status can change here (this file's was {})",
            last_status.unwrap_or("none")
        ));
    }
    let rec_id = match field("id") {
        Some(Value::String(id)) if valid_id(&id) => id,
        Some(Value::String(id)) if !id.is_empty() => return Err(format!("the store `id` {id:?} is not a rec id")),
        _ => return Err("this artifact has no store `id` to change".into()),
    };
    let note = text("outcome_note");
    let (path, body) = match status.as_str() {
        "snoozed" => match field("snooze_days").and_then(|v| v.as_i64()) {
            Some(days) => (format!("/v1/rx/recs/{rec_id}/snooze"), json!({"days": days})),
            None => return Err("`status: snoozed` needs `snooze_days: 1` to `7` beside it".into()),
        },
        "acted" | "skipped" | "dismissed" => {
            let disposition = match status.as_str() {
                "acted" => text("disposition").unwrap_or_else(|| "acted_as_prescribed".into()),
                other => other.to_string(),
            };
            if status == "acted" && !matches!(disposition.as_str(), "acted_as_prescribed" | "acted_modified") {
                return Err(format!(
                    "`disposition: {disposition}` does not go with `status: acted`: use acted_as_prescribed or acted_modified"
                ));
            }
            let mut body = json!({"disposition": disposition});
            if let Some(fit) = field("subjective_fit_1_5") {
                body["subjective_fit_1_5"] = fit;
            }
            if let Some(n) = note {
                body["outcome_note"] = json!(n);
            }
            (format!("/v1/rx/recs/{rec_id}/disposition"), body)
        }
        other => {
            return Err(format!(
                "`status: {other}` is not a change you can make: use snoozed, acted, skipped or dismissed"
            ));
        }
    };
    Ok(Some(Change { rec_id, path, body }))
}

impl Remote {
    /// `--url`, else `MNEME_URL`, else the runner's default address; the
    /// key from `MNEME_API_KEY` only, so it never shows in a process list or
    /// a shell history.
    pub fn from_env(url: Option<String>) -> Result<Remote> {
        let url = url
            .or_else(|| std::env::var("MNEME_URL").ok())
            .unwrap_or_else(|| "http://127.0.0.1:3000".into())
            .trim_end_matches('/')
            .to_string();
        let Ok(api_key) = std::env::var("MNEME_API_KEY") else {
            bail!("set MNEME_API_KEY to the app's API key (the `api_key` variable)");
        };
        // No redirects: one would drop the key and end in a puzzling 401.
        let agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .max_redirects(0)
            .timeout_global(Some(Duration::from_secs(120)))
            .build()
            .into();
        Ok(Remote { url, api_key, agent })
    }

    /// The app's address, without a trailing slash.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// `(status, body)` of one request.
    fn send(&self, method: &str, path: &str, body: Option<&Value>) -> Result<(u16, Vec<u8>)> {
        match body {
            Some(b) => self.request(
                method,
                path,
                &[("content-type", "application/json".into())],
                Some(b.to_string().into_bytes()),
            ),
            None => self.request(method, path, &[], None),
        }
    }

    /// `(status, body)` of one request with the key, `headers` and `body`
    /// (`mneme mcp` forwards a client's messages through it).
    pub fn request(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, String)],
        body: Option<Vec<u8>>,
    ) -> Result<(u16, Vec<u8>)> {
        let url = format!("{}{path}", self.url);
        let mut req = ureq::http::Request::builder()
            .method(method)
            .uri(&url)
            .header("authorization", format!("Bearer {}", self.api_key));
        for (k, v) in headers {
            req = req.header(*k, v);
        }
        let resp = match body {
            Some(b) => self.agent.run(req.body(b)?),
            None => self.agent.run(req.body(())?),
        }
        .with_context(|| format!("{method} {url}"))?;
        let status = resp.status().as_u16();
        if (300..400).contains(&status) {
            let to = resp.headers().get("location").and_then(|l| l.to_str().ok()).unwrap_or("?").to_string();
            bail!("{method} {url} was redirected to {to}: pass that address as --url");
        }
        let bytes = resp.into_body().with_config().limit(512 << 20).read_to_vec()?;
        Ok((status, bytes))
    }
}

/// An API error body's message, or the status.
fn api_error(status: u16, body: &[u8]) -> String {
    let v: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    match (v["error"]["code"].as_str(), v["error"]["message"].as_str()) {
        (Some(c), Some(m)) => format!("{status} {c}: {m}"),
        _ => format!("HTTP {status}"),
    }
}

fn load_state(dir: &Path) -> Result<State> {
    match std::fs::read(dir.join(STATE)) {
        Ok(b) => serde_json::from_slice(&b).with_context(|| format!("reading {}", dir.join(STATE).display())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(State::default()),
        Err(e) => Err(e).context("reading the vault state"),
    }
}

/// Writes through a synced temporary file and a rename, so a crash leaves
/// the old file or the new one, never half of one.
fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    use std::io::Write;
    let parent = path.parent().context("a vault file has a folder")?;
    std::fs::create_dir_all(parent).with_context(|| format!("creating {}", parent.display()))?;
    let tmp = parent.join(format!(".{}.mneme-tmp", path.file_name().unwrap_or_default().to_string_lossy()));
    let mut f = std::fs::File::create(&tmp).with_context(|| format!("writing {}", tmp.display()))?;
    f.write_all(bytes).and_then(|()| f.sync_all()).with_context(|| format!("writing {}", tmp.display()))?;
    std::fs::rename(&tmp, path).with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}

fn save_state(dir: &Path, state: &State) -> Result<()> {
    write_atomic(&dir.join(STATE), &serde_json::to_vec_pretty(state)?)
}

/// What a pull did, by file.
#[derive(Debug, Default)]
pub struct PullReport {
    pub written: Vec<String>,
    pub unchanged: usize,
    /// Changed here since the last pull.
    pub kept: Vec<String>,
    /// Here before any pull wrote them, and not the store's content.
    pub foreign: Vec<String>,
    pub removed: Vec<String>,
}

/// Pulls the vault into `dir`. `force` maps files push has dealt with to
/// the hash of the local version it saw: such a file is replaced if it
/// still holds that version.
pub fn pull(remote: &Remote, dir: &Path, force: &BTreeMap<String, String>) -> Result<PullReport> {
    let (status, body) = remote.send("GET", "/vault/export", None)?;
    if status != 200 {
        bail!("the vault export failed: {}", api_error(status, &body));
    }
    let files = mneme_knowledge::tar::entries(&body).map_err(|e| anyhow::anyhow!("the vault export: {e}"))?;
    let mut checked = Vec::with_capacity(files.len());
    for (path, content) in files {
        let Some(rel) = safe_path(&path) else { bail!("the store sent a path outside the vault: {path:?}") };
        checked.push((path, dir.join(rel), content));
    }
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let mut state = load_state(dir)?;
    let mut report = PullReport::default();
    // What was written is recorded even when a later file fails.
    let applied = apply(&checked, dir, &mut state, force, &mut report);
    let saved = save_state(dir, &state);
    applied.and(saved)?;
    Ok(report)
}

fn apply(
    files: &[(String, PathBuf, Vec<u8>)],
    dir: &Path,
    state: &mut State,
    force: &BTreeMap<String, String>,
    report: &mut PullReport,
) -> Result<()> {
    let mut seen = BTreeSet::new();
    for (path, full, content) in files {
        seen.insert(path.clone());
        let local = std::fs::read(full).ok();
        let last = state.files.get(path);
        match pull_action(local.as_deref(), content, last, force.get(path).map(String::as_str)) {
            PullAction::Write => {
                write_atomic(full, content)?;
                report.written.push(path.clone());
            }
            PullAction::Same => report.unchanged += 1,
            PullAction::KeepEdited if last.is_none() => {
                report.foreign.push(path.clone());
                continue;
            }
            PullAction::KeepEdited => {
                report.kept.push(path.clone());
                continue;
            }
        }
        state.files.insert(path.clone(), pulled(content));
    }
    let gone: Vec<String> = state.files.keys().filter(|p| !seen.contains(*p)).cloned().collect();
    for path in gone {
        let full = safe_path(&path).map(|r| dir.join(r));
        let local = full.as_ref().and_then(|f| std::fs::read(f).ok());
        let unedited = local.as_deref().is_none_or(|l| {
            let h = sha(l);
            state.files.get(&path).is_some_and(|p| p.sha256 == h) || force.get(&path).is_some_and(|f| *f == h)
        });
        if unedited {
            if let (Some(f), Some(_)) = (&full, &local) {
                std::fs::remove_file(f).with_context(|| format!("removing {}", f.display()))?;
            }
            state.files.remove(&path);
            report.removed.push(path);
        } else {
            report.kept.push(path);
        }
    }
    Ok(())
}

/// What a push did, by file.
#[derive(Debug, Default)]
pub struct PushReport {
    pub sent: Vec<(String, String)>,
    pub restored: Vec<String>,
    pub failed: Vec<(String, String)>,
    pub pull: PullReport,
}

pub fn push(remote: &Remote, dir: &Path) -> Result<PushReport> {
    let mut state = load_state(dir)?;
    if state.files.is_empty() {
        bail!("{} holds no pulled vault: run `mneme vault pull {}` first", dir.display(), dir.display());
    }
    let mut report = PushReport::default();
    let mut force = BTreeMap::new();
    let paths: Vec<(String, Pulled)> = state.files.iter().map(|(p, l)| (p.clone(), l.clone())).collect();
    for (path, last) in paths {
        let Some(full) = safe_path(&path).map(|r| dir.join(r)) else { continue };
        let Ok(local) = std::fs::read(&full) else { continue };
        let hash = sha(&local);
        if hash == last.sha256 {
            continue;
        }
        let Ok(md) = std::str::from_utf8(&local) else {
            report.failed.push((path, "the file is not UTF-8 text".into()));
            continue;
        };
        let change = match change_for(md, last.status.as_deref()) {
            Ok(Some(c)) => c,
            Ok(None) => {
                keep_replaced(dir, &path, &local)?;
                report.restored.push(path.clone());
                force.insert(path, hash);
                continue;
            }
            Err(why) => {
                report.failed.push((path, why));
                continue;
            }
        };
        match remote.send("POST", &change.path, Some(&change.body)) {
            Ok((200, body)) => {
                let v: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
                let now = v["status"].as_str().unwrap_or("changed").to_string();
                report.sent.push((path.clone(), format!("{} is {now}", change.rec_id)));
                // Recorded at once: a push cut short after this point
                // finds the status already sent and does not send it again.
                if let Some(p) = state.files.get_mut(&path) {
                    p.status = Some(now);
                }
                save_state(dir, &state)?;
                force.insert(path, hash);
            }
            Ok((status, body)) => report.failed.push((path, api_error(status, &body))),
            Err(e) => report.failed.push((path, format!("{e:#}"))),
        }
    }
    report.pull = pull(remote, dir, &force)?;
    Ok(report)
}

/// Keeps the principal's version of a file push is about to replace.
fn keep_replaced(dir: &Path, path: &str, local: &[u8]) -> Result<()> {
    let rel = safe_path(path).context("a vault path")?;
    write_atomic(&dir.join(REPLACED).join(rel), local)
}

pub fn print_pull(r: &PullReport) {
    for p in &r.written {
        println!("wrote    {p}");
    }
    for p in &r.removed {
        println!("removed  {p}");
    }
    for p in &r.kept {
        println!(
            "kept     {p} (changed here since the last pull: `mneme vault push` sends a rec's status; \
             other changes go back to the store's copy)"
        );
    }
    for p in &r.foreign {
        println!("kept     {p} (here before any pull and not the store's copy: move it aside, then pull)");
    }
    println!(
        "{} written, {} unchanged, {} removed, {} kept with local changes",
        r.written.len(),
        r.unchanged,
        r.removed.len(),
        r.kept.len() + r.foreign.len()
    );
}

pub fn print_push(r: &PushReport) {
    for (p, what) in &r.sent {
        println!("sent     {p}: {what}");
    }
    for p in &r.restored {
        println!("restored {p} (only what the store owns had changed; your version is in {REPLACED}/{p})");
    }
    for (p, why) in &r.failed {
        println!("failed   {p}: {why}");
    }
    println!("{} sent, {} restored, {} failed", r.sent.len(), r.restored.len(), r.failed.len());
    print_pull(&r.pull);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(status: &str, extra: &str) -> String {
        format!("---\nid: \"rec-1\"\ndoor: \"fitness\"\nstatus: \"{status}\"\n{extra}---\n\n## TL;DR\nbody\n")
    }

    #[test]
    fn paths_stay_inside_the_vault() {
        assert_eq!(safe_path("Fitness/rx/rx-2026-11-22-01.md"), Some(PathBuf::from("Fitness/rx/rx-2026-11-22-01.md")));
        for bad in ["", "/etc/passwd", "../x.md", "a/../../x.md", "./a.md", ".mneme/vault.json"] {
            assert_eq!(safe_path(bad), None, "{bad}");
        }
    }

    #[test]
    fn pull_writes_missing_and_stale_files_and_keeps_edits() {
        let store = b"new";
        let last = pulled(b"old");
        assert_eq!(pull_action(None, store, None, None), PullAction::Write);
        assert_eq!(pull_action(Some(b"new"), store, Some(&last), None), PullAction::Same);
        assert_eq!(pull_action(Some(b"old"), store, Some(&last), None), PullAction::Write, "unedited, stale");
        assert_eq!(pull_action(Some(b"mine"), store, Some(&last), None), PullAction::KeepEdited);
        assert_eq!(pull_action(Some(b"mine"), store, None, None), PullAction::KeepEdited, "never pulled here");
        let seen = sha(b"mine");
        assert_eq!(
            pull_action(Some(b"mine"), store, Some(&last), Some(&seen)),
            PullAction::Write,
            "push dealt with it"
        );
        assert_eq!(
            pull_action(Some(b"mine, edited again"), store, Some(&last), Some(&seen)),
            PullAction::KeepEdited,
            "edited again while push ran"
        );
    }

    #[test]
    fn a_status_edit_becomes_one_rec_api_call() {
        let c = change_for(&rec("snoozed", "snooze_days: 3\n"), Some("open")).unwrap().unwrap();
        assert_eq!((c.path.as_str(), &c.body), ("/v1/rx/recs/rec-1/snooze", &json!({"days": 3})));
        let c = change_for(&rec("acted", "subjective_fit_1_5: 4\noutcome_note: \"did half\"\n"), Some("open"))
            .unwrap()
            .unwrap();
        assert_eq!(c.path, "/v1/rx/recs/rec-1/disposition");
        assert_eq!(
            c.body,
            json!({"disposition": "acted_as_prescribed", "subjective_fit_1_5": 4, "outcome_note": "did half"})
        );
        let c = change_for(&rec("acted", "disposition: acted_modified\nsubjective_fit_1_5: 2\n"), Some("snoozed"))
            .unwrap()
            .unwrap();
        assert_eq!(c.body["disposition"], "acted_modified");
        for s in ["skipped", "dismissed"] {
            assert_eq!(change_for(&rec(s, ""), Some("open")).unwrap().unwrap().body, json!({"disposition": s}));
        }
        assert_eq!(change_for(&rec("skipped", ""), Some("acted")), Ok(None), "a skip shows as acted once sent");
    }

    #[test]
    fn edits_the_design_does_not_allow_are_refused_with_the_reason() {
        assert_eq!(change_for(&rec("open", ""), Some("open")), Ok(None), "status as pulled");
        assert!(change_for(&rec("snoozed", ""), Some("open")).unwrap_err().contains("snooze_days"));
        assert!(change_for(&rec("maybe", ""), Some("open")).unwrap_err().contains("not a change you can make"));
        assert!(change_for(&rec("open", ""), Some("acted")).unwrap_err().contains("only an open or snoozed"));
        assert!(change_for(&rec("dismissed", ""), None).unwrap_err().contains("only an open or snoozed"));
        let no_id = rec("dismissed", "").replace("id: \"rec-1\"\n", "id: null\n");
        assert!(change_for(&no_id, Some("open")).unwrap_err().contains("no store `id`"));
        let lost = rec("open", "").replace("status: \"open\"\n", "");
        assert!(change_for(&lost, Some("open")).unwrap_err().contains("lost its `status`"));
        for id in ["../tasks", "a/b", "x?y=1", "é"] {
            let odd = rec("dismissed", "").replace("\"rec-1\"", &format!("{id:?}"));
            assert!(change_for(&odd, Some("open")).unwrap_err().contains("is not a rec id"), "{id}");
        }
        let wrong = rec("acted", "disposition: dismissed\n");
        assert!(change_for(&wrong, Some("open")).unwrap_err().contains("does not go with `status: acted`"));
        let broken = rec("acted", "outcome_note: \"unclosed\n");
        let why = change_for(&broken, Some("open")).unwrap_err();
        assert!(why.contains("frontmatter could not be read (line "), "{why}");
    }

    #[test]
    fn an_edit_saved_by_obsidian_on_windows_is_read() {
        // CRLF endings, a byte-order mark, a plain value and a block value.
        let md = rec("acted", "disposition: acted_modified\noutcome_note: |\n  Two sessions.\n  Knee fine.\n")
            .replace("status: \"acted\"", "status: acted")
            .replace('\n', "\r\n");
        let c = change_for(&format!("\u{feff}{md}"), Some("open")).unwrap().unwrap();
        assert_eq!(c.body, json!({"disposition": "acted_modified", "outcome_note": "Two sessions.\nKnee fine."}));
        let snooze = rec("snoozed", "snooze_days: '3'\n").replace('\n', "\r\n");
        assert!(change_for(&snooze, Some("open")).unwrap_err().contains("snooze_days"), "a quoted number is text");
        let snooze = rec("snoozed", "snooze_days: 3\n").replace('\n', "\r\n");
        assert_eq!(change_for(&snooze, Some("open")).unwrap().unwrap().body, json!({"days": 3}));
    }
}
