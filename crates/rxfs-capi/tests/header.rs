//! The committed `include/rxfs.h` is what cbindgen makes of the source
//! now (regenerate: `cp target/release/build/rxfs-capi-*/out/rxfs.h
//! crates/rxfs-capi/include/` after a build, or see scripts/install-capi).

#[test]
fn committed_header_is_current() {
    let generated = std::fs::read_to_string(concat!(env!("OUT_DIR"), "/rxfs.h"))
        .expect("build.rs generated rxfs.h");
    let committed = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/include/rxfs.h"))
        .expect("include/rxfs.h");
    assert!(
        generated == committed,
        "include/rxfs.h is stale: copy {}/rxfs.h over it",
        env!("OUT_DIR")
    );
}
