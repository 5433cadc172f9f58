//! rxfs: XFS v5 in userspace.
//!
//! Read and write XFS v5 filesystems (image files or block devices) so
//! that Linux's XFS and `xfs_repair` accept every byte: every metadata
//! change is a logged transaction, as the kernel makes it.
//!
//! ## Quick start
//!
//! Make a filesystem, write a file, read it back ([`volume::Volume`] is
//! the path-level API; [`fs::Filesystem`] the inode-level one):
//!
//! ```
//! use rxfs::mkfs::{image::make_image, MkfsOptions};
//! use rxfs::volume::{OpenFlags, Volume, VolumeOptions};
//!
//! # fn main() -> rxfs::Result<()> {
//! # let dir = std::env::temp_dir().join(format!("rxfs-doc-{}", std::process::id()));
//! # std::fs::create_dir_all(&dir).unwrap();
//! let img = dir.join("disk.img");
//! // mkfs: a sparse 300 MiB image file with mkfs.xfs's defaults.
//! let geometry = make_image(&img, &MkfsOptions { dsize: Some(300 << 20), ..Default::default() }, false)?;
//! assert_eq!(geometry.blocksize, 4096);
//!
//! // Write: closing commits and unmounts cleanly.
//! let vol = Volume::open(&img, &VolumeOptions::writable())?;
//! vol.mkdir(b"/etc", 0o755)?;
//! let f = vol.open_file(b"/etc/motd", OpenFlags::WRITE | OpenFlags::CREATE, 0o644)?;
//! vol.write_at(&f, 0, b"hello from rxfs\n")?;
//! vol.close_file(f)?;
//! vol.close()?;
//!
//! // Read it back, read-only.
//! let vol = Volume::open(&img, &VolumeOptions::default())?;
//! let f = vol.open_file(b"/etc/motd", OpenFlags::READ, 0)?;
//! let mut buf = [0u8; 64];
//! let n = vol.read_at(&f, 0, &mut buf)?;
//! assert_eq!(&buf[..n], b"hello from rxfs\n");
//! vol.close_file(f)?;
//! let names: Vec<_> = vol.read_dir(b"/etc")?.into_iter().map(|e| e.name).collect();
//! assert_eq!(names, [b"motd".to_vec()]);
//! # drop(vol);
//! # std::fs::remove_dir_all(&dir).unwrap();
//! # Ok(())
//! # }
//! ```
//!
//! ## Layers
//! Bottom up. A module uses only modules of its own layer or below, and no
//! two top-level modules use each other (`scripts/layers --check`, run by
//! `scripts/test-all`, reads the table below and fails otherwise). Where a
//! lower layer must call upward it goes through a trait it owns:
//! [`log::TailPusher`] (the log asks the AIL to move the tail),
//! [`ail::LogForce`] (the AIL forces the CIL), [`xact::AgSpace`] (the btree
//! editor and the rmap code get blocks and AGFL fix-ups from the allocator),
//! [`inode::ReadCtx`] (every structure's read path reads a mounted
//! filesystem through it: blocks, inodes, the read path's locks),
//! [`recover::logged::LoggedMount`] (recovery finishes through a read-write
//! mount's logged transactions).
//!
//! ```text
//! layer  modules
//!   0    types error
//!   1    format
//!   2    bdev geometry clock
//!   3    log
//!   4    cache ail cil
//!   5    xact cred inode
//!   6    ag btree
//!   7    rmap
//!   8    alloc rtalloc
//!   9    ialloc bmap
//!  10    dir symlink rt
//!  11    attr
//!  12    ns
//!  13    recover
//!  14    fs
//!  15    check mkfs populate
//!  16    volume
//! ```
//! - [`types`], [`error`]: newtypes per address space; the error type.
//! - [`format`](mod@format): the on-disk format, pure (no I/O): layouts, decoders,
//!   verifiers, in-place field editors, buffer kinds.
//! - [`bdev`]: every byte of I/O goes through [`bdev::BlockDevice`];
//!   [`geometry`]: sizes and address conversions from the superblock;
//!   [`clock`]: "now" and XFS's random values, fixed for reproducible
//!   images.
//! - [`log`]: the log writer: grant heads, log buffers, forces, the
//!   head/tail search.
//! - [`cache`], [`ail`], [`cil`]: the buffer and inode cache with the inode
//!   locks and the read view; write-back and tail moves; delayed logging.
//! - [`xact`]: the transaction contract ([`xact::MetaTx`]) every metadata
//!   algorithm is written against; [`cred`]: callers' credentials;
//!   [`inode`]: the in-core inode, its decoding from the dinode, and the
//!   read context ([`inode::ReadCtx`]) the per-structure read paths use.
//! - [`ag`], [`btree`]: the AG headers (verified reads, in-place edits);
//!   the short-form AG btrees (bnobt, cntbt, inobt, finobt, rmapbt): the
//!   verifying walker and the generic editor.
//! - [`rmap`], [`alloc`], [`ialloc`], [`bmap`], [`dir`], [`attr`]:
//!   reverse mappings, free space, inodes, fork mappings, directories,
//!   extended attributes: each structure's changes on a [`xact::MetaTx`]
//!   and its reads over [`inode::ReadCtx`] (inode allocation, file data,
//!   directories, attributes); speculative preallocation's policy
//!   ([`bmap::prealloc`]).
//! - [`rtalloc`]: the realtime allocator (bitmap and summary changes on a
//!   [`xact::MetaTx`], under the realtime lock).
//! - [`symlink`]: reading symlink targets (inline and remote blocks).
//! - [`rt`]: the realtime section: checks at open, bitmap and summary
//!   reads, free-space queries.
//! - [`ns`]: namespace operations on a transaction (create, link, unlink,
//!   rename...), combining the modules below.
//! - [`recover`]: the log check at open, log replay per item type, intent
//!   finishing and unlinked inodes (in memory, or through a read-write
//!   mount's log), recovery in place and the clean log.
//! - [`fs`]: a mounted filesystem: opening and mounting, the inode cache,
//!   the read path's locks and entry points, the logged transaction, the
//!   operations of a read-write mount.
//! - [`check`], [`mkfs`], [`populate`]: the checker, making filesystems,
//!   copying host trees in.
//! - [`volume`]: path-level access to an image (open, stat, read, write,
//!   make and remove by path): what the Python and C bindings wrap.
//!
//! Lock order of the write path (outermost first), each module documenting
//! its own part:
//! 1. inode locks (`ilock`), ascending inode number;
//! 2. the log reservation (grant heads may wait for the AIL; nothing below
//!    is held while waiting);
//! 3. the realtime lock, AGI buffers (ascending AG), AGF buffers
//!    (ascending AG); then other buffers ([`xact`]);
//! 4. the CIL's push order, context, item and list locks ([`cil`]);
//! 5. the AIL lock, then an item's state ([`ail`]);
//! 6. the log writer's core lock, then the grant heads' lock ([`log`]).
//!
//! The read path holds at most one lock at a time; the inode cache lock is
//! never held across I/O.

pub mod ag;
pub mod ail;
pub mod alloc;
pub mod attr;
pub mod bdev;
pub mod bmap;
pub mod btree;
pub mod cache;
pub mod check;
pub mod cil;
pub mod clock;
pub mod cred;
pub mod dir;
pub mod error;
pub mod format;
pub mod fs;
pub mod geometry;
pub mod ialloc;
pub mod inode;
pub mod log;
pub mod mkfs;
pub mod ns;
pub mod populate;
pub mod recover;
pub mod rmap;
pub mod rt;
pub mod rtalloc;
pub mod symlink;
pub mod types;
pub mod volume;
pub mod xact;

pub use error::{Error, Result};
pub use fs::{Filesystem, MountOptions};
