//! `rxfs._rxfs`: the native half of the Python package `rxfs` (the
//! Pythonic API, file objects and `walk` are in `rxfs/__init__.py`).
//!
//! Every call that reads or writes the image releases the GIL, so several
//! Python threads read at once. Errors become `OSError` with the errno the
//! library reports (Python picks the subclass: `FileNotFoundError`...);
//! corruption (EUCLEAN) is `rxfs.CorruptFilesystemError`, an `OSError`.
//! A panic in the library (a bug) reaches Python as an exception, never
//! as a crash of the interpreter.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use pyo3::buffer::PyBuffer;
use pyo3::create_exception;
use pyo3::exceptions::{PyOSError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyTuple};

use rxfs::format::inode::Timestamp;
use rxfs::volume::{FileRef, OpenFlags, Stat, Volume, VolumeOptions};

create_exception!(
    _rxfs,
    CorruptFilesystemError,
    PyOSError,
    "The image's metadata is corrupt (errno EUCLEAN, as the kernel reports it)."
);

/// The errno XFS reports for corruption (EUCLEAN).
const EFSCORRUPTED: i32 = 117;

fn os_error(e: &rxfs::Error, path: Option<&[u8]>) -> PyErr {
    let errno = e.errno();
    let msg = e.to_string();
    let name = path.map(|p| String::from_utf8_lossy(p).into_owned());
    if errno == EFSCORRUPTED {
        return match name {
            Some(n) => CorruptFilesystemError::new_err((errno, msg, n)),
            None => CorruptFilesystemError::new_err((errno, msg)),
        };
    }
    match name {
        Some(n) => PyOSError::new_err((errno, msg, n)),
        None => PyOSError::new_err((errno, msg)),
    }
}

fn err_at(path: &[u8]) -> impl FnOnce(rxfs::Error) -> PyErr + '_ {
    move |e| os_error(&e, Some(path))
}

fn ns(t: Timestamp) -> i128 {
    i128::from(t.sec) * 1_000_000_000 + i128::from(t.nsec)
}

fn ts_of_ns(v: i128) -> Timestamp {
    Timestamp {
        sec: v.div_euclid(1_000_000_000) as i64,
        nsec: v.rem_euclid(1_000_000_000) as u32,
    }
}

/// `os.stat_result`'s fields (and birth time, generation): a sequence of
/// the first ten like `os.stat_result`, with every field as an attribute.
#[pyclass(frozen, module = "rxfs", name = "StatResult")]
struct StatResult {
    #[pyo3(get)]
    st_mode: u32,
    #[pyo3(get)]
    st_ino: u64,
    #[pyo3(get)]
    st_dev: u64,
    #[pyo3(get)]
    st_nlink: u32,
    #[pyo3(get)]
    st_uid: u32,
    #[pyo3(get)]
    st_gid: u32,
    #[pyo3(get)]
    st_size: u64,
    #[pyo3(get)]
    st_atime_ns: i128,
    #[pyo3(get)]
    st_mtime_ns: i128,
    #[pyo3(get)]
    st_ctime_ns: i128,
    #[pyo3(get)]
    st_birthtime_ns: i128,
    #[pyo3(get)]
    st_blksize: u32,
    #[pyo3(get)]
    st_blocks: u64,
    #[pyo3(get)]
    st_rdev: u64,
    #[pyo3(get)]
    st_gen: u32,
}

impl StatResult {
    fn new(s: &Stat, dev: u64) -> StatResult {
        StatResult {
            st_mode: s.mode,
            st_ino: s.ino,
            st_dev: dev,
            st_nlink: s.nlink,
            st_uid: s.uid,
            st_gid: s.gid,
            st_size: s.size,
            st_atime_ns: ns(s.atime),
            st_mtime_ns: ns(s.mtime),
            st_ctime_ns: ns(s.ctime),
            st_birthtime_ns: ns(s.btime),
            st_blksize: s.blksize,
            st_blocks: s.blocks,
            st_rdev: libc::makedev(s.rdev.0, s.rdev.1),
            st_gen: s.generation,
        }
    }

