//! The shape of the code, held as issue #23 sets it: no two source files of
//! a crate or component import each other, directly or around a circle; no
//! crate or component holds more than 15% of the Rust lines; and a stage
//! function's contract is typed WIT, not a JSON string (D-C26).
//!
//! All three are ratchets while #23 is under way: what breaks the rule
//! today is listed below, a new breach fails, and so does a listed one that
//! is gone (take it off the list, so it cannot come back).

use mneme_e2e::rust_files;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Circles of files that import each other, each as its files sorted,
/// relative to the repository. None is left; a new one fails the test.
const KNOWN_CIRCLES: &[&[&str]] = &[];

/// Crates and components over the 15% share. None is left; a new one
/// fails the test.
const KNOWN_LARGE: &[&str] = &[];

/// Stage functions that take or return a bare JSON string, as
/// `package/function`. None is left (D-C28: JSON crosses a seam only under
/// a named alias that says why); a new one fails the test.
const KNOWN_JSON_FUNCS: &[&str] = &[];

/// The most of the Rust lines (under `crates/*/src` and `components/*/src`)
/// one crate or component may hold.
const MAX_SHARE: f64 = 0.15;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Every crate and component: its folder, relative to the repository.
fn units() -> Vec<String> {
    let mut out = Vec::new();
    for parent in ["crates", "components"] {
        for e in std::fs::read_dir(repo().join(parent)).unwrap() {
            let p = e.unwrap().path();
            if p.join("src").is_dir() {
                out.push(format!("{parent}/{}", p.file_name().unwrap().to_string_lossy()));
            }
        }
    }
    out.sort();
    out
}

/// The module path of a file under `src`: `a/b.rs` and `a/b/mod.rs` are
/// `["a", "b"]`; `lib.rs` and `main.rs`, the root, are `[]`. A file under
/// `src/bin` is a crate of its own, with its own root.
fn module_of(rel: &Path) -> Vec<String> {
    let mut parts: Vec<String> = rel.iter().map(|p| p.to_string_lossy().into_owned()).collect();
    let last = parts.pop().unwrap();
    let stem = last.trim_end_matches(".rs");
    if !(stem == "mod" || (parts.is_empty() && (stem == "lib" || stem == "main"))) {
        parts.push(stem.to_string());
    }
    parts
}

/// Paths named after `crate::` (or `super::`, resolved) in `text`: for
/// `use crate::{a::b, c}` both `a::b` and `c`.
fn referenced_paths(text: &str, module: &[String]) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    for (anchor, base) in [("crate::", Vec::new()), ("super::", module[..module.len().saturating_sub(1)].to_vec())] {
        let mut rest = text;
        while let Some(at) = rest.find(anchor) {
            let before = rest[..at].chars().next_back();
            rest = &rest[at + anchor.len()..];
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
                continue;
            }
            for tail in expand(rest) {
                let mut path = base.clone();
                path.extend(tail);
                out.push(path);
            }
        }
    }
    out
}

/// The paths at the start of `s`: `a::b::C` gives `[a, b, C]`; a brace
/// group gives each of its members' paths.
fn expand(s: &str) -> Vec<Vec<String>> {
    let s = s.trim_start();
    if let Some(inner) = s.strip_prefix('{') {
        let mut depth = 0;
        let mut end = inner.len();
        for (i, c) in inner.char_indices() {
            match c {
                '{' => depth += 1,
                '}' if depth == 0 => {
                    end = i;
                    break;
                }
                '}' => depth -= 1,
                _ => {}
            }
        }
        let group = &inner[..end];
        let (mut members, mut depth, mut start) = (Vec::new(), 0, 0);
        for (i, c) in group.char_indices() {
            match c {
                '{' => depth += 1,
                '}' => depth -= 1,
                ',' if depth == 0 => {
                    members.push(&group[start..i]);
                    start = i + 1;
                }
                _ => {}
            }
        }
        members.push(&group[start..]);
        return members.into_iter().flat_map(expand).collect();
    }
    let ident: String = s.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
    if ident.is_empty() {
        return Vec::new();
    }
    let after = &s[ident.len()..];
    match after.strip_prefix("::") {
        Some(more) => {
            let tails = expand(more);
            if tails.is_empty() {
                vec![vec![ident]]
            } else {
                tails
                    .into_iter()
                    .map(|t| {
                        let mut p = vec![ident.clone()];
                        p.extend(t);
                        p
                    })
                    .collect()
            }
        }
        None => vec![vec![ident]],
    }
}

