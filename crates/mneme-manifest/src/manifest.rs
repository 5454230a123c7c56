//! Parsing and validating `spin.toml` (manifest v2), the way Spin does.
//!
//! Only what this runner serves is modelled: the application, variables,
//! HTTP and cron triggers, and components with their capabilities and
//! dependencies. Anything Spin would refuse is refused here too, with the
//! same reasoning (for example a dependency that declares its own
//! permissions), so an app this runner accepts also loads under Spin.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use anyhow::{Context, Result, bail};
use serde::Deserialize;

use crate::routes::HttpTrigger;

#[derive(Debug, Deserialize)]
pub struct RawManifest {
    pub spin_manifest_version: u32,
    pub application: Application,
    #[serde(default)]
    pub variables: BTreeMap<String, VariableDef>,
    #[serde(default)]
    pub trigger: BTreeMap<String, Vec<toml::Table>>,
    #[serde(default)]
    pub component: BTreeMap<String, ComponentDef>,
}

#[derive(Debug, Deserialize)]
pub struct Application {
    pub name: String,
    #[serde(default)]
    pub version: Option<String>,
    #[serde(default)]
    pub trigger: BTreeMap<String, toml::Table>,
    #[serde(default)]
    pub tool: BTreeMap<String, toml::Table>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VariableDef {
    #[serde(default)]
    pub default: Option<String>,
    #[serde(default)]
    pub required: bool,
    /// Accepted as Spin accepts it; the runner never prints any variable value.
    #[serde(default)]
    #[allow(dead_code)]
    pub secret: bool,
    #[serde(default)]
    #[allow(dead_code)]
    pub description: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum FileMount {
    Path(String),
    Mapped { source: String, destination: String },
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct ComponentDef {
    pub source: Option<toml::Value>,
    #[serde(default)]
    pub files: Vec<FileMount>,
    #[serde(default)]
    pub allowed_outbound_hosts: Vec<String>,
    #[serde(default)]
    pub key_value_stores: Vec<String>,
    #[serde(default)]
    pub sqlite_databases: Vec<String>,
    #[serde(default)]
    pub ai_models: Vec<String>,
    #[serde(default)]
    pub environment: BTreeMap<String, String>,
    #[serde(default)]
    pub variables: BTreeMap<String, String>,
    #[serde(default)]
    pub dependencies_inherit_configuration: bool,
    #[serde(default)]
    pub dependencies: BTreeMap<String, toml::Value>,
    #[serde(default)]
    pub build: Option<toml::Table>,
}

/// Which of the parent's capabilities a dependency inherits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Inherit {
    All,
    None,
    Some(Vec<String>),
}

/// The capability groups `inherit_configuration` may name (Spin's keys).
pub const INHERITABLE: &[&str] = &[
    "allowed_outbound_hosts",
    "key_value_stores",
    "sqlite_databases",
    "variables",
    "ai_models",
    "environment",
    "files",
];

#[derive(Debug, Clone)]
pub struct Dependency {
    /// The import it satisfies: `ns:pkg` or `ns:pkg/iface[@ver]`.
    pub key: String,
    /// Id of the component that provides it.
    pub component: String,
    pub export: Option<String>,
    pub inherit: Inherit,
}

#[derive(Debug, Clone)]
pub struct Component {
    pub id: String,
    pub source: PathBuf,
    pub def: ComponentDef,
    pub dependencies: Vec<Dependency>,
}

/// A scheduled job: `component` is the HTTP component that serves `path`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CronTrigger {
    pub component: String,
    pub cron_expression: String,
    pub path: String,
    pub at_startup: bool,
}

#[derive(Debug)]
pub struct Manifest {
    pub dir: PathBuf,
    pub name: String,
    pub version: Option<String>,
    pub variables: BTreeMap<String, VariableDef>,
    pub http_base: String,
    pub http: Vec<HttpTrigger>,
    pub cron: Vec<CronTrigger>,
    /// The app variable holding the bearer token the cron trigger sends.
    pub cron_token_variable: Option<String>,
    pub components: BTreeMap<String, Component>,
}

pub fn load(path: &Path) -> Result<Manifest> {
    let text = std::fs::read_to_string(path).with_context(|| format!("reading manifest {}", path.display()))?;
    let dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
    let dir = if dir.as_os_str().is_empty() { PathBuf::from(".") } else { dir };
    parse(&text, &dir).with_context(|| format!("invalid manifest {}", path.display()))
}

pub fn is_snake_name(s: &str) -> bool {
    variable_name_problem(s).is_none()
}

/// Why `key` is not a variable name, in Spin's words and in the order Spin
/// checks (`crates/expressions`, `Key::validate`); `None` when it is one.
pub fn variable_name_problem(key: &str) -> Option<String> {
    let bad = key.chars().find(|c| !(c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '_'));
    Some(if key.is_empty() {
        "must not be empty".to_string()
    } else if let Some(c) = bad {
        format!(
            "invalid character {c:?}. Variable names may contain only lower-case letters, numbers, and underscores."
        )
    } else if !key.starts_with(|c: char| c.is_ascii_lowercase()) {
        "must start with a lowercase ASCII letter".to_string()
    } else if !key.ends_with(|c: char| c.is_ascii_alphanumeric()) {
        "must end with a lowercase ASCII letter or digit".to_string()
    } else if key.contains("__") {
        "must not contain multiple consecutive underscores".to_string()
    } else {
        return None;
    })
}

fn is_component_id(s: &str) -> bool {
    !s.is_empty()
        && s.split('-').all(|w| !w.is_empty() && w.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit()))
        && s.starts_with(|c: char| c.is_ascii_lowercase())
}

