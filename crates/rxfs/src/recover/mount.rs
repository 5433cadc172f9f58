//! The log at mount time: [`check_at_open`] finds the log's state (see
//! [`crate::log::find`]) and refuses what a mount cannot take (a
//! `norecovery` read-write mount, an external log, a dirty log where it
//! cannot be recovered).

use crate::bdev::BlockDevice;
use crate::error::{Error, Result};
use crate::format::sb::Superblock;
use crate::geometry::Geometry;
use crate::log::find::{Log, LogState};

/// The log check of a mount (`read_only`, `norecovery`: its options): a
/// dirty log is refused for a read-write mount that reaches here (the
/// read-write mount recovers through [`super::logged`] instead); read-only
/// mounts recover it in memory (see [`super::finish::recover_and_finish`])
/// unless they are `norecovery`. `Ok(None)`: no log state (external log,
/// or an unreadable log under `norecovery`).
pub fn check_at_open(
    dev: &dyn BlockDevice,
    geo: &Geometry,
    sb: &Superblock,
    read_only: bool,
    norecovery: bool,
) -> Result<Option<LogState>> {
    if norecovery && !read_only {
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
    // A read-only mount recovers in memory.
    if st.needs_recovery() && !norecovery && !read_only {
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
