//! Requests: the header, then each opcode's arguments decoded from the
//! bytes the kernel sent (fixed structs, NUL-terminated names, data).
//!
//! Decoding never trusts a length: a message shorter than its opcode's
//! fixed part, a name without its NUL or data past the message's end is
//! [`Op::Malformed`], which the session answers with EINVAL. Data
//! (writes, xattr values) is borrowed from the buffer the request was
//! read into, never copied.

use zerocopy::FromBytes;

use super::abi::{self, op};

/// Who sent a request and about what.
#[derive(Debug, Clone, Copy)]
pub struct Request {
    pub unique: u64,
    pub nodeid: u64,
    pub uid: u32,
    pub gid: u32,
    pub pid: u32,
}

impl Request {
    pub fn uid(&self) -> u32 {
        self.uid
    }
    pub fn gid(&self) -> u32 {
        self.gid
    }
    pub fn pid(&self) -> u32 {
        self.pid
    }
}

/// A decoded request.
#[derive(Debug)]
pub enum Op<'a> {
    Init(abi::InitIn),
    Destroy,
    Interrupt,
    Lookup {
        name: &'a [u8],
    },
    Forget {
        nlookup: u64,
    },
    BatchForget(Vec<abi::ForgetOne>),
    Getattr,
    Statx,
    Setattr(abi::SetattrIn),
    Readlink,
    Symlink {
        name: &'a [u8],
        target: &'a [u8],
    },
    Mknod {
        name: &'a [u8],
        arg: abi::MknodIn,
    },
    Mkdir {
        name: &'a [u8],
        arg: abi::MkdirIn,
    },
    Unlink {
        name: &'a [u8],
    },
    Rmdir {
        name: &'a [u8],
    },
    Rename {
        name: &'a [u8],
        newdir: u64,
        newname: &'a [u8],
        flags: u32,
    },
    Link {
        oldnodeid: u64,
        newname: &'a [u8],
    },
    Open(abi::OpenIn),
    Read(abi::ReadIn),
    Write {
        arg: abi::WriteIn,
        data: &'a [u8],
    },
    Statfs,
    Release(abi::ReleaseIn),
    Fsync(abi::FsyncIn),
    Setxattr {
        arg: abi::SetxattrIn,
        name: &'a [u8],
        value: &'a [u8],
    },
    Getxattr {
        size: u32,
        name: &'a [u8],
    },
    Listxattr {
        size: u32,
    },
    Removexattr {
        name: &'a [u8],
    },
    Flush,
    Opendir(abi::OpenIn),
    Readdir(abi::ReadIn),
    Readdirplus(abi::ReadIn),
    Releasedir,
    Fsyncdir(abi::FsyncIn),
    Access(abi::AccessIn),
    Create {
        arg: abi::CreateIn,
        name: &'a [u8],
    },
    Tmpfile {
        arg: abi::CreateIn,
    },
    Ioctl {
        arg: abi::IoctlIn,
        data: &'a [u8],
    },
    Fallocate(abi::FallocateIn),
    Lseek(abi::LseekIn),
    CopyFileRange(abi::CopyFileRangeIn),
    Syncfs,
    /// An opcode this driver does not serve (ENOSYS).
    Unknown,
    /// Arguments that do not fit the message (EINVAL).
    Malformed,
}

