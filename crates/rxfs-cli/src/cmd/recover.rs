//! `rxfs recover`: replay a dirty log onto the image and leave a clean log.

use std::path::PathBuf;
use std::sync::Arc;

use rxfs::bdev::{BlockDevice, FileDevice};

use crate::opts::WriteArgs;
use crate::{CliError, CliResult};

/// Replay the log of IMAGE onto it (writes the image) and write a clean log.
///
/// Afterwards the kernel mounts the image without recovery and
/// `xfs_repair -n` accepts it. Unfinished extent frees (EFIs) are finished
/// and files unlinked while open are freed; refused, with nothing written,
/// when the log holds other unfinished intents (reverse-mapping, refcount,
/// bmap, attribute or exchange intents). A filesystem with a realtime
/// section recovers as its read-write mount does when its realtime device
/// is given (`-o rtdev=FILE`), else in place (recovery reads and writes
/// no realtime data); either way the free realtime extent count is
/// recounted from the bitmap.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The image file or block device (opened read-write).
    pub image: PathBuf,
    #[command(flatten)]
    pub img: WriteArgs,
}

pub fn run(a: Args) -> CliResult<()> {
    let name = a.image.display().to_string();
    let o = a.img.parse()?;
    let dev =
        FileDevice::open(&a.image, false, o.direct_io).map_err(|e| CliError::fs(&name, &e))?;
    let rtdev = match &o.rtdev {
        Some(p) => Some(Arc::new(
            FileDevice::open(p, false, o.direct_io).map_err(|e| CliError::fs(p.display(), &e))?,
        ) as Arc<dyn BlockDevice>),
        None => None,
    };
    let stats = rxfs::fs::recover_devices(Arc::new(dev), rtdev, o.mount_options())
        .map_err(|e| CliError::fs(&name, &e))?;
    if stats == Default::default() {
        outln!("{name}: log is clean, nothing to recover");
    } else {
        outln!("{name}: recovered: {stats}");
    }
    Ok(())
}
