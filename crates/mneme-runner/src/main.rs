//! `mneme`: runs a Spin application (`spin.toml`, manifest v2) on wasmtime.
//!
//! `mneme up` takes `spin up`'s flags and serves the same components with
//! Spin's host interfaces and semantics; `mneme build` runs each
//! component's build command as `spin build` does; `mneme vault pull|push`
//! syncs the vault with a running app (the `mneme-vault` crate).

mod app;
mod bridge;
mod budget;
mod cli;
mod compose;
mod conn;
mod cron;
mod host;
mod instance;
mod local_model;
mod log;
mod otel;
mod restore;
mod server;
mod stdio;

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
    Up(Box<cli::UpArgs>),
    /// Build every component with its `[component.<id>.build]` command.
    Build {
        /// The application manifest, or a directory holding spin.toml.
        #[arg(short = 'f', long = "from")]
        from: Option<String>,
    },
    /// Run the application's schedules (`[application.tool.mneme]` in
    /// spin.toml) against a deployment: each job is a POST to its tick
    /// endpoint with the cron token, which comes from the environment as
    /// the app's own does (`SPIN_VARIABLE_CRON_TOKEN`, or `./.env`). This is
    /// the scheduler `mneme up` runs in-process; use it beside `spin up`.
    Cron {
        /// The deployment's address, for example http://127.0.0.1:3000.
        #[arg(long)]
        url: String,
        /// The application manifest, or a directory holding spin.toml.
        #[arg(short = 'f', long = "from")]
        from: Option<String>,
        /// A line for every run, not only for failures, recoveries and the
        /// summary every few minutes (`MNEME_TICK_SUMMARY_SECS`, 300).
        #[arg(long = "log-ticks")]
        log_ticks: bool,
    },
    /// Sync the vault (knowledge entries and rx artifacts) with a local
    /// folder that opens as an Obsidian vault. The API key comes from
    /// `MNEME_API_KEY`.
    #[command(subcommand)]
    Vault(VaultCommand),
    /// Serve MCP over stdio for a client that launches a command (Claude
    /// Desktop), forwarding each message to the app's `/mcp`. The API key
    /// comes from `MNEME_API_KEY`.
    Mcp {
        /// The app's address (default: `MNEME_URL`, else http://127.0.0.1:3000).
        #[arg(long)]
        url: Option<String>,
    },
    /// Restore a privacy export (`GET /privacy/export`) into a running
    /// Mneme, in parts, whatever its size. The store must hold no data of
    /// its own unless --merge. The API key comes from `MNEME_API_KEY`.
    Restore {
        /// The export file.
        file: PathBuf,
        /// The app's address (default: `MNEME_URL`, else http://127.0.0.1:3000).
        #[arg(long)]
        url: Option<String>,
        /// Restore beside what the store holds, keeping the store's rows
        /// where a key is in both.
        #[arg(long)]
        merge: bool,
        /// The size parts are cut at (at most the app's 4 MiB body limit).
        #[arg(long = "part-bytes", default_value_t = 2 << 20,
              value_parser = clap::value_parser!(u64).range(1024..=(4 << 20)))]
        part_bytes: u64,
    },
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

fn main() -> Result<()> {
    cap_malloc_arenas();
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).is_some_and(|a| a == "up") {
        cli::refuse_unsupported_spin_flags(&args[2..])?;
    }
    let cli = Cli::parse();
    match cli.command {
        Command::Up(args) => tokio::runtime::Builder::new_multi_thread().enable_all().build()?.block_on(up(*args)),
        Command::Build { from } => build(&cli::manifest_path(from.as_deref(), &std::env::current_dir()?)?),
        Command::Cron { url, from, log_ticks } => tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()?
            .block_on(cron_only(&url, from.as_deref(), log_ticks)),
        Command::Mcp { url } => bridge::run(url),
        Command::Restore { file, url, merge, part_bytes } => restore::run(&file, url, merge, part_bytes as usize),
        Command::Vault(VaultCommand::Pull(a)) => {
            let report = mneme_vault::pull(&mneme_vault::Remote::from_env(a.url)?, &a.dir, &Default::default())?;
            mneme_vault::print_pull(&report);
            Ok(())
        }
        Command::Vault(VaultCommand::Push(a)) => {
            let report = mneme_vault::push(&mneme_vault::Remote::from_env(a.url)?, &a.dir)?;
            mneme_vault::print_push(&report);
            if !report.failed.is_empty() {
                bail!("{} change(s) were not sent; the files keep them", report.failed.len());
            }
            Ok(())
        }
    }
}

