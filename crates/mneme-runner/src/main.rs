//! `mneme`: runs a Spin application (`spin.toml`, manifest v2) on wasmtime.
//!
//! `mneme up` takes `spin up`'s flags and serves the same components with
//! Spin's host interfaces and semantics; `mneme build` runs each
//! component's build command as `spin build` does; `mneme vault pull|push`
//! syncs the vault with a running app (see `vault.rs`).

mod app;
mod budget;
mod compose;
mod conn;
mod cron;
mod host;
mod instance;
mod server;
mod vault;

use mneme_manifest::{manifest, outbound, routes, runtime_config, variables};

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use clap::{Parser, Subcommand};

/// How often the engine's epoch advances; request deadlines count in ticks.
pub const EPOCH_TICK: Duration = Duration::from_millis(10);

#[derive(Parser)]
#[command(name = "mneme", version, about = "Run a Spin application on wasmtime")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Start the application (the flags of `spin up`).
    Up(UpArgs),
    /// Build every component with its `[component.<id>.build]` command.
    Build {
        /// The application manifest.
        #[arg(short = 'f', long = "from", default_value = "spin.toml")]
        from: PathBuf,
    },
    /// Sync the vault (knowledge entries and rx artifacts) with a local
    /// folder that opens as an Obsidian vault. The API key comes from
    /// `MNEME_API_KEY`.
    #[command(subcommand)]
    Vault(VaultCommand),
}

#[derive(Subcommand)]
enum VaultCommand {
    /// Write the store's vault into DIR; unchanged files are untouched and
    /// files changed here since the last pull are kept.
    Pull(VaultArgs),
    /// Send the rec status changes made in DIR's frontmatter through the
    /// API, then pull: everything else is as the store says.
    Push(VaultArgs),
}

#[derive(clap::Args)]
struct VaultArgs {
    /// The vault folder.
    dir: PathBuf,
    /// The app's address (default: `MNEME_URL`, else http://127.0.0.1:3000).
    #[arg(long)]
    url: Option<String>,
}

