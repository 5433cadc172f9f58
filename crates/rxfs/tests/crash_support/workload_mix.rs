//! The workload's op mixes: which kinds of step it draws, with weights
//! per mille.
//!
//! The full mix keeps about a quarter of the ops durability ops (fsync of
//! files and directories, fdatasync, sync); the workload also fsyncs
//! around renames and links (the destination directory a third of the
//! time, the moved file a sixth), as careful applications do.
//! [`Mix::NamespaceFsync`] moves weight from data ops to renames, links,
//! atomic saves and directory fsyncs; [`Mix::NamespaceOnly`] has no data
//! ops and no fsync (sync only).

/// Which operations a workload draws, and how often.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mix {
    /// Everything.
    Full,
    /// Namespace ops (create, mkdir, unlink, rmdir, rename, link) and
    /// sync only.
    NamespaceOnly,
    /// Biased towards renames, links, atomic saves and directory fsyncs.
    NamespaceFsync,
}

/// One kind of step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Create,
    Mkdir,
    Write,
    Truncate,
    Falloc,
    Chmod,
    Chown,
    Utimens,
    Xattr,
    Unlink,
    Rmdir,
    /// A file to a new name (same directory or another).
    Rename,
    /// A file over another file.
    RenameOver,
    /// A directory to a new name or over an empty directory.
    RenameDir,
    /// RENAME_EXCHANGE of two files.
    Exchange,
    /// The atomic save: X.tmp written, fsynced, renamed over X, directory
    /// fsynced (several ops).
    AtomicSave,
    Link,
    Fsync,
    FsyncDir,
    Fdatasync,
    Sync,
    /// create/unlink/rmdir requests that must fail.
    Bogus,
    /// rename/link/xattr requests that must fail.
    BogusNs,
}

/// Weights per mille of each op in a mix.
pub fn mix_table(m: Mix) -> &'static [(u32, Op)] {
    use Op::*;
    match m {
        Mix::Full => &[
            (90, Create),
            (40, Mkdir),
            (200, Write),
            (40, Truncate),
            (40, Falloc),
            (20, Chmod),
            (15, Chown),
            (20, Utimens),
            (50, Xattr),
            (45, Unlink),
            (20, Rmdir),
            (30, Rename),
            (15, RenameOver),
            (12, RenameDir),
            (5, Exchange),
            (20, AtomicSave),
            (30, Link),
            (110, Fsync),
            (50, FsyncDir),
            (50, Fdatasync),
            (30, Sync),
            (45, Bogus),
            (23, BogusNs),
        ],
        Mix::NamespaceOnly => &[
            (350, Create),
            (150, Mkdir),
            (180, Unlink),
            (90, Rmdir),
            (60, Rename),
            (20, RenameOver),
            (30, RenameDir),
            (40, Link),
            (50, Sync),
            (30, Bogus),
        ],
        Mix::NamespaceFsync => &[
            (110, Create),
            (50, Mkdir),
            (110, Write),
            (15, Truncate),
            (15, Falloc),
            (10, Chmod),
            (5, Chown),
            (5, Utimens),
            (30, Xattr),
            (40, Unlink),
            (15, Rmdir),
            (80, Rename),
            (40, RenameOver),
            (35, RenameDir),
            (15, Exchange),
            (70, AtomicSave),
            (70, Link),
            (100, Fsync),
            (105, FsyncDir),
            (25, Fdatasync),
            (10, Sync),
            (20, Bogus),
            (25, BogusNs),
        ],
    }
}