pub fn parse(text: &str, dir: &Path) -> Result<Manifest> {
    let raw: RawManifest = toml::from_str(text)?;
    if raw.spin_manifest_version != 2 {
        bail!("spin_manifest_version must be 2, found {}", raw.spin_manifest_version);
    }
    for (name, def) in &raw.variables {
        if !is_snake_name(name) {
            bail!("variable `{name}`: names must be lower_snake_case");
        }
        if def.required && def.default.is_some() {
            bail!("variable `{name}`: a required variable may not have a default");
        }
    }

    let mut components = BTreeMap::new();
    for (id, def) in &raw.component {
        if !is_component_id(id) {
            bail!("component id `{id}` must be lower kebab-case");
        }
        let source = match &def.source {
            Some(toml::Value::String(s)) => dir.join(s),
            Some(other) => bail!(
                "component `{id}`: only a local file `source` is supported by the mneme runner, found {other}; \
                 fetch the component and point `source` at the file"
            ),
            None => bail!("component `{id}` has no `source`"),
        };
        for var in def.variables.keys() {
            if !is_snake_name(var) {
                bail!("component `{id}`: variable `{var}` must be lower_snake_case");
            }
        }
        let mut dependencies = Vec::new();
        for (key, value) in &def.dependencies {
            dependencies.push(parse_dependency(id, key, value, def.dependencies_inherit_configuration)?);
        }
        components.insert(id.clone(), Component { id: id.clone(), source, def: def.clone(), dependencies });
    }

    // Spin's rule: a dependency has no permissions and no dependencies of its own.
    for c in components.values() {
        for dep in &c.dependencies {
            let Some(target) = components.get(&dep.component) else {
                bail!("component `{}`: dependency `{}` names unknown component `{}`", c.id, dep.key, dep.component);
            };
            let d = &target.def;
            let mut own = Vec::new();
            for (name, present) in [
                ("allowed_outbound_hosts", !d.allowed_outbound_hosts.is_empty()),
                ("key_value_stores", !d.key_value_stores.is_empty()),
                ("sqlite_databases", !d.sqlite_databases.is_empty()),
                ("ai_models", !d.ai_models.is_empty()),
                ("variables", !d.variables.is_empty()),
                ("environment", !d.environment.is_empty()),
                ("files", !d.files.is_empty()),
                ("dependencies", !d.dependencies.is_empty()),
            ] {
                if present {
                    own.push(name);
                }
            }
            if !own.is_empty() {
                bail!(
                    "Dependencies may not have their own resources or permissions. Component {} cannot be used as a \
                     dependency of {} because it specifies: {}",
                    target.id,
                    c.id,
                    own.join(", ")
                );
            }
        }
        let mut packages = BTreeMap::new();
        for dep in &c.dependencies {
            let package =
                dep.key.split('/').next().unwrap_or(&dep.key).split('@').next().unwrap_or_default().to_string();
            if let Some(other) = packages.insert(package.clone(), dep.key.clone()) {
                bail!(
                    "component `{}`: dependencies `{other}` and `{}` share the package `{package}`, which Spin \
                     registers once; use one package-level key (`\"{package}\" = {{ … }}`)",
                    c.id,
                    dep.key
                );
            }
        }
    }

    let http_base = raw
        .application
        .trigger
        .get("http")
        .and_then(|t| t.get("base"))
        .and_then(|b| b.as_str())
        .unwrap_or("/")
        .to_string();

    let mut http = Vec::new();
    let mut cron = Vec::new();
    for (kind, entries) in &raw.trigger {
        for entry in entries {
            match kind.as_str() {
                "http" => http.push(parse_http_trigger(entry)?),
                "cron" => cron.push(parse_cron(entry)?),
                other => bail!("trigger type `{other}` is not supported by the mneme runner (supported: http, cron)"),
            }
        }
    }
    let tool = raw.application.tool.get("mneme");
    if let Some(jobs) = tool.and_then(|t| t.get("cron")) {
        let jobs = jobs.as_array().context("[application.tool.mneme] `cron` must be an array of tables")?;
        for job in jobs {
            cron.push(parse_cron(job.as_table().context("each cron entry must be a table")?)?);
        }
    }
    let cron_token_variable =
        tool.and_then(|t| t.get("cron_token_variable")).and_then(|v| v.as_str()).map(str::to_string);
    if let Some(v) = &cron_token_variable
        && !raw.variables.contains_key(v)
    {
        bail!("cron_token_variable names `{v}`, which is not an application variable");
    }

    for t in &http {
        if !components.contains_key(&t.component) {
            bail!("HTTP trigger for route `{}` names unknown component `{}`", t.route, t.component);
        }
    }
    for c in &cron {
        if !components.contains_key(&c.component) {
            bail!("cron trigger names unknown component `{}`", c.component);
        }
        if !http.iter().any(|t| t.component == c.component && !t.private) {
            bail!(
                "cron trigger for `{}`: the runner calls scheduled jobs over HTTP, so that component needs a public \
                 [[trigger.http]] route",
                c.component
            );
        }
        parse_schedule(&c.cron_expression).with_context(|| format!("cron trigger for `{}`", c.component))?;
    }
    crate::routes::Router::new(&http_base, &http)?;

    Ok(Manifest {
        dir: dir.to_path_buf(),
        name: raw.application.name,
        version: raw.application.version,
        variables: raw.variables,
        http_base,
        http,
        cron,
        cron_token_variable,
        components,
    })
}

