//! The deployment files under `deploy/` agree with `spin.toml`, read with
//! this crate's own parsers. Every YAML document of `deploy/spinkube/` is
//! a Kubernetes object of a known kind (the SpinApp against the fields of
//! spin-operator's CRD); the SpinApp is the app of this manifest (image
//! name and tag, probes that reach the right components); every variable
//! it sets is declared, and every secret one comes from a Secret key that
//! exists; the stores are hosted, and `allowed_outbound_hosts` lets the app
//! reach them; the runtime config binds exactly the store labels the
//! components use; the scheduler runs the schedules of this very
//! `spin.toml` (its image copies it) against the SpinApp's Service with the
//! token the app checks; the migration Job calls the migrate tick; the
//! committed Secrets carry no credential; and the systemd units serve and
//! schedule one manifest.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use mneme_manifest::manifest::{self, Manifest};
use mneme_manifest::outbound::AllowedHosts;
use mneme_manifest::routes::Router;
use mneme_manifest::runtime_config::{KvBackend, RuntimeConfig};
use mneme_manifest::variables::{AppVariables, env_name};
use serde::Deserialize;
use serde_yaml::Value;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn spinkube() -> PathBuf {
    root().join("deploy/spinkube")
}

fn app() -> Manifest {
    manifest::load(&root().join("spin.toml")).expect("spin.toml loads")
}

/// Variables this deployment must set, beyond those spin.toml leaves
/// without a default. Several replicas share one store, so the embedded
/// stores (each pod's own) are no choice: `pg_url` and `redis_url`, with
/// their hosts for `allowed_outbound_hosts`. The API needs `api_key`, and
/// the scheduler and the migration Job `cron_token`.
const DEPLOYMENT_SETS: [&str; 6] = ["pg_url", "redis_url", "pg_host", "redis_host", "api_key", "cron_token"];

/// The file the Secrets live in, applied by hand and never by kustomize.
const SECRETS_FILE: &str = "secrets.yaml";
const KUSTOMIZATION_FILE: &str = "kustomization.yaml";

/// One YAML document of `deploy/spinkube/`.
#[derive(Debug, Clone)]
struct Object {
    file: String,
    doc: Value,
}

impl Object {
    fn kind(&self) -> &str {
        self.doc["kind"].as_str().unwrap_or_default()
    }

    fn name(&self) -> &str {
        self.doc["metadata"]["name"].as_str().unwrap_or_default()
    }

    fn what(&self) -> String {
        format!("{} {} ({})", self.kind(), self.name(), self.file)
    }
}

/// Every document of every `*.yaml` / `*.yml` file under `deploy/spinkube/`
/// (a file may hold several, separated by `---`); empty documents are
/// skipped, as kubectl skips them.
fn objects() -> Vec<Object> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(spinkube())
        .expect("deploy/spinkube exists")
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "yaml" || x == "yml"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no YAML under deploy/spinkube");
    let mut out = Vec::new();
    for path in files {
        let file = path.file_name().unwrap().to_string_lossy().into_owned();
        let text = std::fs::read_to_string(&path).unwrap();
        for (i, doc) in serde_yaml::Deserializer::from_str(&text).enumerate() {
            let doc = Value::deserialize(doc).unwrap_or_else(|e| panic!("{file}: document {}: {e}", i + 1));
            if !doc.is_null() {
                out.push(Object { file: file.clone(), doc });
            }
        }
    }
    out
}

fn one<'a>(objects: &'a [Object], kind: &str) -> &'a Object {
    let found: Vec<&Object> = objects.iter().filter(|o| o.kind() == kind).collect();
    assert_eq!(found.len(), 1, "expected one {kind}, found {}", found.len());
    found[0]
}

fn typed<T: serde::de::DeserializeOwned>(o: &Object) -> T {
    serde_yaml::from_value(o.doc.clone()).unwrap_or_else(|e| panic!("{}: {e}", o.what()))
}

// The parts of the objects the checks read. The SpinApp's spec lists every
// field of spin-operator's SpinApp CRD (core.spinkube.dev/v1alpha1) and
// refuses any other, as the API server's schema would drop it.

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SpinApp {
    #[serde(rename = "apiVersion")]
    _api_version: String,
    #[serde(rename = "kind")]
    _kind: String,
    metadata: Metadata,
    spec: SpinAppSpec,
}

