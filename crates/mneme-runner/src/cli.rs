//! `mneme up`'s flags: `spin up`'s, under Spin's names and with Spin's
//! parsing and refusals (read in spinframework/spin at 94a8fc8a:
//! `src/commands/up.rs`, `crates/trigger/src/cli.rs`,
//! `crates/trigger-http/src/lib.rs`, `crates/runtime-factors/src/lib.rs`,
//! `crates/variables-static`), plus the runner's own extras, each named
//! `--mneme-…` so that no one takes it for Spin's.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result, bail};

use crate::instance;

/// The application manifest's default name, as Spin's.
pub const DEFAULT_MANIFEST_FILE: &str = "spin.toml";

#[derive(clap::Args)]
pub struct UpArgs {
    /// The application to run: a manifest (spin.toml) file, or a directory
    /// containing a spin.toml file. If omitted, it defaults to "spin.toml"
    /// here or in a parent directory.
    #[arg(short = 'f', long = "from", visible_alias = "file")]
    pub from: Option<String>,
    /// Pass an environment variable (key=value) to all components of the
    /// application.
    #[arg(short = 'e', long = "env", value_parser = parse_env_var)]
    pub env: Vec<(String, String)>,
    /// IP address and port to listen on (port 0 picks a free port).
    #[arg(long, env = "SPIN_HTTP_LISTEN_ADDR", default_value = "127.0.0.1:3000")]
    pub listen: String,
    /// Configuration file for config providers and wasmtime config.
    #[arg(long = "runtime-config-file", env = "RUNTIME_CONFIG_FILE")]
    pub runtime_config_file: Option<PathBuf>,
    /// Set the application state directory path. If unset, defaults to
    /// `.spin/` beside the manifest; an empty value means the default.
    #[arg(long = "state-dir")]
    pub state_dir: Option<String>,
    /// Set a variable: KEY=VALUE, KEY=@FILE (the value is the file's
    /// text), @FILE.json or @FILE.toml (a flat map of names to strings).
    /// Consulted before every other provider; if a key is given several
    /// times, the last value wins.
    #[arg(long = "variable", value_name = "KEY=VALUE | KEY=@FILE | @FILE.json | @FILE.toml")]
    pub variable: Vec<String>,
    /// The most memory one instance may use, in bytes (Spin's flag; the
    /// runner's default is 256 MiB).
    #[arg(long = "max-instance-memory", env = "SPIN_MAX_INSTANCE_MEMORY", default_value_t = 256 << 20)]
    pub max_instance_memory: usize,
    /// Time limit of one request (`s`, `ms`, `us` or `ns`; a bare number
    /// is seconds; `a..b` draws per instance). Spin's flag; its default here
    /// is 420 s, above `/chat`'s own 360 s, so a long ACT loop ends its stream
    /// itself (D-F12).
    #[arg(long, default_value = "420s", value_parser = parse_duration_range)]
    pub request_timeout: instance::Range<Duration>,
    /// Most requests one instance serves before it is dropped (Spin's flag
    /// and its WASIp3 default; `a..b` draws per instance).
    #[arg(long, default_value = "128", value_parser = parse_usize_range)]
    pub max_instance_reuse_count: instance::Range<usize>,
    /// Most requests one instance serves at once (Spin's flag and its
    /// WASIp3 default).
    #[arg(long, default_value = "16", value_parser = parse_usize_range)]
    pub max_instance_concurrent_reuse_count: instance::Range<usize>,
    /// How long an idle instance is kept for reuse (Spin's flag and default).
    #[arg(long, default_value = "1s", value_parser = parse_duration_range)]
    pub idle_instance_timeout: instance::Range<Duration>,
    /// [mneme only] Largest request body the runner accepts, in bytes; the
    /// app enforces its own, smaller, limits whoever runs it.
    #[arg(long = "mneme-max-body-bytes", env = "MNEME_MAX_BODY_BYTES", default_value_t = 4 << 20)]
    pub mneme_max_body_bytes: usize,
    /// [mneme only] Print a line for every scheduled run; by default the
    /// console hears only of failures, recoveries and a summary of the runs
    /// every few minutes (`MNEME_TICK_SUMMARY_SECS`, 300).
    #[arg(long = "mneme-log-ticks")]
    pub mneme_log_ticks: bool,
    /// [mneme only] Start a local model server with the app and stop it
    /// with the app: a .gguf file, or the name of a model that
    /// scripts/install-model.sh installed (`qwen2.5-1.5b`). Its address
    /// becomes the variable `llm_url` unless `llm_url` is set (D-L1).
    #[arg(long = "mneme-local-model", env = "MNEME_LOCAL_MODEL", value_name = "FILE | NAME")]
    pub mneme_local_model: Option<String>,
    /// [mneme only] CPU threads the local model uses (default: all cores).
    #[arg(long = "mneme-local-model-threads", env = "MNEME_LOCAL_MODEL_THREADS")]
    pub mneme_local_model_threads: Option<usize>,
}

