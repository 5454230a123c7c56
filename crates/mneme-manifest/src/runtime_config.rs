//! `runtime-config.toml`, as `spin up --runtime-config-file` reads it:
//! key-value stores (`spin` SQLite files or `redis`), SQLite databases
//! (`spin`), and `[llm_compute]` for inference. Relative paths resolve
//! against the runtime-config file's directory, as in Spin.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use serde::Deserialize;

#[derive(Debug, Clone, PartialEq)]
pub enum KvBackend {
    SqliteFile(PathBuf),
    Redis(String),
}

#[derive(Debug, Clone)]
pub struct LlmCompute {
    /// Base URL of an OpenAI-compatible API, ending in `/v1`.
    pub url: String,
    pub auth_token: Option<String>,
}

#[derive(Debug, Clone)]
pub struct RuntimeConfig {
    pub kv: BTreeMap<String, KvBackend>,
    pub sqlite: BTreeMap<String, PathBuf>,
    pub llm: Option<LlmCompute>,
}

#[derive(Deserialize)]
struct Raw {
    #[serde(default)]
    key_value_store: BTreeMap<String, toml::Table>,
    #[serde(default)]
    sqlite_database: BTreeMap<String, toml::Table>,
    #[serde(default)]
    llm_compute: Option<toml::Table>,
}

impl RuntimeConfig {
    /// The defaults Spin uses with no runtime config: both stores are SQLite
    /// files in the state directory (`.spin/` beside the manifest).
    pub fn defaults(state_dir: &Path) -> Self {
        let mut kv = BTreeMap::new();
        kv.insert("default".into(), KvBackend::SqliteFile(state_dir.join("sqlite_key_value.db")));
        let mut sqlite = BTreeMap::new();
        sqlite.insert("default".into(), state_dir.join("sqlite_db.db"));
        Self { kv, sqlite, llm: None }
    }

    pub fn load(path: Option<&Path>, state_dir: &Path) -> Result<Self> {
        let mut cfg = Self::defaults(state_dir);
        let Some(path) = path else { return Ok(cfg) };
        let text =
            std::fs::read_to_string(path).with_context(|| format!("reading runtime config {}", path.display()))?;
        let base = path.parent().unwrap_or(Path::new("."));
        cfg.merge(&text, base).with_context(|| format!("invalid runtime config {}", path.display()))?;
        Ok(cfg)
    }

