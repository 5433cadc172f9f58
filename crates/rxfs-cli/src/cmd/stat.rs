//! `rxfs stat`: one inode, shown like stat(1).

use std::path::PathBuf;

use rxfs::inode::{Fork, Inode};
use rxfs::types::FileType;
use rxfs::Filesystem;

use crate::opts::ImageArgs;
use crate::text::{decode_name, format_time, mode_string, type_long_name};
use crate::{CliError, CliResult};

/// Show an inode like stat(1).
///
/// Times are in UTC with nanoseconds. Also shows
/// XFS details stat cannot show: data fork format and extent count, flags,
/// and the names of its extended attributes. A final symlink is not
/// followed.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The image file or block device.
    pub image: PathBuf,
    /// Absolute path inside the image.
    pub path: PathBuf,
    #[command(flatten)]
    pub img: ImageArgs,
}

pub fn run(a: Args) -> CliResult<()> {
    let (fs, ip) = a.img.open_path(&a.image, &a.path)?;
    let text = render(&fs, &a.path.display().to_string(), &ip)
        .map_err(|e| CliError::fs(a.path.display(), &e))?;
    print!("{text}");
    Ok(())
}

pub fn render(fs: &Filesystem, name: &str, ip: &Inode) -> rxfs::Result<String> {
    let c = &ip.core;
    let ft = ip.file_type();
    let mut o = String::new();
    let mut file = format!("  File: {name}");
    if ft == Some(FileType::Symlink) {
        let t = fs.readlink(ip)?;
        file.push_str(&format!(" -> {}", decode_name(&t)));
    }
    o.push_str(&file);
    o.push('\n');
    o.push_str(&format!(
        "  Size: {:<10}\tBlocks: {:<10} IO Block: {:<6} {}\n",
        c.size,
        crate::stat_view::st_blocks(fs, &ip.core),
        crate::stat_view::st_blksize(fs, &ip.core),
        type_long_name(ft, c.size)
    ));
    let mut l3 = format!("Inode: {:<11} Links: {}", ip.ino.0, c.nlink);
    if let Some((ma, mi)) = crate::stat_view::rdev(ip) {
        l3.push_str(&format!("     Device type: {ma},{mi}"));
    }
    o.push_str(&l3);
    o.push('\n');
    o.push_str(&format!(
        "Access: ({:04o}/{})  Uid: ({:>5})   Gid: ({:>5})\n",
        c.mode & 0o7777,
        mode_string(c.mode),
        c.uid,
        c.gid
    ));
    o.push_str(&format!("Access: {}\n", format_time(c.atime)));
    o.push_str(&format!("Modify: {}\n", format_time(c.mtime)));
    o.push_str(&format!("Change: {}\n", format_time(c.ctime)));
    o.push_str(&format!(" Birth: {}\n", format_time(c.crtime)));
    let fmt = match &ip.data {
        Fork::Dev(_) => "dev".to_string(),
        Fork::Local(_) => "local".to_string(),
        Fork::Extents { list, btree } => format!(
            "{} ({} extents)",
            if *btree { "btree" } else { "extents" },
            list.len()
        ),
    };
    o.push_str(&format!(
        "  XFS: format={fmt} flags={:#x} flags2={:#x} projid={} gen={}\n",
        c.flags, c.flags2, c.projid, c.gen
    ));
    let names = fs.listxattr(ip)?;
    let shown: Vec<String> = names.iter().map(|n| decode_name(n)).collect();
    if shown.is_empty() {
        o.push_str("Xattrs: (none)\n");
    } else {
        o.push_str(&format!("Xattrs: {}\n", shown.join(" ")));
    }
    Ok(o)
}
