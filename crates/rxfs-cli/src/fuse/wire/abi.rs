//! The FUSE kernel interface: the message layouts and numbers of
//! `include/uapi/linux/fuse.h` (protocol 7.x), restated for this driver.
//!
//! Every struct is `repr(C)` with no implicit padding (the header pads
//! each to 64 bits so 32-bit servers work on 64-bit kernels), so zerocopy
//! reads requests from and writes replies into byte buffers directly.
//! Requests may be shorter than these structs when the kernel speaks an
//! older minor version; [`super::request`] reads them zero-padded.

use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

pub const KERNEL_VERSION: u32 = 7;
/// The minor version we speak: 7.41 has FUSE_TMPFILE (7.37), FUSE_STATX
/// (7.39), parallel direct writes (7.38) and ALLOW_IDMAP (7.40).
pub const KERNEL_MINOR_VERSION: u32 = 41;
pub const ROOT_ID: u64 = 1;

/// Opcodes (`enum fuse_opcode`).
pub mod op {
    pub const LOOKUP: u32 = 1;
    pub const FORGET: u32 = 2;
    pub const GETATTR: u32 = 3;
    pub const SETATTR: u32 = 4;
    pub const READLINK: u32 = 5;
    pub const SYMLINK: u32 = 6;
    pub const MKNOD: u32 = 8;
    pub const MKDIR: u32 = 9;
    pub const UNLINK: u32 = 10;
    pub const RMDIR: u32 = 11;
    pub const RENAME: u32 = 12;
    pub const LINK: u32 = 13;
    pub const OPEN: u32 = 14;
    pub const READ: u32 = 15;
    pub const WRITE: u32 = 16;
    pub const STATFS: u32 = 17;
    pub const RELEASE: u32 = 18;
    pub const FSYNC: u32 = 20;
    pub const SETXATTR: u32 = 21;
    pub const GETXATTR: u32 = 22;
    pub const LISTXATTR: u32 = 23;
    pub const REMOVEXATTR: u32 = 24;
    pub const FLUSH: u32 = 25;
    pub const INIT: u32 = 26;
    pub const OPENDIR: u32 = 27;
    pub const READDIR: u32 = 28;
    pub const RELEASEDIR: u32 = 29;
    pub const FSYNCDIR: u32 = 30;
    pub const ACCESS: u32 = 34;
    pub const CREATE: u32 = 35;
    pub const INTERRUPT: u32 = 36;
    pub const DESTROY: u32 = 38;
    pub const IOCTL: u32 = 39;
    pub const BATCH_FORGET: u32 = 42;
    pub const FALLOCATE: u32 = 43;
    pub const READDIRPLUS: u32 = 44;
    pub const RENAME2: u32 = 45;
    pub const LSEEK: u32 = 46;
    pub const COPY_FILE_RANGE: u32 = 47;
    pub const SYNCFS: u32 = 50;
    pub const TMPFILE: u32 = 51;
    pub const STATX: u32 = 52;
}

/// INIT flags (`flags` is the low 32 bits, `flags2` the high ones).
pub mod init {
    pub const ASYNC_READ: u64 = 1 << 0;
    pub const EXPORT_SUPPORT: u64 = 1 << 4;
    pub const BIG_WRITES: u64 = 1 << 5;
    pub const DONT_MASK: u64 = 1 << 6;
    pub const DO_READDIRPLUS: u64 = 1 << 13;
    pub const READDIRPLUS_AUTO: u64 = 1 << 14;
    pub const WRITEBACK_CACHE: u64 = 1 << 16;
    pub const PARALLEL_DIROPS: u64 = 1 << 18;
    pub const POSIX_ACL: u64 = 1 << 20;
    pub const MAX_PAGES: u64 = 1 << 22;
    pub const CACHE_SYMLINKS: u64 = 1 << 23;
    /// The daemon drops set-id bits on write, truncate and chown itself
    /// (the kernel tells it when the caller lacks CAP_FSETID).
    pub const HANDLE_KILLPRIV_V2: u64 = 1 << 28;
    pub const INIT_EXT: u64 = 1 << 30;
    pub const DIRECT_IO_ALLOW_MMAP: u64 = 1 << 36;
    pub const ALLOW_IDMAP: u64 = 1 << 40;
    pub const OVER_IO_URING: u64 = 1 << 41;
}

/// Open reply flags (`fuse_open_out.open_flags`).
pub mod fopen {
    pub const DIRECT_IO: u32 = 1 << 0;
    pub const KEEP_CACHE: u32 = 1 << 1;
    pub const CACHE_DIR: u32 = 1 << 3;
    pub const PARALLEL_DIRECT_WRITES: u32 = 1 << 6;
}

