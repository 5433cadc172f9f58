//! Image files and block devices through pread/pwrite.
//!
//! With `direct` the file is opened O_DIRECT; requests that are not aligned to
//! the logical sector size go through an aligned bounce buffer.
//!
//! One writer at a time: a read-write open owns the device exclusively
//! until it is closed, as the kernel's mount owns its block device. An
//! image file gets an exclusive `flock` and is refused while a loop device
//! backed by it is mounted or claimed; a block device is opened `O_EXCL`,
//! which fails while the kernel has it (or a partition of it) mounted.
//! A refused open fails at once with `InUse`, naming the owner (see
//! [`super::claim`]); [`FileDevice::open_waiting`] waits for the owner to
//! let go instead. Read-only opens take no lock and are not refused: they
//! read whatever is on the device. A read-only *mount* first waits, up to
//! [`OWNER_WAIT`], for a writer to let go ([`wait_for_writer`]), so that it
//! does not read the log of an rxfs that is still finishing its unmount.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::{FileExt, FileTypeExt, OpenOptionsExt};
use std::path::Path;

use super::BlockDevice;
use crate::error::{Error, Result};

pub struct FileDevice {
    file: File,
    size: u64,
    read_only: bool,
    direct: bool,
}

/// `_IO(0x12, 127)`: zero a byte range of a block device.
const BLKZEROOUT: libc::c_ulong = 0x127f;

/// How long a read-only mount waits for a read-write owner to let go.
pub const OWNER_WAIT: std::time::Duration = std::time::Duration::from_secs(15);

/// Alignment used for O_DIRECT bounce buffers and requests.
const DIRECT_ALIGN: u64 = 4096;

