//! Path resolution for tools (CLI, library users): absolute paths from the
//! root, intermediate symlinks followed (at most [`MAX_SYMLINK_FOLLOW`]), the
//! last component not followed (lstat semantics).

use super::Filesystem;
use crate::error::{Error, Result};
use crate::types::Ino;

pub const MAX_SYMLINK_FOLLOW: u32 = 40;

impl Filesystem {
    /// Resolve `path` (bytes, '/'-separated, relative to the root).
    pub fn resolve(&self, path: &[u8]) -> Result<Ino> {
        let mut follows = 0;
        self.resolve_from(self.root_ino(), path, &mut follows)
    }

    fn resolve_from(&self, start: Ino, path: &[u8], follows: &mut u32) -> Result<Ino> {
        let mut cur = if path.first() == Some(&b'/') {
            self.root_ino()
        } else {
            start
        };
        let comps: Vec<&[u8]> = path
            .split(|&c| c == b'/')
            .filter(|c| !c.is_empty() && *c != b".")
            .collect();
        for (i, name) in comps.iter().enumerate() {
            let dir = self.iget(cur)?;
            if !dir.is_dir() {
                return Err(Error::NotDir);
            }
            if name.len() > 255 {
                return Err(Error::NameTooLong);
            }
            let next = self.lookup(&dir, name)?;
            let last = i + 1 == comps.len();
            let ip = self.iget(next)?;
            if !last && ip.file_type() == Some(crate::types::FileType::Symlink) {
                *follows += 1;
                if *follows > MAX_SYMLINK_FOLLOW {
                    return Err(Error::Invalid("too many levels of symbolic links".into()));
                }
                let target = self.readlink(&ip)?;
                cur = self.resolve_from(cur, &target, follows)?;
            } else {
                cur = next;
            }
        }
        Ok(cur)
    }
}
