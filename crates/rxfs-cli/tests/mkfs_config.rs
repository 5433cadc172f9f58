//! `rxfs mkfs -c options=FILE` reads mkfs.xfs's configuration files: each
//! of xfsprogs' shipped `lts_*.conf` profiles gives the superblock feature
//! bits mkfs.xfs gives for the same options on its command line (this
//! xfsprogs cannot read its own files: they list `nrext64` under
//! `[metadata]`, which only newer mkfs.xfs takes), and the image passes
//! `xfs_repair -n`. An option set both in the file and on the command line
//! is refused, as mkfs.xfs refuses it.
//!
//! Needs mkfs.xfs, xfs_db, xfs_repair and /usr/share/xfsprogs/mkfs (xfsprogs).

mod common;

use std::path::Path;

use common::*;

const UUID: &str = "uuid=0f1e2d3c-4b5a-4978-8695-a4b3c2d1e0f0";

fn features(img: &Path) -> String {
    let out = run_output(
        "xfs_db",
        &[
            "-r",
            "-c",
            "sb 0",
            "-c",
            "p versionnum features2 features_compat features_ro_compat features_incompat",
            img.to_str().unwrap(),
        ],
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn lts_profiles_match_mkfs_xfs() {
    let dir = Path::new("/usr/share/xfsprogs/mkfs");
    let s = Scratch::new("mkfs-config");
    let mut seen = 0;
    for name in ["lts_4.19", "lts_5.4", "lts_5.10", "lts_5.15", "lts_6.1"] {
        let conf = dir.join(format!("{name}.conf"));
        let text = std::fs::read_to_string(&conf)
            .unwrap_or_else(|e| panic!("{}: {e} (xfsprogs ships it)", conf.display()));
        seen += 1;
        // The same options as mkfs.xfs command-line flags.
        let (mut m, mut i) = (vec![UUID.to_string()], Vec::new());
        let mut section = "";
        for l in text.lines().map(str::trim) {
            if l.starts_with('#') || l.is_empty() {
                continue;
            }
            if let Some(sec) = l.strip_prefix('[') {
                section = sec.trim_end_matches(']');
                continue;
            }
            match (section, l.starts_with("nrext64")) {
                ("metadata", false) => m.push(l.to_string()),
                ("inode", _) | ("metadata", true) => i.push(l.to_string()),
                other => panic!("{name}: section {other:?} not covered by this test"),
            }
        }
        let ours = s.path(&format!("{name}-ours.img"));
        let theirs = s.path(&format!("{name}-theirs.img"));
        let c = format!("options={}", conf.display());
        rxfs_ok(&[
            "mkfs",
            "-q",
            "-d",
            "size=400m",
            "-c",
            &c,
            "-m",
            UUID,
            ours.to_str().unwrap(),
        ]);
        std::fs::File::create(&theirs)
            .unwrap()
            .set_len(400 << 20)
            .unwrap();
        let (m, i) = (m.join(","), i.join(","));
        let mut args = vec!["-q", "-m", &m];
        if !i.is_empty() {
            args.extend(["-i", &i]);
        }
        args.push(theirs.to_str().unwrap());
        run("mkfs.xfs", &args);
        assert_eq!(features(&ours), features(&theirs), "{name}");
        let r = run_output("xfs_repair", &["-n", ours.to_str().unwrap()]);
        assert!(r.status.success(), "{name}: {r:?}");
    }
    assert_eq!(seen, 5);
}

#[test]
fn an_option_in_both_places_is_refused() {
    let s = Scratch::new("mkfs-config-twice");
    let conf = s.path("c.conf");
    std::fs::write(&conf, "# test\n[metadata]\nreflink=1\n").unwrap();
    let img = s.path("img");
    let c = format!("options={}", conf.display());
    let out = rxfs(&[
        "mkfs",
        "-q",
        "-d",
        "size=300m",
        "-c",
        &c,
        "-m",
        "reflink=0",
        img.to_str().unwrap(),
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("-m reflink: set both in"), "{err}");
    assert!(!img.exists());
    std::fs::write(&conf, "[nonsense]\nx=1\n").unwrap();
    let out = rxfs(&[
        "mkfs",
        "-q",
        "-d",
        "size=300m",
        "-c",
        &c,
        img.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("line 1: unknown section [nonsense]"));
}
