//! `--mneme-local-model`: a local OpenAI-compatible model server started and
//! stopped with the app (D-L1). The server is the project's
//! `local-model/server.mjs` (node-llama-cpp's prebuilt CPU runtime), found
//! beside the manifest or at `MNEME_LOCAL_MODEL_SERVER`; it listens on a
//! free loopback port and its address is offered to the app as the variable
//! `llm_url` (and its model as `llm_model`), unless `llm_url` is configured:
//! a configured endpoint always wins.

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use anyhow::{Context, Result, bail};

/// The light model's budget for triage and the tie-breaker on a CPU model:
/// a triage on the 1.5B model took 1.5–2.6 s on 2 cores (BENCHMARKS, "A
/// real model"), with room for a busy machine.
pub const LIGHT_TIMEOUT_MS: u32 = 6_000;

/// How long the server may take to load its model and listen.
const READY_TIMEOUT: Duration = Duration::from_secs(180);

/// A running local model server; stopped (SIGTERM, then SIGKILL) when
/// dropped, and by the kernel if the runner dies first.
pub struct LocalModel {
    child: Child,
    pub url: String,
    pub name: String,
}

/// The model file `spec` names: a path to a file, or the name of a model
/// `scripts/install-model.sh` installed into `MNEME_LLM_DIR` (default
/// `~/.cache/mneme/llm`).
pub fn model_file(spec: &str) -> Result<PathBuf> {
    let direct = PathBuf::from(spec);
    if direct.is_file() {
        return Ok(direct);
    }
    let dir = std::env::var_os("MNEME_LLM_DIR")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/mneme/llm")));
    let installed = dir.map(|d| d.join(format!("{spec}.gguf")));
    match installed {
        Some(p) if p.is_file() => Ok(p),
        _ => bail!(
            "no model file `{spec}`: give a path to a .gguf file, or install one with \
             scripts/install-model.sh {spec}"
        ),
    }
}

/// Where the server script is: `MNEME_LOCAL_MODEL_SERVER`, else
/// `local-model/server.mjs` beside the manifest.
fn server_script(app_dir: &Path) -> Result<PathBuf> {
    let script = std::env::var_os("MNEME_LOCAL_MODEL_SERVER")
        .map_or_else(|| app_dir.join("local-model/server.mjs"), PathBuf::from);
    if !script.is_file() {
        bail!("the local model server {} is missing", script.display());
    }
    if !script.parent().is_some_and(|d| d.join("node_modules/node-llama-cpp").is_dir()) {
        bail!("the local model's runtime is not installed: run scripts/install-model.sh");
    }
    Ok(script)
}

/// Whether the variable `name` is set (not blank) by a provider above the
/// manifest's default: `--variable`, `SPIN_VARIABLE_<NAME>`, or `.env`.
pub fn configured(name: &str, cli: &HashMap<String, String>, dotenv: &HashMap<String, String>) -> bool {
    let set = |v: Option<&String>| v.is_some_and(|v| !v.trim().is_empty());
    let env = mneme_manifest::variables::env_name(name);
    set(cli.get(name)) || set(std::env::var(&env).ok().as_ref()) || set(dotenv.get(&env))
}

impl LocalModel {
    /// Starts the server on `model` and waits until it serves.
    pub fn start(app_dir: &Path, model: &Path, threads: usize) -> Result<Self> {
        let script = server_script(app_dir)?;
        let name = model.file_stem().and_then(|s| s.to_str()).unwrap_or("local").to_string();
        let mut cmd = Command::new(std::env::var_os("MNEME_NODE").unwrap_or_else(|| "node".into()));
        cmd.arg(&script)
            .arg("--model")
            .arg(model)
            .args(["--listen", "127.0.0.1:0", "--name", &name, "--threads", &threads.to_string()])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        #[cfg(target_os = "linux")]
        {
            use std::os::unix::process::CommandExt;
            // SAFETY: prctl only sets this child's parent-death signal; it
            // runs between fork and exec and touches no shared state.
            unsafe {
                cmd.pre_exec(|| {
                    libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM);
                    Ok(())
                });
            }
        }
        let mut child = cmd.spawn().context("starting the local model server (is Node.js 20+ installed?)")?;
        let stdout = child.stdout.take().expect("piped stdout");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut sent = false;
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if !sent && let Some(url) = serving_url(&line) {
                    let _ = tx.send(url);
                    sent = true;
                }
                eprintln!("{line}");
            }
        });
        let mut model = LocalModel { child, url: String::new(), name };
        match rx.recv_timeout(READY_TIMEOUT) {
            Ok(url) => {
                model.url = url;
                Ok(model)
            }
            Err(_) => {
                let status = model.child.try_wait().ok().flatten();
                match status {
                    Some(s) => bail!("the local model server exited before serving ({s})"),
                    None => bail!("the local model server did not serve within {} s", READY_TIMEOUT.as_secs()),
                }
            }
        }
    }
}

/// The URL in the server's ready line: `local-model: serving NAME at URL (…)`.
fn serving_url(line: &str) -> Option<String> {
    let rest = line.strip_prefix("local-model: serving ")?;
    let (_, after) = rest.split_once(" at ")?;
    let url = after.split_whitespace().next()?;
    url.starts_with("http://").then(|| url.to_string())
}

impl Drop for LocalModel {
    fn drop(&mut self) {
        if let Ok(Some(_)) = self.child.try_wait() {
            return;
        }
        // SAFETY: kill with SIGTERM on our own child's pid, which has not
        // been reaped (try_wait above saw it running).
        unsafe {
            libc::kill(self.child.id() as libc::pid_t, libc::SIGTERM);
        }
        for _ in 0..100 {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ready_line_gives_the_url() {
        assert_eq!(
            serving_url("local-model: serving qwen at http://127.0.0.1:40000/v1 (loaded in 5.1 s, 2 threads)"),
            Some("http://127.0.0.1:40000/v1".into())
        );
        assert_eq!(serving_url("local-model: loading"), None);
        assert_eq!(serving_url("something else"), None);
    }

    #[test]
    fn a_configured_llm_url_wins() {
        let mut cli = HashMap::new();
        let dotenv = HashMap::new();
        // The test process's own environment may not name one.
        if std::env::var("SPIN_VARIABLE_LLM_URL").is_err() {
            assert!(!configured("llm_url", &cli, &dotenv));
            cli.insert("llm_url".to_string(), " ".to_string());
            assert!(!configured("llm_url", &cli, &dotenv), "blank is not configured");
        }
        cli.insert("llm_url".to_string(), "http://h/v1".to_string());
        assert!(configured("llm_url", &cli, &dotenv));
        let dotenv = HashMap::from([("SPIN_VARIABLE_LLM_URL".to_string(), "http://d/v1".to_string())]);
        assert!(configured("llm_url", &HashMap::new(), &dotenv));
    }

    #[test]
    fn a_missing_model_names_the_install_command() {
        let e = model_file("no-such-model-here").unwrap_err().to_string();
        assert!(e.contains("scripts/install-model.sh no-such-model-here"), "{e}");
    }
}