    fn seq<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        let secs = |v: i128| v.div_euclid(1_000_000_000) as i64;
        (
            self.st_mode,
            self.st_ino,
            self.st_dev,
            self.st_nlink,
            self.st_uid,
            self.st_gid,
            self.st_size,
            secs(self.st_atime_ns),
            secs(self.st_mtime_ns),
            secs(self.st_ctime_ns),
        )
            .into_pyobject(py)
    }
}

fn float_secs(v: i128) -> f64 {
    v as f64 / 1e9
}

#[pymethods]
impl StatResult {
    #[getter]
    fn st_atime(&self) -> f64 {
        float_secs(self.st_atime_ns)
    }
    #[getter]
    fn st_mtime(&self) -> f64 {
        float_secs(self.st_mtime_ns)
    }
    #[getter]
    fn st_ctime(&self) -> f64 {
        float_secs(self.st_ctime_ns)
    }
    #[getter]
    fn st_birthtime(&self) -> f64 {
        float_secs(self.st_birthtime_ns)
    }
    fn __len__(&self) -> usize {
        10
    }
    fn __getitem__<'py>(
        &self,
        py: Python<'py>,
        idx: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        self.seq(py)?.as_any().get_item(idx)
    }
    fn __iter__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        Ok(self.seq(py)?.as_any().try_iter()?.into_any())
    }
    fn __repr__(&self) -> String {
        format!(
            "rxfs.StatResult(st_mode={}, st_ino={}, st_dev={}, st_nlink={}, st_uid={}, st_gid={}, \
             st_size={}, st_atime={}, st_mtime={}, st_ctime={}, st_birthtime={})",
            self.st_mode,
            self.st_ino,
            self.st_dev,
            self.st_nlink,
            self.st_uid,
            self.st_gid,
            self.st_size,
            self.st_atime_ns.div_euclid(1_000_000_000),
            self.st_mtime_ns.div_euclid(1_000_000_000),
            self.st_ctime_ns.div_euclid(1_000_000_000),
            self.st_birthtime_ns.div_euclid(1_000_000_000),
        )
    }
}

/// An open image (wrapped by `rxfs.FileSystem`).
#[pyclass(frozen, module = "rxfs._rxfs", name = "Volume")]
struct PyVolume {
    vol: Arc<Volume>,
    /// `st_dev` of every stat: from the filesystem UUID.
    dev: u64,
}

/// DT_* of a directory entry's type (DT_UNKNOWN when not recorded).
fn dtype(t: Option<rxfs::types::FileType>) -> u8 {
    use rxfs::types::FileType as F;
    match t {
        Some(F::Regular) => libc::DT_REG,
        Some(F::Directory) => libc::DT_DIR,
        Some(F::Symlink) => libc::DT_LNK,
        Some(F::CharDev) => libc::DT_CHR,
        Some(F::BlockDev) => libc::DT_BLK,
        Some(F::Fifo) => libc::DT_FIFO,
        Some(F::Socket) => libc::DT_SOCK,
        None => libc::DT_UNKNOWN,
    }
}

#[pymethods]
impl PyVolume {
    #[new]
    #[pyo3(signature = (path, writable=false, rtdev=None, offset=0, partition=None, owner=None))]
    fn new(
        py: Python<'_>,
        path: PathBuf,
        writable: bool,
        rtdev: Option<PathBuf>,
        offset: u64,
        partition: Option<u32>,
        owner: Option<(u32, u32)>,
    ) -> PyResult<Self> {
        let o = VolumeOptions {
            writable,
            rtdev,
            offset,
            partition,
            owner,
        };
        let shown = path.as_os_str().as_encoded_bytes().to_vec();
        let vol = py
            .detach(|| Volume::open(&path, &o))
            .map_err(err_at(&shown))?;
        let u = vol.filesystem().sb().uuid;
        let dev = u64::from_le_bytes(u[..8].try_into().expect("8 bytes"));
        Ok(PyVolume {
            vol: Arc::new(vol),
            dev,
        })
    }

    #[getter]
    fn writable(&self) -> bool {
        self.vol.is_writable()
    }