fn parse_dependency(parent: &str, key: &str, value: &toml::Value, inherit_default: bool) -> Result<Dependency> {
    let valid_key = key.split_once(':').is_some_and(|(ns, rest)| !ns.is_empty() && !rest.is_empty());
    if !valid_key {
        bail!(
            "component `{parent}`: dependency key `{key}` must be a package (`ns:pkg`) or interface (`ns:pkg/iface`)"
        );
    }
    let table = match value {
        toml::Value::Table(t) => t,
        toml::Value::String(v) => bail!(
            "component `{parent}`: dependency `{key}` = \"{v}\" comes from a registry, which the mneme runner cannot \
             reach; use `{{ component = \"…\" }}` or `{{ path = \"…\" }}`"
        ),
        other => bail!("component `{parent}`: dependency `{key}` has an invalid value {other}"),
    };
    let Some(component) = table.get("component").and_then(|c| c.as_str()) else {
        bail!(
            "component `{parent}`: dependency `{key}` must name a `component` (path, url and registry sources are not supported)"
        );
    };
    let inherit = match table.get("inherit_configuration") {
        None => {
            if inherit_default {
                Inherit::All
            } else {
                Inherit::None
            }
        }
        Some(toml::Value::Boolean(true)) => Inherit::All,
        Some(toml::Value::Boolean(false)) => Inherit::None,
        Some(toml::Value::Array(items)) => {
            let mut keys = Vec::new();
            for it in items {
                let k = it.as_str().context("inherit_configuration entries must be strings")?;
                if !INHERITABLE.contains(&k) {
                    bail!(
                        "component `{parent}`: dependency `{key}`: cannot inherit `{k}` (one of {})",
                        INHERITABLE.join(", ")
                    );
                }
                keys.push(k.to_string());
            }
            Inherit::Some(keys)
        }
        Some(other) => bail!("component `{parent}`: inherit_configuration must be a boolean or a list, found {other}"),
    };
    Ok(Dependency {
        key: key.to_string(),
        component: component.to_string(),
        export: table.get("export").and_then(|e| e.as_str()).map(str::to_string),
        inherit,
    })
}

