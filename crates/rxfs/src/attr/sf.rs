//! Shortform attribute list edits, pure (no I/O): on decoded entries (see
//! [`crate::format::attr`] for the layout).
//!
//! Rules (the kernel's): an entry fits inline only with a name and a value
//! shorter than 255 bytes; a list fits when [`super::forkoff::bytes_fit`]
//! finds a fork offset for its size; a new or replaced entry goes to the
//! end of the list. Shortform entries carry only namespace bits as flags.

use super::forkoff;
use crate::format::attr::{self, AttrEntry, AttrValue, Namespace};

/// Most entries a shortform header can count.
const SF_MAX_COUNT: usize = 255;
/// Names and values inline must be shorter than this.
const SF_ENTSIZE_MAX: usize = 255;

/// The list with `name` in `ns` set to `value` (an old entry of that name
/// removed, the new one appended).
pub fn set(list: &[AttrEntry], ns: Namespace, name: &[u8], value: &[u8]) -> Vec<AttrEntry> {
    let mut out: Vec<AttrEntry> = list
        .iter()
        .filter(|e| !e.matches(ns, name))
        .cloned()
        .collect();
    out.push(AttrEntry {
        flags: ns.flags(),
        name: name.to_vec(),
        hashval: 0,
        value: AttrValue::Local(value.to_vec()),
    });
    out
}

/// The list without `name` in `ns`; `None` when absent.
pub fn remove(list: &[AttrEntry], ns: Namespace, name: &[u8]) -> Option<Vec<AttrEntry>> {
    let i = list.iter().position(|e| e.matches(ns, name))?;
    let mut out = list.to_vec();
    out.remove(i);
    Some(out)
}

/// Whether every entry can be stored inline at all.
pub fn entries_inline(list: &[AttrEntry]) -> bool {
    list.len() <= SF_MAX_COUNT
        && list.iter().all(|e| match &e.value {
            AttrValue::Local(v) => e.name.len() < SF_ENTSIZE_MAX && v.len() < SF_ENTSIZE_MAX,
            AttrValue::Remote { .. } => false,
        })
}

/// The fork offset the list would be stored at in dinode `d`, or `None`
/// when it cannot be shortform there.
pub fn fits(d: &[u8], list: &[AttrEntry]) -> Option<u8> {
    if !entries_inline(list) {
        return None;
    }
    match forkoff::bytes_fit(d, attr::sf_totsize(list)) {
        0 => None,
        fo => Some(fo),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn e(ns: Namespace, n: &str, v: &[u8]) -> AttrEntry {
        AttrEntry {
            flags: ns.flags(),
            name: n.as_bytes().to_vec(),
            hashval: 0,
            value: AttrValue::Local(v.to_vec()),
        }
    }

    #[test]
    fn set_replace_remove_roundtrip() {
        let l = set(&[], Namespace::User, b"a", b"1");
        let l = set(&l, Namespace::Trusted, b"a", b"22");
        let l = set(&l, Namespace::User, b"a", b"333");
        assert_eq!(
            l,
            vec![
                e(Namespace::Trusted, "a", b"22"),
                e(Namespace::User, "a", b"333")
            ]
        );
        let bytes = attr::encode_shortform(&l);
        assert_eq!(bytes.len(), attr::sf_totsize(&l));
        let back = attr::decode_shortform(&bytes, crate::types::Ino(1)).unwrap();
        assert_eq!(back, l);
        assert_eq!(remove(&l, Namespace::Security, b"a"), None);
        assert_eq!(
            remove(&l, Namespace::User, b"a").unwrap(),
            vec![e(Namespace::Trusted, "a", b"22")]
        );
    }

    #[test]
    fn long_values_are_not_inline() {
        assert!(!entries_inline(&[e(Namespace::User, "x", &[0; 255])]));
        assert!(entries_inline(&[e(Namespace::User, "x", &[0; 254])]));
    }
}