/// SETATTR's `valid` bits.
pub mod fattr {
    pub const MODE: u32 = 1 << 0;
    pub const UID: u32 = 1 << 1;
    pub const GID: u32 = 1 << 2;
    pub const SIZE: u32 = 1 << 3;
    pub const ATIME: u32 = 1 << 4;
    pub const MTIME: u32 = 1 << 5;
    pub const FH: u32 = 1 << 6;
    pub const ATIME_NOW: u32 = 1 << 7;
    pub const MTIME_NOW: u32 = 1 << 8;
    pub const CTIME: u32 = 1 << 10;
    /// With HANDLE_KILLPRIV_V2: a truncate by a caller without
    /// CAP_FSETID, or any chown of a non-directory.
    pub const KILL_SUIDGID: u32 = 1 << 11;
}

pub const FSYNC_FDATASYNC: u32 = 1 << 0;
/// `fuse_write_in.write_flags`: the write comes from the kernel's page
/// cache (write-back), not from a write(2) in progress.
pub const WRITE_CACHE: u32 = 1 << 0;
/// `fuse_write_in.write_flags`, with HANDLE_KILLPRIV_V2: the writer lacks
/// CAP_FSETID (set-id bits go as the VFS's rules say).
pub const WRITE_KILL_SUIDGID: u32 = 1 << 2;
pub const NOTIFY_INVAL_INODE: i32 = 2;

/// `FUSE_DEV_IOC_CLONE`: `_IOR(229, 0, uint32_t)`.
pub const DEV_IOC_CLONE: libc::c_ulong = (2 << 30) | (4 << 16) | (229 << 8);