/// `spin up` flags this runner does not implement: refused by name, so a
/// Spin user learns at once instead of meeting clap's "unexpected argument".
const SPIN_FLAGS_NOT_SUPPORTED: [&str; 27] = [
    "--tls-cert",
    "--tls-key",
    "--find-free-port",
    "--http1-max-buf-size",
    "--format",
    "--log-dir",
    "--truncate-logs",
    "--disable-cache",
    "--cache",
    "--disable-pooling",
    "--debug-info",
    "--follow",
    "--quiet",
    "--key-value",
    "--sqlite",
    "--allow-transient-write",
    "--experimental-wasi-otel",
    "--profile",
    "--insecure",
    "--temp",
    "--cache-dir",
    "--direct-mounts",
    "--build",
    "--component-id",
    "--from-registry",
    "--from-file",
    "--experimental-wasm-feature",
];

/// Refuses a `spin up` flag the runner does not implement, naming it.
pub fn refuse_unsupported_spin_flags(args: &[String]) -> Result<()> {
    for a in args {
        let name = a.split_once('=').map_or(a.as_str(), |(n, _)| n);
        let short = match name {
            "-L" => Some("--log-dir"),
            "-q" => Some("--quiet"),
            "-k" => Some("--insecure"),
            "-c" => Some("--component-id"),
            _ => None,
        };
        if let Some(flag) = short.or_else(|| SPIN_FLAGS_NOT_SUPPORTED.iter().copied().find(|f| *f == name)) {
            bail!(
                "`{flag}` is a `spin up` flag that `mneme up` does not support; run the app under `spin up` to use it"
            );
        }
    }
    Ok(())
}

/// Spin's `--env` parser: split at the first `=`.
fn parse_env_var(s: &str) -> Result<(String, String), String> {
    s.split_once('=')
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .ok_or_else(|| "Environment variable must be of the form `key=value`".to_string())
}

/// Spin's range syntax: `N` or `A..B`.
fn parse_range<T>(s: &str, one: impl Fn(&str) -> Result<T, String>) -> Result<instance::Range<T>, String> {
    match s.split_once("..") {
        Some((a, b)) => Ok(instance::Range::Bounds(one(a)?, one(b)?)),
        None => Ok(instance::Range::Value(one(s)?)),
    }
}

fn parse_usize_range(s: &str) -> Result<instance::Range<usize>, String> {
    parse_range(s, |v| v.parse::<usize>().map_err(|e| format!("expected integer or range; got {s:?}; {e}")))
}

/// A duration as `spin up` reads one: a bare number is seconds, else a
/// number suffixed by `s`, `ms`, `us`, `μs` or `ns`.
pub fn parse_duration(v: &str) -> Result<Duration, String> {
    let bad = || format!("expected integer suffixed by `s`, `ms`, `us`, `μs`, or `ns`; got {v:?}");
    if let Ok(n) = v.parse::<u64>() {
        return Ok(Duration::from_secs(n));
    }
    let (num, unit): (&str, fn(u64) -> Duration) = if let Some(n) = v.strip_suffix("ms") {
        (n, Duration::from_millis)
    } else if let Some(n) = v.strip_suffix("us").or_else(|| v.strip_suffix("μs")) {
        (n, Duration::from_micros)
    } else if let Some(n) = v.strip_suffix("ns") {
        (n, Duration::from_nanos)
    } else if let Some(n) = v.strip_suffix('s') {
        (n, Duration::from_secs)
    } else {
        return Err(bad());
    };
    num.parse::<u64>().map(unit).map_err(|_| bad())
}

