//! mkfs.xfs-style option parsing for `rxfs mkfs`: `-b size=4k`,
//! `-d agcount=8,size=1g`, `-m rmapbt=1,uuid=...`, numbers with mkfs.xfs's
//! suffixes (s = 512-byte sectors, b = filesystem blocks, k/m/g/t/p =
//! powers of 1024). Every option rxfs does not implement is refused by
//! name.

use rxfs::mkfs::MkfsOptions;

use crate::{CliError, CliResult};

/// A number with mkfs.xfs's unit suffixes. `blocksize` is needed for `b`.
pub fn parse_num(opt: &str, v: &str, blocksize: u32) -> CliResult<u64> {
    let bad = || CliError::usage(format!("invalid value {v:?} for {opt}"));
    let v = v.trim();
    if v.is_empty() {
        return Err(bad());
    }
    let (digits, suffix) = match v.find(|c: char| !c.is_ascii_digit()) {
        Some(i) => v.split_at(i),
        None => (v, ""),
    };
    let n: u64 = digits.parse().map_err(|_| bad())?;
    let mult: u64 = match suffix.to_ascii_lowercase().as_str() {
        "" => 1,
        "s" => 512,
        "b" => blocksize as u64,
        "k" => 1 << 10,
        "m" => 1 << 20,
        "g" => 1 << 30,
        "t" => 1 << 40,
        "p" => 1 << 50,
        _ => return Err(bad()),
    };
    n.checked_mul(mult).ok_or_else(bad)
}

fn parse_bool(opt: &str, v: &str) -> CliResult<bool> {
    match v {
        "1" | "" => Ok(true),
        "0" => Ok(false),
        _ => Err(CliError::usage(format!(
            "invalid value {v:?} for {opt} (0 or 1)"
        ))),
    }
}

fn parse_uuid(v: &str) -> CliResult<[u8; 16]> {
    let hex: String = v.chars().filter(|c| *c != '-').collect();
    if hex.len() != 32 || v.len() != 36 {
        return Err(CliError::usage(format!("invalid UUID {v:?}")));
    }
    let mut u = [0u8; 16];
    for (i, b) in u.iter_mut().enumerate() {
        *b = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16)
            .map_err(|_| CliError::usage(format!("invalid UUID {v:?}")))?;
    }
    Ok(u)
}

/// The realtime device named by `-r rtdev=`.
#[derive(Debug, Default)]
pub struct RtArgs {
    pub rtdev: Option<std::path::PathBuf>,
}

/// Apply one `-X a=b,c=d` option group to `o`.
pub fn apply(o: &mut MkfsOptions, rt: &mut RtArgs, flag: char, subopts: &str) -> CliResult<()> {
    // `-b size=` must be known before `b` suffixes elsewhere: the caller
    // applies -b first.
    let bs = o.blocksize.unwrap_or(4096);
    for item in subopts.split(',').filter(|s| !s.is_empty()) {
        let (k, v) = item.split_once('=').unwrap_or((item, ""));
        let name = format!("-{flag} {k}");
        let num = |v: &str| parse_num(&name, v, bs);
        let u32v = |v: &str| -> CliResult<u32> {
            u32::try_from(num(v)?)
                .map_err(|_| CliError::usage(format!("{name}: value {v} too large")))
        };
        match (flag, k) {
            ('b', "size") => o.blocksize = Some(u32v(v)?),
            ('d', "agcount") => o.agcount = Some(parse_num(&name, v, 1)?),
            ('d', "agsize") => o.agsize = Some(num(v)?),
            ('d', "size") => o.dsize = Some(num(v)?),
            ('d', "sectsize") | ('s', "size") => o.sectsize = Some(u32v(v)?),
            ('d', "rtinherit") => o.rtinherit = parse_bool(&name, v)?,
            ('i', "size") => o.inodesize = Some(u32v(v)?),
            ('i', "maxpct") => {
                o.imaxpct = Some(
                    u8::try_from(parse_num(&name, v, 1)?)
                        .map_err(|_| CliError::usage(format!("{name}: {v} is not a percentage")))?,
                )
            }
            ('i', "sparse") => feature(o, "sparse", parse_bool(&name, v)?),
            // xfsprogs' shipped configuration files (lts_*.conf) list nrext64
            // under [metadata]; newer mkfs.xfs takes it there too.
            ('i' | 'm', "nrext64") => feature(o, "nrext64", parse_bool(&name, v)?),
            ('l', "size") => o.logsize = Some(num(v)?),
            ('l', "agnum") => {
                o.logagno = Some(
                    u32::try_from(parse_num(&name, v, 1)?)
                        .map_err(|_| CliError::usage(format!("{name}: {v} too large")))?,
                )
            }
            ('l', "internal") if parse_bool(&name, v)? => {}
            ('n', "size") => o.dirblocksize = Some(u32v(v)?),
            ('n', "ftype") if parse_bool(&name, v)? => {}
            ('n', "version") if v == "2" => {}
            ('m', "crc") => feature(o, "crc", parse_bool(&name, v)?),
            ('m', "finobt") => feature(o, "finobt", parse_bool(&name, v)?),
            ('m', "rmapbt") => feature(o, "rmapbt", parse_bool(&name, v)?),
            ('m', "reflink") => feature(o, "reflink", parse_bool(&name, v)?),
            ('m', "bigtime") => feature(o, "bigtime", parse_bool(&name, v)?),
            ('m', "inobtcount") => feature(o, "inobtcount", parse_bool(&name, v)?),
            ('m', "uuid") => o.uuid = Some(parse_uuid(v)?),
            ('r', "rtdev") => rt.rtdev = Some(v.into()),
            ('r', "extsize") => o.rtextsize = Some(num(v)?),
            ('r', "size") => o.rtsize = Some(num(v)?),
            _ => {
                return Err(CliError::usage(format!(
                    "mkfs option {name}{} is not supported by rxfs mkfs",
                    if v.is_empty() {
                        String::new()
                    } else {
                        format!("={v}")
                    }
                )))
            }
        }
    }
    Ok(())
}

