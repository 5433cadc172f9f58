//! An unlogged transaction applied straight to a device: for testing
//! algorithms against the kernel oracle, never for a mounted filesystem.
//!
//! [`MemTx`] implements [`MetaTx`] with private copies of every joined
//! buffer and inode; [`MemTx::commit`] writes them (CRC stamped, LSN left as
//! it was) and the superblock counters, then flushes. A crash in the middle
//! of a commit is not safe: that is what the logged transaction is for.

use std::collections::HashMap;
use std::sync::Arc;

use crate::bdev::BlockDevice;
use crate::error::{Error, Location, Result};
use crate::format::bufkind::BufKind;
use crate::format::inode as dinode;
use crate::format::meta_header::meta_header;
use crate::format::sb::Superblock;
use crate::format::{be16, be64, crc, put_be64};
use crate::geometry::Geometry;
use crate::types::{AgBlock, AgNumber, Daddr, Ino};
use crate::xact::{BufId, InodeId, MetaTx, SbCounter};

struct JBuf {
    daddr: Daddr,
    kind: BufKind,
    data: Vec<u8>,
    dirty: bool,
    stale: bool,
}

struct JInode {
    ino: Ino,
    data: Vec<u8>,
    dirty: bool,
}

/// See the module doc.
pub struct MemTx {
    dev: Arc<dyn BlockDevice>,
    sb: Superblock,
    geo: Geometry,
    bufs: Vec<JBuf>,
    by_addr: HashMap<u64, BufId>,
    inodes: Vec<JInode>,
    by_ino: HashMap<u64, InodeId>,
    sb_delta: HashMap<&'static str, i64>,
    /// ICREATE items logged (for tests to inspect).
    pub icreates: Vec<(AgNumber, AgBlock, u32, u32, u32)>,
    busy: Vec<(AgNumber, AgBlock, u32)>,
    /// Times `busy` was emptied: the stable sequence
    /// ([`MetaTx::busy_stable_seq`]); the ranges it holds belong to the
    /// next one.
    busy_cleared: u64,
    /// Raw items logged (for tests to inspect; MemTx has no log).
    pub raw_items: Vec<Vec<Vec<u8>>>,
    /// The directory rotor to use (tests share one per image so that
    /// placement does not depend on other tests); `None`: process-wide.
    pub dir_rotor: Option<Arc<std::sync::atomic::AtomicU32>>,
    /// How the realtime allocator of this transaction searches (tests of
    /// the three modes); its state lives and dies with the transaction.
    pub rt_mode: crate::cache::rtsum::RtSumMode,
    rt: Option<crate::cache::rtsum::RtSumCache>,
}

impl MemTx {
    pub fn new(dev: Arc<dyn BlockDevice>) -> Result<Self> {
        let sb = crate::geometry::read_primary_sb(&*dev)?;
        let geo = Geometry::new(&sb);
        Ok(MemTx {
            dev,
            sb,
            geo,
            bufs: Vec::new(),
            by_addr: HashMap::new(),
            inodes: Vec::new(),
            by_ino: HashMap::new(),
            sb_delta: HashMap::new(),
            icreates: Vec::new(),
            busy: Vec::new(),
            busy_cleared: 0,
            raw_items: Vec::new(),
            dir_rotor: None,
            rt_mode: Default::default(),
            rt: None,
        })
    }

    fn join(&mut self, daddr: Daddr, len: usize, kind: BufKind, read: bool) -> Result<BufId> {
        if let Some(&id) = self.by_addr.get(&daddr.0) {
            let b = &self.bufs[id.0 as usize];
            if b.data.len() != len {
                return Err(Error::Invalid(format!(
                    "buffer at daddr {} joined with length {} and {len}",
                    daddr.0,
                    b.data.len()
                )));
            }
            return Ok(id);
        }
        let mut data = vec![0u8; len];
        if read {
            self.dev.read_at(&mut data, daddr.bytes())?;
            kind.verify(&data, daddr, &self.sb.metadata_uuid())?;
        }
        let id = BufId(self.bufs.len() as u32);
        self.bufs.push(JBuf {
            daddr,
            kind,
            data,
            dirty: !read,
            stale: false,
        });
        self.by_addr.insert(daddr.0, id);
        Ok(id)
    }

