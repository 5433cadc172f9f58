//! The whole read path over one fuzzed inode and 40 fuzzed blocks of a
//! synthetic filesystem: inode and fork decoding, bmbt walks, directories,
//! attributes, symlinks and file reads.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rxfs::types::Ino;

fuzz_target!(|data: &[u8]| {
    if data.is_empty() {
        return;
    }
    if let Some(s) = rxfs_fuzz::SynthFs::open(data[0], &data[1..]) {
        s.walk(Ino(rxfs_fuzz::INO), 1);
    }
});