fn parse_http_trigger(t: &toml::Table) -> Result<HttpTrigger> {
    let component = match t.get("component") {
        Some(toml::Value::String(s)) => s.clone(),
        _ => bail!("each [[trigger.http]] needs `component = \"<id>\"`"),
    };
    let (route, private) = match t.get("route") {
        Some(toml::Value::String(r)) => (r.clone(), false),
        Some(toml::Value::Table(r)) if r.get("private").and_then(|p| p.as_bool()) == Some(true) => {
            (String::new(), true)
        }
        _ => bail!("[[trigger.http]] for `{component}` needs `route = \"/path\"` or `route = {{ private = true }}`"),
    };
    Ok(HttpTrigger { route, private, component })
}

fn parse_cron(t: &toml::Table) -> Result<CronTrigger> {
    let get = |k: &str| t.get(k).and_then(|v| v.as_str()).map(str::to_string);
    let component = get("component").context("a cron entry needs `component`")?;
    let cron_expression = get("cron_expression").context("a cron entry needs `cron_expression`")?;
    let path = get("path").unwrap_or_else(|| format!("/tick/{component}"));
    if !path.starts_with('/') {
        bail!("cron entry for `{component}`: `path` must start with `/`");
    }
    let at_startup = t.get("at_startup").and_then(|v| v.as_bool()).unwrap_or(false);
    Ok(CronTrigger { component, cron_expression, path, at_startup })
}

