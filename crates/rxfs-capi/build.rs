//! Generates rxfs.h from the crate's source into OUT_DIR; the committed
//! include/rxfs.h must equal it (tests/header.rs checks).

fn main() {
    let dir = std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets it");
    let out = std::env::var("OUT_DIR").expect("cargo sets it");
    println!("cargo:rerun-if-changed=src");
    println!("cargo:rerun-if-changed=cbindgen.toml");
    // Installed as librxfs.so.MAJOR (scripts/install-capi): programs
    // linked with -lrxfs record that name.
    let major = std::env::var("CARGO_PKG_VERSION_MAJOR").expect("cargo sets it");
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,librxfs.so.{major}");
    let config =
        cbindgen::Config::from_file(format!("{dir}/cbindgen.toml")).expect("cbindgen.toml parses");
    match cbindgen::Builder::new()
        .with_crate(&dir)
        .with_config(config)
        .generate()
    {
        Ok(b) => {
            b.write_to_file(format!("{out}/rxfs.h"));
        }
        Err(e) => panic!("cbindgen: {e}"),
    }
}