fn parse_duration_range(s: &str) -> Result<instance::Range<Duration>, String> {
    parse_range(s, parse_duration)
}

/// The manifest `-f` names, as Spin resolves it (`crates/common/src/paths.rs`,
/// `src/commands/up/app_source.rs`): a file as it is, a directory's
/// `spin.toml`; with no `-f`, `spin.toml` here or in a parent directory up to
/// the repository's root.
pub fn manifest_path(from: Option<&str>, cwd: &Path) -> Result<PathBuf> {
    let Some(source) = from else {
        let mut dir = Some(cwd);
        for _ in 0..20 {
            let Some(d) = dir else { break };
            let candidate = d.join(DEFAULT_MANIFEST_FILE);
            if candidate.is_file() {
                return Ok(candidate);
            }
            if d.join(".git").exists() {
                break;
            }
            dir = d.parent();
        }
        bail!(
            "Default file '{DEFAULT_MANIFEST_FILE}' not found. Run `mneme up --from <APPLICATION>`, or `mneme up --help` for usage."
        );
    };
    let path = cwd.join(source);
    if path.is_dir() {
        let file = path.join(DEFAULT_MANIFEST_FILE);
        if !file.is_file() {
            bail!("Directory {} does not contain a file named '{DEFAULT_MANIFEST_FILE}'", path.display());
        }
        return Ok(file);
    }
    if !path.exists() {
        bail!(
            "File or directory '{source}' not found. If you meant to load from a registry, use the `--from-registry` option."
        );
    }
    Ok(path)
}

/// The `--variable` values, read as Spin's static provider reads them
/// (`crates/variables-static/src/source.rs`); later values win.
pub fn cli_variables(sources: &[String], cwd: &Path) -> Result<HashMap<String, String>> {
    let read = |f: &str| {
        let p = cwd.join(f);
        std::fs::read_to_string(&p).with_context(|| format!("Failed to read {}.", p.display()))
    };
    let mut out = HashMap::new();
    for s in sources {
        if let Some(file) = s.strip_prefix('@') {
            let ext = Path::new(file).extension().and_then(|e| e.to_str());
            if !matches!(ext, Some("json" | "toml")) {
                bail!("variable files must end in .json or .toml");
            }
            let text = read(file)?;
            let map: HashMap<String, String> = if ext == Some("json") {
                serde_json::from_str(&text).with_context(|| format!("Failed to parse JSON from {file}."))?
            } else {
                toml::from_str(&text).with_context(|| format!("Failed to parse TOML from {file}."))?
            };
            out.extend(map);
        } else if let Some((key, value)) = s.split_once('=') {
            let value = match value.strip_prefix('@') {
                Some(file) => read(file)?,
                None => value.to_string(),
            };
            out.insert(key.to_string(), value);
        } else {
            bail!("variables must be in the form 'key=value' or '@file'");
        }
    }
    Ok(out)
}

/// The `.env` file Spin's environment provider falls back to (in the
/// working directory): `KEY=VALUE` lines, `#` comments, an optional
/// `export `, and values in single or double quotes. A missing file is no
/// file.
pub fn dotenv(path: &Path) -> Result<HashMap<String, String>> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(HashMap::new()),
        Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
    };
    let mut out = HashMap::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let line = line.strip_prefix("export ").unwrap_or(line);
        let Some((k, v)) = line.split_once('=') else {
            bail!("{}:{}: expected KEY=VALUE", path.display(), n + 1);
        };
        let v = v.trim();
        let v = [('"', '"'), ('\'', '\'')]
            .iter()
            .find_map(|(a, b)| v.strip_prefix(*a).and_then(|x| x.strip_suffix(*b)))
            .unwrap_or(v);
        out.insert(k.trim().to_string(), v.to_string());
    }
    Ok(out)
}