impl Op<'_> {
    /// The request's kind, for traces.
    pub fn kind(&self) -> &'static str {
        match self {
            Op::Init { .. } => "Init",
            Op::Destroy { .. } => "Destroy",
            Op::Interrupt { .. } => "Interrupt",
            Op::Lookup { .. } => "Lookup",
            Op::Forget { .. } => "Forget",
            Op::BatchForget { .. } => "BatchForget",
            Op::Getattr { .. } => "Getattr",
            Op::Statx { .. } => "Statx",
            Op::Setattr { .. } => "Setattr",
            Op::Readlink { .. } => "Readlink",
            Op::Symlink { .. } => "Symlink",
            Op::Mknod { .. } => "Mknod",
            Op::Mkdir { .. } => "Mkdir",
            Op::Unlink { .. } => "Unlink",
            Op::Rmdir { .. } => "Rmdir",
            Op::Rename { .. } => "Rename",
            Op::Link { .. } => "Link",
            Op::Open { .. } => "Open",
            Op::Read { .. } => "Read",
            Op::Write { .. } => "Write",
            Op::Statfs { .. } => "Statfs",
            Op::Release { .. } => "Release",
            Op::Fsync { .. } => "Fsync",
            Op::Setxattr { .. } => "Setxattr",
            Op::Getxattr { .. } => "Getxattr",
            Op::Listxattr { .. } => "Listxattr",
            Op::Removexattr { .. } => "Removexattr",
            Op::Flush { .. } => "Flush",
            Op::Opendir { .. } => "Opendir",
            Op::Readdir { .. } => "Readdir",
            Op::Readdirplus { .. } => "Readdirplus",
            Op::Releasedir { .. } => "Releasedir",
            Op::Fsyncdir { .. } => "Fsyncdir",
            Op::Access { .. } => "Access",
            Op::Create { .. } => "Create",
            Op::Tmpfile { .. } => "Tmpfile",
            Op::Ioctl { .. } => "Ioctl",
            Op::Fallocate { .. } => "Fallocate",
            Op::Lseek { .. } => "Lseek",
            Op::CopyFileRange { .. } => "CopyFileRange",
            Op::Syncfs { .. } => "Syncfs",
            Op::Unknown { .. } => "Unknown",
            Op::Malformed { .. } => "Malformed",
        }
    }
}

/// A cursor over a request's argument bytes. From `/dev/fuse` they are
/// one run; from an io_uring entry the fixed part (the kernel's "op
/// header", its first argument) is in the entry's header and the rest in
/// its payload buffer, so the cursor moves to `payload` once the fixed
/// part is read, or at once for opcodes without one ([`Args::none`]).
struct Args<'a>(&'a [u8], Option<&'a [u8]>);

impl<'a> Args<'a> {
    fn fixed<T: FromBytes>(&mut self) -> Option<T> {
        let (t, rest) = T::read_from_prefix(self.0).ok()?;
        self.0 = self.1.take().unwrap_or(rest);
        Some(t)
    }

    /// The opcode's first argument is empty (names come first).
    fn none(&mut self) {
        if let Some(p) = self.1.take() {
            self.0 = p;
        }
    }

    fn name(&mut self) -> Option<&'a [u8]> {
        let end = self.0.iter().position(|&b| b == 0)?;
        let (name, rest) = self.0.split_at(end);
        self.0 = &rest[1..];
        Some(name)
    }

    fn name_first(&mut self) -> Option<&'a [u8]> {
        self.none();
        self.name()
    }

    fn bytes(&mut self, n: usize) -> Option<&'a [u8]> {
        if self.0.len() < n {
            return None;
        }
        let (b, rest) = self.0.split_at(n);
        self.0 = rest;
        Some(b)
    }
}

/// Split one message read from `/dev/fuse` into its header and its
/// arguments. `None` if the message is shorter than a header or than
/// its own length.
pub fn parse(msg: &[u8]) -> Option<(Request, Op<'_>)> {
    let (h, _) = abi::InHeader::read_from_prefix(msg).ok()?;
    let len = h.len as usize;
    if len < std::mem::size_of::<abi::InHeader>() || len > msg.len() {
        return None;
    }
    let body = &msg[std::mem::size_of::<abi::InHeader>()..len];
    // Extensions (supplementary groups, security contexts) trail the
    // arguments; we asked for none, but never read them as arguments.
    let ext = h.total_extlen as usize * 8;
    let body = &body[..body.len().saturating_sub(ext)];
    let req = Request {
        unique: h.unique,
        nodeid: h.nodeid,
        uid: h.uid,
        gid: h.gid,
        pid: h.pid,
    };
    Some((
        req,
        decode(h.opcode, Args(body, None)).unwrap_or(Op::Malformed),
    ))
}

