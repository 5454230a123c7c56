//! Embeds every `migrations/<backend>/NNNN_name.sql` file into the crate, so
//! the `store` stage (a wasm component with no file system access) carries its
//! own schema history.

use std::{env, fmt::Write as _, fs, path::PathBuf};

fn main() {
    let root = PathBuf::from(env::var("CARGO_MANIFEST_DIR").unwrap()).join("../../migrations");
    let mut out = String::new();
    for backend in ["sqlite", "postgres"] {
        let dir = root.join(backend);
        println!("cargo:rerun-if-changed={}", dir.display());
        let mut files: Vec<_> = fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|x| x == "sql"))
            .collect();
        files.sort();
        writeln!(out, "pub static {}: &[RawMigration] = &[", backend.to_uppercase()).unwrap();
        for f in files {
            println!("cargo:rerun-if-changed={}", f.display());
            let stem = f.file_stem().unwrap().to_str().unwrap().to_string();
            writeln!(out, "    RawMigration {{ file: {stem:?}, sql: include_str!({:?}) }},", f.canonicalize().unwrap())
                .unwrap();
        }
        writeln!(out, "];").unwrap();
    }
    fs::write(PathBuf::from(env::var("OUT_DIR").unwrap()).join("embedded.rs"), out).unwrap();
}