/// `--state-dir`: an empty value is no value.
pub fn state_dir(flag: Option<&str>) -> Option<PathBuf> {
    flag.filter(|s| !s.is_empty()).map(PathBuf::from)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manifests_resolve_as_spin_resolves_them() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join("app/sub")).unwrap();
        std::fs::create_dir_all(root.join("empty")).unwrap();
        std::fs::write(root.join("app/spin.toml"), "").unwrap();
        std::fs::write(root.join("app/other.toml"), "").unwrap();
        assert_eq!(manifest_path(Some("app"), root).unwrap(), root.join("app/spin.toml"));
        assert_eq!(manifest_path(Some("app/other.toml"), root).unwrap(), root.join("app/other.toml"));
        assert_eq!(manifest_path(None, &root.join("app/sub")).unwrap(), root.join("app/spin.toml"));
        let e = manifest_path(Some("empty"), root).unwrap_err().to_string();
        assert_eq!(e, format!("Directory {} does not contain a file named 'spin.toml'", root.join("empty").display()));
        let e = manifest_path(Some("nope.toml"), root).unwrap_err().to_string();
        assert_eq!(
            e,
            "File or directory 'nope.toml' not found. If you meant to load from a registry, use the `--from-registry` option."
        );
        std::fs::create_dir_all(root.join("repo/.git")).unwrap();
        let e = manifest_path(None, &root.join("repo")).unwrap_err().to_string();
        assert!(e.starts_with("Default file 'spin.toml' not found."), "{e}");
    }

    #[test]
    fn variables_read_as_spins_static_provider_reads_them() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        std::fs::write(d.join("key.txt"), "from-file").unwrap();
        std::fs::write(d.join("v.json"), r#"{"a": "1", "b": "2"}"#).unwrap();
        std::fs::write(d.join("v.toml"), "b = \"3\"\n").unwrap();
        let args: Vec<String> =
            ["x=y=z", "k=@key.txt", "@v.json", "@v.toml", "a=last"].iter().map(|s| s.to_string()).collect();
        let v = cli_variables(&args, d).unwrap();
        assert_eq!(v["x"], "y=z", "split at the first =");
        assert_eq!(v["k"], "from-file");
        assert_eq!((v["a"].as_str(), v["b"].as_str()), ("last", "3"), "later values win");
        let err = |s: &str| cli_variables(&[s.to_string()], d).unwrap_err().to_string();
        assert_eq!(err("novalue"), "variables must be in the form 'key=value' or '@file'");
        assert_eq!(err("@v.yaml"), "variable files must end in .json or .toml");
        assert!(err("@missing.json").starts_with("Failed to read "), "{}", err("@missing.json"));
    }

    #[test]
    fn env_pairs_and_dotenv_files_parse() {
        assert_eq!(parse_env_var("A=b=c").unwrap(), ("A".into(), "b=c".into()));
        assert_eq!(parse_env_var("A").unwrap_err(), "Environment variable must be of the form `key=value`");
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join(".env");
        assert!(dotenv(&p).unwrap().is_empty(), "no file, no values");
        std::fs::write(&p, "# c\nSPIN_VARIABLE_A=1\nexport SPIN_VARIABLE_B=\"two words\"\n\nC='x'\n").unwrap();
        let m = dotenv(&p).unwrap();
        assert_eq!(
            (m["SPIN_VARIABLE_A"].as_str(), m["SPIN_VARIABLE_B"].as_str(), m["C"].as_str()),
            ("1", "two words", "x")
        );
    }

    #[test]
    fn unsupported_spin_flags_are_named() {
        let args = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert!(refuse_unsupported_spin_flags(&args(&["--listen", "x", "--variable", "a=b"])).is_ok());
        let e = refuse_unsupported_spin_flags(&args(&["--tls-cert=c.pem"])).unwrap_err().to_string();
        assert!(e.starts_with("`--tls-cert` is a `spin up` flag that `mneme up` does not support"), "{e}");
        assert!(refuse_unsupported_spin_flags(&args(&["-q"])).unwrap_err().to_string().contains("--quiet"));
    }

    #[test]
    fn durations_and_ranges_parse_as_spins() {
        assert_eq!(parse_duration("3").unwrap(), Duration::from_secs(3));
        assert_eq!(parse_duration("250ms").unwrap(), Duration::from_millis(250));
        assert_eq!(parse_duration("7μs").unwrap(), Duration::from_micros(7));
        assert!(parse_duration("1h").is_err());
        assert!(matches!(parse_usize_range("2..5").unwrap(), instance::Range::Bounds(2, 5)));
        assert!(parse_usize_range("x").unwrap_err().starts_with("expected integer or range"));
    }
}