    fn close(&self, py: Python<'_>) -> PyResult<()> {
        py.detach(|| self.vol.close())
            .map_err(|e| os_error(&e, None))
    }

    fn stat(&self, py: Python<'_>, path: &[u8], follow: bool) -> PyResult<StatResult> {
        let s = py
            .detach(|| self.vol.stat(path, follow))
            .map_err(err_at(path))?;
        Ok(StatResult::new(&s, self.dev))
    }

    fn stat_ino(&self, py: Python<'_>, ino: u64) -> PyResult<StatResult> {
        let s = py
            .detach(|| self.vol.stat_ino(ino))
            .map_err(|e| os_error(&e, None))?;
        Ok(StatResult::new(&s, self.dev))
    }

    /// [(name, ino, DT_*)] of a directory, without `.` and `..`.
    fn read_dir(&self, py: Python<'_>, path: &[u8]) -> PyResult<Vec<(Py<PyBytes>, u64, u8)>> {
        let entries = py
            .detach(|| self.vol.read_dir(path))
            .map_err(err_at(path))?;
        Ok(entries
            .into_iter()
            .map(|e| {
                (
                    PyBytes::new(py, &e.name).unbind(),
                    e.ino,
                    dtype(e.file_type),
                )
            })
            .collect())
    }

    fn readlink<'py>(&self, py: Python<'py>, path: &[u8]) -> PyResult<Bound<'py, PyBytes>> {
        let t = py
            .detach(|| self.vol.readlink(path))
            .map_err(err_at(path))?;
        Ok(PyBytes::new(py, &t))
    }

    fn listxattr(&self, py: Python<'_>, path: &[u8], follow: bool) -> PyResult<Vec<Py<PyBytes>>> {
        let names = py
            .detach(|| self.vol.listxattr(path, follow))
            .map_err(err_at(path))?;
        Ok(names.iter().map(|n| PyBytes::new(py, n).unbind()).collect())
    }

    fn getxattr<'py>(
        &self,
        py: Python<'py>,
        path: &[u8],
        name: &[u8],
        follow: bool,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let v = py
            .detach(|| self.vol.getxattr(path, name, follow))
            .map_err(err_at(path))?;
        Ok(PyBytes::new(py, &v))
    }

    /// `how`: 0 create or replace, 1 create only, 2 replace only.
    fn setxattr(
        &self,
        py: Python<'_>,
        path: &[u8],
        name: &[u8],
        value: &[u8],
        how: u8,
        follow: bool,
    ) -> PyResult<()> {
        let how = match how {
            0 => rxfs::attr::XattrSet::Any,
            1 => rxfs::attr::XattrSet::Create,
            2 => rxfs::attr::XattrSet::Replace,
            _ => return Err(PyValueError::new_err("how: 0, 1 (create) or 2 (replace)")),
        };
        py.detach(|| self.vol.setxattr(path, name, value, how, follow))
            .map_err(err_at(path))
    }

    fn removexattr(&self, py: Python<'_>, path: &[u8], name: &[u8], follow: bool) -> PyResult<()> {
        py.detach(|| self.vol.removexattr(path, name, follow))
            .map_err(err_at(path))
    }

    /// Open a file; `flags` are `OpenFlags` bits (see rxfs/__init__.py).
    fn open_file(&self, py: Python<'_>, path: &[u8], flags: u32, mode: u32) -> PyResult<PyFile> {
        let flags = OpenFlags::from_bits(flags)
            .ok_or_else(|| PyValueError::new_err(format!("unknown open flags {flags:#x}")))?;
        let f = py
            .detach(|| self.vol.open_file(path, flags, mode))
            .map_err(err_at(path))?;
        Ok(PyFile {
            vol: Arc::clone(&self.vol),
            ino: f.ino(),
            dev: self.dev,
            f: Mutex::new(Some(f)),
        })
    }

    /// The whole contents of a regular file (a fast path for `read_bytes`).
    fn read_file<'py>(&self, py: Python<'py>, path: &[u8]) -> PyResult<Bound<'py, PyBytes>> {
        let data = py
            .detach(|| -> rxfs::Result<Vec<u8>> {
                let f = self.vol.open_file(path, OpenFlags::READ, 0)?;
                let r = (|| {
                    let size = self.vol.fstat(&f)?.size as usize;
                    let mut buf = vec![0u8; size];
                    let mut done = 0;
                    while done < size {
                        let n = self.vol.read_at(&f, done as u64, &mut buf[done..])?;
                        if n == 0 {
                            break;
                        }
                        done += n;
                    }
                    buf.truncate(done);
                    Ok(buf)
                })();
                let closed = self.vol.close_file(f);
                let buf = r?;
                closed?;
                Ok(buf)
            })
            .map_err(err_at(path))?;
        Ok(PyBytes::new(py, &data))
    }

    fn mkdir(&self, py: Python<'_>, path: &[u8], mode: u32) -> PyResult<()> {
        py.detach(|| self.vol.mkdir(path, mode))
            .map(|_| ())
            .map_err(err_at(path))
    }

    fn mknod(
        &self,
        py: Python<'_>,
        path: &[u8],
        mode: u32,
        major: u32,
        minor: u32,
    ) -> PyResult<()> {
        py.detach(|| self.vol.mknod(path, mode, major, minor))
            .map(|_| ())
            .map_err(err_at(path))
    }

    fn unlink(&self, py: Python<'_>, path: &[u8]) -> PyResult<()> {
        py.detach(|| self.vol.unlink(path)).map_err(err_at(path))
    }

    fn rmdir(&self, py: Python<'_>, path: &[u8]) -> PyResult<()> {
        py.detach(|| self.vol.rmdir(path)).map_err(err_at(path))
    }

    fn rename(&self, py: Python<'_>, src: &[u8], dst: &[u8]) -> PyResult<()> {
        py.detach(|| self.vol.rename(src, dst)).map_err(err_at(src))
    }

    fn link(&self, py: Python<'_>, src: &[u8], dst: &[u8]) -> PyResult<()> {
        py.detach(|| self.vol.link(src, dst)).map_err(err_at(dst))
    }

    fn symlink(&self, py: Python<'_>, target: &[u8], path: &[u8]) -> PyResult<()> {
        py.detach(|| self.vol.symlink(target, path))
            .map(|_| ())
            .map_err(err_at(path))
    }

    fn chmod(&self, py: Python<'_>, path: &[u8], mode: u32, follow: bool) -> PyResult<()> {
        py.detach(|| self.vol.chmod(path, mode, follow))
            .map_err(err_at(path))
    }

    fn chown(
        &self,
        py: Python<'_>,
        path: &[u8],
        uid: Option<u32>,
        gid: Option<u32>,
        follow: bool,
    ) -> PyResult<()> {
        py.detach(|| self.vol.chown(path, uid, gid, follow))
            .map_err(err_at(path))
    }

    /// Times in nanoseconds; None leaves one.
    fn utime(
        &self,
        py: Python<'_>,
        path: &[u8],
        atime_ns: Option<i128>,
        mtime_ns: Option<i128>,
        follow: bool,
    ) -> PyResult<()> {
        let (a, m) = (atime_ns.map(ts_of_ns), mtime_ns.map(ts_of_ns));
        py.detach(|| self.vol.utime(path, a, m, follow))
            .map_err(err_at(path))
    }

    fn truncate(&self, py: Python<'_>, path: &[u8], length: u64) -> PyResult<()> {
        py.detach(|| self.vol.truncate(path, length))
            .map_err(err_at(path))
    }

    fn sync(&self, py: Python<'_>) -> PyResult<()> {
        py.detach(|| self.vol.sync())
            .map_err(|e| os_error(&e, None))
    }

    /// (bsize, frsize, blocks, bfree, bavail, files, ffree, namelen).
    fn statvfs(&self, py: Python<'_>) -> PyResult<StatVfs> {
        let s = py
            .detach(|| self.vol.statfs())
            .map_err(|e| os_error(&e, None))?;
        Ok((
            s.bsize, s.frsize, s.blocks, s.bfree, s.bavail, s.files, s.ffree, s.namelen,
        ))
    }
}

