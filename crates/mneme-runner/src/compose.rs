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

/// The name under which a denied import is served by the host.
pub fn deny_name(import: &str) -> String {
    let mut s = String::from("mneme-deny");
    for part in import.split(|c: char| !c.is_ascii_alphanumeric()).filter(|p| !p.is_empty()) {
        s.push('-');
        s.push_str(&part.to_ascii_lowercase());
    }
    s
}

fn interface_matches(key: &str, import: &str) -> bool {
    let strip = |s: &str| s.split('@').next().unwrap_or(s).to_string();
    if key.contains('/') {
        strip(key) == strip(import)
    } else {
        import.split('/').next().is_some_and(|pkg| strip(pkg) == strip(key))
    }
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
        let pkg = Package::from_bytes(&format!("mneme:dep{i}"), None, bytes.clone(), graph.types_mut())
            .with_context(|| format!("parsing dependency component `{}`", dep.component))?;
        let pid = graph.register_package(pkg)?;
        let dep_exports: Vec<String> = graph.types()[graph[pid].ty()].exports.keys().cloned().collect();
        let dep_imports: Vec<(String, wac_graph::types::ItemKind)> =
            graph.types()[graph[pid].ty()].imports.iter().map(|(k, v)| (k.clone(), *v)).collect();
        let inst = graph.instantiate(pid);

        let targets: Vec<&String> = root_imports.iter().filter(|imp| interface_matches(&dep.key, imp)).collect();
        if targets.is_empty() {
            bail!("dependency `{}`: the entry component imports nothing matching `{}`", dep.component, dep.key);
        }
        for import in targets {
            let export = match &dep.export {
                Some(e) => e.clone(),
                None => {
                    dep_exports.iter().find(|e| interface_matches(e, import) && e.contains('/')).cloned().with_context(
                        || format!("dependency component `{}` exports nothing for `{import}`", dep.component),
                    )?
                }
            };
            let alias = graph
                .alias_instance_export(inst, &export)
                .with_context(|| format!("dependency `{}` has no export `{export}`", dep.component))?;
            graph
                .set_instantiation_argument(root_inst, import, alias)
                .with_context(|| format!("plugging `{export}` of `{}` into `{import}`", dep.component))?;
        }

        for (import, kind) in dep_imports {
            let Some(cap) = capability_of(&import) else { continue };
            let granted = match &dep.inherit {
                Inherit::All => true,
                Inherit::None => false,
                Inherit::Some(keys) => keys.iter().any(|k| k == cap),
            };
            if !granted {
                // A copy of the interface type without its id: wac-graph
                // shares instance imports by interface id, which would fold
                // the deny import back into the real one.
                let kind = match kind {
                    wac_graph::types::ItemKind::Instance(id) => {
                        let mut anonymous = graph.types()[id].clone();
                        anonymous.id = None;
                        wac_graph::types::ItemKind::Instance(graph.types_mut().add_interface(anonymous))
                    }
                    other => other,
                };
                let node = graph.import(deny_name(&import), kind).context("adding a deny import")?;
                graph.set_instantiation_argument(inst, &import, node)?;
            }
        }
    }

    for name in root_exports {
        let alias = graph.alias_instance_export(root_inst, &name)?;
        graph.export(alias, &name)?;
    }
    graph.encode(EncodeOptions::default()).context("encoding the composed component")
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
    }
}