#[derive(Debug, Deserialize)]
struct Metadata {
    name: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
#[allow(dead_code)]
struct SpinAppSpec {
    executor: String,
    image: String,
    #[serde(default)]
    image_pull_secrets: Vec<Value>,
    #[serde(default)]
    checks: Checks,
    replicas: Option<i64>,
    #[serde(default)]
    enable_autoscaling: bool,
    #[serde(default)]
    runtime_config: SpinRuntimeConfig,
    #[serde(default)]
    volumes: Vec<Value>,
    #[serde(default)]
    volume_mounts: Vec<Value>,
    #[serde(default)]
    variables: Vec<SpinVar>,
    #[serde(default)]
    service_annotations: BTreeMap<String, String>,
    #[serde(default)]
    deployment_annotations: BTreeMap<String, String>,
    #[serde(default)]
    pod_annotations: BTreeMap<String, String>,
    #[serde(default)]
    pod_labels: BTreeMap<String, String>,
    #[serde(default)]
    resources: Resources,
    components: Option<Vec<String>>,
    service_account_name: Option<String>,
    #[serde(default)]
    invocation_limits: BTreeMap<String, String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct Checks {
    readiness: Option<Probe>,
    liveness: Option<Probe>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
#[allow(dead_code)]
struct Probe {
    http_get: HttpGet,
    initial_delay_seconds: Option<i64>,
    timeout_seconds: Option<i64>,
    period_seconds: Option<i64>,
    success_threshold: Option<i64>,
    failure_threshold: Option<i64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
#[allow(dead_code)]
struct HttpGet {
    path: String,
    #[serde(default)]
    http_headers: Vec<Value>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
#[allow(dead_code)]
struct SpinRuntimeConfig {
    load_from_secret: Option<String>,
    #[serde(default)]
    sqlite_databases: Vec<Value>,
    #[serde(default)]
    key_value_stores: Vec<Value>,
    llm_compute: Option<Value>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct Resources {
    #[serde(default)]
    limits: BTreeMap<String, Value>,
    #[serde(default)]
    requests: BTreeMap<String, Value>,
}

/// A SpinApp variable, and a container's environment variable: a literal
/// or a reference.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct SpinVar {
    name: String,
    value: Option<String>,
    value_from: Option<ValueFrom>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
#[allow(dead_code)]
struct ValueFrom {
    secret_key_ref: Option<KeyRef>,
    config_map_key_ref: Option<KeyRef>,
    field_ref: Option<Value>,
    resource_field_ref: Option<Value>,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
struct KeyRef {
    name: String,
    key: String,
    #[serde(default)]
    optional: bool,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Container {
    name: String,
    image: String,
    #[serde(default)]
    command: Vec<String>,
    #[serde(default)]
    args: Vec<String>,
    #[serde(default)]
    env: Vec<SpinVar>,
}

/// The containers of a Deployment's or a Job's pod template.
fn containers(o: &Object) -> Vec<Container> {
    let list = &o.doc["spec"]["template"]["spec"]["containers"];
    assert!(list.is_sequence(), "{}: no spec.template.spec.containers", o.what());
    serde_yaml::from_value(list.clone()).unwrap_or_else(|e| panic!("{}: containers: {e}", o.what()))
}

/// Secret name → key → value, from `stringData`.
fn secrets(objects: &[Object]) -> BTreeMap<String, BTreeMap<String, String>> {
    let mut out = BTreeMap::new();
    for o in objects.iter().filter(|o| o.kind() == "Secret") {
        assert!(o.doc["data"].is_null(), "{}: keep values in stringData, readable in review", o.what());
        let data: BTreeMap<String, String> = serde_yaml::from_value(o.doc["stringData"].clone())
            .unwrap_or_else(|e| panic!("{}: stringData must map keys to strings: {e}", o.what()));
        out.insert(o.name().to_string(), data);
    }
    out
}

/// The value a reference points at, in the committed Secrets.
fn secret_value<'a>(secrets: &'a BTreeMap<String, BTreeMap<String, String>>, r: &KeyRef, whose: &str) -> &'a str {
    let keys =
        secrets.get(&r.name).unwrap_or_else(|| panic!("{whose}: no Secret named `{}` in {SECRETS_FILE}", r.name));
    keys.get(&r.key).unwrap_or_else(|| panic!("{whose}: Secret `{}` has no key `{}` in {SECRETS_FILE}", r.name, r.key))
}

/// `(scheme, host, port)` of an `http://host[:port]` address.
fn endpoint(url: &str) -> (String, String, u16) {
    let u = url::Url::parse(url).unwrap_or_else(|e| panic!("`{url}` is not a URL: {e}"));
    let host = u.host_str().unwrap_or_else(|| panic!("`{url}` has no host")).to_string();
    let port = u.port_or_known_default().unwrap_or_else(|| panic!("`{url}` has no port"));
    (u.scheme().to_string(), host, port)
}

/// Host and port of a PostgreSQL connection string, in either form Spin
/// takes: `host=… port=…` or `postgres://…`.
fn pg_endpoint(conn: &str) -> (String, u16) {
    if conn.starts_with("postgres://") || conn.starts_with("postgresql://") {
        let (_, host, port) = endpoint(&conn.replacen("postgresql://", "postgres://", 1));
        return (host, port);
    }
    let field = |name: &str| conn.split_whitespace().find_map(|kv| kv.strip_prefix(&format!("{name}=")));
    let host = field("host").unwrap_or_else(|| panic!("`{conn}` names no host")).to_string();
    let port = field("port").map_or(5432, |p| p.parse().unwrap_or_else(|_| panic!("`{conn}`: port is not a number")));
    (host, port)
}

/// The value after `flag` (or its other spelling) in `argv`.
fn flag<'a>(argv: &'a [String], names: &[&str]) -> Option<&'a str> {
    argv.iter().position(|a| names.contains(&a.as_str())).and_then(|i| argv.get(i + 1)).map(String::as_str)
}

/// `registry/name` and `tag` of an image reference.
fn image_parts(image: &str) -> (&str, &str, &str) {
    let (repo, tag) = image.rsplit_once(':').filter(|(_, t)| !t.contains('/')).unwrap_or((image, ""));
    let (registry, name) = repo.rsplit_once('/').unwrap_or(("", repo));
    (registry, name, tag)
}

/// What the scheduler's Dockerfile does: its entrypoint, and where it
/// copies each source.
struct Dockerfile {
    entrypoint: Vec<String>,
    copies: Vec<(String, String)>,
    runs: Vec<String>,
}

fn dockerfile() -> Dockerfile {
    let text = std::fs::read_to_string(spinkube().join("scheduler.Dockerfile")).expect("scheduler.Dockerfile");
    let mut d = Dockerfile { entrypoint: Vec::new(), copies: Vec::new(), runs: Vec::new() };
    for line in text.lines().map(str::trim) {
        if let Some(rest) = line.strip_prefix("ENTRYPOINT ") {
            d.entrypoint = serde_yaml::from_str(rest).expect("ENTRYPOINT in exec form");
        } else if let Some(rest) = line.strip_prefix("COPY ") {
            let words: Vec<&str> = rest.split_whitespace().filter(|w| !w.starts_with("--")).collect();
            let from_stage = rest.split_whitespace().any(|w| w.starts_with("--from="));
            if let [src, dest] = words[..] {
                let src = if from_stage { format!("(stage) {src}") } else { src.to_string() };
                d.copies.push((src, dest.to_string()));
            }
        } else if let Some(rest) = line.strip_prefix("RUN ") {
            d.runs.push(rest.to_string());
        }
    }
    d
}

impl Dockerfile {
    /// Where the build context's `src` lands in the image.
    fn dest_of(&self, src: &str) -> &str {
        let found: Vec<&str> = self.copies.iter().filter(|(s, _)| s == src).map(|(_, d)| d.as_str()).collect();
        assert_eq!(found.len(), 1, "scheduler.Dockerfile must copy `{src}` once: {:?}", self.copies);
        found[0]
    }
}

#[test]
fn every_document_is_a_kubernetes_object_of_a_known_kind() {
    let objects = objects();
    let api_version = |kind: &str| match kind {
        "SpinApp" => "core.spinkube.dev/v1alpha1",
        "Deployment" => "apps/v1",
        "Job" => "batch/v1",
        "Secret" => "v1",
        "Kustomization" => "kustomize.config.k8s.io/v1beta1",
        other => panic!("deploy/spinkube holds a `{other}`, which these checks do not know"),
    };
    let mut seen = BTreeSet::new();
    for o in &objects {
        assert!(o.doc.is_mapping(), "{}: a document must be a mapping", o.file);
        let kind = o.doc["kind"].as_str().unwrap_or_else(|| panic!("{}: a document without `kind`", o.file));
        assert_eq!(o.doc["apiVersion"].as_str(), Some(api_version(kind)), "{}: apiVersion", o.what());
        let name = o.doc["metadata"]["name"].as_str().unwrap_or_else(|| panic!("{}: no metadata.name", o.what()));
        // A DNS-1123 label: what a Service, and so the SpinApp, may be named.
        let label = !name.is_empty()
            && name.len() <= 63
            && name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
            && !name.starts_with('-')
            && !name.ends_with('-');
        assert!(label, "{}: `{name}` is not a DNS-1123 label", o.what());
        assert!(seen.insert((kind.to_string(), name.to_string())), "two objects are {kind} {name}");
    }
    let count = |kind: &str| objects.iter().filter(|o| o.kind() == kind).count();
    for kind in ["SpinApp", "Deployment", "Job", "Kustomization"] {
        assert_eq!(count(kind), 1, "deploy/spinkube must hold one {kind}");
    }
    assert_eq!(count("Secret"), 2, "the variables' Secret and the runtime config's");

    // Each parses as its kind: the SpinApp as the CRD defines it, the
    // workloads with their containers, the Secrets with string values.
    let spinapp: SpinApp = typed(one(&objects, "SpinApp"));
    assert!(!spinapp.spec.image.is_empty());
    for kind in ["Deployment", "Job"] {
        let o = one(&objects, kind);
        let cs = containers(o);
        assert_eq!(cs.len(), 1, "{}: one container", o.what());
        assert!(!cs[0].name.is_empty() && !cs[0].image.is_empty(), "{}", o.what());
    }
    let job = one(&objects, "Job");
    let policy = job.doc["spec"]["template"]["spec"]["restartPolicy"].as_str();
    assert!(matches!(policy, Some("Never" | "OnFailure")), "a Job's pods need restartPolicy Never or OnFailure");
    assert!(job.doc["spec"]["backoffLimit"].as_i64().is_some(), "the Job bounds its retries");
    let deployment = one(&objects, "Deployment");
    let labels = &deployment.doc["spec"]["template"]["metadata"]["labels"];
    for (k, v) in deployment.doc["spec"]["selector"]["matchLabels"].as_mapping().expect("a selector").iter() {
        assert_eq!(&labels[k], v, "the Deployment's selector must match its pods' labels");
    }
    secrets(&objects);
}

#[test]
fn kustomize_applies_everything_but_the_secrets_in_one_namespace() {
    let objects = objects();
    let k = one(&objects, "Kustomization");
    assert_eq!(k.file, KUSTOMIZATION_FILE);
    let resources: BTreeSet<String> =
        serde_yaml::from_value(k.doc["resources"].clone()).expect("resources: a list of files");
    let files: BTreeSet<String> =
        objects.iter().map(|o| o.file.clone()).filter(|f| f != KUSTOMIZATION_FILE && f != SECRETS_FILE).collect();
    assert_eq!(resources, files, "kustomization.yaml must list every manifest but the Secrets");
    let secret_files: BTreeSet<&str> =
        objects.iter().filter(|o| o.kind() == "Secret").map(|o| o.file.as_str()).collect();
    // So re-applying the kustomization never resets a Secret, and leaves
    // nothing else out.
    assert_eq!(secret_files, BTreeSet::from([SECRETS_FILE]), "the Secrets live in {SECRETS_FILE} alone");
    for o in objects.iter().filter(|o| o.file == SECRETS_FILE) {
        assert_eq!(o.kind(), "Secret", "{}: kubectl apply -k leaves {SECRETS_FILE} out", o.what());
    }

    // One namespace: the kustomization's, which the Secrets name themselves
    // (they are applied with kubectl apply -f).
    let ns = k.doc["namespace"].as_str().expect("the kustomization sets the namespace");
    for o in &objects {
        let own = o.doc["metadata"]["namespace"].as_str();
        if o.file == SECRETS_FILE {
            assert_eq!(own, Some(ns), "{}: the Secrets must be created in `{ns}`", o.what());
        } else {
            assert!(own.is_none() || own == Some(ns), "{}: in another namespace than `{ns}`", o.what());
        }
    }
}

#[test]
fn the_spinapp_is_the_app_of_spin_toml() {
    let m = app();
    let objects = objects();
    let spinapp: SpinApp = typed(one(&objects, "SpinApp"));
    let spec = &spinapp.spec;

    // `spin registry push <registry>/<name>:<version>` from this checkout.
    let (registry, name, tag) = image_parts(&spec.image);
    assert!(!registry.is_empty(), "the image names its registry: {}", spec.image);
    assert_eq!(name, m.name, "the image is named after [application] name");
    assert_eq!(Some(tag), m.version.as_deref(), "the image's tag is [application] version");
    assert_eq!(spinapp.metadata.name, m.name, "the SpinApp, and so its Service, is named after the application");

    assert_eq!(spec.executor, "containerd-shim-spin");
    assert!(!spec.enable_autoscaling);
    assert!(spec.replicas.is_some_and(|r| r >= 1), "replicas: {:?}", spec.replicas);
    // Every component runs: the stages are dependencies of the entries,
    // and a list would have to name them all.
    assert!(spec.components.is_none(), "a `components` list would leave the stages out");
    for (what, map) in [("requests", &spec.resources.requests), ("limits", &spec.resources.limits)] {
        assert!(map.contains_key("memory"), "resources.{what} must give memory");
    }

    // The probes reach the components they mean to.
    let router = Router::new(&m.http_base, &m.http).unwrap();
    let component = |path: &str| router.route(path).unwrap_or_else(|| panic!("no route for {path}")).component;
    let readiness = spec.checks.readiness.as_ref().expect("a readiness probe");
    assert_eq!(readiness.http_get.path, "/health");
    assert_eq!(component(&readiness.http_get.path), "api", "readiness is the API's /health, which checks the stores");
    let liveness = spec.checks.liveness.as_ref().expect("a liveness probe");
    let live = &m.components[&component(&liveness.http_get.path)];
    assert!(
        live.def.key_value_stores.is_empty()
            && live.def.sqlite_databases.is_empty()
            && live.def.allowed_outbound_hosts.is_empty()
            && live.dependencies.is_empty(),
        "liveness ({} on `{}`) must touch no store, or a database outage restarts every pod",
        liveness.http_get.path,
        live.id
    );
}

#[test]
fn variables_are_declared_and_secrets_come_from_secrets() {
    let m = app();
    let objects = objects();
    let secrets = secrets(&objects);
    let spinapp: SpinApp = typed(one(&objects, "SpinApp"));
    let mut set = BTreeSet::new();
    for v in &spinapp.spec.variables {
        assert!(set.insert(v.name.clone()), "variable `{}` is set twice", v.name);
        let def = m
            .variables
            .get(&v.name)
            .unwrap_or_else(|| panic!("the SpinApp sets `{}`, which spin.toml's [variables] does not declare", v.name));
        match (&v.value, &v.value_from) {
            (Some(_), None) => {
                assert!(!def.secret, "`{}` is secret in spin.toml: take it from a Secret, not a literal", v.name)
            }
            (None, Some(from)) => {
                let r = from.secret_key_ref.as_ref().unwrap_or_else(|| {
                    panic!("`{}` must come from a Secret (secretKeyRef), not another source", v.name)
                });
                assert!(!r.optional, "`{}`: an optional Secret key would hide a missing one", v.name);
                secret_value(&secrets, r, &format!("variable `{}`", v.name));
            }
            _ => panic!("`{}` needs either `value` or `valueFrom`", v.name),
        }
    }
    for (name, def) in &m.variables {
        if def.required || def.default.is_none() {
            assert!(set.contains(name), "`{name}` has no default in spin.toml: the SpinApp must set it");
        }
    }
    for name in DEPLOYMENT_SETS {
        assert!(m.variables.contains_key(name), "`{name}` is no longer a variable of spin.toml");
        assert!(set.contains(name), "the SpinApp must set `{name}`");
    }
    // Every key of the variables' Secret is read by someone.
    let mut read: BTreeSet<(String, String)> = BTreeSet::new();
    let workloads = objects.iter().filter(|o| matches!(o.kind(), "Deployment" | "Job"));
    for v in spinapp.spec.variables.iter().cloned().chain(workloads.flat_map(containers).flat_map(|c| c.env)) {
        if let Some(r) = v.value_from.and_then(|f| f.secret_key_ref) {
            read.insert((r.name, r.key));
        }
    }
    for (secret, keys) in &secrets {
        if secret == "mneme-runtime-config" {
            continue;
        }
        for key in keys.keys() {
            assert!(read.contains(&(secret.clone(), key.clone())), "Secret `{secret}` key `{key}` is read by nothing");
        }
    }
}

/// The Spin variables of the SpinApp with the committed Secrets' values,
/// resolved as Spin resolves them.
fn resolved(m: &Manifest, objects: &[Object]) -> AppVariables {
    let secrets = secrets(objects);
    let spinapp: SpinApp = typed(one(objects, "SpinApp"));
    let mut env = BTreeMap::new();
    for v in &spinapp.spec.variables {
        let value = match (&v.value, &v.value_from) {
            (Some(value), _) => value.clone(),
            (None, Some(from)) => secret_value(&secrets, from.secret_key_ref.as_ref().unwrap(), &v.name).to_string(),
            (None, None) => String::new(),
        };
        env.insert(env_name(&v.name), value);
    }
    AppVariables::resolve(&m.variables, &|k| env.get(k).cloned()).expect("the variables resolve")
}

#[test]
fn the_stores_are_hosted_and_reachable_under_allowed_outbound_hosts() {
    let m = app();
    let objects = objects();
    let vars = resolved(&m, &objects);
    let pg_url = vars.get("pg_url").filter(|v| !v.is_empty()).expect("pg_url selects PostgreSQL");
    let redis_url = vars.get("redis_url").filter(|v| !v.is_empty()).expect("redis_url selects Redis");
    let (pg_host, pg_port) = pg_endpoint(pg_url);
    assert_eq!(endpoint(redis_url).0, "redis", "redis_url: {redis_url}");
    // What each component that opens the stores may reach, with these
    // values: Spin refuses a connection outside it.
    let mut checked = 0;
    for c in m.components.values().filter(|c| !c.def.allowed_outbound_hosts.is_empty()) {
        let uses_stores = c.dependencies.iter().any(|d| d.component == "store");
        if !uses_stores {
            continue;
        }
        let expanded: Vec<String> = c.def.allowed_outbound_hosts.iter().map(|t| vars.expand(t).unwrap()).collect();
        let allowed = AllowedHosts::parse(&expanded).unwrap();
        assert!(
            allowed.allows("postgres", &pg_host, pg_port),
            "`{}` may not reach postgres://{pg_host}:{pg_port} (pg_url): set pg_host to it; allowed: {expanded:?}",
            c.id
        );
        assert!(allowed.allows_url(redis_url), "`{}` may not reach {redis_url}: set redis_host to it", c.id);
        checked += 1;
    }
    assert!(checked >= 2, "the api and tick entries open the stores");
}

/// The runtime config the SpinApp loads, as text.
fn spinkube_runtime_config(objects: &[Object]) -> String {
    let spinapp: SpinApp = typed(one(objects, "SpinApp"));
    let secret = spinapp.spec.runtime_config.load_from_secret.expect("runtimeConfig.loadFromSecret");
    let secrets = secrets(objects);
    let keys = secrets.get(&secret).unwrap_or_else(|| panic!("no Secret `{secret}` in {SECRETS_FILE}"));
    assert_eq!(
        keys.keys().collect::<Vec<_>>(),
        ["runtime-config.toml"],
        "spin-operator reads one key, runtime-config.toml"
    );
    keys["runtime-config.toml"].clone()
}

/// The store labels the components of spin.toml use: key-value, SQLite.
fn labels(m: &Manifest) -> (BTreeSet<String>, BTreeSet<String>) {
    let kv = m.components.values().flat_map(|c| c.def.key_value_stores.iter().cloned()).collect();
    let sqlite = m.components.values().flat_map(|c| c.def.sqlite_databases.iter().cloned()).collect();
    (kv, sqlite)
}

/// Loads `text` with this crate's loader (the subset of Spin's runtime
/// config that `mneme up` also reads), from a file in a fresh directory.
fn load_runtime_config(text: &str, state_dir: &Path) -> RuntimeConfig {
    let dir =
        std::env::temp_dir().join(format!("mneme-spinkube-{}-{:?}", std::process::id(), std::thread::current().id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("runtime-config.toml");
    std::fs::write(&path, text).unwrap();
    let cfg = RuntimeConfig::load(Some(&path), state_dir).unwrap_or_else(|e| panic!("{e:#}"));
    let _ = std::fs::remove_dir_all(&dir);
    cfg
}

/// Every label of `table` (`key_value_store`, `sqlite_database`) in a
/// runtime config.
fn declared(raw: &toml::Table, table: &str) -> BTreeSet<String> {
    raw.get(table).and_then(|t| t.as_table()).map(|t| t.keys().cloned().collect()).unwrap_or_default()
}

#[test]
fn the_runtime_config_binds_every_store_label_and_the_embeddings() {
    let m = app();
    let objects = objects();
    let text = spinkube_runtime_config(&objects);
    let raw: toml::Table = toml::from_str(&text).expect("runtime-config.toml is TOML");
    let (kv, sqlite) = labels(&m);
    assert!(!kv.is_empty() && !sqlite.is_empty(), "spin.toml's components name their stores");
    assert_eq!(declared(&raw, "key_value_store"), kv, "the runtime config binds each key-value label spin.toml uses");
    assert_eq!(declared(&raw, "sqlite_database"), sqlite, "the runtime config binds each SQLite label spin.toml uses");

    let cfg = load_runtime_config(&text, Path::new("/nonexistent-state"));
    let redis_url = resolved(&m, &objects).get("redis_url").unwrap().to_string();
    for label in &kv {
        assert_eq!(
            cfg.kv[label],
            KvBackend::Redis(redis_url.clone()),
            "key_value_store.{label} is the Redis of redis_url, shared by the replicas"
        );
    }
    for label in &sqlite {
        let t = &raw["sqlite_database"][label.as_str()];
        assert_eq!(t.get("type").and_then(|v| v.as_str()), Some("spin"), "sqlite_database.{label}");
        assert!(t.get("path").is_none(), "sqlite_database.{label}: a path would be a file in one pod's disk");
    }

    // Components that ask for embeddings get them from a server: the shim
    // has no local model engine.
    if m.components.values().any(|c| !c.def.ai_models.is_empty()) {
        let llm = raw.get("llm_compute").and_then(|v| v.as_table()).expect("[llm_compute] for ai_models");
        assert_eq!(llm.get("type").and_then(|v| v.as_str()), Some("remote_http"));
        assert_eq!(llm.get("api_type").and_then(|v| v.as_str()), Some("open_ai"), "an OpenAI-compatible server");
        assert!(llm.get("auth_token").is_some_and(|v| v.is_str()), "Spin requires auth_token, even empty");
        let url = &cfg.llm.as_ref().expect("loaded").url;
        assert!(matches!(endpoint(url).0.as_str(), "http" | "https"), "{url}");
    }
}

#[test]
fn the_scheduler_runs_the_schedules_of_this_spin_toml_against_the_spinapp() {
    let m = app();
    let objects = objects();
    let spinapp: SpinApp = typed(one(&objects, "SpinApp"));
    let deployment = one(&objects, "Deployment");
    assert_eq!(deployment.doc["spec"]["replicas"].as_i64(), Some(1), "one scheduler (a second is harmless)");
    let scheduler = containers(deployment).remove(0);

    // The image: built by scheduler.Dockerfile from this checkout, with
    // the app's registry and version.
    let (registry, name, tag) = image_parts(&scheduler.image);
    assert_eq!(registry, image_parts(&spinapp.spec.image).0, "one registry for the app and its scheduler");
    assert_eq!(name, format!("{}-scheduler", m.name));
    assert_eq!(Some(tag), m.version.as_deref(), "the scheduler is built from the app's checkout");
    let docker = dockerfile();
    assert!(
        docker.runs.iter().any(|r| r.contains("cargo build") && r.contains("-p mneme-runner")),
        "{:?}",
        docker.runs
    );
    let binary = docker.dest_of("(stage) /src/target/release/mneme");
    assert_eq!(docker.entrypoint, [binary.rsplit('/').next().unwrap()], "the entrypoint is the mneme binary");

    // `mneme cron --url <the SpinApp's Service> -f <this spin.toml>`.
    assert!(scheduler.command.is_empty(), "the image's entrypoint runs");
    let argv = &scheduler.args;
    assert_eq!(argv.first().map(String::as_str), Some("cron"), "{argv:?}");
    let manifest_in_image = docker.dest_of("spin.toml");
    assert_eq!(
        flag(argv, &["-f", "--from"]),
        Some(manifest_in_image),
        "the scheduler reads the spin.toml its image copies from the checkout"
    );
    let url = flag(argv, &["--url"]).expect("--url");
    assert_eq!(endpoint(url), ("http".into(), spinapp.metadata.name.clone(), 80), "the SpinApp's Service: {url}");

    // The token the app checks, from where the app takes it.
    let token_var = m.cron_token_variable.as_deref().expect("spin.toml names its cron token variable");
    let app_ref = spinapp.spec.variables.iter().find(|v| v.name == token_var).and_then(|v| v.value_from.clone());
    let app_ref = app_ref.and_then(|f| f.secret_key_ref).expect("the SpinApp takes the cron token from a Secret");
    let env = scheduler.env.iter().find(|e| e.name == env_name(token_var)).expect("the scheduler's cron token");
    assert_eq!(env.value_from.clone().and_then(|f| f.secret_key_ref), Some(app_ref), "the same Secret key");

    // Every schedule reaches the component spin.toml names for it.
    assert!(!m.cron.is_empty(), "spin.toml schedules jobs");
    let router = Router::new(&m.http_base, &m.http).unwrap();
    for job in &m.cron {
        let routed = router.route(&job.path).map(|r| r.component);
        assert_eq!(routed.as_deref(), Some(job.component.as_str()), "{} must reach `{}`", job.path, job.component);
    }
}

#[test]
fn the_migration_job_calls_the_migrate_tick_with_the_cron_token() {
    let m = app();
    let objects = objects();
    let spinapp: SpinApp = typed(one(&objects, "SpinApp"));
    let job = containers(one(&objects, "Job")).remove(0);
    let scheduler = containers(one(&objects, "Deployment")).remove(0);
    assert_eq!(job.image, scheduler.image, "the Job runs the scheduler's image");

    // Its command is migrate.sh, which the image puts on the PATH.
    let docker = dockerfile();
    let script = docker.dest_of("deploy/spinkube/migrate.sh");
    assert_eq!(job.command.len(), 1, "{:?}", job.command);
    assert_eq!(script, format!("/usr/local/bin/{}", job.command[0]), "the Job's command is migrate.sh");
    let text = std::fs::read_to_string(spinkube().join("migrate.sh")).unwrap();
    assert!(text.contains("/tick/migrate\""), "migrate.sh POSTs /tick/migrate");
    let scheduled = m.cron.iter().find(|c| c.path == "/tick/migrate").expect("spin.toml schedules /tick/migrate");
    assert!(scheduled.at_startup, "the scheduler also migrates first thing");
    assert!(text.contains("--config -"), "the token reaches curl on its standard input, not its command line");

    let url = job.env.iter().find(|e| e.name == "MNEME_URL").and_then(|e| e.value.clone()).expect("MNEME_URL");
    assert_eq!(endpoint(&url), ("http".into(), spinapp.metadata.name.clone(), 80), "the SpinApp's Service");
    let token_var = m.cron_token_variable.as_deref().unwrap();
    let token = |env: &[SpinVar]| {
        env.iter().find(|e| e.name == env_name(token_var)).and_then(|e| e.value_from.clone()?.secret_key_ref)
    };
    assert!(token(&job.env).is_some(), "the Job takes the cron token from a Secret");
    assert_eq!(token(&job.env), token(&scheduler.env), "the Job and the scheduler send the same token");
}

#[test]
fn the_committed_secrets_hold_no_credential() {
    let m = app();
    let objects = objects();
    let secrets = secrets(&objects);
    let spinapp: SpinApp = typed(one(&objects, "SpinApp"));
    for v in &spinapp.spec.variables {
        let Some(r) = v.value_from.as_ref().and_then(|f| f.secret_key_ref.as_ref()) else { continue };
        let value = secret_value(&secrets, r, &v.name);
        match v.name.as_str() {
            "pg_url" => assert!(!value.contains("password"), "pg_url must not carry a password: {value}"),
            "redis_url" => {
                let u = url::Url::parse(value).unwrap();
                assert!(u.password().is_none(), "redis_url must not carry a password");
            }
            name => {
                assert!(m.variables[name].secret, "`{name}` comes from a Secret but is not secret in spin.toml");
                assert_eq!(value, "", "`{name}` is a token: leave it empty in the repository (closed)");
            }
        }
    }
    let raw: toml::Table = toml::from_str(&spinkube_runtime_config(&objects)).unwrap();
    for store in raw.get("key_value_store").and_then(|t| t.as_table()).into_iter().flat_map(|t| t.values()) {
        if let Some(url) = store.get("url").and_then(|u| u.as_str()) {
            assert!(url::Url::parse(url).unwrap().password().is_none(), "a store URL with a password: {url}");
        }
    }
    if let Some(token) = raw.get("llm_compute").and_then(|l| l.get("auth_token")).and_then(|t| t.as_str()) {
        assert_eq!(token, "", "llm_compute.auth_token: leave it empty in the repository");
    }
}

/// The `key=value` lines of a systemd unit, by key (a key may repeat).
fn unit(name: &str) -> BTreeMap<String, Vec<String>> {
    let text = std::fs::read_to_string(root().join("deploy/systemd").join(name)).expect(name);
    let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for line in text.lines().map(str::trim) {
        if line.starts_with('#') || line.starts_with('[') || line.is_empty() {
            continue;
        }
        let (k, v) = line.split_once('=').unwrap_or_else(|| panic!("{name}: `{line}` is not key=value"));
        out.entry(k.to_string()).or_default().push(v.to_string());
    }
    out
}

fn only<'a>(u: &'a BTreeMap<String, Vec<String>>, key: &str, name: &str) -> &'a str {
    match u.get(key).map(Vec::as_slice) {
        Some([v]) => v,
        other => panic!("{name}: expected one {key}=, found {other:?}"),
    }
}

#[test]
fn the_systemd_units_serve_and_schedule_one_manifest() {
    let m = app();
    let serve = unit("mneme.service");
    let cron = unit("mneme-cron.service");
    let argv = |u: &BTreeMap<String, Vec<String>>, name: &str| -> Vec<String> {
        only(u, "ExecStart", name).split_whitespace().map(str::to_string).collect()
    };
    let up = argv(&serve, "mneme.service");
    assert!(up[0].ends_with("/spin") && up[1] == "up", "mneme.service runs `spin up`: {up:?}");
    let sched = argv(&cron, "mneme-cron.service");
    assert!(sched[0].ends_with("/mneme") && sched[1] == "cron", "mneme-cron.service runs `mneme cron`: {sched:?}");

    // One manifest: the scheduler reads the schedules of the app it calls.
    let manifest = flag(&up, &["-f", "--from"]).expect("spin up --from");
    assert_eq!(flag(&sched, &["-f", "--from"]), Some(manifest), "both read one spin.toml");
    let listen = flag(&up, &["--listen"]).expect("spin up --listen");
    assert_eq!(flag(&sched, &["--url"]), Some(format!("http://{listen}").as_str()), "cron calls where Spin listens");
    assert_eq!(only(&serve, "EnvironmentFile", "mneme.service"), only(&cron, "EnvironmentFile", "mneme-cron.service"));
    assert_eq!(only(&serve, "User", "mneme.service"), only(&cron, "User", "mneme-cron.service"));
    for key in ["Wants", "After"] {
        assert!(only(&cron, key, "mneme-cron.service").split_whitespace().any(|u| u == "mneme.service"), "{key}=");
    }

    // The runtime config is this repository's, at the same place relative
    // to spin.toml, and binds the labels spin.toml uses inside the state
    // directory systemd gives the service.
    let app_dir = Path::new(manifest).parent().unwrap();
    let config = flag(&up, &["--runtime-config-file"]).expect("--runtime-config-file");
    let relative = Path::new(config).strip_prefix(app_dir).expect("the runtime config lies beside spin.toml");
    let text = std::fs::read_to_string(root().join(relative))
        .unwrap_or_else(|_| panic!("{} in the repository", relative.display()));
    let state = flag(&up, &["--state-dir"]).expect("--state-dir");
    assert_eq!(state, format!("/var/lib/{}", only(&serve, "StateDirectory", "mneme.service")), "the state directory");
    let raw: toml::Table = toml::from_str(&text).unwrap();
    let (kv, sqlite) = labels(&m);
    assert_eq!(declared(&raw, "key_value_store"), kv);
    assert_eq!(declared(&raw, "sqlite_database"), sqlite);
    let cfg = load_runtime_config(&text, Path::new(state));
    for (label, backend) in &cfg.kv {
        assert!(
            matches!(backend, KvBackend::SqliteFile(p) if p.starts_with(state)),
            "key_value_store.{label} must be in {state}: {backend:?}"
        );
    }
    for (label, path) in &cfg.sqlite {
        assert!(path.starts_with(state), "sqlite_database.{label} must be in {state}: {}", path.display());
    }
}