/// statvfs's fields, in `os.statvfs_result`'s order (f_bsize, f_frsize,
/// f_blocks, f_bfree, f_bavail, f_files, f_ffree, f_namemax).
type StatVfs = (u32, u32, u64, u64, u64, u64, u64, u32);

/// An open file of a volume (wrapped by `rxfs.RawFile`).
#[pyclass(frozen, module = "rxfs._rxfs", name = "File")]
struct PyFile {
    vol: Arc<Volume>,
    ino: u64,
    dev: u64,
    f: Mutex<Option<FileRef>>,
}

impl PyFile {
    fn with<T: Send>(
        &self,
        py: Python<'_>,
        op: impl FnOnce(&Volume, &FileRef) -> rxfs::Result<T> + Send,
    ) -> PyResult<T> {
        py.detach(|| {
            let g = self.f.lock().unwrap_or_else(|p| p.into_inner());
            match g.as_ref() {
                Some(f) => Ok(op(&self.vol, f)),
                None => Err(()),
            }
        })
        .map_err(|()| PyValueError::new_err("I/O operation on closed file"))?
        .map_err(|e| os_error(&e, None))
    }
}

/// A raw pointer to a Python buffer's bytes, carried into a GIL-free
/// closure; the `PyBuffer` it came from outlives the closure.
struct BufPtr(*mut u8, usize);
// SAFETY: the buffer stays alive (its PyBuffer view is held by the
// caller for the whole call) and only this thread writes it meanwhile.
unsafe impl Send for BufPtr {}