    fn merge(&mut self, text: &str, base: &Path) -> Result<()> {
        let raw: Raw = toml::from_str(text)?;
        for (label, t) in raw.key_value_store {
            let backend = match t.get("type").and_then(|v| v.as_str()) {
                Some("spin") => KvBackend::SqliteFile(
                    t.get("path")
                        .and_then(|p| p.as_str())
                        .map_or_else(|| base.join(format!("{label}.db")), |p| base.join(p)),
                ),
                Some("redis") => KvBackend::Redis(
                    t.get("url")
                        .and_then(|u| u.as_str())
                        .context(format!("key_value_store.{label}: redis needs `url`"))?
                        .to_string(),
                ),
                Some(other) => bail!("key_value_store.{label}: type `{other}` is not supported (spin, redis)"),
                None => bail!("key_value_store.{label} needs a `type`"),
            };
            self.kv.insert(label, backend);
        }
        for (label, t) in raw.sqlite_database {
            match t.get("type").and_then(|v| v.as_str()) {
                Some("spin") => {
                    let path = t
                        .get("path")
                        .and_then(|p| p.as_str())
                        .map_or_else(|| base.join(format!("{label}.db")), |p| base.join(p));
                    self.sqlite.insert(label, path);
                }
                Some(other) => bail!("sqlite_database.{label}: type `{other}` is not supported (spin)"),
                None => bail!("sqlite_database.{label} needs a `type`"),
            }
        }
        if let Some(t) = raw.llm_compute {
            match t.get("type").and_then(|v| v.as_str()) {
                Some("remote_http") => {
                    let url = t.get("url").and_then(|u| u.as_str()).context("llm_compute: remote_http needs `url`")?;
                    self.llm = Some(LlmCompute {
                        url: url.trim_end_matches('/').to_string(),
                        auth_token: t.get("auth_token").and_then(|a| a.as_str()).map(str::to_string),
                    });
                }
                Some("spin") | None => {}
                Some(other) => bail!("llm_compute: type `{other}` is not supported (remote_http)"),
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_then_overrides() {
        let mut c = RuntimeConfig::defaults(Path::new("/s"));
        c.merge(
            "[key_value_store.default]\ntype = \"spin\"\npath = \"data/kv.db\"\n[key_value_store.cache]\ntype = \"redis\"\nurl = \"redis://127.0.0.1:6379\"\n",
            Path::new("/cfg"),
        )
        .unwrap();
        assert_eq!(c.kv["default"], KvBackend::SqliteFile("/cfg/data/kv.db".into()));
        assert_eq!(c.kv["cache"], KvBackend::Redis("redis://127.0.0.1:6379".into()));
        assert_eq!(c.sqlite["default"], PathBuf::from("/s/sqlite_db.db"));
    }

    #[test]
    fn unknown_types_are_refused() {
        let mut c = RuntimeConfig::defaults(Path::new("/s"));
        assert!(c.merge("[key_value_store.x]\ntype = \"azure_cosmos\"\n", Path::new("/")).is_err());
        assert!(c.merge("[sqlite_database.x]\ntype = \"libsql\"\n", Path::new("/")).is_err());
    }
}

/// Properties: no runtime-config text makes the loader panic (see
/// docs/FUZZING.md).
#[cfg(test)]
mod proptests {
    use super::*;
    use proptest::prelude::*;

    fn config() -> ProptestConfig {
        // 512 cases unless `PROPTEST_CASES` asks for more (or fewer).
        let cases = std::env::var("PROPTEST_CASES").ok().and_then(|c| c.parse().ok()).unwrap_or(512);
        ProptestConfig { cases, ..ProptestConfig::default() }
    }

    fn pick(items: &[&'static str]) -> impl Strategy<Value = &'static str> + use<> {
        prop::sample::select(items.to_vec())
    }

    /// One table close to a valid one.
    fn table() -> impl Strategy<Value = String> {
        (
            pick(&["key_value_store", "sqlite_database", "llm_compute", "other"]),
            pick(&["default", "cache", "\"a b\"", "\"\"", "é"]),
            pick(&[
                "type = \"spin\"",
                "type = \"redis\"",
                "type = \"remote_http\"",
                "type = \"libsql\"",
                "type = 1",
                "",
            ]),
            pick(&["", "path = \"kv.db\"", "path = \"/abs/kv.db\"", "path = \"../x\"", "path = 1", "path = \"\""]),
            pick(&[
                "",
                "url = \"redis://h\"",
                "url = \"http://h/v1/\"",
                "url = \"\"",
                "url = []",
                "auth_token = \"t\"",
            ]),
        )
            .prop_map(|(section, label, ty, path, url)| {
                if section == "llm_compute" {
                    format!("[llm_compute]\n{ty}\n{url}\n")
                } else {
                    format!("[{section}.{label}]\n{ty}\n{path}\n{url}\n")
                }
            })
    }

    proptest! {
        #![proptest_config(config())]

        #[test]
        fn near_valid_configs_load_or_are_refused(tables in prop::collection::vec(table(), 0..5)) {
            let mut c = RuntimeConfig::defaults(Path::new("/s"));
            if c.merge(&tables.concat(), Path::new("/cfg")).is_ok() {
                prop_assert!(c.kv.contains_key("default") && c.sqlite.contains_key("default"));
                if let Some(llm) = &c.llm {
                    prop_assert!(!llm.url.ends_with('/'));
                }
            }
        }

        #[test]
        fn toml_ish_text_loads_or_is_refused(
            text in "([\\[\\]a-z_.=\"'{}, \n0-9:/#-]|key_value_store|sqlite_database|llm_compute|type|spin|redis)\
                     {0,120}"
        ) {
            let mut c = RuntimeConfig::defaults(Path::new("/s"));
            let _ = c.merge(&text, Path::new("/cfg"));
        }

        #[test]
        fn any_text_loads_or_is_refused(text in any::<String>()) {
            let mut c = RuntimeConfig::defaults(Path::new("/s"));
            let _ = c.merge(&text, Path::new(""));
        }
    }
}
