//! `rxfs check`: a read-only consistency check, like `xfs_repair -n`.
//!
//! Exit codes: 0 clean, 1 findings (including an image whose primary
//! superblock is corrupt: finding `sb-bad`), 2 usage or I/O errors (the
//! image cannot be read at all, or uses features rxfs does not know).

use std::io::IsTerminal;
use std::path::PathBuf;

use rxfs::check::{Finding, Report};
use rxfs::{Error, Filesystem, MountOptions};

use crate::opts::ImageArgs;
use crate::{CliError, CliResult};

/// Check an image for consistency without changing it (like xfs_repair -n).
///
/// Reads every superblock, AG header, btree, inode, directory and
/// attribute fork, the space map (every block claimed exactly once) and
/// the realtime section (realtime files' extents against the bitmap, the
/// bitmap against the summary and sb_frextents). Prints one line per
/// finding (`CODE: [ag N] [block B] [inode I]: message`), then notes on
/// what was not checked (`note: ...`), then a summary. A dirty log is a
/// finding (`log-dirty`); the on-disk state is checked anyway, without
/// replaying the log. The realtime bitmap and summary live on the data
/// device, so the realtime section is checked without `-o rtdev=FILE` too;
/// given, the realtime device's size is checked as well. Exit status: 0
/// clean, 1 findings, 2 usage or I/O errors.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The image file or block device.
    pub image: PathBuf,
    /// `-o ro,norecovery,rtdev=FILE,odirect` and `--rtdev FILE` (the image
    /// is always opened read-only, without log recovery).
    #[command(flatten)]
    pub img: ImageArgs,
    /// Print one JSON object: clean, findings, notes, stats.
    #[arg(long)]
    pub json: bool,
    /// No progress bar.
    #[arg(long, short)]
    pub quiet: bool,
}

pub fn run(a: Args) -> CliResult<()> {
    let o = a.img.parse(false)?;
    let opts = MountOptions {
        read_only: true,
        norecovery: true,
        direct_io: o.direct_io,
        within: o.within,
        ..Default::default()
    };
    if let Some(rt) = &o.rtdev {
        std::fs::metadata(rt).map_err(|e| CliError::io(rt.display(), &e))?;
    }
    // Too short to hold a superblock: not XFS at all (a bad superblock
    // in an image of XFS's size is a finding, below).
    let meta = std::fs::metadata(&a.image)
        .map_err(|e| CliError::io(a.image.display(), &e).with_code(crate::cli_error::EXIT_USAGE))?;
    if meta.is_file() && meta.len() < 512 {
        return Err(CliError::new(format!(
            "{}: not an XFS filesystem ({} bytes, too short for a superblock)",
            a.image.display(),
            meta.len()
        ))
        .with_code(crate::cli_error::EXIT_USAGE));
    }
    let report = match Filesystem::open_path(&a.image, o.rtdev.as_deref(), opts) {
        Ok(fs) => run_check(&fs, a.quiet),
        // A corrupt primary superblock is a finding; a feature rxfs does
        // not know, or a device that fails, is not.
        Err(e @ Error::Corrupt { .. }) => {
            let mut r = Report::default();
            r.findings.push(Finding {
                code: "sb-bad",
                ag: Some(0),
                block: Some(0),
                ino: None,
                message: e.to_string(),
            });
            r.stats.findings = 1;
            r
        }
        Err(e) => {
            return Err(CliError::fs(a.image.display(), &e).with_code(crate::cli_error::EXIT_USAGE))
        }
    };
    let out = if a.json {
        render_json(&report)
    } else {
        render_text(&report)
    };
    super::write_stdout(&mut std::io::stdout().lock(), out.as_bytes())?;
    if report.clean() {
        Ok(())
    } else {
        Err(CliError {
            code: crate::cli_error::EXIT_FAILURE,
            msg: String::new(),
        })
    }
}

fn run_check(fs: &Filesystem, quiet: bool) -> Report {
    let show = !quiet && std::io::stderr().is_terminal();
    if !show {
        return rxfs::check::check(fs, &mut |_, _, _| {});
    }
    let bar = indicatif::ProgressBar::new(1);
    bar.set_style(
        indicatif::ProgressStyle::with_template("{msg:24} [{bar:40}] {pos}/{len}")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    let r = rxfs::check::check(fs, &mut |phase, done, total| {
        bar.set_message(phase.to_string());
        bar.set_length(total.max(1));
        bar.set_position(done);
    });
    bar.finish_and_clear();
    r
}

fn render_text(r: &Report) -> String {
    let mut o = String::new();
    for f in &r.findings {
        o.push_str(&f.to_string());
        o.push('\n');
    }
    if r.stats.findings as usize > r.findings.len() {
        o.push_str(&format!(
            "... {} more findings not shown\n",
            r.stats.findings as usize - r.findings.len()
        ));
    }
    for n in &r.notes {
        o.push_str(&format!("note: {n}\n"));
    }
    if r.clean() {
        o.push_str("clean: no findings\n");
    } else {
        o.push_str(&format!("{} finding(s)\n", r.stats.findings));
    }
    o
}

fn render_json(r: &Report) -> String {
    use serde_json::{json, Map, Value};
    let findings: Vec<Value> = r
        .findings
        .iter()
        .map(|f| {
            json!({
                "code": f.code,
                "ag": f.ag,
                "block": f.block,
                "ino": f.ino,
                "message": f.message,
            })
        })
        .collect();
    let mut stats = Map::new();
    for (k, v) in r.stats.lines() {
        stats.insert(k.to_string(), json!(v));
    }
    let v = json!({
        "clean": r.clean(),
        "findings": findings,
        "notes": r.notes,
        "stats": stats,
    });
    format!("{v}\n")
}