#[pymethods]
impl PyFile {
    #[getter]
    fn ino(&self) -> u64 {
        self.ino
    }

    fn read_at<'py>(
        &self,
        py: Python<'py>,
        offset: u64,
        size: usize,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let data = self.with(py, |v, f| {
            let mut buf = vec![0u8; size];
            let mut done = 0;
            while done < size {
                let n = v.read_at(f, offset + done as u64, &mut buf[done..])?;
                if n == 0 {
                    break;
                }
                done += n;
            }
            buf.truncate(done);
            Ok(buf)
        })?;
        Ok(PyBytes::new(py, &data))
    }

    /// Read into a writable, contiguous buffer; the bytes read.
    fn readinto_at(
        &self,
        py: Python<'_>,
        offset: u64,
        buffer: &Bound<'_, PyAny>,
    ) -> PyResult<usize> {
        let b: PyBuffer<u8> = PyBuffer::get(buffer)?;
        if b.readonly() || !b.is_c_contiguous() {
            return Err(PyValueError::new_err("a writable, contiguous buffer"));
        }
        let p = BufPtr(b.buf_ptr().cast::<u8>(), b.len_bytes());
        let n = self.with(py, move |v, f| {
            let p = p;
            // SAFETY: see BufPtr.
            let dst = unsafe { std::slice::from_raw_parts_mut(p.0, p.1) };
            v.read_at(f, offset, dst)
        })?;
        drop(b);
        Ok(n)
    }

    fn write_at(&self, py: Python<'_>, offset: u64, data: &[u8]) -> PyResult<usize> {
        self.with(py, |v, f| v.write_at(f, offset, data))
    }

    fn truncate(&self, py: Python<'_>, length: u64) -> PyResult<()> {
        self.with(py, |v, f| v.ftruncate(f, length))
    }

    fn fsync(&self, py: Python<'_>) -> PyResult<()> {
        self.with(py, |v, f| v.fsync_file(f))
    }

    fn fstat(&self, py: Python<'_>) -> PyResult<StatResult> {
        let s = self.with(py, |v, f| v.fstat(f))?;
        Ok(StatResult::new(&s, self.dev))
    }

    fn close(&self, py: Python<'_>) -> PyResult<()> {
        let f = self.f.lock().unwrap_or_else(|p| p.into_inner()).take();
        match f {
            Some(f) => py
                .detach(|| self.vol.close_file(f))
                .map_err(|e| os_error(&e, None)),
            None => Ok(()),
        }
    }
}

