//! Component dependencies, composed at load time with `wac-graph` the way
//! Spin 4.1 composes them: each `[component.X.dependencies]` entry plugs the
//! dependency's export into the parent's import(s) of the same interface or
//! package; anything left unplugged becomes an import of the composed
//! component, satisfied by the host.
//!
//! A dependency that does not inherit a capability gets it denied: its
//! import of that capability is renamed to `mneme-deny-…`, which the host
//! serves with implementations that refuse every call, as Spin's deny-all
//! adapter does.

use anyhow::{Context, Result, bail};
use wac_graph::types::Package;
use wac_graph::{CompositionGraph, EncodeOptions};

use crate::manifest::{Dependency, Inherit};

/// The capability group (Spin's inherit key) an import belongs to, if any.
pub fn capability_of(import: &str) -> Option<&'static str> {
    let iface = import.split('@').next().unwrap_or(import);
    Some(match iface {
        "spin:key-value/key-value" => "key_value_stores",
        "spin:sqlite/sqlite" => "sqlite_databases",
        "spin:variables/variables" => "variables",
        "fermyon:spin/llm" => "ai_models",
        "spin:postgres/postgres" | "spin:redis/redis" | "wasi:http/client" => "allowed_outbound_hosts",
        _ => return None,
    })
}

/// The name under which the host serves `import` denied: `mneme-deny-`
/// and the import's name in plain kebab. The composed component imports it
/// as [`deny_import`] says, once per dependency it is denied to.
pub fn deny_name(import: &str) -> String {
    let mut s = String::from("mneme-deny");
    push_kebab(&mut s, import);
    s
}

/// The import of the composed component that serves `import` denied to
/// `dependency`: [`deny_name`] and `-for-<dependency>`. One per dependency,
/// since two dependencies' copies of an interface are separate types (their
/// resources included) and the graph takes each import name once.
pub fn deny_import(import: &str, dependency: &str) -> String {
    let mut s = deny_name(import);
    s.push_str("-for");
    push_kebab(&mut s, dependency);
    s
}

/// The denied interface a `mneme-deny-…` import stands for, of `known`.
pub fn denied_interface<'a>(name: &str, known: &[&'a str]) -> Option<&'a str> {
    known.iter().copied().find(|iface| {
        let base = deny_name(iface);
        name == base || name.strip_prefix(&base).is_some_and(|rest| rest.starts_with("-for-"))
    })
}

/// Appends each run of ASCII letters and digits of `text`, lowercased, as a
/// `-word`.
fn push_kebab(s: &mut String, text: &str) {
    for part in text.split(|c: char| !c.is_ascii_alphanumeric()).filter(|p| !p.is_empty()) {
        s.push('-');
        s.push_str(&part.to_ascii_lowercase());
    }
}

fn interface_matches(key: &str, import: &str) -> bool {
    let strip = |s: &str| s.split('@').next().unwrap_or(s).to_string();
    if key.contains('/') {
        strip(key) == strip(import)
    } else {
        import.split('/').next().is_some_and(|pkg| strip(pkg) == strip(key))
    }
}

/// One stage for tracing: the dependency alone, wrapped as [`compose`]
/// wraps it (its denied capabilities routed to the host's refusals), its
/// export of each interface the entry imports from it exported under the
/// entry's import name. The host instantiates it beside the entry and
/// serves the entry's imports by calling these exports inside a span
/// (`app.rs`); a separate top-level instance, because the component model
/// forbids the host to re-enter the instance that called it.
pub struct TracedStage {
    pub component: String,
    pub bytes: Vec<u8>,
    /// The entry's import names it serves.
    pub serves: Vec<String>,
}

