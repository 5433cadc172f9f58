//! Free-space allocation (work in progress: API stub).

pub mod btree_edit;

use crate::error::{Error, Result};
use crate::types::{AgBlock, AgNumber};
use crate::xact::MetaTx;

/// An allocation request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AllocReq {
    /// AG to start in.
    pub agno: AgNumber,
    /// Allocate as close as possible to this block of `agno`.
    pub near: Option<AgBlock>,
    pub minlen: u32,
    pub maxlen: u32,
    /// The start must be a multiple of this (AG-relative); 1 = none.
    pub align: u32,
    /// May move on to higher AGs when `agno` has no room.
    pub any_ag: bool,
    /// The extent is for metadata.
    pub meta: bool,
}

/// An allocated extent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct AgExtent {
    pub agno: AgNumber,
    pub agbno: AgBlock,
    pub len: u32,
}

/// Allocate an extent (see the module doc).
pub fn alloc_extent(_tx: &mut dyn MetaTx, _req: &AllocReq) -> Result<AgExtent> {
    Err(Error::NotSupported("alloc_extent: stub".into()))
}

/// Free `len` blocks at `agbno` of AG `agno`.
pub fn free_extent(
    _tx: &mut dyn MetaTx,
    _agno: AgNumber,
    _agbno: AgBlock,
    _len: u32,
) -> Result<()> {
    Err(Error::NotSupported("free_extent: stub".into()))
}
