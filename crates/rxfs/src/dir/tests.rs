//! Unit tests of the pure directory edits: random sequences of additions
//! and removals checked against a model, every state decoded back with the
//! read path's decoders.

use std::collections::BTreeMap;

use super::block::{
    block_add, block_can_add, block_from_sf, block_remove, block_to_sf, changed_chunks, BlockState,
};
use super::sf::{sf_add, sf_empty, sf_remove, sf_size, SfAdd};
use crate::format::crc;
use crate::format::da::hashname;
use crate::format::dir::{DirGeo, DATA_FIRST_OFFSET, DIR3_CRC_OFF};
use crate::format::dir_sf::{decode_sf, encode_sf, SfDir, MAX_SHORT_INUM};
use crate::types::{Daddr, Ino};

const UUID: [u8; 16] = [7; 16];
const DIR: Ino = Ino(131);
const DADDR: Daddr = Daddr(96);

/// xorshift64: deterministic, seedable.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// A valid random name of `len` bytes (no NUL, no '/').
fn name_of(r: &mut Rng, len: usize) -> Vec<u8> {
    (0..len)
        .map(|_| {
            let c = b'0' + r.below(75) as u8;
            if c == b'/' {
                b'_'
            } else {
                c
            }
        })
        .collect()
}

/// A different name with the same hash: flip bit 0 of one byte and bit 7
/// of the next one, both inside the same 4-byte hash group.
fn collide(name: &[u8]) -> Option<Vec<u8>> {
    for i in 0..name.len().saturating_sub(1) {
        // Bytes i and i+1 are combined with shifts 7 apart unless i ends a
        // 4-byte group.
        let full = name.len() / 4 * 4;
        let same_group = if i + 1 < full { i % 4 != 3 } else { i >= full };
        if !same_group {
            continue;
        }
        let mut n = name.to_vec();
        n[i] ^= 1;
        n[i + 1] ^= 0x80;
        if crate::format::dir::name_valid(&n) {
            debug_assert_eq!(hashname(&n), hashname(name));
            return Some(n);
        }
    }
    None
}

fn pick_name(r: &mut Rng, model: &BTreeMap<Vec<u8>, (Ino, u8)>) -> Vec<u8> {
    // Collide with an existing name now and then.
    if !model.is_empty() && r.below(4) == 0 {
        let k = model
            .keys()
            .nth(r.below(model.len() as u64) as usize)
            .unwrap();
        if let Some(c) = collide(k) {
            return c;
        }
    }
    let len = match r.below(10) {
        0 => 255,
        1 => 1 + r.below(3) as usize,
        _ => 1 + r.below(40) as usize,
    };
    name_of(r, len)
}

fn pick_ino(r: &mut Rng, allow_wide: bool) -> Ino {
    if allow_wide && r.below(8) == 0 {
        Ino((1 << 33) + r.below(1 << 20))
    } else {
        Ino(128 + r.below(1 << 20))
    }
}

fn check_sf(geo: &DirGeo, sf: &SfDir, model: &BTreeMap<Vec<u8>, (Ino, u8)>) {
    let bytes = encode_sf(sf, geo);
    let back = decode_sf(&bytes, geo, DIR).expect("sf decodes");
    assert_eq!(&back, sf);
    let got: BTreeMap<_, _> = back
        .entries
        .iter()
        .map(|e| (e.name.clone(), (e.ino, e.ftype)))
        .collect();
    assert_eq!(&got, model);
    assert_eq!(
        back.wide,
        back.entries.iter().any(|e| e.ino.0 > MAX_SHORT_INUM)
    );
    assert!(back.entries.iter().all(|e| e.offset % 8 == 0));
}

