//! Mount options for the tests.

use rxfs::MountOptions;

/// Read-write mount options (defaults otherwise).
pub fn rw() -> MountOptions {
    MountOptions {
        read_only: false,
        ..Default::default()
    }
}

/// Read-only mount options.
pub fn ro() -> MountOptions {
    MountOptions {
        read_only: true,
        ..Default::default()
    }
}