    /// Write every changed buffer and inode and the superblock counters.
    pub fn commit(self) -> Result<()> {
        for b in &self.bufs {
            if !b.dirty || b.stale {
                continue;
            }
            let mut data = b.data.clone();
            if let Some(h) = meta_header(&data).filter(|_| b.kind.has_header()) {
                crc::update(&mut data, h.crc_off);
            }
            b.kind.verify(&data, b.daddr, &self.sb.metadata_uuid())?;
            self.dev.write_at(&data, b.daddr.bytes())?;
        }
        for ip in &self.inodes {
            if !ip.dirty {
                continue;
            }
            let mut data = ip.data.clone();
            crc::update(&mut data, dinode::DINODE_CRC_OFF);
            // The inode's write verifier, as for buffers above.
            dinode::decode_core(&data, ip.ino, &self.sb.metadata_uuid(), true)?;
            let (daddr, off) = self.geo.ino_location(ip.ino);
            self.dev.write_at(&data, daddr.bytes() + off as u64)?;
        }
        if !self.sb_delta.is_empty() {
            let mut s = vec![0u8; self.geo.sectsize as usize];
            self.dev.read_at(&mut s, 0)?;
            for (name, off) in [
                ("icount", 128),
                ("ifree", 136),
                ("fdblocks", 144),
                ("frextents", 152),
            ] {
                let d = self.sb_delta.get(name).copied().unwrap_or(0);
                let v = be64(&s, off) as i64 + d;
                if v < 0 {
                    return Err(Error::corrupt(
                        "superblock",
                        Location::Daddr(0),
                        format!("{name} would go negative"),
                    ));
                }
                put_be64(&mut s, off, v as u64);
            }
            crc::update(&mut s, 224);
            self.dev.write_at(&s, 0)?;
        }
        self.dev.flush()
    }
}

