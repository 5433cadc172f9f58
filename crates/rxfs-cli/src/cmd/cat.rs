//! `rxfs cat`: copy a regular file's contents to stdout.

use std::path::PathBuf;

use crate::opts::ImageArgs;
use crate::{CliError, CliResult};

/// Bytes read per call.
const CHUNK_BYTES: usize = 1 << 20;

/// Print a file of the image to standard output.
///
/// Holes read as zeros. Intermediate symlinks in PATH are followed; a final symlink is
/// an error (use `rxfs cat IMAGE TARGET`).
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The image file or block device.
    pub image: PathBuf,
    /// Absolute path of the file inside the image.
    pub path: PathBuf,
    #[command(flatten)]
    pub img: ImageArgs,
}

pub fn run(a: Args) -> CliResult<()> {
    let (fs, ip) = a.img.open_path(&a.image, &a.path)?;
    let shown = a.path.display();
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let mut buf = vec![0u8; CHUNK_BYTES];
    let mut off = 0u64;
    loop {
        let n = fs
            .read_file(&ip, off, &mut buf)
            .map_err(|e| CliError::fs(&shown, &e))?;
        if n == 0 {
            break;
        }
        super::write_stdout(&mut out, &buf[..n])?;
        off += n as u64;
    }
    std::io::Write::flush(&mut out).map_err(|e| CliError::io("stdout", &e))?;
    Ok(())
}