fn feature(o: &mut MkfsOptions, name: &'static str, on: bool) {
    let f = &mut o.features;
    match name {
        "crc" => f.crc = on,
        "finobt" => f.finobt = on,
        "rmapbt" => f.rmapbt = on,
        "reflink" => f.reflink = on,
        "bigtime" => f.bigtime = on,
        "inobtcount" => f.inobtcount = on,
        "sparse" => f.sparse = on,
        "nrext64" => f.nrext64 = on,
        _ => unreachable!("unknown feature {name}"),
    }
    o.explicit.push(name);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_and_suffixes() {
        assert_eq!(parse_num("x", "300m", 4096).unwrap(), 300 << 20);
        assert_eq!(parse_num("x", "8b", 4096).unwrap(), 8 * 4096);
        assert_eq!(parse_num("x", "2s", 4096).unwrap(), 1024);
        assert_eq!(parse_num("x", "1T", 4096).unwrap(), 1 << 40);
        assert!(parse_num("x", "12q", 4096).is_err());
        assert!(parse_num("x", "", 4096).is_err());
    }

    #[test]
    fn unsupported_options_are_named() {
        let mut o = MkfsOptions::default();
        let mut rt = RtArgs::default();
        let e = apply(&mut o, &mut rt, 'd', "su=64k").unwrap_err();
        assert!(e.msg.contains("-d su"), "{}", e.msg);
        apply(&mut o, &mut rt, 'm', "rmapbt=1,reflink=0").unwrap();
        assert!(o.features.rmapbt && !o.features.reflink);
        assert_eq!(o.explicit, vec!["rmapbt", "reflink"]);
        assert!(apply(&mut o, &mut rt, 'm', "uuid=nope").is_err());
        apply(&mut o, &mut rt, 'd', "rtinherit=1").unwrap();
        assert!(o.rtinherit);
        apply(&mut o, &mut rt, 'd', "rtinherit=0").unwrap();
        assert!(!o.rtinherit);
        apply(&mut o, &mut rt, 'd', "rtinherit").unwrap();
        assert!(o.rtinherit);
        assert!(apply(&mut o, &mut rt, 'd', "rtinherit=2").is_err());
    }
}

/// The option flag of a configuration file section (mkfs.xfs's names).
fn section_flag(name: &str) -> Option<char> {
    Some(match name {
        "block" => 'b',
        "data" => 'd',
        "inode" => 'i',
        "log" => 'l',
        "metadata" => 'm',
        "naming" => 'n',
        "realtime" => 'r',
        "sector" => 's',
        _ => return None,
    })
}

/// A mkfs.xfs configuration file (`-c options=FILE`, the format of
/// /usr/share/xfsprogs/mkfs/*.conf): `[section]` headers named after the
/// option groups, `key=value` lines, `#` comments. Returns the
/// (flag, "key=value") pairs in file order; errors name the line.
pub fn parse_config(text: &str) -> Result<Vec<(char, String)>, String> {
    let mut out = Vec::new();
    let mut flag = None;
    for (n, raw) in text.lines().enumerate() {
        let line = raw.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            flag = Some(
                section_flag(name.trim())
                    .ok_or_else(|| format!("line {}: unknown section [{}]", n + 1, name.trim()))?,
            );
            continue;
        }
        let f = flag.ok_or_else(|| format!("line {}: '{line}' before any [section]", n + 1))?;
        let (k, v) = line
            .split_once('=')
            .ok_or_else(|| format!("line {}: '{line}' is not key=value", n + 1))?;
        out.push((f, format!("{}={}", k.trim(), v.trim())));
    }
    Ok(out)
}

/// The suboption names a command-line `-FLAG a=1,b=2` list sets.
pub fn keys_of(subopts: &str) -> impl Iterator<Item = &str> {
    subopts
        .split(',')
        .filter(|s| !s.is_empty())
        .map(|s| s.split_once('=').map_or(s, |(k, _)| k))
}

#[cfg(test)]
mod config_tests {
    use super::*;

    #[test]
    fn xfsprogs_lts_file() {
        let text =
            "# V5 features\n\n[metadata]\nnrext64=0\nbigtime=1\ncrc=1\n\n[inode]\nsparse=1\n";
        let got = parse_config(text).unwrap();
        assert_eq!(
            got,
            vec![
                ('m', "nrext64=0".to_string()),
                ('m', "bigtime=1".into()),
                ('m', "crc=1".into()),
                ('i', "sparse=1".into())
            ]
        );
        assert!(parse_config("[bogus]\n")
            .unwrap_err()
            .contains("line 1: unknown section"));
        assert!(parse_config("crc=1\n")
            .unwrap_err()
            .contains("before any [section]"));
        assert!(parse_config("[data]\nsize\n")
            .unwrap_err()
            .contains("line 2"));
        assert_eq!(
            keys_of("size=1g,agcount=4").collect::<Vec<_>>(),
            ["size", "agcount"]
        );
    }
}
