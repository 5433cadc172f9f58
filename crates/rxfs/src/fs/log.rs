//! The log at mount time: [`check_at_open`] finds the log's state (see
//! [`crate::log::find`]) and refuses what a mount cannot take;
//! [`Filesystem::log_state`] and [`Filesystem::log`] give it to callers.

use super::Filesystem;
use crate::bdev::BlockDevice;
use crate::error::{Error, Result};
use crate::format::sb::Superblock;
use crate::geometry::Geometry;
use crate::log::find::{Log, LogState};

impl Filesystem {
    /// The log state found at open (None: external log, or not computed
    /// because the mount was `norecovery` and the log could not be read).
    pub fn log_state(&self) -> Option<&LogState> {
        self.log_state.as_ref()
    }

    /// The internal log, for reading.
    pub fn log(&self) -> Result<Log<'_>> {
        Log::new(self.dev(), self.geo(), self.sb())
    }
}

/// The log check of [`Filesystem::open`]: a dirty log is refused for a
/// read-write mount (no read-write recovery yet); read-only mounts recover
/// it in memory (see [`super::recover`]) unless they are `norecovery`.
pub(super) fn check_at_open(
    dev: &dyn BlockDevice,
    geo: &Geometry,
    sb: &Superblock,
    opts: &super::MountOptions,
) -> Result<Option<LogState>> {
    let norecovery = opts.norecovery;
    if norecovery && !opts.read_only {
        return Err(Error::Invalid(
            "norecovery requires a read-only mount (-o ro,norecovery), as in the kernel".into(),
        ));
    }
    if sb.logstart == 0 {
        if norecovery {
            return Ok(None);
        }
        return Err(Error::NotSupported(
            "the filesystem has an external log device, which rxfs cannot read: \
             mount with -o ro,norecovery"
                .into(),
        ));
    }
    let st = match Log::new(dev, geo, sb).and_then(|l| l.find_state()) {
        Ok(st) => st,
        Err(e) if norecovery => {
            tracing::warn!("cannot read the log ({e}); mounting norecovery anyway");
            return Ok(None);
        }
        Err(e) => return Err(e),
    };
    // A read-only mount recovers in memory (see `super::recover`).
    if st.needs_recovery() && !norecovery && !opts.read_only {
        return Err(Error::DirtyLog {
            head: st.head.0 as u64,
            tail: st.tail.0 as u64,
            detail: format!(
                "head {} tail {}: the log needs recovery, and rxfs cannot recover \
                 for a read-write mount yet. Mount with -o ro (recovery in memory), \
                 -o ro,norecovery (the on-disk state without the log), or run \
                 `rxfs recover` or a kernel mount to replay it onto the image",
                st.head, st.tail
            ),
        });
    }
    Ok(Some(st))
}