#[test]
fn sf_random_against_model() {
    for (seed, fork) in [(1u64, 336usize), (2, 80), (3, 1824), (4, 200)] {
        let geo = DirGeo::new(12, 0, true);
        let mut r = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
        let mut sf = sf_empty(Ino(128));
        let mut model = BTreeMap::new();
        let (mut adds, mut full) = (0, 0);
        for _ in 0..3000 {
            if model.is_empty() || r.below(3) != 0 {
                let name = pick_name(&mut r, &model);
                if model.contains_key(&name) {
                    continue;
                }
                let ino = pick_ino(&mut r, true);
                match sf_add(&geo, &sf, fork, &name, ino, 1 + r.below(7) as u8) {
                    SfAdd::Fits(n) => {
                        assert!(sf_size(&geo, &n) <= fork);
                        let e = n.entries.iter().find(|e| e.name == name).unwrap();
                        model.insert(name, (ino, e.ftype));
                        sf = n;
                        adds += 1;
                    }
                    SfAdd::ToBlock => {
                        // Refused only when it really does not fit.
                        let wide = sf.wide || ino.0 > MAX_SHORT_INUM;
                        let mut t = sf.clone();
                        t.wide = wide;
                        t.entries.push(crate::format::dir_sf::SfEntry {
                            name: name.clone(),
                            offset: 0,
                            ftype: 1,
                            ino,
                        });
                        let too_big = sf_size(&geo, &t) > fork;
                        let end = sf
                            .entries
                            .last()
                            .map(|e| e.offset as usize + geo.data_entsize(e.name.len()))
                            .unwrap_or(DATA_FIRST_OFFSET);
                        let blk_full =
                            end + geo.data_entsize(name.len()) + (t.entries.len() + 2) * 8 + 8
                                > geo.blksize as usize;
                        assert!(too_big || blk_full, "seed {seed}: refused without reason");
                        full += 1;
                    }
                }
            } else {
                let k = model
                    .keys()
                    .nth(r.below(model.len() as u64) as usize)
                    .unwrap()
                    .clone();
                let (n, ino) = sf_remove(&sf, &k).unwrap();
                assert_eq!(ino, model.remove(&k).unwrap().0);
                sf = n;
            }
            check_sf(&geo, &sf, &model);
        }
        assert!(
            adds > 50 && full > 0,
            "seed {seed}: adds {adds} full {full}"
        );
    }
}

#[test]
fn sf_offsets_follow_the_kernel() {
    let geo = DirGeo::new(12, 0, true);
    let mut sf = sf_empty(Ino(128));
    for n in [b"aa".as_ref(), b"bbbbbbbbbb", b"c"] {
        let SfAdd::Fits(s) = sf_add(&geo, &sf, 336, n, Ino(200), 1) else {
            panic!()
        };
        sf = s;
    }
    let offs: Vec<u16> = sf.entries.iter().map(|e| e.offset).collect();
    // 0x60, then + entsize(2) = 16, + entsize(10) = 24.
    assert_eq!(offs, [0x60, 0x70, 0x88]);
    // Removing the first leaves a 16-byte hole; appending keeps going at
    // the end (the "easy" way)...
    let (s, _) = sf_remove(&sf, b"aa").unwrap();
    let SfAdd::Fits(s) = sf_add(&geo, &s, 336, b"d", Ino(201), 1) else {
        panic!()
    };
    assert_eq!(s.entries.last().unwrap().offset, 0x98);
    // ...unless the inode numbers widen: then the first hole is used.
    let SfAdd::Fits(w) = sf_add(&geo, &s, 336, b"e", Ino(1 << 40), 1) else {
        panic!()
    };
    assert!(w.wide);
    assert_eq!(w.entries[0].name, b"e");
    assert_eq!(w.entries[0].offset, 0x60);
    // And back to 4-byte numbers when the wide one goes.
    let (n, _) = sf_remove(&w, b"e").unwrap();
    assert!(!n.wide);
    assert_eq!(n, s);
}

/// Stamp the CRC and decode with the read path (verifies everything).
fn decode(geo: &DirGeo, buf: &[u8]) -> BlockState {
    let mut b = buf.to_vec();
    crc::update(&mut b, DIR3_CRC_OFF);
    BlockState::decode(&b, geo, DADDR, DIR, &UUID).expect("block decodes")
}

fn check_block(geo: &DirGeo, buf: &[u8], st: &BlockState, model: &BTreeMap<Vec<u8>, (Ino, u8)>) {
    let back = decode(geo, buf);
    assert_eq!(&back, st, "model state differs from the decoded block");
    let got: BTreeMap<_, _> = back
        .user_entries()
        .map(|e| (e.name.clone(), (e.ino, e.ftype)))
        .collect();
    assert_eq!(&got, model);
    for k in model.keys() {
        assert!(back.find(geo, k).is_some());
    }
    assert_eq!(back.leaf.len() - back.stale, model.len() + 2);
}

