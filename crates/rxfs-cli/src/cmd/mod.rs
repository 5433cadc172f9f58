//! One module per subcommand. Each has an `Args` (clap derive, with the
//! subcommand's `--help` text as its doc comment) and a `run`.

pub mod cat;
pub mod debug;
pub mod get;
pub mod info;
pub mod install_helper;
pub mod ls;
pub mod mount;
pub mod stat;
pub mod umount;

use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::Arc;

use rxfs::fs::Inode;
use rxfs::Filesystem;

use crate::{CliError, CliResult};

/// Resolve a path inside the image (lstat semantics) and load its inode.
pub fn resolve(fs: &Filesystem, path: &Path) -> CliResult<Arc<Inode>> {
    let shown = path.display();
    let ino = fs
        .resolve(path.as_os_str().as_bytes())
        .map_err(|e| CliError::fs(&shown, &e))?;
    fs.iget(ino).map_err(|e| CliError::fs(&shown, &e))
}

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
