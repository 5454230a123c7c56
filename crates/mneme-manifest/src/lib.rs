//! The Spin application model, as Spin 4.1 defines it and `mneme up` reads
//! it: the manifest (`spin.toml`, manifest v2, with its checks), the
//! application's variables and how their values are resolved, the runtime
//! configuration file, the HTTP routes, and `allowed_outbound_hosts`. Pure:
//! it reads files and the environment it is given, and runs nothing; the
//! runner (`crates/mneme-runner`) loads and serves what it describes.

pub mod manifest;
pub mod outbound;
pub mod routes;
pub mod runtime_config;
pub mod schedule;
pub mod variables;