impl MetaTx for MemTx {
    fn ag_space(&self) -> &'static dyn crate::xact::AgSpace {
        &crate::alloc::ALLOCATOR
    }
    fn dir_rotor(&self) -> u32 {
        use std::sync::atomic::Ordering::Relaxed;
        match &self.dir_rotor {
            Some(r) => r.fetch_add(1, Relaxed),
            None => crate::xact::DIR_ROTOR.fetch_add(1, Relaxed),
        }
    }
    fn geo(&self) -> &Geometry {
        &self.geo
    }
    fn sb(&self) -> &Superblock {
        &self.sb
    }
    fn read_buf(&mut self, daddr: Daddr, len: usize, kind: BufKind) -> Result<BufId> {
        self.join(daddr, len, kind, true)
    }
    fn new_buf(&mut self, daddr: Daddr, len: usize, kind: BufKind) -> Result<BufId> {
        let id = self.join(daddr, len, kind, false)?;
        let b = &mut self.bufs[id.0 as usize];
        b.data.fill(0);
        b.stale = false;
        b.kind = kind;
        Ok(id)
    }
    fn buf(&self, b: BufId) -> &[u8] {
        &self.bufs[b.0 as usize].data
    }
    fn buf_mut(&mut self, b: BufId) -> &mut [u8] {
        &mut self.bufs[b.0 as usize].data
    }
    fn log_buf(&mut self, b: BufId, range: std::ops::Range<usize>) {
        let jb = &mut self.bufs[b.0 as usize];
        assert!(range.start < range.end && range.end <= jb.data.len());
        jb.dirty = true;
    }
    fn stale_buf(&mut self, b: BufId) {
        self.bufs[b.0 as usize].stale = true;
    }
    fn ordered_buf(&mut self, b: BufId) {
        self.bufs[b.0 as usize].dirty = true;
    }
    fn log_icreate(&mut self, agno: AgNumber, agbno: AgBlock, count: u32, length: u32, gen: u32) {
        self.icreates.push((agno, agbno, count, length, gen));
    }
    fn ijoin(&mut self, ino: Ino) -> Result<InodeId> {
        if let Some(&id) = self.by_ino.get(&ino.0) {
            return Ok(id);
        }
        let data = self.read_dinode_raw(ino)?;
        if be16(&data, 0) != dinode::DINODE_MAGIC || !crc::verify(&data, dinode::DINODE_CRC_OFF) {
            return Err(Error::corrupt(
                "inode",
                Location::Ino(ino.0),
                "bad magic or CRC",
            ));
        }
        let id = InodeId(self.inodes.len() as u32);
        self.inodes.push(JInode {
            ino,
            data,
            dirty: false,
        });
        self.by_ino.insert(ino.0, id);
        Ok(id)
    }
    fn ijoin_new(
        &mut self,
        ino: Ino,
        dinode: Vec<u8>,
        _before: Option<Vec<u8>>,
    ) -> Result<InodeId> {
        if dinode.len() != self.geo.inodesize as usize {
            return Err(Error::Invalid("new dinode has the wrong size".into()));
        }
        let id = InodeId(self.inodes.len() as u32);
        self.inodes.push(JInode {
            ino,
            data: dinode,
            dirty: true,
        });
        self.by_ino.insert(ino.0, id);
        Ok(id)
    }
    fn read_dinode_raw(&mut self, ino: Ino) -> Result<Vec<u8>> {
        if !self.geo.ino_valid(ino) {
            return Err(Error::Invalid(format!(
                "inode number {} out of range",
                ino.0
            )));
        }
        let (daddr, off) = self.geo.ino_location(ino);
        let mut data = vec![0u8; self.geo.inodesize as usize];
        // An inode inside a buffer this transaction initialised (new chunk).
        let n = data.len();
        let at = daddr.bytes() + off as u64;
        for b in &self.bufs {
            if b.kind == BufKind::Dino
                && b.daddr.bytes() <= at
                && at + n as u64 <= b.daddr.bytes() + b.data.len() as u64
            {
                let s = (at - b.daddr.bytes()) as usize;
                data.copy_from_slice(&b.data[s..s + n]);
                return Ok(data);
            }
        }
        self.dev.read_at(&mut data, daddr.bytes() + off as u64)?;
        Ok(data)
    }
    fn inode(&self, i: InodeId) -> &[u8] {
        &self.inodes[i.0 as usize].data
    }
    fn inode_mut(&mut self, i: InodeId) -> &mut [u8] {
        let ip = &mut self.inodes[i.0 as usize];
        ip.dirty = true;
        &mut ip.data
    }
    fn ifree_done(&mut self, _i: InodeId) {}
    fn log_raw_item(&mut self, regions: Vec<Vec<u8>>) {
        self.raw_items.push(regions);
    }
    fn defer_free(&mut self, agno: AgNumber, agbno: AgBlock, len: u32) -> Result<()> {
        crate::alloc::free_extent(self, agno, agbno, len)
    }
    fn mod_sb(&mut self, c: SbCounter, delta: i64) {
        let name = match c {
            SbCounter::FreeBlocks => "fdblocks",
            SbCounter::ICount => "icount",
            SbCounter::IFree => "ifree",
            SbCounter::FreeRtExtents => "frextents",
        };
        *self.sb_delta.entry(name).or_insert(0) += delta;
    }
    fn mark_busy(&mut self, agno: AgNumber, agbno: AgBlock, len: u32) {
        self.busy.push((agno, agbno, len));
    }
    fn busy_overlap(&self, agno: AgNumber, agbno: AgBlock, len: u32) -> Option<(AgBlock, u32)> {
        crate::xact::own_busy(&self.busy, agno, agbno, len).next()
    }
    fn committed_busy_ranges(
        &self,
        _agno: AgNumber,
        _agbno: AgBlock,
        _len: u32,
    ) -> Vec<(AgBlock, u32, u64)> {
        // Recovery commits nothing before its end: every busy range is
        // its own.
        Vec::new()
    }
    fn own_busy_ranges(&self, agno: AgNumber, agbno: AgBlock, len: u32) -> Vec<(AgBlock, u32)> {
        crate::xact::own_busy(&self.busy, agno, agbno, len).collect()
    }
    fn busy_stable_seq(&self) -> u64 {
        self.busy_cleared
    }
    fn force_busy(&mut self) -> Result<()> {
        self.busy_cleared += 1;
        self.busy.clear();
        Ok(())
    }
    fn rt_lock(&mut self) -> Result<&mut crate::cache::rtsum::RtSumCache> {
        let (mode, levels, rbm) = (self.rt_mode, self.sb.rextslog as u32 + 1, self.sb.rbmblocks);
        Ok(self
            .rt
            .get_or_insert_with(|| crate::cache::rtsum::RtSumCache::new(mode, levels, rbm)))
    }
}