/// Wait until no read-write owner holds `path` (see the module doc), at
/// most `timeout`; whether it was free by then. Probes as a writer would
/// take it (a shared `flock` of an image file, an `O_EXCL` open of a block
/// device) and lets go at once.
pub fn wait_for_writer(path: &Path, timeout: std::time::Duration) -> bool {
    let deadline = std::time::Instant::now() + timeout;
    loop {
        if writer_gone(path) {
            return true;
        }
        if std::time::Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

fn writer_gone(path: &Path) -> bool {
    let is_bdev = std::fs::metadata(path)
        .map(|m| m.file_type().is_block_device())
        .unwrap_or(false);
    let mut opts = OpenOptions::new();
    opts.read(true);
    if is_bdev {
        opts.custom_flags(libc::O_EXCL);
    }
    let f = match opts.open(path) {
        Ok(f) => f,
        Err(e) => return e.raw_os_error() != Some(libc::EBUSY),
    };
    if is_bdev {
        return true;
    }
    // SAFETY: flock on a descriptor we own; closing it drops the lock.
    unsafe {
        libc::flock(
            std::os::fd::AsRawFd::as_raw_fd(&f),
            libc::LOCK_SH | libc::LOCK_NB,
        ) == 0
    }
}

impl FileDevice {
    /// Open an image file or block device; a read-write open of a device
    /// that another writer owns fails at once with `InUse` (see the module
    /// doc).
    pub fn open(path: &Path, read_only: bool, direct: bool) -> Result<Self> {
        Self::open_once(path, read_only, direct)
    }

    /// [`Self::open`], but while the device is owned elsewhere, retry for
    /// up to `timeout`; `waiting` is called once, with the reason, when the
    /// wait begins. Fails with the last `InUse` when time is up.
    pub fn open_waiting(
        path: &Path,
        read_only: bool,
        direct: bool,
        timeout: std::time::Duration,
        waiting: &mut dyn FnMut(&str),
    ) -> Result<Self> {
        let deadline = std::time::Instant::now() + timeout;
        let mut told = false;
        loop {
            match Self::open_once(path, read_only, direct) {
                Err(Error::InUse(why)) if std::time::Instant::now() < deadline => {
                    if !told {
                        waiting(&why);
                        told = true;
                    }
                    std::thread::sleep(std::time::Duration::from_millis(20))
                }
                r => return r,
            }
        }
    }

    fn open_once(path: &Path, read_only: bool, direct: bool) -> Result<Self> {
        let is_bdev = std::fs::metadata(path)
            .map(|m| m.file_type().is_block_device())
            .unwrap_or(false);
        let mut opts = OpenOptions::new();
        opts.read(true).write(!read_only);
        let mut flags = 0;
        if direct {
            flags |= libc::O_DIRECT;
        }
        if is_bdev && !read_only {
            flags |= libc::O_EXCL;
        }
        opts.custom_flags(flags);
        let file = match opts.open(path) {
            Ok(f) => f,
            Err(e) if e.raw_os_error() == Some(libc::EBUSY) => {
                let why = std::fs::metadata(path)
                    .map(|m| super::claim::bdev_reason(&m))
                    .unwrap_or_else(|_| "opened exclusively elsewhere".into());
                return Err(Error::InUse(why));
            }
            Err(e) => return Err(Error::io("open", 0, 0, e)),
        };
        if !read_only && !is_bdev {
            let meta = file.metadata().map_err(|e| Error::io("stat", 0, 0, e))?;
            if let Some(why) = super::claim::loop_reason(&meta) {
                return Err(Error::InUse(why));
            }
            take_lock(&file, &meta)?;
        }
        let meta = file.metadata().map_err(|e| Error::io("stat", 0, 0, e))?;
        let size = if meta.file_type().is_block_device() {
            block_device_size(&file)?
        } else {
            meta.len()
        };
        Ok(FileDevice {
            file,
            size,
            read_only,
            direct,
        })
    }

    fn check_range(&self, op: &'static str, offset: u64, len: usize) -> Result<()> {
        match offset.checked_add(len as u64) {
            Some(end) if end <= self.size => Ok(()),
            _ => Err(Error::io(
                op,
                offset,
                len,
                std::io::Error::from_raw_os_error(libc::EIO),
            )),
        }
    }

    fn read_direct(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        let start = offset / DIRECT_ALIGN * DIRECT_ALIGN;
        let end = (offset + buf.len() as u64).div_ceil(DIRECT_ALIGN) * DIRECT_ALIGN;
        let mut bounce = AlignedBuf::new((end - start) as usize);
        self.file
            .read_exact_at(bounce.as_mut(), start)
            .map_err(|e| Error::io("read", start, bounce.len, e))?;
        let skip = (offset - start) as usize;
        buf.copy_from_slice(&bounce.as_mut()[skip..skip + buf.len()]);
        Ok(())
    }

    fn write_direct(&self, buf: &[u8], offset: u64) -> Result<()> {
        let start = offset / DIRECT_ALIGN * DIRECT_ALIGN;
        let end = (offset + buf.len() as u64).div_ceil(DIRECT_ALIGN) * DIRECT_ALIGN;
        let mut bounce = AlignedBuf::new((end - start) as usize);
        if start != offset || end != offset + buf.len() as u64 {
            // Read-modify-write of the partial edges.
            self.file
                .read_exact_at(bounce.as_mut(), start)
                .map_err(|e| Error::io("read", start, bounce.len, e))?;
        }
        let skip = (offset - start) as usize;
        bounce.as_mut()[skip..skip + buf.len()].copy_from_slice(buf);
        let len = bounce.len;
        self.file
            .write_all_at(bounce.as_mut(), start)
            .map_err(|e| Error::io("write", start, len, e))
    }
}

/// How long a read-write open waits for an owner in this same process
/// (a `Filesystem` being dropped on another thread lets go of its
/// device when its last background thread ends).
const OWN_PROCESS_GRACE: std::time::Duration = std::time::Duration::from_secs(3);

/// The exclusive `flock` of an image file opened read-write. Another
/// process's lock is refused at once; this process's own (see
/// [`OWN_PROCESS_GRACE`]) is waited for briefly first.
fn take_lock(file: &File, meta: &std::fs::Metadata) -> Result<()> {
    let deadline = std::time::Instant::now() + OWN_PROCESS_GRACE;
    loop {
        // SAFETY: flock on a descriptor we own; no memory involved.
        let r = unsafe {
            libc::flock(
                std::os::fd::AsRawFd::as_raw_fd(file),
                libc::LOCK_EX | libc::LOCK_NB,
            )
        };
        if r == 0 {
            return Ok(());
        }
        let e = std::io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::EWOULDBLOCK) {
            return Err(Error::io("flock", 0, 0, e));
        }
        let ours = super::claim::flock_held_here(meta);
        if !ours || std::time::Instant::now() >= deadline {
            return Err(Error::InUse(super::claim::flock_reason(meta)));
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

/// Write every byte of `bufs` from `offset`, in `pwritev` calls of at
/// most `IOV_MAX` pieces, going on after a short write.
fn pwritev_all(file: &File, bufs: &[&[u8]], offset: u64) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    const IOV_MAX: usize = 1024;
    // (piece, bytes of it already written)
    let (mut i, mut done_in) = (0usize, 0usize);
    let mut at = offset;
    loop {
        // Empty pieces carry nothing; with only empty pieces left, a
        // zero-length pwritev would read as a device that wrote nothing.
        while i < bufs.len() && bufs[i].len() == done_in {
            i += 1;
            done_in = 0;
        }
        if i == bufs.len() {
            return Ok(());
        }
        let iov: Vec<libc::iovec> = bufs[i..]
            .iter()
            .take(IOV_MAX)
            .enumerate()
            .map(|(k, b)| {
                let b = if k == 0 { &b[done_in..] } else { b };
                libc::iovec {
                    iov_base: b.as_ptr() as *mut libc::c_void,
                    iov_len: b.len(),
                }
            })
            .collect();
        // SAFETY: every iovec points into a slice borrowed for the call.
        let n = unsafe {
            libc::pwritev(
                file.as_raw_fd(),
                iov.as_ptr(),
                iov.len() as libc::c_int,
                at as libc::off_t,
            )
        };
        if n < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        if n == 0 {
            return Err(std::io::ErrorKind::WriteZero.into());
        }
        let mut n = n as usize;
        at += n as u64;
        while n > 0 {
            let left = bufs[i].len() - done_in;
            if n >= left {
                n -= left;
                i += 1;
                done_in = 0;
            } else {
                done_in += n;
                n = 0;
            }
        }
    }
}

/// The size in bytes of an open block device (BLKGETSIZE64).
pub fn block_device_size(file: &File) -> Result<u64> {
    use std::os::fd::AsRawFd;
    // BLKGETSIZE64 = _IOR(0x12, 114, size_t)
    const BLKGETSIZE64: libc::c_ulong = 0x8008_1272;
    let mut size: u64 = 0;
    // SAFETY: the ioctl writes one u64 into `size`, which outlives the call.
    let rc = unsafe { libc::ioctl(file.as_raw_fd(), BLKGETSIZE64, &mut size as *mut u64) };
    if rc != 0 {
        return Err(Error::io("ioctl", 0, 0, std::io::Error::last_os_error()));
    }
    Ok(size)
}

/// The physical sector size of an open block device (BLKPBSZGET), 512 if
/// it cannot tell.
pub fn block_device_sectsize(file: &File) -> u32 {
    use std::os::fd::AsRawFd;
    let mut pb: libc::c_uint = 0;
    // SAFETY: BLKPBSZGET writes one unsigned int into `pb`.
    let r = unsafe { libc::ioctl(file.as_raw_fd(), libc::BLKPBSZGET, &mut pb) };
    if r == 0 && pb >= 512 {
        pb
    } else {
        512
    }
}

/// A heap buffer aligned for O_DIRECT.
struct AlignedBuf {
    ptr: *mut u8,
    len: usize,
}

impl AlignedBuf {
    fn new(len: usize) -> Self {
        let layout = std::alloc::Layout::from_size_align(len.max(1), DIRECT_ALIGN as usize)
            .expect("valid layout");
        // SAFETY: layout has non-zero size.
        let ptr = unsafe { std::alloc::alloc_zeroed(layout) };
        if ptr.is_null() {
            std::alloc::handle_alloc_error(layout);
        }
        AlignedBuf { ptr, len }
    }

    fn as_mut(&mut self) -> &mut [u8] {
        // SAFETY: ptr is a live allocation of len bytes owned by self.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) }
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        let layout = std::alloc::Layout::from_size_align(self.len.max(1), DIRECT_ALIGN as usize)
            .expect("valid layout");
        // SAFETY: allocated in new() with the same layout.
        unsafe { std::alloc::dealloc(self.ptr, layout) }
    }
}

impl BlockDevice for FileDevice {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        self.check_range("read", offset, buf.len())?;
        if self.direct {
            return self.read_direct(buf, offset);
        }
        self.file
            .read_exact_at(buf, offset)
            .map_err(|e| Error::io("read", offset, buf.len(), e))
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> Result<()> {
        if self.read_only {
            return Err(Error::ReadOnly("device opened read-only".into()));
        }
        self.check_range("write", offset, buf.len())?;
        if self.direct {
            return self.write_direct(buf, offset);
        }
        self.file
            .write_all_at(buf, offset)
            .map_err(|e| Error::io("write", offset, buf.len(), e))
    }

    /// One `pwritev` per up to 1,024 pieces (the buffered image or
    /// device; O_DIRECT goes piece by piece through the bounce buffer).
    fn write_vectored_at(&self, bufs: &[&[u8]], offset: u64) -> Result<()> {
        if self.read_only {
            return Err(Error::ReadOnly("device opened read-only".into()));
        }
        let total: usize = bufs.iter().map(|b| b.len()).sum();
        self.check_range("write", offset, total)?;
        if self.direct {
            return crate::bdev::write_each(self, bufs, offset);
        }
        pwritev_all(&self.file, bufs, offset).map_err(|e| Error::io("write", offset, total, e))
    }

    fn flush(&self) -> Result<()> {
        if self.read_only {
            return Ok(());
        }
        self.file
            .sync_data()
            .map_err(|e| Error::io("flush", 0, 0, e))
    }

    fn size(&self) -> u64 {
        self.size
    }

    fn read_only(&self) -> bool {
        self.read_only
    }

    fn zero_range(&self, offset: u64, len: u64) -> Result<()> {
        self.check_range("zero", offset, len as usize)?;
        if self.read_only {
            return Err(Error::io(
                "zero",
                offset,
                len as usize,
                std::io::Error::from_raw_os_error(libc::EROFS),
            ));
        }
        let ft = self.file.metadata().map(|m| m.file_type()).ok();
        if ft.is_some_and(|t| t.is_block_device()) && !self.direct {
            // The device zeroes the range itself (or unmaps it).
            let range: [u64; 2] = [offset, len];
            // SAFETY: BLKZEROOUT reads two u64s (start, length) in bytes.
            let r = unsafe {
                libc::ioctl(
                    std::os::fd::AsRawFd::as_raw_fd(&self.file),
                    BLKZEROOUT,
                    range.as_ptr(),
                )
            };
            if r == 0 {
                return Ok(());
            }
        }
        if ft.is_some_and(|t| t.is_file()) {
            // A hole reads as zeros and keeps the image sparse.
            let mode = libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE;
            // SAFETY: plain syscall on an open descriptor we own.
            let r = unsafe {
                libc::fallocate(
                    std::os::fd::AsRawFd::as_raw_fd(&self.file),
                    mode,
                    offset as libc::off_t,
                    len as libc::off_t,
                )
            };
            if r == 0 {
                return Ok(());
            }
        }
        let zeros = vec![0u8; (1u64 << 20).min(len) as usize];
        let mut at = 0;
        while at < len {
            let n = (zeros.len() as u64).min(len - at) as usize;
            self.write_at(&zeros[..n], offset + at)?;
            at += n as u64;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    /// Vectored writes land as the pieces one after another: more pieces
    /// than one pwritev takes, empty ones among them, buffered and
    /// O_DIRECT (unaligned edges), and the default of the trait agrees.
    #[test]
    fn vectored_writes_land_in_order() {
        let dir = std::env::temp_dir().join(format!("rxfs-writev-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let pieces: Vec<Vec<u8>> = (0..2500u32)
            .map(|i| vec![(i % 251) as u8; (i % 7) as usize * 3])
            .collect();
        let refs: Vec<&[u8]> = pieces.iter().map(|p| p.as_slice()).collect();
        let want: Vec<u8> = pieces.concat();
        for direct in [false, true] {
            let img = dir.join(format!("img{direct}"));
            std::fs::write(&img, vec![0xeeu8; 1 << 20]).unwrap();
            let dev = match FileDevice::open(&img, false, direct) {
                Ok(d) => d,
                // tmpfs has no O_DIRECT: say so rather than pass quietly.
                Err(e) if direct && e.to_string().contains("nvalid argument") => {
                    eprintln!(
                        "O_DIRECT case not run: {} refuses O_DIRECT ({e})",
                        dir.display()
                    );
                    continue;
                }
                Err(e) => panic!("{e}"),
            };
            // Nothing but empty pieces: a no-op, not a short write.
            dev.write_vectored_at(&[&[], &[]], 5).unwrap();
            dev.write_vectored_at(&[], 5).unwrap();
            dev.write_vectored_at(&refs, 777).unwrap();
            let mut got = vec![0u8; want.len() + 2];
            dev.read_at(&mut got, 776).unwrap();
            assert_eq!(got[0], 0xee);
            assert_eq!(&got[1..1 + want.len()], &want[..], "direct {direct}");
            assert_eq!(got[1 + want.len()], 0xee);
        }
        let mem = crate::bdev::MemDevice::new(vec![0u8; 1 << 20]);
        mem.write_vectored_at(&refs, 777).unwrap();
        let mut got = vec![0u8; want.len()];
        mem.read_at(&mut got, 777).unwrap();
        assert_eq!(got, want);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn one_read_write_owner_at_a_time() {
        let dir = std::env::temp_dir().join(format!("rxfs-owner-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let img = dir.join("img");
        std::fs::write(&img, vec![0u8; 1 << 20]).unwrap();
        let first = FileDevice::open(&img, false, false).unwrap();
        // Readers are not refused.
        let reader = FileDevice::open(&img, true, false).unwrap();
        drop(reader);
        // A second writer is refused, with who owns it (this process's
        // own owner after OWN_PROCESS_GRACE: another process's at once, as
        // the CLI tests check).
        let t0 = Instant::now();
        let e = match FileDevice::open(&img, false, false) {
            Err(e) => e,
            Ok(_) => panic!("a second read-write open of an owned image"),
        };
        assert!(
            t0.elapsed() < OWN_PROCESS_GRACE + Duration::from_secs(2),
            "refusal took {:?}",
            t0.elapsed()
        );
        assert_eq!(e.errno(), libc::EBUSY);
        let why = e.to_string();
        assert!(
            why.contains("already open read-write by this process"),
            "{why}"
        );
        assert!(
            why.contains(&format!("pid {}", std::process::id())),
            "{why}"
        );
        // The in-process owner lets go: the next open gets it.
        drop(first);
        drop(FileDevice::open(&img, false, false).unwrap());

        // Another process's lock (util-linux flock(1)) is refused at once,
        // naming it; open_waiting waits for it, saying why once.
        let mut holder = std::process::Command::new("flock")
            .arg("-x")
            .arg(&img)
            .args(["-c", "sleep 1.5"])
            .spawn()
            .expect("flock(1) from util-linux");
        let deadline = Instant::now() + Duration::from_secs(10);
        let refused = loop {
            match FileDevice::open(&img, false, false) {
                Err(e) => break e,
                Ok(d) if Instant::now() < deadline => {
                    drop(d);
                    std::thread::sleep(Duration::from_millis(20));
                }
                Ok(_) => panic!("flock(1) never took the lock"),
            }
        };
        let why = refused.to_string();
        assert!(why.contains("open read-write by flock (pid "), "{why}");
        let t0 = Instant::now();
        let mut said = Vec::new();
        let r = FileDevice::open_waiting(&img, false, false, Duration::from_secs(30), &mut |w| {
            said.push(w.to_string())
        });
        r.unwrap();
        assert!(t0.elapsed() >= Duration::from_millis(500), "did not wait");
        assert_eq!(said.len(), 1, "{said:?}");
        holder.wait().unwrap();
        // And gives up after its timeout.
        let _owner = FileDevice::open(&img, false, false).unwrap();
        let t0 = Instant::now();
        let r =
            FileDevice::open_waiting(&img, false, false, Duration::from_millis(200), &mut |_| {});
        assert!(matches!(r, Err(Error::InUse(_))));
        assert!(t0.elapsed() >= Duration::from_millis(200));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