macro_rules! wire_struct {
    ($(#[$m:meta])* $name:ident { $($f:ident: $t:ty),* $(,)? }) => {
        $(#[$m])*
        #[repr(C)]
        #[derive(Debug, Clone, Copy, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
        pub struct $name { $(pub $f: $t),* }
    };
}

wire_struct!(InHeader {
    len: u32,
    opcode: u32,
    unique: u64,
    nodeid: u64,
    uid: u32,
    gid: u32,
    pid: u32,
    total_extlen: u16,
    padding: u16,
});

wire_struct!(OutHeader {
    len: u32,
    error: i32,
    unique: u64,
});

wire_struct!(Attr {
    ino: u64,
    size: u64,
    blocks: u64,
    atime: u64,
    mtime: u64,
    ctime: u64,
    atimensec: u32,
    mtimensec: u32,
    ctimensec: u32,
    mode: u32,
    nlink: u32,
    uid: u32,
    gid: u32,
    rdev: u32,
    blksize: u32,
    flags: u32,
});

wire_struct!(SxTime {
    sec: i64,
    nsec: u32,
    reserved: i32,
});

wire_struct!(
    /// `struct fuse_statx`, bit for bit `struct statx`.
    Statx {
        mask: u32,
        blksize: u32,
        attributes: u64,
        nlink: u32,
        uid: u32,
        gid: u32,
        mode: u16,
        spare0: u16,
        ino: u64,
        size: u64,
        blocks: u64,
        attributes_mask: u64,
        atime: SxTime,
        btime: SxTime,
        ctime: SxTime,
        mtime: SxTime,
        rdev_major: u32,
        rdev_minor: u32,
        dev_major: u32,
        dev_minor: u32,
        spare2: [u64; 14],
    }
);

wire_struct!(EntryOut {
    nodeid: u64,
    generation: u64,
    entry_valid: u64,
    attr_valid: u64,
    entry_valid_nsec: u32,
    attr_valid_nsec: u32,
    attr: Attr,
});

wire_struct!(AttrOut {
    attr_valid: u64,
    attr_valid_nsec: u32,
    dummy: u32,
    attr: Attr,
});

wire_struct!(StatxIn {
    getattr_flags: u32,
    reserved: u32,
    fh: u64,
    sx_flags: u32,
    sx_mask: u32,
});

wire_struct!(StatxOut {
    attr_valid: u64,
    attr_valid_nsec: u32,
    flags: u32,
    spare: [u64; 2],
    stat: Statx,
});

wire_struct!(ForgetIn { nlookup: u64 });
wire_struct!(ForgetOne {
    nodeid: u64,
    nlookup: u64,
});
wire_struct!(BatchForgetIn {
    count: u32,
    dummy: u32,
});

wire_struct!(MknodIn {
    mode: u32,
    rdev: u32,
    umask: u32,
    padding: u32,
});

wire_struct!(MkdirIn {
    mode: u32,
    umask: u32,
});

wire_struct!(RenameIn { newdir: u64 });

wire_struct!(Rename2In {
    newdir: u64,
    flags: u32,
    padding: u32,
});

wire_struct!(LinkIn { oldnodeid: u64 });

wire_struct!(SetattrIn {
    valid: u32,
    padding: u32,
    fh: u64,
    size: u64,
    lock_owner: u64,
    atime: u64,
    mtime: u64,
    ctime: u64,
    atimensec: u32,
    mtimensec: u32,
    ctimensec: u32,
    mode: u32,
    unused4: u32,
    uid: u32,
    gid: u32,
    unused5: u32,
});

wire_struct!(OpenIn {
    flags: u32,
    open_flags: u32,
});

wire_struct!(CreateIn {
    flags: u32,
    mode: u32,
    umask: u32,
    open_flags: u32,
});

wire_struct!(OpenOut {
    fh: u64,
    open_flags: u32,
    backing_id: i32,
});

wire_struct!(ReleaseIn {
    fh: u64,
    flags: u32,
    release_flags: u32,
    lock_owner: u64,
});

wire_struct!(ReadIn {
    fh: u64,
    offset: u64,
    size: u32,
    read_flags: u32,
    lock_owner: u64,
    flags: u32,
    padding: u32,
});

wire_struct!(WriteIn {
    fh: u64,
    offset: u64,
    size: u32,
    write_flags: u32,
    lock_owner: u64,
    flags: u32,
    padding: u32,
});

wire_struct!(WriteOut {
    size: u32,
    padding: u32,
});

wire_struct!(Kstatfs {
    blocks: u64,
    bfree: u64,
    bavail: u64,
    files: u64,
    ffree: u64,
    bsize: u32,
    namelen: u32,
    frsize: u32,
    padding: u32,
    spare: [u32; 6],
});

wire_struct!(FsyncIn {
    fh: u64,
    fsync_flags: u32,
    padding: u32,
});

wire_struct!(
    /// SETXATTR's fixed part without FUSE_SETXATTR_EXT (which we do not
    /// ask for): the kernel's compat size, 8 bytes.
    SetxattrIn {
        size: u32,
        flags: u32,
    }
);

wire_struct!(GetxattrIn {
    size: u32,
    padding: u32,
});

wire_struct!(GetxattrOut {
    size: u32,
    padding: u32,
});

wire_struct!(AccessIn {
    mask: u32,
    padding: u32,
});

wire_struct!(InitIn {
    major: u32,
    minor: u32,
    max_readahead: u32,
    flags: u32,
    flags2: u32,
    unused: [u32; 11],
});

wire_struct!(InitOut {
    major: u32,
    minor: u32,
    max_readahead: u32,
    flags: u32,
    max_background: u16,
    congestion_threshold: u16,
    max_write: u32,
    time_gran: u32,
    max_pages: u16,
    map_alignment: u16,
    flags2: u32,
    max_stack_depth: u32,
    unused: [u32; 6],
});

wire_struct!(IoctlIn {
    fh: u64,
    flags: u32,
    cmd: u32,
    arg: u64,
    in_size: u32,
    out_size: u32,
});

wire_struct!(IoctlOut {
    result: i32,
    flags: u32,
    in_iovs: u32,
    out_iovs: u32,
});

wire_struct!(FallocateIn {
    fh: u64,
    offset: u64,
    length: u64,
    mode: u32,
    padding: u32,
});

wire_struct!(LseekIn {
    fh: u64,
    offset: u64,
    whence: u32,
    padding: u32,
});

wire_struct!(LseekOut { offset: u64 });

wire_struct!(CopyFileRangeIn {
    fh_in: u64,
    off_in: u64,
    nodeid_out: u64,
    fh_out: u64,
    off_out: u64,
    len: u64,
    flags: u64,
});

wire_struct!(Dirent {
    ino: u64,
    off: u64,
    namelen: u32,
    typ: u32,
});

wire_struct!(NotifyInvalInodeOut {
    ino: u64,
    off: i64,
    len: i64,
});

#[cfg(test)]
mod tests {
    use super::*;

    /// The sizes the kernel's header gives (its FUSE_COMPAT_* sizes and
    /// the 64-bit padding of every struct).
    #[test]
    fn sizes_match_the_kernel() {
        use std::mem::size_of;
        assert_eq!(size_of::<InHeader>(), 40);
        assert_eq!(size_of::<OutHeader>(), 16);
        assert_eq!(size_of::<Attr>(), 88);
        assert_eq!(size_of::<EntryOut>(), 128);
        assert_eq!(size_of::<AttrOut>(), 104);
        assert_eq!(size_of::<Statx>(), 256);
        assert_eq!(size_of::<StatxOut>(), 288);
        assert_eq!(size_of::<SetattrIn>(), 88);
        assert_eq!(size_of::<InitIn>(), 64);
        assert_eq!(size_of::<InitOut>(), 64);
        assert_eq!(size_of::<ReadIn>(), 40);
        assert_eq!(size_of::<WriteIn>(), 40);
        assert_eq!(size_of::<Kstatfs>(), 80);
        assert_eq!(size_of::<CopyFileRangeIn>(), 56);
        assert_eq!(size_of::<Dirent>(), 24);
        assert_eq!(DEV_IOC_CLONE, 0x8004_e500);
    }
}