/// Parses `sec min hour dom month dow [year]`.
pub fn parse_schedule(expr: &str) -> Result<cron::Schedule> {
    let fields = expr.split_whitespace().count();
    if !(6..=7).contains(&fields) {
        bail!(
            "cron_expression `{expr}` has {fields} fields; expected `sec min hour day-of-month month day-of-week [year]`"
        );
    }
    cron::Schedule::from_str(expr).map_err(|e| anyhow::anyhow!("cron_expression `{expr}`: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn variable_names_are_judged_in_spins_words_and_order() {
        let cases = [
            ("api_key", None),
            ("k2", None),
            ("", Some("must not be empty")),
            (
                "Bad-Name",
                Some(
                    "invalid character 'B'. Variable names may contain only lower-case letters, numbers, and underscores.",
                ),
            ),
            ("2fa", Some("must start with a lowercase ASCII letter")),
            ("_x", Some("must start with a lowercase ASCII letter")),
            ("x_", Some("must end with a lowercase ASCII letter or digit")),
            ("a__b", Some("must not contain multiple consecutive underscores")),
        ];
        for (key, want) in cases {
            assert_eq!(variable_name_problem(key).as_deref(), want, "{key:?}");
            assert_eq!(is_snake_name(key), want.is_none(), "{key:?}");
        }
    }

    const BASE: &str = r#"
spin_manifest_version = 2
[application]
name = "t"
[[trigger.http]]
route = "/..."
component = "api"
[component.api]
source = "api.wasm"
key_value_stores = ["default"]
[component.api.dependencies]
"mneme:store" = { component = "store", inherit_configuration = true }
[component.store]
source = "store.wasm"
"#;

    fn parse_str(s: &str) -> Result<Manifest> {
        parse(s, Path::new("/app"))
    }

    #[test]
    fn accepts_a_composed_app() {
        let m = parse_str(BASE).unwrap();
        assert_eq!(m.components["api"].dependencies[0].inherit, Inherit::All);
        assert_eq!(m.components["api"].source, Path::new("/app/api.wasm"));
    }

    #[test]
    fn dependency_with_own_permissions_is_refused_like_spin() {
        let bad = BASE.replace(
            "[component.store]\nsource = \"store.wasm\"",
            "[component.store]\nsource = \"store.wasm\"\nkey_value_stores = [\"default\"]",
        );
        let err = format!("{:#}", parse_str(&bad).unwrap_err());
        assert!(err.contains("Dependencies may not have their own resources or permissions"), "{err}");
        assert!(err.contains("key_value_stores"), "{err}");
    }

    #[test]
    fn dependency_with_dependencies_is_refused() {
        let bad = format!("{BASE}[component.store.dependencies]\n\"a:b\" = {{ component = \"api\" }}\n");
        assert!(format!("{:#}", parse_str(&bad).unwrap_err()).contains("dependencies"));
    }

    #[test]
    fn two_keys_of_one_package_are_refused() {
        let bad = BASE.replace(
            "\"mneme:store\" = { component = \"store\", inherit_configuration = true }",
            "\"mneme:store/a\" = { component = \"store\" }\n\"mneme:store/b\" = { component = \"store\" }",
        );
        assert!(format!("{:#}", parse_str(&bad).unwrap_err()).contains("share the package"));
    }

    #[test]
    fn unknown_trigger_and_bad_variable_names_are_refused() {
        assert!(parse_str(&format!("{BASE}[[trigger.mqtt]]\ncomponent = \"api\"\n")).is_err());
        assert!(
            parse_str(
                &BASE.replace("[[trigger.http]]", "[variables]\nBadName = { default = \"x\" }\n[[trigger.http]]")
            )
            .is_err()
        );
    }

    #[test]
    fn cron_entries_from_trigger_and_tool_table() {
        let m = parse_str(&format!(
            "{BASE}[[trigger.cron]]\ncomponent = \"api\"\ncron_expression = \"*/5 * * * * *\"\npath = \"/tick/a\"\n"
        ))
        .unwrap();
        assert_eq!(m.cron[0].path, "/tick/a");
        let with_tool = BASE.replace(
            "[application]\nname = \"t\"",
            "[application]\nname = \"t\"\n[[application.tool.mneme.cron]]\ncomponent = \"api\"\ncron_expression = \"0 0 * * * *\"\nat_startup = true",
        );
        let m = parse_str(&with_tool).unwrap();
        assert!(m.cron[0].at_startup);
        assert_eq!(m.cron[0].path, "/tick/api");
    }

    #[test]
    fn cron_with_invalid_expression_is_refused() {
        let bad = format!("{BASE}[[trigger.cron]]\ncomponent = \"api\"\ncron_expression = \"every minute\"\n");
        assert!(parse_str(&bad).is_err());
    }
}

/// Properties: no manifest text, however malformed or near-valid, makes
/// the loader panic (see docs/FUZZING.md).
#[cfg(test)]
mod proptests {
    use super::*;
    use proptest::prelude::*;

    fn config() -> ProptestConfig {
        // 512 cases unless `PROPTEST_CASES` asks for more (or fewer).
        let cases = std::env::var("PROPTEST_CASES").ok().and_then(|c| c.parse().ok()).unwrap_or(512);
        ProptestConfig { cases, ..ProptestConfig::default() }
    }

    /// A valid app with one public HTTP component.
    const APP: &str = "spin_manifest_version = 2\n[application]\nname = \"t\"\n[[trigger.http]]\nroute = \"/...\"\n\
                       component = \"api\"\n[component.api]\nsource = \"api.wasm\"\n";

    fn pick(items: &[&'static str]) -> impl Strategy<Value = &'static str> + use<> {
        prop::sample::select(items.to_vec())
    }

    /// Mostly one of `good`, sometimes one of `bad`, so that most cases get
    /// past the first checks and reach the later ones.
    fn mostly(good: &[&'static str], bad: &[&'static str]) -> impl Strategy<Value = &'static str> + use<> {
        prop_oneof![12 => pick(good), 1 => pick(bad)]
    }

    fn component_id() -> impl Strategy<Value = &'static str> {
        mostly(&["api", "store", "llm", "tick-2"], &["Bad", "a--b", "-x", "x-", ""])
    }

    /// A `cron_expression`: tokens cron accepts, and near misses.
    fn cron_expression() -> impl Strategy<Value = String> {
        const TOKENS: &[&str] = &[
            "*",
            "0",
            "59",
            "60",
            "*/5",
            "*/0",
            "0/0",
            "1-5",
            "5-1",
            "1-5/2",
            "1,2,3",
            ",",
            "-",
            "/",
            "?",
            "L",
            "W",
            "MON",
            "MON-FRI",
            "FRI-MON",
            "JAN",
            "DEC-JAN",
            "4294967296",
            "99999999999999999999",
            "2026",
            "1970-2100",
            "3000-1970",
            "#",
            "1#2",
            "*/99999999999",
        ];
        let valid = (
            pick(&["0", "*/5", "*", "0-59/10", "59", "1,2"]),
            pick(&["0", "*", "*/15", "30"]),
            pick(&["0", "*", "9-17", "23"]),
            pick(&["*", "1", "31", "1-15", "?", "L"]),
            pick(&["*", "1", "12", "JAN-MAR", "*/2"]),
            pick(&["*", "?", "MON-FRI", "1-5", "SUN", "6"]),
            pick(&["", "2026", "2020-2100", "*"]),
        )
            .prop_map(|(s, m, h, d, mo, w, y)| format!("{s} {m} {h} {d} {mo} {w} {y}").trim_end().to_string());
        prop_oneof![
            2 => valid,
            1 => prop::collection::vec(pick(TOKENS), 0..9).prop_map(|t| t.join(" ")),
            1 => prop::collection::vec(pick(TOKENS), 6..=7).prop_map(|t| t.join(" ")),
        ]
    }

    fn route() -> impl Strategy<Value = String> {
        prop_oneof![
            4 => mostly(
                &["/...", "/", "/a", "/a/...", "/:id", "/a/:b/...", "/é"],
                &["", "a", "/:", "/a...", "/a/.../b", "//"],
            )
            .prop_map(|r| format!("route = {r:?}")),
            1 => Just("route = { private = true }".to_string()),
            1 => pick(&["route = { private = false }", "route = 3", ""]).prop_map(str::to_string),
        ]
    }

    fn dependency() -> impl Strategy<Value = String> {
        let key = mostly(&["mneme:store", "mneme:store/a", "mneme:llm/b@1.0", "a:b"], &["bad", "a:", ":b"]);
        let inherit = mostly(&["true", "false", "[\"files\"]"], &["[\"x\"]", "[1]", "1", "\"all\""]);
        let value = prop_oneof![
            3 => component_id().prop_map(|c| format!("{{ component = {c:?} }}")),
            3 => (component_id(), inherit)
                .prop_map(|(c, i)| format!("{{ component = {c:?}, inherit_configuration = {i} }}")),
            1 => pick(&["\"1.0\"", "{ path = \"x.wasm\" }", "3"]).prop_map(str::to_string),
        ];
        (key, value).prop_map(|(k, v)| format!("{k:?} = {v}\n"))
    }

    /// The body of one `[component.<id>]` table and its dependencies.
    fn component(id: &'static str) -> impl Strategy<Value = String> {
        (
            mostly(&["source = \"a.wasm\""], &["source = { url = \"https://x\", digest = \"d\" }", "source = 1", ""]),
            pick(&[
                "",
                "",
                "key_value_stores = [\"default\"]",
                "files = [\"a\", { source = \"s\", destination = \"/d\" }]",
            ]),
            mostly(&["", "variables = { a = \"{{ x }}\" }"], &["variables = { Bad = \"x\" }"]),
            any::<bool>(),
            prop::collection::vec(dependency(), 0..3),
        )
            .prop_map(move |(source, cap, vars, inherit, deps)| {
                format!(
                    "[component.{id:?}]\n{source}\n{cap}\n{vars}\ndependencies_inherit_configuration = {inherit}\n\
                     [component.{id:?}.dependencies]\n{}",
                    deps.concat()
                )
            })
    }

    fn trigger() -> impl Strategy<Value = String> {
        prop_oneof![
            3 => (route(), component_id()).prop_map(|(r, c)| format!("[[trigger.http]]\n{r}\ncomponent = {c:?}\n")),
            1 => (
                component_id(),
                cron_expression(),
                mostly(&["", "path = \"/tick/x\""], &["path = \"tick\"", "path = 1"]),
            )
                .prop_map(|(c, e, p)| format!("[[trigger.cron]]\ncomponent = {c:?}\ncron_expression = {e:?}\n{p}\n")),
            1 => (component_id(), cron_expression(), mostly(&["true", "false"], &["1", "\"yes\""])).prop_map(
                |(c, e, s)| format!(
                    "[[application.tool.mneme.cron]]\ncomponent = {c:?}\ncron_expression = {e:?}\nat_startup = {s}\n"
                )
            ),
            1 => Just("[[trigger.mqtt]]\ncomponent = \"api\"\n".to_string()),
            // Mostly the component every manifest here may have, and a public route.
            6 => (cron_expression(), any::<bool>()).prop_map(|(e, startup)| format!(
                "[[trigger.http]]\nroute = \"/tick/...\"\ncomponent = \"api\"\n[[trigger.cron]]\ncomponent = \"api\"\n\
                 cron_expression = {e:?}\nat_startup = {startup}\n"
            )),
        ]
    }

    /// A manifest close to a valid one: every section present, each mostly
    /// with values Spin takes and sometimes with values it refuses.
    fn near_valid() -> impl Strategy<Value = String> {
        let variables = prop::collection::btree_map(
            mostly(&["token", "x1"], &["Bad", "a__b", "a_", ""]),
            mostly(
                &["{ default = \"x\" }", "{ required = true }", "{ secret = true }"],
                &["{ required = true, default = \"x\" }", "{ other = 1 }", "\"x\""],
            ),
            0..3,
        );
        let components = prop::collection::btree_set(component_id(), 0..4)
            .prop_map(|mut ids| {
                ids.insert("api");
                ids
            })
            .prop_flat_map(|ids| ids.into_iter().map(component).collect::<Vec<_>>());
        (
            mostly(&["2"], &["1", "\"2\"", "-1", "4294967296"]),
            mostly(
                &["", "[application.trigger.http]\nbase = \"/\"", "[application.trigger.http]\nbase = \"/api/\""],
                &["[application.trigger.http]\nbase = \"\"", "[application.trigger.http]\nbase = 1"],
            ),
            mostly(
                &[""],
                &[
                    "[application.tool.mneme]\ncron_token_variable = \"token\"",
                    "[application.tool.mneme]\ncron = 3",
                    "[application.tool.mneme]\ncron = [1]",
                ],
            ),
            variables,
            components,
            prop::collection::vec(trigger(), 0..4),
        )
            .prop_map(|(version, base, tool, vars, comps, triggers)| {
                // Array tables under [application] come before [variables];
                // the rest may go in any order.
                let (app_tables, others): (Vec<String>, Vec<String>) =
                    triggers.into_iter().partition(|t| t.starts_with("[[application."));
                let vars: String = vars.iter().map(|(n, v)| format!("{n:?} = {v}\n")).collect();
                format!(
                    "spin_manifest_version = {version}\n[application]\nname = \"t\"\n{base}\n{tool}\n{}\n\
                     [variables]\n{vars}\n{}\n{}",
                    app_tables.concat(),
                    others.concat(),
                    comps.join("\n"),
                )
            })
    }

    proptest! {
        #![proptest_config(config())]

        #[test]
        fn near_valid_manifests_load_or_are_refused(text in near_valid()) {
            // About 3% of these load; the rest are refused at every check.
            if let Ok(m) = parse(&text, Path::new("/app")) {
                // What loads is consistent: triggers name known components.
                prop_assert!(m.http.iter().all(|t| m.components.contains_key(&t.component)));
                prop_assert!(m.cron.iter().all(|c| m.components.contains_key(&c.component) && c.path.starts_with('/')));
            }
        }

        #[test]
        fn toml_ish_text_loads_or_is_refused(
            tail in "([\\[\\]a-z_.=\"'{}, \n0-9:/*#-]|trigger|component|source|route|cron_expression){0,120}",
            prefixed in any::<bool>(),
        ) {
            let text = if prefixed {
                format!("spin_manifest_version = 2\n[application]\nname = \"t\"\n{tail}")
            } else {
                tail
            };
            let _ = parse(&text, Path::new("/app"));
        }

        #[test]
        fn any_text_loads_or_is_refused(text in any::<String>()) {
            let _ = parse(&text, Path::new("."));
        }

        #[test]
        fn a_cron_expression_parses_or_is_refused(expr in cron_expression()) {
            let text = format!("{APP}[[trigger.cron]]\ncomponent = \"api\"\ncron_expression = {expr:?}\n");
            let _ = parse(&text, Path::new("/app"));
        }
    }
}
