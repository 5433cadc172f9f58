//! `rxfs recover`: replay a dirty log onto the image and leave a clean log.

use std::path::PathBuf;

use crate::{CliError, CliResult};

/// Replay the log of IMAGE onto it (writes the image) and write a clean log.
///
/// Afterwards the kernel mounts the image without recovery and
/// `xfs_repair -n` accepts it. Unfinished extent frees (EFIs) are finished
/// and files unlinked while open are freed; refused, with nothing written,
/// when the log holds other unfinished intents (reverse-mapping, refcount,
/// bmap, attribute or exchange intents).
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The image file or block device (opened read-write).
    pub image: PathBuf,
}

pub fn run(a: Args) -> CliResult<()> {
    let name = a.image.display().to_string();
    let dev = rxfs::bdev::FileDevice::open(&a.image, false, false)
        .map_err(|e| CliError::fs(&name, &e))?;
    let stats = rxfs::fs::recover_to_device(std::sync::Arc::new(dev))
        .map_err(|e| CliError::fs(&name, &e))?;
    if stats == Default::default() {
        println!("{name}: log is clean, nothing to recover");
    } else {
        println!("{name}: recovered: {stats}");
    }
    Ok(())
}