/// Make a filesystem (see `rxfs.mkfs`); returns the geometry chosen.
#[pyfunction]
#[pyo3(signature = (path, size=None, force=false, label=None, uuid=None, block_size=None,
    sector_size=None, inode_size=None, dir_block_size=None, agcount=None, agsize=None,
    log_size=None, imaxpct=None, features=Vec::new()))]
#[allow(clippy::too_many_arguments)]
fn mkfs(
    py: Python<'_>,
    path: PathBuf,
    size: Option<u64>,
    force: bool,
    label: Option<String>,
    uuid: Option<[u8; 16]>,
    block_size: Option<u32>,
    sector_size: Option<u32>,
    inode_size: Option<u32>,
    dir_block_size: Option<u32>,
    agcount: Option<u64>,
    agsize: Option<u64>,
    log_size: Option<u64>,
    imaxpct: Option<u8>,
    features: Vec<(String, bool)>,
) -> PyResult<Vec<(&'static str, u64)>> {
    let mut o = rxfs::mkfs::MkfsOptions {
        blocksize: block_size,
        sectsize: sector_size,
        inodesize: inode_size,
        dirblocksize: dir_block_size,
        agcount,
        agsize,
        dsize: size,
        logsize: log_size,
        imaxpct,
        label,
        uuid,
        ..Default::default()
    };
    for (name, on) in &features {
        let f = &mut o.features;
        let (slot, key): (&mut bool, &'static str) = match name.as_str() {
            "crc" => (&mut f.crc, "crc"),
            "finobt" => (&mut f.finobt, "finobt"),
            "sparse" => (&mut f.sparse, "sparse"),
            "reflink" => (&mut f.reflink, "reflink"),
            "rmapbt" => (&mut f.rmapbt, "rmapbt"),
            "bigtime" => (&mut f.bigtime, "bigtime"),
            "inobtcount" => (&mut f.inobtcount, "inobtcount"),
            "nrext64" => (&mut f.nrext64, "nrext64"),
            other => {
                return Err(PyValueError::new_err(format!(
                    "unknown feature {other:?} (crc, finobt, sparse, reflink, rmapbt, bigtime, \
                     inobtcount, nrext64)"
                )))
            }
        };
        *slot = *on;
        o.explicit.push(key);
    }
    let shown = path.as_os_str().as_encoded_bytes().to_vec();
    let p = py
        .detach(|| rxfs::mkfs::image::make_image(&path, &o, force))
        .map_err(err_at(&shown))?;
    Ok(vec![
        ("block_size", u64::from(p.blocksize)),
        ("sector_size", u64::from(p.sectsize)),
        ("inode_size", u64::from(p.inodesize)),
        ("dir_block_size", u64::from(p.dirblocksize)),
        ("data_blocks", p.dblocks),
        ("agcount", u64::from(p.agcount)),
        ("agblocks", u64::from(p.agblocks)),
        ("log_blocks", u64::from(p.logblocks)),
    ])
}

/// Check an image read-only, as it is on disk (see `rxfs.check`):
/// [(code, ag, block, ino, message)].
#[pyfunction]
#[pyo3(signature = (path, rtdev=None))]
#[allow(clippy::type_complexity)]
fn check(
    py: Python<'_>,
    path: PathBuf,
    rtdev: Option<PathBuf>,
) -> PyResult<Vec<(&'static str, Option<u32>, Option<u64>, Option<u64>, String)>> {
    let shown = path.as_os_str().as_encoded_bytes().to_vec();
    let report = py
        .detach(|| -> rxfs::Result<rxfs::check::Report> {
            let opts = rxfs::fs::MountOptions {
                read_only: true,
                norecovery: true,
                ..Default::default()
            };
            let fs = rxfs::Filesystem::open_path(&path, rtdev.as_deref(), opts)?;
            Ok(rxfs::check::check(&fs, &mut |_, _, _| {}))
        })
        .map_err(err_at(&shown))?;
    Ok(report
        .findings
        .into_iter()
        .map(|f| (f.code, f.ag, f.block, f.ino, f.message))
        .collect())
}

