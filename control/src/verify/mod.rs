//! `strait verify`: record-level proof that what strait's stored progress says is copied is on
//! the target, identical. [`compare`] is the sans-IO comparison of one partition (pairing by the
//! stored exact mapping); [`partition`] reads both clusters for it; [`syncs`] pairs what
//! MirrorMaker copied before strait by its offset syncs; [`continuous`] is the bookkeeping of
//! the verification `strait run` does as it goes (`strait.verify.*`).

pub mod compare;
pub mod continuous;
pub mod partition;
pub mod syncs;
