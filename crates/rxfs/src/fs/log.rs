//! The log: finding head and tail, clean/dirty state.
//! (Stub: filled in by the log work.)
