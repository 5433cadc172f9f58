//! `rxfs`: XFS v5 images in userspace.
//!
//! One subcommand per file under `cmd/`; the FUSE driver lives in `fuse/`,
//! the tree manifest (the fixture suite's comparison format) in
//! `manifest.rs`. The inspection subcommands open images read-only
//! (`MountOptions { read_only: true, .. }`); `mount` mounts read-write
//! unless `-o ro`, and `recover` writes the replayed log.
//!
//! Besides the normal `rxfs SUBCOMMAND ...` form, the binary accepts the
//! mount-helper argument forms (see [`cmd::mount::helper_argv`]):
//! `mount.fuse.rxfs IMAGE MNT -o OPTS` (mount(8) running the helper that
//! `rxfs install-helper` links) and `rxfs IMAGE MNT -o OPTS` (Debian's
//! `mount.fuse3` running the program named after `fuse.`); and, named
//! `umount.fuse.rxfs`, umount(8)'s helper (see [`cmd::umount`]).

/// The daemon and the tools allocate and free many small, short-lived
/// buffers per request (decoded directory blocks, log vectors, joined
/// buffers); mimalloc's per-thread free lists halve the CPU time of a
/// create against glibc's malloc (measured with `rxfs bench fsmark`).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// `println!` that drops its line when standard output is closed or
/// failing instead of panicking (exit 101): for the subcommands that change
/// an image and the mount daemon, which must never stop halfway because
/// nobody reads what they print.
macro_rules! outln {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout(), $($t)*);
    }};
}

/// [`outln!`] on standard error.
macro_rules! errln {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($t)*);
    }};
}

mod alloc_tuning;
mod cli_error;
mod cmd;
mod fuse;
mod manifest;
mod opts;
mod stat_view;
mod sys;
mod text;

use clap::{Parser, Subcommand};

pub use cli_error::{CliError, CliResult};

/// Read and write XFS v5 filesystem images without the kernel.
#[derive(Parser, Debug)]
#[command(name = "rxfs", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    cmd: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    Info(cmd::info::Args),
    Ls(cmd::ls::Args),
    Cat(cmd::cat::Args),
    Check(cmd::check::Args),
    Stat(cmd::stat::Args),
    Get(cmd::get::Args),
    Mount(cmd::mount::Args),
    Umount(cmd::umount::Args),
    Stats(cmd::stats::Args),
    InstallHelper(cmd::install_helper::Args),
    Recover(cmd::recover::Args),
    Put(cmd::put::Args),
    Rm(cmd::rm::Args),
    Mkdir(cmd::mkdir::Args),
    Populate(cmd::populate::Args),
    Mkfs(cmd::mkfs::Args),
    Bench(cmd::bench::Args),
    /// Write man pages for rxfs and every command into a directory.
    Man(cmd::docs::ManArgs),
    /// Print a shell completion script (bash, zsh, fish...).
    Completions(cmd::docs::CompletionsArgs),
    #[command(subcommand)]
    Debug(cmd::debug::DebugCmd),
}

fn run(cli: Cli) -> CliResult<()> {
    match cli.cmd {
        Command::Info(a) => cmd::info::run(a),
        Command::Ls(a) => cmd::ls::run(a),
        Command::Cat(a) => cmd::cat::run(a),
        Command::Check(a) => cmd::check::run(a),
        Command::Stat(a) => cmd::stat::run(a),
        Command::Get(a) => cmd::get::run(a),
        Command::Mount(a) => cmd::mount::run(a),
        Command::Umount(a) => cmd::umount::run(a),
        Command::Stats(a) => cmd::stats::run(a),
        Command::InstallHelper(a) => cmd::install_helper::run(a),
        Command::Recover(a) => cmd::recover::run(a),
        Command::Put(a) => cmd::put::run(a),
        Command::Rm(a) => cmd::rm::run(a),
        Command::Mkdir(a) => cmd::mkdir::run(a),
        Command::Populate(a) => cmd::populate::run(a),
        Command::Mkfs(a) => cmd::mkfs::run(a),
        Command::Bench(a) => cmd::bench::run(a),
        Command::Man(a) => cmd::docs::man(a, <Cli as clap::CommandFactory>::command()),
        Command::Completions(a) => {
            cmd::docs::completions(a, <Cli as clap::CommandFactory>::command())
        }
        Command::Debug(d) => cmd::debug::run(d),
    }
}

/// `SOURCE_DATE_EPOCH` (reproducible-builds.org) for the commands that
/// build images: "now" becomes that time, newer source times are clamped
/// to it, random values come from a sequence seeded by it, and populate
/// copies in one order (see [`rxfs::clock`]). A malformed value is an
/// error, as the specification asks. A mount ignores it: a live
/// filesystem keeps the real clock.
fn source_date_epoch(cmd: &Command) -> CliResult<()> {
    let builds = matches!(
        cmd,
        Command::Mkfs(_) | Command::Populate(_) | Command::Put(_) | Command::Mkdir(_)
    );
    let Some(v) = std::env::var_os("SOURCE_DATE_EPOCH").filter(|_| builds) else {
        return Ok(());
    };
    let sec = v
        .to_str()
        .and_then(|s| s.trim().parse::<i64>().ok())
        .filter(|&s| s >= 0)
        .ok_or_else(|| {
            CliError::usage(format!(
                "SOURCE_DATE_EPOCH={}: not a count of seconds since 1970",
                v.to_string_lossy()
            ))
        })?;
    rxfs::clock::set_fixed(sec);
    Ok(())
}

impl Command {
    /// Subcommands that only read: a closed standard output or error ends
    /// them as it ends other Unix tools (SIGPIPE). The others (changes to
    /// an image, the mount daemon) never die halfway for it: they ignore
    /// SIGPIPE, as Rust programs do, and what they cannot print is dropped.
    fn reads_only(&self) -> bool {
        matches!(
            self,
            Command::Info(_)
                | Command::Ls(_)
                | Command::Cat(_)
                | Command::Check(_)
                | Command::Stat(_)
                | Command::Get(_)
                | Command::Stats(_)
                | Command::Debug(_)
        )
    }
}

fn main() {
    sys::ensure_stdio();
    let argv: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let result = if cmd::umount::is_helper_name(&argv) {
        cmd::umount::run_helper(&argv[1..])
    } else {
        match cmd::mount::helper_argv(&argv) {
            Some(helper) => cmd::mount::run_helper(helper),
            None => {
                let cli = Cli::parse_from(argv);
                if cli.cmd.reads_only() {
                    sys::default_sigpipe();
                }
                match source_date_epoch(&cli.cmd) {
                    Ok(()) => run(cli),
                    Err(e) => Err(e),
                }
            }
        }
    };
    if let Err(e) = result {
        if !e.msg.is_empty() {
            // Not eprintln!: it panics (exit 101) when stderr is closed.
            errln!("rxfs: {}", e.msg);
        }
        std::process::exit(e.code);
    }
}
