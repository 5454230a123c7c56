//! Collects the Spin WIT packages the host implements from the `spin-sdk`
//! crate (a build-dependency, so cargo has its source) into `OUT_DIR/wit`,
//! and points `bindgen!` at them through `wit-path.rs`. Guests and host
//! then bind one and the same contract, and no copy is committed.

use std::{env, fs, path::PathBuf, process::Command};

const PACKAGES: &[&str] = &[
    "spin-key-value@3.0.0",
    "spin-sqlite@3.1.0",
    "spin-postgres@4.2.0",
    "spin-redis@3.0.0",
    "spin-variables@3.0.0",
    "fermyon-spin@2.0.0",
];

fn main() {
    let out = PathBuf::from(env::var("OUT_DIR").unwrap());
    let sdk_dir = spin_sdk_dir().join("wit/deps");
    let dest = out.join("wit");
    let _ = fs::remove_dir_all(&dest);
    let mut paths = Vec::new();
    for pkg in PACKAGES {
        let from = sdk_dir.join(pkg);
        let to = dest.join(pkg);
        fs::create_dir_all(&to).unwrap();
        for f in fs::read_dir(&from).unwrap_or_else(|e| panic!("{}: {e}", from.display())) {
            let f = f.unwrap().path();
            if f.extension().is_some_and(|x| x == "wit") {
                let text = fs::read_to_string(&f).unwrap();
                // fermyon:spin@2.0.0 also holds worlds over packages the host
                // does not bind (mysql, key-value v2…); keep only `llm`.
                if *pkg == "fermyon-spin@2.0.0" && !text.contains("interface llm") {
                    continue;
                }
                fs::write(to.join(f.file_name().unwrap()), text).unwrap();
            }
        }
        paths.push(to);
    }
    println!("cargo:rerun-if-changed=build.rs");
    let paths = paths.iter().map(|p| format!("{:?}", p.display().to_string())).collect::<Vec<_>>().join(", ");
    fs::write(out.join("spin_bindings.rs"), BINDGEN.replace("@PATHS@", &paths)).unwrap();
}

/// Where cargo unpacked spin-sdk 7.0.0 (a build-dependency, so it is there
/// before this script runs): the registry's source folder, found without
/// resolving the whole graph (`cargo metadata` would need every platform's
/// crates downloaded). Falls back to `cargo metadata` for vendored sources.
fn spin_sdk_dir() -> PathBuf {
    let home = env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo")))
        .expect("CARGO_HOME or HOME");
    if let Ok(registries) = fs::read_dir(home.join("registry/src")) {
        for r in registries.flatten() {
            let dir = r.path().join("spin-sdk-7.0.0");
            if dir.join("wit/deps").is_dir() {
                return dir;
            }
        }
    }
    let meta = Command::new(env::var("CARGO").unwrap())
        .args(["metadata", "--format-version", "1", "--offline"])
        .current_dir(env::var("CARGO_MANIFEST_DIR").unwrap())
        .output()
        .expect("running cargo metadata");
    assert!(meta.status.success(), "cargo metadata failed: {}", String::from_utf8_lossy(&meta.stderr));
    let meta: serde_json::Value = serde_json::from_slice(&meta.stdout).unwrap();
    let sdk = meta["packages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "spin-sdk" && p["version"] == "7.0.0")
        .expect("spin-sdk 7.0.0 in the dependency graph");
    PathBuf::from(sdk["manifest_path"].as_str().unwrap()).parent().unwrap().to_path_buf()
}

/// The `bindgen!` call for Spin's host interfaces; `@PATHS@` becomes the
/// package directories collected above.
const BINDGEN: &str = r#"
wasmtime::component::bindgen!({
    path: [@PATHS@],
    inline: "
        package mneme:runner-host;
        world spin-host {
            import spin:key-value/key-value@3.0.0;
            import spin:sqlite/sqlite@3.1.0;
            import spin:postgres/postgres@4.2.0;
            import spin:redis/redis@3.0.0;
            import spin:variables/variables@3.0.0;
            import fermyon:spin/llm@2.0.0;
        }
    ",
    world: "mneme:runner-host/spin-host",
    imports: { default: async | trappable },
    with: {
        "spin:key-value/key-value.store": crate::host::kv::StoreHandle,
        "spin:sqlite/sqlite.connection": crate::host::sqlite::SqliteHandle,
        "spin:postgres/postgres.connection": crate::host::postgres::PgHandle,
        "spin:postgres/postgres.connection-builder": crate::host::postgres::PgBuilder,
        "spin:redis/redis.connection": crate::host::redis::RedisHandle,
    },
    require_store_data_send: true,
});
"#;