#[derive(clap::Args)]
struct UpArgs {
    /// The application manifest.
    #[arg(short = 'f', long = "from", default_value = "spin.toml")]
    from: PathBuf,
    /// The address to serve on (port 0 picks a free port).
    #[arg(long, default_value = "127.0.0.1:3000")]
    listen: String,
    /// The runtime configuration file.
    #[arg(long = "runtime-config-file")]
    runtime_config_file: Option<PathBuf>,
    /// Where stores and caches live (default: `.spin` beside the manifest).
    #[arg(long = "state-dir")]
    state_dir: Option<PathBuf>,
    /// Largest request body accepted, in bytes.
    #[arg(long, default_value_t = 4 << 20)]
    max_body_bytes: usize,
    /// Memory cap of one request's instance, in MiB.
    #[arg(long, default_value_t = 256)]
    max_memory_mb: usize,
    /// Time limit of one request (`s`, `ms`, `us` or `ns`; a bare number
    /// is seconds; `a..b` draws per instance). Spin's flag; its default here
    /// is 420 s, above `/chat`'s own 360 s, so a long ACT loop ends its stream
    /// itself (D-F12).
    #[arg(long, default_value = "420s", value_parser = parse_duration_range)]
    request_timeout: instance::Range<Duration>,
    /// Most requests one instance serves before it is dropped (Spin's flag
    /// and default; `a..b` draws per instance).
    #[arg(long, default_value = "128", value_parser = parse_usize_range)]
    max_instance_reuse_count: instance::Range<usize>,
    /// Most requests one instance serves at once (Spin's flag and default).
    #[arg(long, default_value = "16", value_parser = parse_usize_range)]
    max_instance_concurrent_reuse_count: instance::Range<usize>,
    /// How long an idle instance is kept for reuse (Spin's flag and default).
    #[arg(long, default_value = "1s", value_parser = parse_duration_range)]
    idle_instance_timeout: instance::Range<Duration>,
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
fn parse_duration(v: &str) -> Result<Duration, String> {
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

fn main() -> Result<()> {
    cap_malloc_arenas();
    let cli = Cli::parse();
    match cli.command {
        Command::Up(args) => tokio::runtime::Builder::new_multi_thread().enable_all().build()?.block_on(up(args)),
        Command::Build { from } => build(&from),
        Command::Vault(VaultCommand::Pull(a)) => {
            let report = vault::pull(&vault::Remote::from_env(a.url)?, &a.dir, &Default::default())?;
            vault::print_pull(&report);
            Ok(())
        }
        Command::Vault(VaultCommand::Push(a)) => {
            let report = vault::push(&vault::Remote::from_env(a.url)?, &a.dir)?;
            vault::print_push(&report);
            if !report.failed.is_empty() {
                bail!("{} change(s) were not sent; the files keep them", report.failed.len());
            }
            Ok(())
        }
    }
}

async fn up(args: UpArgs) -> Result<()> {
    let started = std::time::Instant::now();
    let limits = instance::Limits {
        memory_bytes: args.max_memory_mb << 20,
        max_body_bytes: args.max_body_bytes,
        reuse: instance::Reuse {
            max_requests: args.max_instance_reuse_count,
            max_concurrent: args.max_instance_concurrent_reuse_count,
            idle_timeout: args.idle_instance_timeout,
            request_timeout: args.request_timeout,
        },
    };
    let app = Arc::new(
        app::App::load(app::LoadOptions {
            manifest: args.from.clone(),
            runtime_config: args.runtime_config_file.clone(),
            state_dir: args.state_dir.clone(),
            limits,
        })
        .await?,
    );
    eprintln!("Starting {} {}", app.manifest.name, app.manifest.version.as_deref().unwrap_or(""));
    let engine = app.engine().clone();
    std::thread::spawn(move || {
        loop {
            std::thread::sleep(EPOCH_TICK);
            engine.increment_epoch();
        }
    });
    std::thread::spawn(give_back_freed_memory);
    cron::run_startup(&app).await?;
    let listener =
        tokio::net::TcpListener::bind(&args.listen).await.with_context(|| format!("listening on {}", args.listen))?;
    let addr = listener.local_addr()?;
    cron::spawn_all(&app)?;
    println!("Ready in {} ms", started.elapsed().as_millis());
    println!("Serving http://{addr}");
    println!("Available Routes:");
    for t in app.manifest.http.iter().filter(|t| !t.private) {
        println!("  {}: http://{addr}{}", t.component, t.route);
    }
    server::serve(app, listener, shutdown_signal()).await
}

/// Two malloc arenas, unless `MALLOC_ARENA_MAX` says otherwise. glibc gives
/// each new thread that finds every arena busy an arena of its own, up to
/// eight per core, and each keeps a few megabytes that trimming cannot
/// return. SQLite calls and embeddings run on the blocking pool, whose
/// threads come and go, so on the embedded store the runner's resident
/// memory crept up by about 2 MB a minute under the soak's steady load
/// (+7.9% over 30 minutes); with two arenas it levels off after warm-up.
/// Called first in `main`, before any other thread exists.
fn cap_malloc_arenas() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    if std::env::var_os("MALLOC_ARENA_MAX").is_none() {
        // SAFETY: mallopt only sets an allocator parameter; no other
        // thread runs yet.
        unsafe {
            libc::mallopt(libc::M_ARENA_MAX, 2);
        }
    }
}

/// glibc keeps what a burst freed in its per-thread arenas (a thousand open
/// streams left 660 MB resident where 150 MB were in use); trimming the heap
/// every few seconds returns it to the OS (D-F17).
fn give_back_freed_memory() {
    loop {
        std::thread::sleep(Duration::from_secs(10));
        #[cfg(all(target_os = "linux", target_env = "gnu"))]
        // SAFETY: malloc_trim only releases free memory; it takes the
        // allocator's own locks and touches nothing the program owns.
        unsafe {
            libc::malloc_trim(0);
        }
    }
}

async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            .expect("installing SIGTERM handler");
        tokio::select! { _ = ctrl_c => {}, _ = term.recv() => {} }
    }
    #[cfg(not(unix))]
    let _ = ctrl_c.await;
    eprintln!("shutting down");
}

fn build(from: &std::path::Path) -> Result<()> {
    let m = manifest::load(from)?;
    for c in m.components.values() {
        let Some(b) = &c.def.build else { continue };
        let Some(cmd) = b.get("command").and_then(|c| c.as_str()) else { continue };
        let dir = b.get("workdir").and_then(|w| w.as_str()).map_or_else(|| m.dir.clone(), |w| m.dir.join(w));
        eprintln!("building {}: {cmd}", c.id);
        let status = std::process::Command::new("sh").arg("-c").arg(cmd).current_dir(&dir).status()?;
        if !status.success() {
            bail!("building component `{}` failed ({status})", c.id);
        }
    }
    Ok(())
}