/// The kernel's rule for room in a block directory, stated on its own:
/// without stale leaf entries the leaf grows into the unused slot that
/// ends at it, so that slot must exist and the entry must fit elsewhere or
/// beside the new leaf entry; with stale entries the entry must fit some
/// slot, or the end slot once all stale entries but one are squeezed out.
fn fits(st: &BlockState, need: usize) -> bool {
    let ls = st.leaf_start();
    let end = st.free.iter().find(|f| f.0 + f.1 == ls).map(|f| f.1);
    let other = st.free.iter().any(|f| f.0 + f.1 != ls && f.1 >= need);
    if st.stale == 0 {
        end.is_some_and(|e| other || e >= need + 8)
    } else {
        other || end.unwrap_or(0) + (st.stale - 1) * 8 >= need
    }
}

fn run_block(geo: DirGeo, seed: u64, ops: usize) -> (usize, usize, usize) {
    let mut r = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
    let (mut buf, mut st) = block_from_sf(&geo, &sf_empty(Ino(128)), DIR, DADDR, &UUID).unwrap();
    let mut model = BTreeMap::new();
    check_block(&geo, &buf, &st, &model);
    let (mut adds, mut refused, mut compacts) = (0, 0, 0);
    for _ in 0..ops {
        // Fill up, then drain, then fill again.
        let add_bias = if (adds / 40) % 3 == 2 { 3 } else { 8 };
        if model.is_empty() || r.below(10) < add_bias {
            let name = pick_name(&mut r, &model);
            if model.contains_key(&name) {
                continue;
            }
            let ino = pick_ino(&mut r, true);
            let ft = 1 + r.below(7) as u8;
            let before = buf.clone();
            let st_before = st.clone();
            let stale_before = st.stale;
            let can = block_can_add(&geo, &st, name.len());
            let r = block_add(&geo, &mut buf, &mut st, &name, ino, ft);
            assert_eq!(can, r.is_ok(), "block_can_add disagrees with block_add");
            match r {
                Ok(()) => {
                    assert!(fits(&st_before, geo.data_entsize(name.len())));
                    if stale_before > 1 && st.stale == 0 {
                        compacts += 1;
                    }
                    model.insert(name, (ino, if geo.ftype { ft } else { 0 }));
                    adds += 1;
                    let ranges = bytewise(&before, &buf);
                    assert!(!ranges.is_empty());
                    assert!(ranges.iter().all(|r| r.start >= 48 || r.end <= 4));
                }
                Err(e) => {
                    assert!(matches!(e, crate::Error::NotSupported(_)), "{e}");
                    assert_eq!(before, buf, "refused add changed the block");
                    assert_eq!(st_before, st);
                    assert!(!fits(&st, geo.data_entsize(name.len())));
                    refused += 1;
                }
            }
        } else {
            let k = model
                .keys()
                .nth(r.below(model.len() as u64) as usize)
                .unwrap()
                .clone();
            let ino = block_remove(&geo, &mut buf, &mut st, &k).expect("present");
            assert_eq!(ino, model.remove(&k).unwrap().0);
            assert!(block_remove(&geo, &mut buf, &mut st, &k).is_none());
        }
        check_block(&geo, &buf, &st, &model);
    }
    (adds, refused, compacts)
}

#[test]
fn block_random_against_model() {
    let mut tot = (0, 0, 0);
    for seed in 1..=6 {
        let (a, r, c) = run_block(DirGeo::new(12, 0, true), seed, 1500);
        tot = (tot.0 + a, tot.1 + r, tot.2 + c);
    }
    // 1k blocks, no ftype, and 8k directory blocks on 4k blocks.
    for seed in 7..=9 {
        run_block(DirGeo::new(10, 0, false), seed, 800);
        run_block(DirGeo::new(12, 1, true), seed, 800);
    }
    // 64 KiB directory blocks: offsets and lengths near 16 bits.
    run_block(DirGeo::new(12, 4, true), 10, 1500);
    assert!(tot.0 > 1000, "adds {tot:?}");
    assert!(tot.1 > 10, "the block never filled up: {tot:?}");
    assert!(tot.2 > 0, "stale leaf entries never compacted: {tot:?}");
}