/// Prepares `root` and its dependencies for tracing: the entry as built
/// (every import left to the host) and each dependency as a [`TracedStage`].
pub fn compose_traced(root: &[u8], deps: &[(Dependency, Vec<u8>)]) -> Result<Vec<TracedStage>> {
    let mut types = wac_graph::types::Types::default();
    let root_pkg =
        Package::from_bytes("mneme:root", None, root.to_vec(), &mut types).context("parsing the entry component")?;
    let root_imports: Vec<String> = types[root_pkg.ty()].imports.keys().cloned().collect();
    let mut stages = Vec::new();
    for (dep, bytes) in deps {
        let mut graph = CompositionGraph::new();
        let (inst, dep_exports, dep_imports) = add_dependency(&mut graph, "mneme:dep", dep, bytes)?;
        let mut serves = Vec::new();
        for import in root_imports.iter().filter(|imp| interface_matches(&dep.key, imp)) {
            let (export, alias) = dep_export(&mut graph, inst, dep, &dep_exports, import)?;
            graph.export(alias, import).with_context(|| format!("exporting `{export}` as `{import}`"))?;
            serves.push(import.clone());
        }
        if serves.is_empty() {
            bail!("dependency `{}`: the entry component imports nothing matching `{}`", dep.component, dep.key);
        }
        deny_ungranted(&mut graph, inst, dep, &dep_imports)?;
        let bytes = graph.encode(EncodeOptions::default()).context("encoding a traced stage")?;
        stages.push(TracedStage { component: dep.component.clone(), bytes, serves });
    }
    Ok(stages)
}

/// Composes `root` with its dependencies; returns `root` unchanged when it has none.
pub fn compose(root: &[u8], deps: &[(Dependency, Vec<u8>)]) -> Result<Vec<u8>> {
    if deps.is_empty() {
        return Ok(root.to_vec());
    }
    let mut graph = CompositionGraph::new();
    let root_pkg = Package::from_bytes("mneme:root", None, root.to_vec(), graph.types_mut())
        .context("parsing the entry component")?;
    let root_id = graph.register_package(root_pkg)?;
    let root_imports: Vec<String> = graph.types()[graph[root_id].ty()].imports.keys().cloned().collect();
    let root_exports: Vec<String> = graph.types()[graph[root_id].ty()].exports.keys().cloned().collect();
    let root_inst = graph.instantiate(root_id);

    for (i, (dep, bytes)) in deps.iter().enumerate() {
        let (inst, dep_exports, dep_imports) = add_dependency(&mut graph, &format!("mneme:dep{i}"), dep, bytes)?;

        let targets: Vec<&String> = root_imports.iter().filter(|imp| interface_matches(&dep.key, imp)).collect();
        if targets.is_empty() {
            bail!("dependency `{}`: the entry component imports nothing matching `{}`", dep.component, dep.key);
        }
        for import in targets {
            let (export, alias) = dep_export(&mut graph, inst, dep, &dep_exports, import)?;
            graph
                .set_instantiation_argument(root_inst, import, alias)
                .with_context(|| format!("plugging `{export}` of `{}` into `{import}`", dep.component))?;
        }

        deny_ungranted(&mut graph, inst, dep, &dep_imports)?;
    }

    for name in root_exports {
        let alias = graph.alias_instance_export(root_inst, &name)?;
        graph.export(alias, &name)?;
    }
    graph.encode(EncodeOptions::default()).context("encoding the composed component")
}

/// A dependency's place in a graph: its instance, its export names and its
/// imports with their kinds.
type Added = (wac_graph::NodeId, Vec<String>, Vec<(String, wac_graph::types::ItemKind)>);

/// Registers and instantiates `dep` in `graph` as package `name`.
fn add_dependency(graph: &mut CompositionGraph, name: &str, dep: &Dependency, bytes: &[u8]) -> Result<Added> {
    let pkg = Package::from_bytes(name, None, bytes.to_vec(), graph.types_mut())
        .with_context(|| format!("parsing dependency component `{}`", dep.component))?;
    let pid = graph.register_package(pkg)?;
    let ty = &graph.types()[graph[pid].ty()];
    let exports = ty.exports.keys().cloned().collect();
    let imports = ty.imports.iter().map(|(k, v)| (k.clone(), *v)).collect();
    Ok((graph.instantiate(pid), exports, imports))
}