/// Each file's imports of other files of the same crate. A file naming what
/// its own parent modules define is not counted: a parent declares its
/// children, so that edge is the tree itself.
fn import_graph(unit: &str) -> BTreeMap<String, BTreeSet<String>> {
    let src = repo().join(unit).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    // One module tree per crate root: `src/bin/x.rs` is its own.
    let mut modules: BTreeMap<(String, Vec<String>), String> = BTreeMap::new();
    let mut info = Vec::new();
    for f in &files {
        let rel = f.strip_prefix(&src).unwrap();
        let (root, module) = match rel.strip_prefix("bin") {
            Ok(r) => (format!("bin/{}", r.iter().next().unwrap().to_string_lossy()), Vec::new()),
            Err(_) => ("lib".to_string(), module_of(rel)),
        };
        let name = format!("{unit}/src/{}", rel.to_string_lossy());
        modules.insert((root.clone(), module.clone()), name.clone());
        info.push((name, root, module, std::fs::read_to_string(f).unwrap()));
    }
    let mut graph = BTreeMap::new();
    for (name, root, module, text) in info {
        let mut to = BTreeSet::new();
        for path in referenced_paths(&text, &module) {
            // The longest prefix of the path that is a file of this crate.
            let target =
                (1..=path.len()).rev().find_map(|n| modules.get(&(root.clone(), path[..n].to_vec())).map(|f| (n, f)));
            if let Some((n, f)) = target {
                let ancestor = n <= module.len() && module[..n] == path[..n];
                if !ancestor && *f != name {
                    to.insert(f.clone());
                }
            }
        }
        graph.insert(name, to);
    }
    graph
}

/// The strongly connected components with more than one file (Tarjan).
fn circles(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    struct Walk<'a> {
        graph: &'a BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on_stack: BTreeSet<&'a str>,
        out: Vec<Vec<String>>,
    }
    fn visit<'a>(w: &mut Walk<'a>, v: &'a str) {
        let i = w.index.len();
        w.index.insert(v, i);
        w.low.insert(v, i);
        w.stack.push(v);
        w.on_stack.insert(v);
        for u in &w.graph[v] {
            let u = u.as_str();
            if !w.index.contains_key(u) {
                visit(w, u);
                let l = w.low[u].min(w.low[v]);
                w.low.insert(v, l);
            } else if w.on_stack.contains(u) {
                let l = w.index[u].min(w.low[v]);
                w.low.insert(v, l);
            }
        }
        if w.low[v] == w.index[v] {
            let mut scc = Vec::new();
            while let Some(u) = w.stack.pop() {
                w.on_stack.remove(u);
                scc.push(u.to_string());
                if u == v {
                    break;
                }
            }
            if scc.len() > 1 {
                scc.sort();
                w.out.push(scc);
            }
        }
    }
    let mut w = Walk {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        out: Vec::new(),
    };
    for v in graph.keys() {
        if !w.index.contains_key(v.as_str()) {
            visit(&mut w, v);
        }
    }
    w.out
}

#[test]
fn the_reader_finds_imports_and_circles() {
    let m = vec!["host".to_string(), "deny".to_string()];
    let paths = referenced_paths("use crate::{a::b, c::{d, e::F}};\nuse super::kv::X; let x = mycrate::z;", &m);
    let want: Vec<Vec<&str>> = vec![vec!["a", "b"], vec!["c", "d"], vec!["c", "e", "F"], vec!["host", "kv", "X"]];
    assert_eq!(paths, want.iter().map(|p| p.iter().map(|s| s.to_string()).collect::<Vec<_>>()).collect::<Vec<_>>());
    let g: BTreeMap<String, BTreeSet<String>> =
        [("a", vec!["b"]), ("b", vec!["c"]), ("c", vec!["a"]), ("d", vec!["a"]), ("e", vec![])]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.into_iter().map(String::from).collect()))
            .collect();
    assert_eq!(circles(&g), vec![vec!["a".to_string(), "b".into(), "c".into()]]);
}

