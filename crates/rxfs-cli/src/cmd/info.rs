//! `rxfs info`: geometry and features, laid out like xfs_info.

use std::path::PathBuf;

use rxfs::Filesystem;

use crate::opts::{open_image, ImageArgs};
use crate::CliResult;

/// Show geometry, features and log state (like xfs_info).
///
/// The layout follows xfs_info; the uuid, label and log state lines are
/// added. The log state says whether the log is clean, and where its head
/// and tail are (cycle/block).
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The image file or block device.
    pub image: PathBuf,
    #[command(flatten)]
    pub img: ImageArgs,
}

pub fn run(a: Args) -> CliResult<()> {
    let mut opts = a.img.parse(false)?;
    // info reads only the superblock and the log: a dirty log is reported,
    // not refused.
    opts.norecovery = true;
    let fs = open_image(&a.image, &opts)?;
    print!("{}", report(&fs, &a.image.display().to_string()));
    Ok(())
}

fn b(v: bool) -> u8 {
    v as u8
}

/// The xfs_info-style report (column widths as xfs_info prints them).
pub fn report(fs: &Filesystem, name: &str) -> String {
    use rxfs::format::sb;
    let s = fs.sb();
    let bs = s.blocksize;
    let mut o = String::new();
    let push = |o: &mut String, l: String| {
        o.push_str(&l);
        o.push('\n');
    };
    push(
        &mut o,
        format!(
            "meta-data={name:<22} isize={:<6} agcount={}, agsize={} blks",
            s.inodesize, s.agcount, s.agblocks
        ),
    );
    push(
        &mut o,
        format!(
            "         ={:<22} sectsz={:<5} attr={}, projid32bit={}",
            "",
            s.sectsize,
            if s.features2 & sb::FEAT2_ATTR2 != 0 {
                2
            } else {
                1
            },
            b(s.features2 & sb::FEAT2_PROJID32 != 0)
        ),
    );
    push(
        &mut o,
        format!(
            "         ={:<22} crc={:<8} finobt={}, sparse={}, rmapbt={}",
            "",
            1,
            b(s.has_finobt()),
            b(s.has_sparse_inodes()),
            b(s.has_rmapbt())
        ),
    );
    push(
        &mut o,
        format!(
            "         ={:<22} reflink={:<4} bigtime={} inobtcount={} nrext64={}",
            "",
            b(s.has_reflink()),
            b(s.has_bigtime()),
            b(s.has_inobtcount()),
            b(s.has_nrext64())
        ),
    );
    push(
        &mut o,
        format!(
            "data     ={:<22} bsize={:<6} blocks={}, imaxpct={}",
            "", bs, s.dblocks, s.imax_pct
        ),
    );
    push(
        &mut o,
        format!(
            "         ={:<22} sunit={:<6} swidth={} blks",
            "", s.unit, s.width
        ),
    );
    push(
        &mut o,
        format!(
            "naming   =version {:<14} bsize={:<6} ascii-ci={}, ftype={}",
            2,
            bs << s.dirblklog,
            0,
            b(s.has_ftype())
        ),
    );
    let log_sunit = if s.logsunit <= 1 {
        0
    } else {
        s.logsunit >> s.blocklog
    };
    push(
        &mut o,
        format!(
            "log      ={:<22} bsize={:<6} blocks={}, version={}",
            if s.logstart != 0 {
                "internal log"
            } else {
                "external"
            },
            bs,
            s.logblocks,
            2
        ),
    );
    push(
        &mut o,
        format!(
            "         ={:<22} sectsz={:<5} sunit={} blks, lazy-count={}",
            "",
            if s.logsectsize == 0 {
                s.sectsize
            } else {
                s.logsectsize
            },
            log_sunit,
            b(s.has_lazysbcount())
        ),
    );
    push(
        &mut o,
        format!(
            "realtime ={:<22} extsz={:<6} blocks={}, rtextents={}",
            if s.rblocks > 0 { "external" } else { "none" },
            s.rextsize as u64 * bs as u64,
            s.rblocks,
            s.rextents
        ),
    );
    push(&mut o, format!("uuid     ={}", uuid_string(&s.uuid)));
    if !s.label().is_empty() {
        push(&mut o, format!("label    ={}", s.label()));
    }
    push(&mut o, log_line(fs));
    o
}

/// The log state line: `log state=clean, head=C/B tail=C/B ...`.
fn log_line(fs: &Filesystem) -> String {
    match fs.log_state() {
        None => "log state=unknown (not read: external log, or norecovery and unreadable)".into(),
        Some(st) => {
            let state = if st.zeroed {
                "clean (zeroed)"
            } else if st.clean {
                "clean"
            } else {
                "dirty (needs recovery)"
            };
            let mut l = format!("log state={state}, head={} tail={}", st.head, st.tail);
            if let Some(r) = &st.last_record {
                l.push_str(&format!(
                    ", last record={} ({} ops{})",
                    r.lsn,
                    r.num_logops,
                    if r.unmount { ", unmount" } else { "" }
                ));
            }
            if let Some(t) = st.torn_from {
                l.push_str(&format!(", torn write cut at block {t}"));
            }
            l
        }
    }
}

pub fn uuid_string(u: &[u8; 16]) -> String {
    let h: String = u.iter().map(|b| format!("{b:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &h[0..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..32]
    )
}