async fn up(args: cli::UpArgs) -> Result<()> {
    let started = std::time::Instant::now();
    otel::init_from_env()?;
    let cwd = std::env::current_dir()?;
    let limits = instance::Limits {
        memory_bytes: args.max_instance_memory,
        max_body_bytes: args.mneme_max_body_bytes,
        reuse: instance::Reuse {
            max_requests: args.max_instance_reuse_count,
            max_concurrent: args.max_instance_concurrent_reuse_count,
            idle_timeout: args.idle_instance_timeout,
            request_timeout: args.request_timeout,
        },
    };
    let manifest = cli::manifest_path(args.from.as_deref(), &cwd)?;
    let mut variables = cli::cli_variables(&args.variable, &cwd)?;
    let dotenv = cli::dotenv(&cwd.join(".env"))?;
    // Kept alive for as long as the app serves; dropping it stops the server.
    let _local_model = match &args.mneme_local_model {
        Some(spec) if local_model::configured("llm_url", &variables, &dotenv) => {
            eprintln!("llm_url is set, so the local model `{spec}` is not started");
            None
        }
        Some(spec) => {
            let file = local_model::model_file(spec)?;
            let threads = args
                .mneme_local_model_threads
                .unwrap_or_else(|| std::thread::available_parallelism().map_or(2, |n| n.get()));
            // Started from the main thread, which lives as long as the
            // process: the server's parent-death signal follows the thread
            // that started it.
            let m = local_model::LocalModel::start(manifest.parent().unwrap_or(&cwd), &file, threads)?;
            // `--variable` is the top provider, but no provider names
            // llm_url (checked above), nor llm_model where it is added.
            if !local_model::configured("llm_model", &variables, &dotenv) {
                variables.insert("llm_model".into(), m.name.clone());
            }
            if !local_model::configured("llm_light_timeout_ms", &variables, &dotenv) {
                variables.insert("llm_light_timeout_ms".into(), local_model::LIGHT_TIMEOUT_MS.to_string());
            }
            variables.insert("llm_url".into(), m.url.clone());
            Some(m)
        }
        None => None,
    };
    let app = Arc::new(
        app::App::load(app::LoadOptions {
            manifest,
            runtime_config: args.runtime_config_file.clone(),
            state_dir: cli::state_dir(args.state_dir.as_deref()),
            limits,
            variables,
            dotenv,
            env: args.env.clone(),
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
    let ticks = Arc::new(cron::Target::InProcess(app.clone()));
    cron::run_startup(&ticks, &app.manifest.cron).await?;
    let listener =
        tokio::net::TcpListener::bind(&args.listen).await.with_context(|| format!("listening on {}", args.listen))?;
    let addr = listener.local_addr()?;
    cron::spawn_all(ticks, &app.manifest.cron, cron::Console::from_env(args.mneme_log_ticks))?;
    println!("Ready in {} ms", started.elapsed().as_millis());
    println!("Serving http://{addr}");
    println!("Available Routes:");
    for t in app.manifest.http.iter().filter(|t| !t.private) {
        println!("  {}: http://{addr}{}", t.component, t.route);
    }
    let served = server::serve(app, listener, shutdown_signal()).await;
    log::flush();
    otel::flush(Duration::from_secs(5));
    served
}

/// `mneme cron`: the schedules of the manifest, sent to `url` until the
/// process is stopped.
async fn cron_only(url: &str, from: Option<&str>, log_ticks: bool) -> Result<()> {
    let cwd = std::env::current_dir()?;
    let m = manifest::load(&cli::manifest_path(from, &cwd)?)?;
    if m.cron.is_empty() {
        bail!("{} has no schedules ([[application.tool.mneme.cron]])", m.dir.join("spin.toml").display());
    }
    let dotenv = cli::dotenv(&cwd.join(".env"))?;
    let token = m.cron_token_variable.as_deref().and_then(|v| {
        let name = variables::env_name(v);
        std::env::var(&name).ok().or_else(|| dotenv.get(&name).cloned()).filter(|t| !t.is_empty())
    });
    if let (Some(v), None) = (&m.cron_token_variable, &token) {
        bail!("the cron token is not set: put the app's `{v}` in {}", variables::env_name(v));
    }
    otel::init_from_env()?;
    eprintln!("mneme cron: {} schedules of {} against {url}", m.cron.len(), m.name);
    let target = Arc::new(cron::Target::remote(url, token));
    cron::run_startup_until_done(&target, &m.cron).await;
    cron::spawn_all(target, &m.cron, cron::Console::from_env(log_ticks))?;
    shutdown_signal().await;
    otel::flush(Duration::from_secs(5));
    Ok(())
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
