//! `rxfs man DIR` and `rxfs completions SHELL`: man pages and shell
//! completions generated from the command-line definition itself (so they
//! cannot drift from `--help`).

use std::path::PathBuf;

use crate::{CliError, CliResult};

/// Write the man pages (rxfs.1 and rxfs-COMMAND.1 for every command) into
/// a directory.
#[derive(clap::Args, Debug)]
pub struct ManArgs {
    /// The directory (created if missing), e.g. /usr/local/share/man/man1.
    pub dir: PathBuf,
}

/// Print a completion script for a shell on standard output.
#[derive(clap::Args, Debug)]
pub struct CompletionsArgs {
    /// bash, zsh, fish, elvish or powershell.
    pub shell: clap_complete::Shell,
}

fn write_page(dir: &std::path::Path, cmd: &clap::Command, name: &str) -> CliResult<()> {
    let path = dir.join(format!("{name}.1"));
    let mut buf = Vec::new();
    clap_mangen::Man::new(cmd.clone().name(name.to_string()))
        .render(&mut buf)
        .map_err(|e| CliError::io(path.display(), &e))?;
    std::fs::write(&path, buf).map_err(|e| CliError::io(path.display(), &e))
}

pub fn man(a: ManArgs, top: clap::Command) -> CliResult<()> {
    std::fs::create_dir_all(&a.dir).map_err(|e| CliError::io(a.dir.display(), &e))?;
    let top = top.version(env!("CARGO_PKG_VERSION"));
    write_page(&a.dir, &top, "rxfs")?;
    let mut n = 1;
    for sub in top.get_subcommands().filter(|s| !s.is_hide_set()) {
        write_page(&a.dir, sub, &format!("rxfs-{}", sub.get_name()))?;
        n += 1;
    }
    outln!("{}: {n} man pages", a.dir.display());
    Ok(())
}

pub fn completions(a: CompletionsArgs, mut top: clap::Command) -> CliResult<()> {
    clap_complete::generate(a.shell, &mut top, "rxfs", &mut std::io::stdout());
    Ok(())
}