/// A request as an io_uring entry holds it: the header (`in_out`), the
/// fixed first argument (`op_in`) and the rest (`payload`).
pub fn parse_ring<'a>(
    in_out: &[u8],
    op_in: &'a [u8],
    payload: &'a [u8],
) -> Option<(Request, Op<'a>)> {
    let (h, _) = abi::InHeader::read_from_prefix(in_out).ok()?;
    let req = Request {
        unique: h.unique,
        nodeid: h.nodeid,
        uid: h.uid,
        gid: h.gid,
        pid: h.pid,
    };
    let ext = h.total_extlen as usize * 8;
    let payload = &payload[..payload.len().saturating_sub(ext)];
    Some((
        req,
        decode(h.opcode, Args(op_in, Some(payload))).unwrap_or(Op::Malformed),
    ))
}

fn decode<'a>(opcode: u32, mut a: Args<'a>) -> Option<Op<'a>> {
    Some(match opcode {
        op::INIT => Op::Init(a.fixed()?),
        op::DESTROY => Op::Destroy,
        op::INTERRUPT => Op::Interrupt,
        op::LOOKUP => Op::Lookup {
            name: a.name_first()?,
        },
        op::FORGET => Op::Forget {
            nlookup: a.fixed::<abi::ForgetIn>()?.nlookup,
        },
        op::BATCH_FORGET => {
            let n = a.fixed::<abi::BatchForgetIn>()?.count as usize;
            let mut v = Vec::with_capacity(n.min(a.0.len() / 16));
            for _ in 0..n {
                v.push(a.fixed::<abi::ForgetOne>()?);
            }
            Op::BatchForget(v)
        }
        op::GETATTR => Op::Getattr,
        op::STATX => {
            a.fixed::<abi::StatxIn>()?;
            Op::Statx
        }
        op::SETATTR => Op::Setattr(a.fixed()?),
        op::READLINK => Op::Readlink,
        op::SYMLINK => {
            let name = a.name_first()?;
            Op::Symlink {
                name,
                target: a.name()?,
            }
        }
        op::MKNOD => {
            let arg = a.fixed()?;
            Op::Mknod {
                arg,
                name: a.name()?,
            }
        }
        op::MKDIR => {
            let arg = a.fixed()?;
            Op::Mkdir {
                arg,
                name: a.name()?,
            }
        }
        op::UNLINK => Op::Unlink {
            name: a.name_first()?,
        },
        op::RMDIR => Op::Rmdir {
            name: a.name_first()?,
        },
        op::RENAME => {
            let newdir = a.fixed::<abi::RenameIn>()?.newdir;
            let name = a.name()?;
            Op::Rename {
                name,
                newdir,
                newname: a.name()?,
                flags: 0,
            }
        }
        op::RENAME2 => {
            let r = a.fixed::<abi::Rename2In>()?;
            let name = a.name()?;
            Op::Rename {
                name,
                newdir: r.newdir,
                newname: a.name()?,
                flags: r.flags,
            }
        }
        op::LINK => {
            let oldnodeid = a.fixed::<abi::LinkIn>()?.oldnodeid;
            Op::Link {
                oldnodeid,
                newname: a.name()?,
            }
        }
        op::OPEN => Op::Open(a.fixed()?),
        op::READ => Op::Read(a.fixed()?),
        op::WRITE => {
            let arg: abi::WriteIn = a.fixed()?;
            Op::Write {
                data: a.bytes(arg.size as usize)?,
                arg,
            }
        }
        op::STATFS => Op::Statfs,
        op::RELEASE => Op::Release(a.fixed()?),
        op::FSYNC => Op::Fsync(a.fixed()?),
        op::SETXATTR => {
            let arg: abi::SetxattrIn = a.fixed()?;
            let name = a.name()?;
            Op::Setxattr {
                value: a.bytes(arg.size as usize)?,
                name,
                arg,
            }
        }
        op::GETXATTR => {
            let size = a.fixed::<abi::GetxattrIn>()?.size;
            Op::Getxattr {
                size,
                name: a.name()?,
            }
        }
        op::LISTXATTR => Op::Listxattr {
            size: a.fixed::<abi::GetxattrIn>()?.size,
        },
        op::REMOVEXATTR => Op::Removexattr {
            name: a.name_first()?,
        },
        op::FLUSH => Op::Flush,
        op::OPENDIR => Op::Opendir(a.fixed()?),
        op::READDIR => Op::Readdir(a.fixed()?),
        op::READDIRPLUS => Op::Readdirplus(a.fixed()?),
        op::RELEASEDIR => Op::Releasedir,
        op::FSYNCDIR => Op::Fsyncdir(a.fixed()?),
        op::ACCESS => Op::Access(a.fixed()?),
        op::CREATE => {
            let arg = a.fixed()?;
            Op::Create {
                arg,
                name: a.name()?,
            }
        }
        op::TMPFILE => Op::Tmpfile { arg: a.fixed()? },
        op::IOCTL => {
            let arg: abi::IoctlIn = a.fixed()?;
            Op::Ioctl {
                data: a.bytes(arg.in_size as usize)?,
                arg,
            }
        }
        op::FALLOCATE => Op::Fallocate(a.fixed()?),
        op::LSEEK => Op::Lseek(a.fixed()?),
        op::COPY_FILE_RANGE => Op::CopyFileRange(a.fixed()?),
        op::SYNCFS => Op::Syncfs,
        _ => Op::Unknown,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use zerocopy::IntoBytes;

    fn msg(opcode: u32, body: &[u8]) -> Vec<u8> {
        let h = abi::InHeader {
            len: (40 + body.len()) as u32,
            opcode,
            unique: 7,
            nodeid: 1,
            uid: 1000,
            gid: 100,
            pid: 42,
            ..Default::default()
        };
        let mut m = h.as_bytes().to_vec();
        m.extend_from_slice(body);
        m
    }

    #[test]
    fn names_and_data_are_bounded() {
        let m = msg(op::LOOKUP, b"abc\0");
        let (r, o) = parse(&m).unwrap();
        assert_eq!((r.unique, r.uid, r.pid), (7, 1000, 42));
        assert!(matches!(o, Op::Lookup { name: b"abc" }));
        // No NUL: malformed, not a read past the message.
        let m = msg(op::LOOKUP, b"abc");
        assert!(matches!(parse(&m).unwrap().1, Op::Malformed));
        // A write claiming more data than the message holds.
        let w = abi::WriteIn {
            size: 100,
            ..Default::default()
        };
        let mut body = w.as_bytes().to_vec();
        body.extend_from_slice(&[1; 10]);
        assert!(matches!(
            parse(&msg(op::WRITE, &body)).unwrap().1,
            Op::Malformed
        ));
        body.extend_from_slice(&[1; 90]);
        match parse(&msg(op::WRITE, &body)).unwrap().1 {
            Op::Write { data, .. } => assert_eq!(data.len(), 100),
            o => panic!("{o:?}"),
        }
        // A header claiming more than was read.
        let mut m = msg(op::GETATTR, &[]);
        m[0] = 200;
        assert!(parse(&m).is_none());
        assert!(matches!(parse(&msg(9999, &[])).unwrap().1, Op::Unknown));
    }

    #[test]
    fn rename_carries_both_names() {
        let r = abi::Rename2In {
            newdir: 5,
            flags: 2,
            padding: 0,
        };
        let mut body = r.as_bytes().to_vec();
        body.extend_from_slice(b"a\0bb\0");
        match parse(&msg(op::RENAME2, &body)).unwrap().1 {
            Op::Rename {
                name,
                newdir,
                newname,
                flags,
            } => assert_eq!(
                (name, newdir, newname, flags),
                (&b"a"[..], 5, &b"bb"[..], 2)
            ),
            o => panic!("{o:?}"),
        }
    }
}