/// Copy a host directory tree into a directory of an image (see
/// `rxfs.populate`); returns (paths, bytes).
#[pyfunction]
#[pyo3(signature = (image, source, dest=b"/".to_vec(), owner=None, overrides=None, threads=None, rtdev=None))]
#[allow(clippy::too_many_arguments)]
fn populate(
    py: Python<'_>,
    image: PathBuf,
    source: PathBuf,
    dest: Vec<u8>,
    owner: Option<(u32, u32)>,
    overrides: Option<PathBuf>,
    threads: Option<usize>,
    rtdev: Option<PathBuf>,
) -> PyResult<(u64, u64)> {
    let shown = image.as_os_str().as_encoded_bytes().to_vec();
    let mut opts = rxfs::populate::Options {
        owner,
        ..Default::default()
    };
    if let Some(t) = threads {
        opts.threads = t;
    }
    if let Some(f) = &overrides {
        let text = std::fs::read_to_string(f).map_err(|e| {
            PyOSError::new_err((
                e.raw_os_error().unwrap_or(libc::EIO),
                e.to_string(),
                f.clone(),
            ))
        })?;
        let o = rxfs::populate::overrides::Overrides::parse(&text)
            .and_then(|o| o.check(&source).map(|()| o))
            .map_err(|e| PyValueError::new_err(format!("{}: {e}", f.display())))?;
        opts.overrides = Some(Arc::new(o));
    }
    let r = py.detach(|| -> Result<(u64, u64), PyErrLater> {
        let vo = VolumeOptions {
            writable: true,
            rtdev,
            ..Default::default()
        };
        let vol = Volume::open(&image, &vo).map_err(PyErrLater::Fs)?;
        let r = (|| {
            let ino = vol.lookup(&dest, true).map_err(PyErrLater::Fs)?;
            if let Ok(m) = std::fs::metadata(&image) {
                use std::os::unix::fs::MetadataExt;
                opts.exclude.push((m.dev(), m.ino()));
            }
            rxfs::populate::populate(
                vol.filesystem(),
                Path::new(&source),
                rxfs::populate::Dest::Into(rxfs::types::Ino(ino)),
                &opts,
                &|_| {},
            )
            .map(|s| (s.files, s.bytes))
            .map_err(PyErrLater::Populate)
        })();
        let closed = vol.close();
        let v = r?;
        closed.map_err(PyErrLater::Fs)?;
        Ok(v)
    });
    r.map_err(|e| match e {
        PyErrLater::Fs(e) => os_error(&e, Some(&shown)),
        PyErrLater::Populate(e) => {
            let errno = match &e.cause {
                rxfs::populate::Cause::Source(io) => io.raw_os_error().unwrap_or(libc::EIO),
                rxfs::populate::Cause::Image(fe) => fe.errno(),
            };
            PyOSError::new_err((errno, e.to_string()))
        }
    })
}

/// An error made without the GIL, turned into a Python exception after.
enum PyErrLater {
    Fs(rxfs::Error),
    Populate(rxfs::populate::PopulateError),
}

#[pymodule]
fn _rxfs(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyVolume>()?;
    m.add_class::<PyFile>()?;
    m.add_class::<StatResult>()?;
    m.add(
        "CorruptFilesystemError",
        m.py().get_type::<CorruptFilesystemError>(),
    )?;
    m.add_function(wrap_pyfunction!(mkfs, m)?)?;
    m.add_function(wrap_pyfunction!(check, m)?)?;
    m.add_function(wrap_pyfunction!(populate, m)?)?;
    m.add("OPEN_READ", OpenFlags::READ.bits())?;
    m.add("OPEN_WRITE", OpenFlags::WRITE.bits())?;
    m.add("OPEN_CREATE", OpenFlags::CREATE.bits())?;
    m.add("OPEN_EXCL", OpenFlags::EXCL.bits())?;
    m.add("OPEN_TRUNCATE", OpenFlags::TRUNCATE.bits())?;
    m.add("OPEN_NOFOLLOW", OpenFlags::NOFOLLOW.bits())?;
    Ok(())
}