/// A data block edited at random (adds into the longest unused slot,
/// removals anywhere): whenever the bestfree table has an empty entry, the
/// trusted decode (no walk) gives exactly the unused slots and table that
/// walking the block gives; with a full table it declines.
#[test]
fn trusted_data_decode_matches_the_walk() {
    use super::data::{
        data_add, data_decode, data_decode_trusted, data_decode_tx, data_new, data_remove,
    };
    use crate::format::crc::Sum;
    let geo = DirGeo::new(12, 0, true);
    let mut r = Rng(0x7a11_0c8e);
    let (mut buf, mut st) = data_new(&geo, DADDR, DIR, &UUID);
    let (mut taken, mut declined) = (0, 0);
    for i in 0..4000 {
        // A fresh block now and then: holes, once made, tend to stay.
        if i % 250 == 0 {
            (buf, st) = data_new(&geo, DADDR, DIR, &UUID);
        }
        let add = st.entries.is_empty() || r.below(10) < 6;
        if add {
            let len = 1 + r.below(40) as usize;
            let name = name_of(&mut r, len);
            if st.bf[0].1 < geo.data_entsize(name.len()) {
                continue;
            }
            let ino = pick_ino(&mut r, true);
            data_add(&geo, &mut buf, &mut st, (&name, ino, 1), true);
        } else {
            // Mostly the last entry (the unused space stays one slot),
            // sometimes any (holes: the table fills up).
            let n = st.entries.len();
            let k = if r.below(10) < 8 {
                n - 1
            } else {
                r.below(n as u64) as usize
            };
            let off = st.entries[k].off;
            data_remove(&geo, &mut buf, &mut st, off).unwrap();
        }
        let walked = data_decode(&buf, &geo, DADDR, DIR, &UUID, false, Sum::InCore).unwrap();
        assert_eq!((&walked.free, walked.bf), (&st.free, st.bf));
        match data_decode_trusted(&buf, &geo, DADDR, DIR, &UUID).unwrap() {
            Some(t) => {
                assert_eq!((&t.free, t.bf), (&walked.free, walked.bf));
                taken += 1;
            }
            None => {
                assert_ne!(walked.bf[2].1, 0);
                declined += 1;
            }
        }
        // The transaction's decoder: the table's answer when it has one,
        // the walk otherwise, trusted or not.
        for trusted in [false, true] {
            let t = data_decode_tx(&buf, &geo, DADDR, DIR, &UUID, false, trusted).unwrap();
            assert_eq!((&t.free, t.bf), (&walked.free, walked.bf));
        }
    }
    assert!(
        taken > 100 && declined > 100,
        "{taken} taken, {declined} declined"
    );
}

#[test]
fn sf_to_block_keeps_offsets_and_back() {
    let geo = DirGeo::new(12, 0, true);
    let mut r = Rng(77);
    let mut sf = sf_empty(Ino(128));
    let mut model = BTreeMap::new();
    // Grow with holes: add 30, remove every third.
    for i in 0..30u64 {
        let name = pick_name(&mut r, &model);
        if model.contains_key(&name) {
            continue;
        }
        let SfAdd::Fits(n) = sf_add(&geo, &sf, 4000, &name, Ino(200 + i), 1) else {
            panic!()
        };
        sf = n;
        model.insert(name, (Ino(200 + i), 1u8));
    }
    let names: Vec<_> = model.keys().cloned().collect();
    for k in names.iter().step_by(3) {
        sf = sf_remove(&sf, k).unwrap().0;
        model.remove(k);
    }
    let (buf, st) = block_from_sf(&geo, &sf, DIR, DADDR, &UUID).unwrap();
    check_block(&geo, &buf, &st, &model);
    for e in &sf.entries {
        let be = st.entries.iter().find(|b| b.name == e.name).unwrap();
        assert_eq!(be.off, e.offset as usize);
    }
    // The parent went to "..".
    assert_eq!(st.entries[1].name, b"..");
    assert_eq!(st.entries[1].ino, Ino(128));
    // And back: the same shortform directory.
    let back = block_to_sf(&geo, &st, 4000).unwrap();
    assert_eq!(back, sf);
    assert!(block_to_sf(&geo, &st, sf_size(&geo, &sf) - 1).is_none());
}

