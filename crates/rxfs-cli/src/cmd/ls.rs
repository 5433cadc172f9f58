//! `rxfs ls`: list a directory (or show one entry).

use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

use rxfs::inode::Inode;
use rxfs::types::FileType;

use crate::opts::ImageArgs;
use crate::text::{format_time_short, mode_string};
use crate::{CliError, CliResult};

/// List a directory of the image.
///
/// Entries are sorted by name ("." and ".." are not shown). For a non-directory, show that entry. With -l: mode, links,
/// uid, gid, size (or major, minor), mtime (UTC), name, symlink target.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The image file or block device.
    pub image: PathBuf,
    /// Absolute path inside the image.
    #[arg(default_value = "/")]
    pub path: PathBuf,
    /// Long listing.
    #[arg(short = 'l')]
    pub long: bool,
    /// Show the inode number first.
    #[arg(short = 'i')]
    pub inode: bool,
    #[command(flatten)]
    pub img: ImageArgs,
}

pub fn run(a: Args) -> CliResult<()> {
    let (fs, ip) = a.img.open_path(&a.image, &a.path)?;
    let shown = a.path.display().to_string();
    let mut entries: Vec<(Vec<u8>, u64)> = Vec::new();
    if ip.is_dir() {
        fs.readdir(&ip, 0, &mut |e| {
            if e.name != b"." && e.name != b".." {
                entries.push((e.name.clone(), e.ino.0));
            }
            true
        })
        .map_err(|e| CliError::fs(&shown, &e))?;
        entries.sort();
    } else {
        let name = a.path.as_os_str().as_bytes().to_vec();
        entries.push((name, ip.ino.0));
    }
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let mut failed = false;
    for (name, ino) in entries {
        let mut line = Vec::new();
        if a.inode {
            let _ = write!(line, "{ino} ");
        }
        if a.long {
            match fs.iget(rxfs::types::Ino(ino)) {
                Ok(child) => long_line(&child, &mut line),
                Err(e) => {
                    eprintln!("rxfs: {}: {e}", crate::text::decode_name(&name));
                    failed = true;
                    continue;
                }
            }
        }
        line.extend_from_slice(&name);
        if a.long {
            if let Ok(child) = fs.iget(rxfs::types::Ino(ino)) {
                if child.file_type() == Some(FileType::Symlink) {
                    if let Ok(t) = fs.readlink(&child) {
                        line.extend_from_slice(b" -> ");
                        line.extend_from_slice(&t);
                    }
                }
            }
        }
        line.push(b'\n');
        super::write_stdout(&mut out, &line)?;
    }
    let _ = out.flush();
    if failed {
        return Err(CliError::new(String::new()));
    }
    Ok(())
}

fn long_line(ip: &Inode, line: &mut Vec<u8>) {
    let c = &ip.core;
    let size = match (&ip.data, ip.file_type()) {
        (rxfs::inode::Fork::Dev(raw), Some(FileType::CharDev | FileType::BlockDev)) => {
            let (ma, mi) = rxfs::format::inode::decode_rdev(*raw);
            format!("{ma}, {mi}")
        }
        _ => c.size.to_string(),
    };
    let _ = write!(
        line,
        "{} {:>3} {:>5} {:>5} {:>10} {} ",
        mode_string(c.mode),
        c.nlink,
        c.uid,
        c.gid,
        size,
        format_time_short(c.mtime)
    );
}
