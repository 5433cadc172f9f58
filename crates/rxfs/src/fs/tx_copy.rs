//! A transaction's working copy of a joined buffer, made on the first
//! write: until then it shares the committed bytes it was joined with.
//!
//! ## Invariant
//! `Shared(a)` holds exactly the committed contents the buffer had when
//! it was joined. The transaction holds the buffer's transaction lock from
//! the join to its commit or cancel, so no other transaction publishes a
//! new version meanwhile; and a published version is a new `Arc`, never a
//! change of the old one. Reading through the shared copy is therefore
//! what reading a private copy made at the join would give, without the
//! copy: a transaction that only looks at a bitmap, summary or directory
//! block pays no copy of it.

use std::sync::Arc;

pub(super) enum TxCopy {
    /// Not written by this transaction: the committed bytes of the join.
    Shared(Arc<Vec<u8>>),
    /// Written (or new): this transaction's own bytes.
    Owned(Vec<u8>),
}

impl TxCopy {
    pub(super) fn bytes(&self) -> &[u8] {
        match self {
            TxCopy::Shared(a) => a,
            TxCopy::Owned(v) => v,
        }
    }

    pub(super) fn len(&self) -> usize {
        self.bytes().len()
    }

    /// The bytes to change: copied out of the committed version on the
    /// first call.
    pub(super) fn bytes_mut(&mut self) -> &mut Vec<u8> {
        if let TxCopy::Shared(a) = self {
            *self = TxCopy::Owned(a.as_ref().clone());
        }
        match self {
            TxCopy::Owned(v) => v,
            TxCopy::Shared(_) => unreachable!("made owned above"),
        }
    }

    /// The bytes, owned (a copy only when never written: a buffer logged
    /// or marked stale or ordered without a change).
    pub(super) fn into_vec(self) -> Vec<u8> {
        match self {
            TxCopy::Shared(a) => Arc::try_unwrap(a).unwrap_or_else(|a| a.as_ref().clone()),
            TxCopy::Owned(v) => v,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_shared_copy_is_copied_on_the_first_write_only() {
        let committed = Arc::new(vec![1u8, 2, 3]);
        let mut c = TxCopy::Shared(committed.clone());
        assert_eq!(c.bytes(), &[1, 2, 3]);
        assert_eq!(Arc::strong_count(&committed), 2, "no copy for reading");
        c.bytes_mut()[0] = 9;
        assert_eq!(c.bytes(), &[9, 2, 3]);
        assert_eq!(*committed, vec![1, 2, 3], "the committed bytes unchanged");
        assert_eq!(Arc::strong_count(&committed), 1, "the share released");
        let p = c.bytes_mut().as_ptr();
        c.bytes_mut()[1] = 8;
        assert_eq!(p, c.bytes().as_ptr(), "copied once");
        assert_eq!(c.into_vec(), vec![9, 8, 3]);
        let s = TxCopy::Shared(committed.clone());
        assert_eq!(s.into_vec(), vec![1, 2, 3]);
        assert_eq!(*committed, vec![1, 2, 3]);
    }
}