#[test]
fn block_from_sf_refuses_overfull() {
    let geo = DirGeo::new(12, 0, true);
    let mut sf = sf_empty(Ino(128));
    // An entry placed where the leaf must go.
    sf.entries.push(crate::format::dir_sf::SfEntry {
        name: vec![b'x'; 200],
        offset: 4096 - 216,
        ftype: 1,
        ino: Ino(300),
    });
    assert!(matches!(
        block_from_sf(&geo, &sf, DIR, DADDR, &UUID),
        Err(crate::Error::NotSupported(_))
    ));
    sf.entries[0].offset = 0x61;
    assert!(block_from_sf(&geo, &sf, DIR, DADDR, &UUID)
        .unwrap_err()
        .is_corrupt());
}

/// Byte ranges where `old` and `new` differ, gaps under 16 bytes merged.
fn bytewise(old: &[u8], new: &[u8]) -> Vec<std::ops::Range<usize>> {
    let mut out: Vec<std::ops::Range<usize>> = Vec::new();
    for (i, (a, b)) in old.iter().zip(new).enumerate() {
        if a != b {
            match out.last_mut() {
                Some(r) if i - r.end < 16 => r.end = i + 1,
                _ => out.push(i..i + 1),
            }
        }
    }
    out
}

#[test]
fn changed_chunks_cover_changes() {
    let a = vec![0u8; 300];
    let mut b = a.clone();
    b[3] = 1;
    b[10] = 1;
    b[299] = 1;
    assert_eq!(changed_chunks(&a, &b, 128), vec![0..128, 256..300]);
    b[200] = 1;
    assert_eq!(changed_chunks(&a, &b, 128), vec![0..300]);
    assert!(changed_chunks(&a, &a, 128).is_empty());
}

/// The chunk runs are exactly the chunks a byte-by-byte scan finds
/// changed, adjacent ones merged.
#[test]
fn changed_chunks_match_a_bytewise_scan() {
    let mut r = Rng(0x5eed_d1ff);
    for round in 0..400 {
        let n = [4096, 100, 1, 0, 513][round % 5];
        let chunk = [128, 16, 1][round % 3];
        let a: Vec<u8> = (0..n).map(|_| r.below(4) as u8).collect();
        let mut b = a.clone();
        for _ in 0..r.below(12) {
            if n > 0 {
                let i = r.below(n as u64) as usize;
                b[i] = b[i].wrapping_add(1 + r.below(3) as u8);
            }
        }
        let mut want: Vec<std::ops::Range<usize>> = Vec::new();
        for c in (0..n).step_by(chunk.max(1)) {
            let end = (c + chunk).min(n);
            if a[c..end] != b[c..end] {
                match want.last_mut() {
                    Some(w) if w.end == c => w.end = end,
                    _ => want.push(c..end),
                }
            }
        }
        assert_eq!(changed_chunks(&a, &b, chunk), want, "round {round}");
    }
}

/// A shortform directory grown from empty (kernel offsets) always fits a
/// block when it has to convert: the leaf form is never needed then.
#[test]
fn sf_growth_converts_into_a_block_with_room() {
    for (geo, fork) in [
        (DirGeo::new(10, 2, true), 336),
        (DirGeo::new(12, 0, true), 336),
        (DirGeo::new(12, 0, true), 1824),
        (DirGeo::new(9, 3, false), 80),
    ] {
        let mut r = Rng(5);
        let mut converted = 0;
        for _ in 0..200 {
            let mut sf = sf_empty(Ino(128));
            loop {
                let max = if r.below(10) == 0 { 255 } else { 20 };
                let l = 1 + r.below(max) as usize;
                let name = name_of(&mut r, l);
                if sf.entries.iter().any(|e| e.name == name) {
                    continue;
                }
                match sf_add(&geo, &sf, fork, &name, Ino(300), 1) {
                    SfAdd::Fits(n) => sf = n,
                    SfAdd::ToBlock => {
                        let (mut buf, mut st) =
                            block_from_sf(&geo, &sf, DIR, DADDR, &UUID).unwrap();
                        block_add(&geo, &mut buf, &mut st, &name, Ino(300), 1)
                            .unwrap_or_else(|e| panic!("{geo:?}: {e}: {sf:?}"));
                        converted += 1;
                        break;
                    }
                }
            }
        }
        assert_eq!(converted, 200);
    }
}

