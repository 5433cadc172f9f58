//! Inode core fields the read path does not need but `xfs_repair` checks:
//! the obsolete link count and the v3 padding zero (`di_pad2` is left
//! alone, as repair leaves it), only known flag bits, flags that fit
//! the file type and the filesystem's features, size hints only with their
//! flags, and `di_next_unlinked` null on a clean filesystem (valid while a
//! log is dirty).

use super::Checker;
use crate::format::ag::NULL_AGINO;
use crate::format::be16;
use crate::format::inode::*;
use crate::types::{FileType, Ino};

const FLAGS_KNOWN: u16 = 0x7fff;
const FLAGS2_KNOWN: u64 =
    DIFLAG2_DAX | DIFLAG2_REFLINK | DIFLAG2_COWEXTSIZE | DIFLAG2_BIGTIME | DIFLAG2_NREXT64;
const DIR_ONLY: u16 =
    DIFLAG_RTINHERIT | DIFLAG_PROJINHERIT | DIFLAG_EXTSZINHERIT | DIFLAG_NOSYMLINKS;
const FILE_ONLY: u16 = DIFLAG_REALTIME | DIFLAG_EXTSIZE;

/// The fields of any inode, free ones too: the v3 padding and
/// `di_next_unlinked`.
pub(crate) fn check_any(c: &mut Checker, ino: Ino, core: &InodeCore, buf: &[u8], log_dirty: bool) {
    // Without nrext64 the 8 bytes at 24 (the big extent count) are padding.
    if core.flags2 & DIFLAG2_NREXT64 == 0 && buf[24..32].iter().any(|&b| b != 0) {
        c.add_ino("inode-field", ino.0, "di_v3_pad not zero");
    }
    let next = core.next_unlinked;
    if next == NULL_AGINO {
        return;
    }
    let geo = c.fs.geo();
    let agno = geo.ino_agno(ino);
    let valid = geo.ino_valid(geo.agino_to_ino(agno, crate::types::AgIno(next)));
    if !valid || !log_dirty {
        let msg = format!("di_next_unlinked {next:#x} on a filesystem with a clean log");
        let msg = if valid {
            msg
        } else {
            format!("di_next_unlinked {next:#x} is not an inode of this AG")
        };
        c.add_ino("inode-next-unlinked", ino.0, msg);
    }
}

/// The fields of an in-use inode's core.
pub(crate) fn check_fields(c: &mut Checker, ino: Ino, core: &InodeCore, buf: &[u8]) {
    let sb = c.fs.sb();
    let ft = FileType::from_mode(core.mode);
    let is_dir = ft == Some(FileType::Directory);
    let is_reg = ft == Some(FileType::Regular);
    let mut bad: Vec<String> = Vec::new();
    let onlink = be16(buf, 6);
    if onlink != 0 {
        bad.push(format!("obsolete di_onlink {onlink}"));
    }
    let f = core.flags;
    if f & !FLAGS_KNOWN != 0 {
        bad.push(format!("unknown di_flags {f:#x}"));
    }
    // Only the realtime flag needs a realtime section, as xfs_repair
    // sees it: mkfs.xfs -d rtinherit=1 sets RTINHERIT on the root either
    // way.
    if f & DIFLAG_REALTIME != 0 && sb.rextents == 0 {
        bad.push(format!(
            "realtime di_flags {f:#x} without a realtime section"
        ));
    }
    if f & DIFLAG_NEWRTBM != 0 && ino.0 != sb.rbmino {
        bad.push("NEWRTBM on an inode that is not the realtime bitmap".into());
    }
    if f & DIR_ONLY != 0 && !is_dir {
        bad.push(format!("directory-only di_flags {f:#x} on a non-directory"));
    }
    if f & FILE_ONLY != 0 && !is_reg {
        bad.push(format!("file-only di_flags {f:#x} on a non-regular file"));
    }
    let f2 = core.flags2;
    if f2 & !FLAGS2_KNOWN != 0 {
        bad.push(format!("unknown di_flags2 {f2:#x}"));
    }
    if f2 & DIFLAG2_REFLINK != 0 && (!sb.has_reflink() || !is_reg) {
        bad.push("reflink flag on a non-file or without reflink".into());
    }
    if f2 & DIFLAG2_COWEXTSIZE != 0 && (!sb.has_reflink() || !(is_reg || is_dir)) {
        bad.push("CoW extent size flag without reflink or on a special file".into());
    }
    if f2 & DIFLAG2_DAX != 0 && !(is_reg || is_dir) {
        bad.push("DAX flag on a special file".into());
    }
    if f2 & DIFLAG2_BIGTIME != 0 && !sb.has_bigtime() {
        bad.push("bigtime flag on a filesystem without bigtime".into());
    }
    if core.extsize != 0 && f & (DIFLAG_EXTSIZE | DIFLAG_EXTSZINHERIT) == 0 {
        bad.push(format!(
            "extent size hint {} without its flag",
            core.extsize
        ));
    }
    if core.cowextsize != 0 && f2 & DIFLAG2_COWEXTSIZE == 0 {
        bad.push(format!(
            "CoW extent size {} without its flag",
            core.cowextsize
        ));
    }
    for b in bad {
        c.add_ino("inode-field", ino.0, b);
    }
}
