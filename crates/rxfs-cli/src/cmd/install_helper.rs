//! `rxfs install-helper`: make `mount -t fuse.rxfs IMAGE MNT -o ro` and a
//! plain `umount MNT` work as they do for the kernel's filesystems.
//!
//! mount(8) runs `/sbin/mount.<type>` for a filesystem type it does not
//! mount itself, so for `fuse.rxfs` it runs `/sbin/mount.fuse.rxfs IMAGE
//! MNT -o OPTS`. This writes that file as a symlink to this binary; `rxfs`
//! recognises the name it was started under and behaves as the helper.
//! (Without the helper, mount(8) falls back to Debian's generic
//! `/sbin/mount.fuse3`, which runs `rxfs IMAGE MNT -o OPTS` through the
//! shell's default PATH (mount(8) passes none), so that works when `rxfs`
//! is installed in /usr/local/sbin, /usr/local/bin, /usr/bin...; `rxfs`
//! accepts that argument form too.)
//!
//! umount(8) likewise runs `/sbin/umount.<type>` when it exists, instead of
//! unmounting itself: `umount.fuse.rxfs` (the second link) unmounts and
//! waits until the daemon has written everything and closed the image, so
//! a script that unmounts and then copies or checks the image gets it
//! clean. (The kernel lets go of a FUSE mount before the daemon is done;
//! without the helper, `umount` returns while the daemon still writes its
//! last log records. `fusermount3 -u` runs no helper: use `rxfs umount`.)

use std::path::PathBuf;

use crate::{CliError, CliResult};

/// Install the mount(8) and umount(8) helpers for type fuse.rxfs.
///
/// Writes /sbin/mount.fuse.rxfs and /sbin/umount.fuse.rxfs (symlinks to
/// this binary), so `mount -t fuse.rxfs IMAGE MNT -o ro` and fstab lines
/// with type fuse.rxfs work, and `umount MNT` returns only once the image
/// is clean and closed.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Directory to install into.
    #[arg(long, default_value = "/sbin")]
    pub dir: PathBuf,
    /// Remove the helper instead.
    #[arg(long)]
    pub remove: bool,
}

pub const HELPER_NAME: &str = "mount.fuse.rxfs";

pub fn run(a: Args) -> CliResult<()> {
    for name in [HELPER_NAME, super::umount::HELPER_NAME] {
        let link = a.dir.join(name);
        if a.remove {
            match std::fs::remove_file(&link) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(CliError::io(link.display(), &e)),
            }
            continue;
        }
        let exe = std::env::current_exe()
            .and_then(|p| p.canonicalize())
            .map_err(|e| CliError::io("cannot find the rxfs binary", &e))?;
        match std::fs::symlink_metadata(&link) {
            Ok(_) => std::fs::remove_file(&link).map_err(|e| CliError::io(link.display(), &e))?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(CliError::io(link.display(), &e)),
        }
        std::os::unix::fs::symlink(&exe, &link).map_err(|e| CliError::io(link.display(), &e))?;
        outln!("{} -> {}", link.display(), exe.display());
    }
    Ok(())
}