/// The export of `dep` that serves the entry's `import` (the manifest's
/// `export`, or the interface of the same name), aliased in `graph`.
fn dep_export(
    graph: &mut CompositionGraph,
    inst: wac_graph::NodeId,
    dep: &Dependency,
    dep_exports: &[String],
    import: &str,
) -> Result<(String, wac_graph::NodeId)> {
    let export = match &dep.export {
        Some(e) => e.clone(),
        None => dep_exports
            .iter()
            .find(|e| interface_matches(e, import) && e.contains('/'))
            .cloned()
            .with_context(|| format!("dependency component `{}` exports nothing for `{import}`", dep.component))?,
    };
    let alias = graph
        .alias_instance_export(inst, &export)
        .with_context(|| format!("dependency `{}` has no export `{export}`", dep.component))?;
    Ok((export, alias))
}

/// Routes each capability import of `dep` that its grant leaves out to a
/// `mneme-deny-…` import of the composition, which the host refuses.
fn deny_ungranted(
    graph: &mut CompositionGraph,
    inst: wac_graph::NodeId,
    dep: &Dependency,
    dep_imports: &[(String, wac_graph::types::ItemKind)],
) -> Result<()> {
    for (import, kind) in dep_imports {
        let Some(cap) = capability_of(import) else { continue };
        let granted = match &dep.inherit {
            Inherit::All => true,
            Inherit::None => false,
            Inherit::Some(keys) => keys.iter().any(|k| k == cap),
        };
        if !granted {
            // A copy of the interface type without its id: wac-graph
            // shares instance imports by interface id, which would fold
            // the deny import back into the real one.
            let kind = match *kind {
                wac_graph::types::ItemKind::Instance(id) => {
                    let mut anonymous = graph.types()[id].clone();
                    anonymous.id = None;
                    wac_graph::types::ItemKind::Instance(graph.types_mut().add_interface(anonymous))
                }
                other => other,
            };
            let node = graph.import(deny_import(import, &dep.component), kind).context("adding a deny import")?;
            graph.set_instantiation_argument(inst, import, node)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_match_packages_and_interfaces() {
        assert!(interface_matches("mneme:store", "mneme:store/store@0.1.0"));
        assert!(interface_matches("mneme:store/store", "mneme:store/store@0.1.0"));
        assert!(interface_matches("mneme:store/store@0.1.0", "mneme:store/store@0.1.0"));
        assert!(!interface_matches("mneme:store", "mneme:storex/store@0.1.0"));
        assert!(!interface_matches("mneme:store/other", "mneme:store/store@0.1.0"));
    }

    #[test]
    fn capabilities_map_to_spin_inherit_keys() {
        assert_eq!(capability_of("spin:key-value/key-value@3.0.0"), Some("key_value_stores"));
        assert_eq!(capability_of("spin:postgres/postgres@4.2.0"), Some("allowed_outbound_hosts"));
        assert_eq!(capability_of("mneme:types/types@0.1.0"), None);
    }

    #[test]
    fn deny_names_are_plain_kebab() {
        assert_eq!(deny_name("spin:key-value/key-value@3.0.0"), "mneme-deny-spin-key-value-key-value-3-0-0");
        assert_eq!(
            deny_import("spin:key-value/key-value@3.0.0", "probe-stage"),
            "mneme-deny-spin-key-value-key-value-3-0-0-for-probe-stage"
        );
    }

    #[test]
    fn deny_imports_name_their_interface() {
        let known = ["spin:key-value/key-value@3.0.0", "spin:sqlite/sqlite@3.1.0"];
        let kv = deny_import(known[0], "commit");
        assert_eq!(denied_interface(&kv, &known), Some(known[0]));
        assert_eq!(denied_interface(&deny_name(known[1]), &known), Some(known[1]));
        assert_eq!(denied_interface("mneme-deny-spin-key-value-key-value-3-0-0x", &known), None);
        assert_eq!(denied_interface("mneme-deny-spin-redis-redis-3-0-0-for-a", &known), None);
    }

    /// Least privilege as shipped (D-F22): composed as `spin.toml` says,
    /// each stage's capability imports are either in its grant or served
    /// denied, and no grant is wider than the table below, which is what
    /// each stage uses. For every stage and every capability group it
    /// imports, a grant without that group composes the import to the host's
    /// refusal (which `tests/tests/host_interfaces.rs` shows is Spin's).
    #[test]
    fn shipped_stages_get_only_what_they_use() {
        use std::collections::BTreeSet;
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let m = crate::manifest::load(&root.join("spin.toml")).unwrap();
        let read = |p: &std::path::Path| {
            std::fs::read(p).unwrap_or_else(|e| panic!("{}: {e} (scripts/build.sh builds the components)", p.display()))
        };
        let storage = ["allowed_outbound_hosts", "key_value_stores", "sqlite_databases", "variables"];
        let sql_only = ["allowed_outbound_hosts", "sqlite_databases", "variables"];
        let uses = |stage: &str| -> BTreeSet<&str> {
            let mut g: BTreeSet<&str> = match stage {
                "llm" => ["allowed_outbound_hosts", "variables", "ai_models"].into(),
                "triage" | "router" | "commit" | "rx" | "tasks" => sql_only.into(),
                _ => storage.into(),
            };
            if matches!(stage, "context" | "act" | "knowledge" | "consolidate" | "drift" | "memory") {
                g.insert("ai_models");
            }
            g
        };
        let imports_of = |bytes: &[u8]| -> Vec<String> {
            let mut types = wac_graph::types::Types::default();
            let pkg = Package::from_bytes("mneme:probe", None, bytes.to_vec(), &mut types).unwrap();
            types[pkg.ty()].imports.keys().cloned().collect()
        };
        let mut stages_seen = BTreeSet::new();
        for entry in ["api", "tick", "mcp"] {
            let c = &m.components[entry];
            let entry_bytes = read(&c.source);
            let mut deps = Vec::new();
            for d in &c.dependencies {
                let granted: BTreeSet<&str> = match &d.inherit {
                    Inherit::Some(keys) => keys.iter().map(String::as_str).collect(),
                    other => panic!("{entry} → {}: inherit_configuration is {other:?}, not a list", d.component),
                };
                assert_eq!(
                    granted,
                    uses(&d.component),
                    "{entry} → {}: the grant differs from what it uses",
                    d.component
                );
                deps.push((d.clone(), read(&m.components[&d.component].source)));
            }
            let composed = imports_of(&compose(&entry_bytes, &deps).unwrap());
            for (d, bytes) in &deps {
                stages_seen.insert(d.component.clone());
                let Inherit::Some(granted) = &d.inherit else { unreachable!() };
                for import in imports_of(bytes) {
                    let Some(cap) = capability_of(&import) else { continue };
                    let denied = composed.contains(&deny_import(&import, &d.component));
                    assert_eq!(
                        denied,
                        !granted.iter().any(|g| g == cap),
                        "{entry} → {}: `{import}` ({cap}) granted {granted:?}, served denied: {denied}",
                        d.component
                    );
                    // Without this one group, the import goes to the refusal.
                    let narrower: Vec<String> = granted.iter().filter(|g| *g != cap).cloned().collect();
                    let one = Dependency { inherit: Inherit::Some(narrower), ..d.clone() };
                    let alone = imports_of(&compose(&entry_bytes, &[(one, bytes.clone())]).unwrap());
                    assert!(
                        alone.contains(&deny_import(&import, &d.component)),
                        "{entry} → {}: `{import}` not refused without `{cap}`",
                        d.component
                    );
                }
            }
        }
        let stages: BTreeSet<String> =
            m.components.keys().filter(|id| !["api", "tick", "mcp", "web"].contains(&id.as_str())).cloned().collect();
        assert_eq!(stages_seen, stages, "every stage is some entry's dependency");
    }
}