/// Mutated blocks: decoding refuses them or gives a state every edit
/// handles without panicking, and what the edits write decodes again.
#[test]
fn mutated_blocks_never_panic() {
    let geo = DirGeo::new(12, 0, true);
    // A block with entries, unused slots and stale leaf entries.
    let (mut buf, mut st) = block_from_sf(&geo, &sf_empty(Ino(128)), DIR, DADDR, &UUID).unwrap();
    let mut r = Rng(99);
    let mut names = Vec::new();
    for i in 0..60u64 {
        let l = 1 + r.below(30) as usize;
        let n = name_of(&mut r, l);
        if block_add(&geo, &mut buf, &mut st, &n, Ino(200 + i), 1).is_ok() {
            names.push(n);
        }
    }
    for n in names.iter().step_by(3) {
        block_remove(&geo, &mut buf, &mut st, n).unwrap();
    }
    let (mut decoded, mut edited) = (0, 0);
    for _ in 0..20000 {
        let mut b = buf.clone();
        for _ in 0..1 + r.below(3) {
            let i = r.below(b.len() as u64) as usize;
            b[i] = r.next() as u8;
        }
        crc::update(&mut b, DIR3_CRC_OFF);
        let Ok(mut s) = BlockState::decode(&b, &geo, DADDR, DIR, &UUID) else {
            continue;
        };
        decoded += 1;
        let l = 1 + r.below(40) as usize;
        let n = name_of(&mut r, l);
        if s.find(&geo, &n).is_none() && block_add(&geo, &mut b, &mut s, &n, Ino(999), 1).is_ok() {
            edited += 1;
        }
        let victim = names[r.below(names.len() as u64) as usize].clone();
        if block_remove(&geo, &mut b, &mut s, &victim).is_some() {
            edited += 1;
        }
        let _ = block_to_sf(&geo, &s, 336);
        check_block(
            &geo,
            &b,
            &s,
            &s.user_entries()
                .map(|e| (e.name.clone(), (e.ino, e.ftype)))
                .collect(),
        );
    }
    assert!(
        decoded > 100 && edited > 100,
        "{decoded} decoded, {edited} edited"
    );
}

/// Mutated shortform forks: decode refuses or every edit and the
/// conversion to a block handle them without panicking.
#[test]
fn mutated_shortform_never_panics() {
    let geo = DirGeo::new(12, 0, true);
    let mut sf = sf_empty(Ino(128));
    let mut r = Rng(7);
    for i in 0..12u64 {
        let l = 1 + r.below(16) as usize;
        let n = name_of(&mut r, l);
        if let SfAdd::Fits(s) = sf_add(&geo, &sf, 336, &n, Ino(300 + i), 1) {
            sf = s;
        }
    }
    let good = encode_sf(&sf, &geo);
    let mut decoded = 0;
    for _ in 0..20000 {
        let mut b = good.clone();
        for _ in 0..1 + r.below(3) {
            let i = r.below(b.len() as u64) as usize;
            b[i] = r.next() as u8;
        }
        let Ok(s) = decode_sf(&b, &geo, DIR) else {
            continue;
        };
        decoded += 1;
        let _ = sf_add(&geo, &s, 336, b"newname", Ino(5000), 1);
        let _ = sf_add(&geo, &s, 336, b"wide", Ino(1 << 40), 1);
        if let Some(e) = s.entries.first() {
            let _ = sf_remove(&s, &e.name.clone());
        }
        if let Ok((mut buf, mut st)) = block_from_sf(&geo, &s, DIR, DADDR, &UUID) {
            let _ = block_add(&geo, &mut buf, &mut st, b"newname2", Ino(5001), 1);
            decode(&geo, &buf);
        }
    }
    assert!(decoded > 100, "{decoded} decoded");
}
