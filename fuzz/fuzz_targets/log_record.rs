//! Log record decode (header, extended headers, unpacking), op parsing,
//! transaction assembly and log item decoding, on arbitrary bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rxfs::error::Location;
use rxfs::format::log::{block_cycle, is_record_header, HostOrder};
use rxfs::format::log_items::{decode_log_dinode, ItemFormat};
use rxfs::format::log_ops::TransAssembler;
use rxfs::format::log_record::LogRecord;
use rxfs::format::put_be32;

fuzz_target!(|data: &[u8]| {
    if data.len() < 2 {
        return;
    }
    let ctl = data[0];
    let at = Location::Daddr(0);
    let mut raw = data[1..].to_vec();
    if ctl & 1 == 0 && raw.len() >= 512 {
        // Magic and version: the fuzzer owns every other field.
        put_be32(&mut raw, 0, 0xfeed_babe);
        put_be32(&mut raw, 8, 2);
    }
    // Callers pass whole 512-byte log blocks.
    let mut bb = raw.clone();
    bb.resize(512, 0);
    let _ = block_cycle(&bb[..512]);
    let _ = is_record_header(&raw);
    let order = if ctl & 2 == 0 {
        HostOrder::Little
    } else {
        HostOrder::Big
    };
    if let Ok(mut rec) = LogRecord::decode(&raw, at) {
        let _ = rec.header.total_blocks();
        if rec.unpack(at).is_ok() {
            let len = (rec.header.len as usize).min(rec.data.len());
            let order = HostOrder::from_fmt(rec.header.fmt).unwrap_or(order);
            let mut asm = TransAssembler::new(order);
            let mut out = Vec::new();
            let r = asm.add_record(
                rec.header.lsn,
                &rec.data[..len],
                rec.header.num_logops,
                at,
                &mut out,
            );
            let _ = r;
            for t in &out {
                for item in &t.items {
                    let _ = ItemFormat::decode(&item.regions, order, at);
                }
            }
        }
    }
    // Item decoders straight on the input, split into regions at 0xa5 bytes.
    let regions: Vec<Vec<u8>> = data[1..]
        .split(|&b| b == 0xa5)
        .take(64)
        .map(|r| r.to_vec())
        .collect();
    let _ = ItemFormat::decode(&regions, order, at);
    let _ = decode_log_dinode(&data[1..], order, at);
});