#[test]
fn no_files_import_each_other_beyond_the_known_circles() {
    let found: BTreeSet<Vec<String>> = units().iter().flat_map(|u| circles(&import_graph(u))).collect();
    let known: BTreeSet<Vec<String>> =
        KNOWN_CIRCLES.iter().map(|c| c.iter().map(|s| s.to_string()).collect()).collect();
    let new: Vec<_> = found.difference(&known).collect();
    let gone: Vec<_> = known.difference(&found).collect();
    assert!(new.is_empty(), "files that import each other in a circle: {new:#?}");
    assert!(gone.is_empty(), "circles no longer there; take them off KNOWN_CIRCLES: {gone:#?}");
}

#[test]
fn no_crate_or_component_holds_more_than_its_share() {
    let mut lines = BTreeMap::new();
    for u in units() {
        let mut files = Vec::new();
        rust_files(&repo().join(&u).join("src"), &mut files);
        let n: usize = files.iter().map(|f| std::fs::read_to_string(f).unwrap().lines().count()).sum();
        lines.insert(u, n);
    }
    let total: usize = lines.values().sum();
    let large: BTreeSet<&str> =
        lines.iter().filter(|(_, n)| **n as f64 / total as f64 > MAX_SHARE).map(|(u, _)| u.as_str()).collect();
    let known: BTreeSet<&str> = KNOWN_LARGE.iter().copied().collect();
    let shares: Vec<String> =
        lines.iter().map(|(u, n)| format!("{u} {:.1}%", 100.0 * *n as f64 / total as f64)).collect();
    assert_eq!(large, known, "over {}% of {total} lines: {shares:#?}", MAX_SHARE * 100.0);
}

/// The functions of one WIT file whose parameters or result is a bare JSON
/// string, as `package/function` (the WIT escape `%` dropped).
fn json_string_funcs_in(package: &str, text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for line in text.lines().map(str::trim) {
        if line.starts_with("///") {
            continue;
        }
        let Some((name, sig)) = line.split_once(": async func(") else { continue };
        let sig = sig.replace(' ', "");
        if sig.starts_with("request:string)") || sig.ends_with("->result<string,stage-error>;") {
            out.push(format!("{package}/{}", name.trim_start_matches('%')));
        }
    }
    out
}

/// Every such function declared in `wit/`.
fn json_string_funcs() -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for dir in std::fs::read_dir(repo().join("wit")).unwrap() {
        let dir = dir.unwrap().path();
        let package = dir.file_name().unwrap().to_string_lossy().to_string();
        for file in std::fs::read_dir(&dir).unwrap() {
            out.extend(json_string_funcs_in(&package, &std::fs::read_to_string(file.unwrap().path()).unwrap()));
        }
    }
    out
}

#[test]
fn the_reader_finds_json_string_functions() {
    let wit = "    /// `{x}` -> `{y}`: a doc line: async func(request: string) -> result<string, stage-error>;\n\
               %list: async func(request: string) -> result<string, stage-error>;\n\
               put: async func(name: string, body: string) -> result<string, stage-error>;\n\
               take: async func(request: string) -> result<taken, stage-error>;\n\
               route: async func(text: string, context: assembled) -> result<routed, stage-error>;";
    assert_eq!(json_string_funcs_in("p", wit), ["p/list", "p/put", "p/take"]);
}

#[test]
fn no_stage_function_passes_json_beyond_the_known_ones() {
    let found = json_string_funcs();
    let known: BTreeSet<String> = KNOWN_JSON_FUNCS.iter().map(|s| s.to_string()).collect();
    let new: Vec<_> = found.difference(&known).collect();
    let gone: Vec<_> = known.difference(&found).collect();
    assert!(new.is_empty(), "stage functions passing JSON strings; give them WIT types (D-C26): {new:#?}");
    assert!(gone.is_empty(), "typed now; take them off KNOWN_JSON_FUNCS: {gone:#?}");
}
