//! `rxfs debug ...`: tools for tests and developers.

use std::path::PathBuf;

use crate::opts::ImageArgs;
use crate::{CliError, CliResult};

/// Developer and test tools.
#[derive(clap::Subcommand, Debug)]
pub enum DebugCmd {
    Manifest(ManifestArgs),
}

/// Print the tree manifest (one JSON line per path).
///
/// One JSON object per path (sorted by the path's bytes) with type, inode, mode, owners, link count, size,
/// blocks, times in ns, rdev, xattrs (hex values), symlink target and the
/// SHA-256 of regular files. The fixture tests compare it with the same
/// walk over kernel and FUSE mounts.
#[derive(clap::Args, Debug)]
pub struct ManifestArgs {
    /// The image file or block device.
    pub image: PathBuf,
    #[command(flatten)]
    pub img: ImageArgs,
}

pub fn run(cmd: DebugCmd) -> CliResult<()> {
    match cmd {
        DebugCmd::Manifest(a) => manifest(a),
    }
}

fn manifest(a: ManifestArgs) -> CliResult<()> {
    let fs = a.img.open(&a.image)?;
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    crate::manifest::write_manifest(&fs, &mut out).map_err(CliError::new)?;
    std::io::Write::flush(&mut out).map_err(|e| CliError::io("stdout", &e))
}
