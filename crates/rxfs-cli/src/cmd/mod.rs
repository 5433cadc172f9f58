//! One module per subcommand. Each has an `Args` (clap derive, with the
//! subcommand's `--help` text as its doc comment) and a `run`.

pub mod bench;
mod bench_rt;
pub mod cat;
pub mod check;
pub mod debug;
pub mod docs;
pub mod get;
pub mod info;
pub mod install_helper;
pub mod ls;
pub mod mkdir;
pub mod mkfs;
pub mod mkfs_fit;
pub mod mkfs_opts;
pub mod mount;
pub mod populate;
pub mod populate_tar;
pub mod protofile;
pub mod put;
pub mod recover;
pub mod rm;
pub mod stat;
pub mod stats;
pub mod umount;

use crate::{CliError, CliResult};

/// Write to stdout; a closed pipe (`rxfs cat | head`) ends quietly.
pub fn write_stdout(out: &mut impl std::io::Write, buf: &[u8]) -> CliResult<()> {
    match out.write_all(buf) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Err(CliError {
            code: 0,
            msg: String::new(),
        }),
        Err(e) => Err(CliError::io("stdout", &e)),
    }
}
