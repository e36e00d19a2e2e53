//! The bytes members and the leader exchange through the coordinator.
//!
//! Member metadata (JoinGroup protocol metadata), version 1, big-endian:
//! `u16 version · u64 digest · u32 n · n × (str key · u64 key digest) · u64 throughput (bytes/s)
//! · u32 m · m × unit`.
//!
//! Assignment (SyncGroup), version 1:
//! `u16 version · u8 refused · [str32 error] · u32 n · n × unit · u32 m · m × (str member ·
//! u32 units · u64 throughput)` (the member summary is for `/status`).
//!
//! `str` is `u16 length · UTF-8`, `str32` is `u32 length · UTF-8`; a unit is `u8 0` (the
//! singleton duties) or `u8 1 · str flow · str topic · i32 partition`. Every length and count is
//! checked against the bytes that remain before anything is allocated; a newer version may
//! append fields, which this version ignores.

use bytes::{Buf, BufMut, Bytes, BytesMut};

use super::Unit;

/// The version this code writes.
pub const VERSION: u16 = 1;
/// The most units one message may carry.
pub const MAX_UNITS: usize = 1 << 20;
/// The most per-key digests one metadata may carry.
pub const MAX_KEYS: usize = 1 << 16;
/// The longest refusal message.
pub const MAX_ERROR_BYTES: usize = 64 << 10;

/// What a member tells the leader when it joins.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct MemberMetadata {
    /// Digest of everything the members must share ([`super::digest`]).
    pub digest: u64,
    /// The same, key by key, so that a refusal names the keys that differ.
    pub keys: Vec<(String, u64)>,
    /// Bytes per second this member copied lately.
    pub throughput: u64,
    /// The units this member holds now.
    pub owned: Vec<Unit>,
}

/// One member as the leader saw it (for `/status`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberSummary {
    pub member_id: String,
    pub units: u32,
    pub throughput: u64,
}

/// What the leader tells one member.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Assignment {
    /// The member is refused (its configuration differs from the leader's): why.
    pub error: Option<String>,
    pub units: Vec<Unit>,
    pub members: Vec<MemberSummary>,
}

/// Bytes that are not a message of this protocol.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CodecError {
    #[error("group message truncated: {what} needs {need} bytes, {have} left")]
    Truncated {
        what: &'static str,
        need: usize,
        have: usize,
    },
    #[error("group message: {what} count {count} exceeds the bound {max}")]
    TooMany {
        what: &'static str,
        count: usize,
        max: usize,
    },
    #[error("group message: {what} is not UTF-8")]
    NotUtf8 { what: &'static str },
    #[error("group message: unknown unit tag {tag}")]
    UnitTag { tag: u8 },
    #[error("group message version {version} is older than 1")]
    Version { version: u16 },
}

fn put_str(b: &mut BytesMut, s: &str) {
    let s = &s.as_bytes()[..s.len().min(u16::MAX as usize)];
    b.put_u16(s.len() as u16);
    b.put_slice(s);
}

fn put_unit(b: &mut BytesMut, u: &Unit) {
    match u {
        Unit::Singleton => b.put_u8(0),
        Unit::Partition {
            flow,
            topic,
            partition,
        } => {
            b.put_u8(1);
            put_str(b, flow);
            put_str(b, topic);
            b.put_i32(*partition);
        }
    }
}

fn put_units(b: &mut BytesMut, units: &[Unit]) {
    let units = &units[..units.len().min(MAX_UNITS)];
    b.put_u32(units.len() as u32);
    for u in units {
        put_unit(b, u);
    }
}

/// Reads with bounds.
struct Reader<'a>(&'a [u8]);

impl Reader<'_> {
    fn need(&self, what: &'static str, need: usize) -> Result<(), CodecError> {
        if self.0.len() < need {
            return Err(CodecError::Truncated {
                what,
                need,
                have: self.0.len(),
            });
        }
        Ok(())
    }

    fn u8(&mut self, what: &'static str) -> Result<u8, CodecError> {
        self.need(what, 1)?;
        Ok(self.0.get_u8())
    }

    fn u16(&mut self, what: &'static str) -> Result<u16, CodecError> {
        self.need(what, 2)?;
        Ok(self.0.get_u16())
    }

    fn u32(&mut self, what: &'static str) -> Result<u32, CodecError> {
        self.need(what, 4)?;
        Ok(self.0.get_u32())
    }

    fn u64(&mut self, what: &'static str) -> Result<u64, CodecError> {
        self.need(what, 8)?;
        Ok(self.0.get_u64())
    }

    fn bytes_str(&mut self, what: &'static str, len: usize) -> Result<String, CodecError> {
        self.need(what, len)?;
        let (s, rest) = self.0.split_at(len);
        self.0 = rest;
        String::from_utf8(s.to_vec()).map_err(|_| CodecError::NotUtf8 { what })
    }

    fn str(&mut self, what: &'static str) -> Result<String, CodecError> {
        let len = self.u16(what)? as usize;
        self.bytes_str(what, len)
    }

    /// A count of items of at least `min_size` bytes each, bounded by `max` and by what is left.
    fn count(
        &mut self,
        what: &'static str,
        min_size: usize,
        max: usize,
    ) -> Result<usize, CodecError> {
        let count = self.u32(what)? as usize;
        if count > max {
            return Err(CodecError::TooMany { what, count, max });
        }
        self.need(what, count.saturating_mul(min_size))?;
        Ok(count)
    }

    fn unit(&mut self) -> Result<Unit, CodecError> {
        match self.u8("unit")? {
            0 => Ok(Unit::Singleton),
            1 => {
                let flow = self.str("unit flow")?;
                let topic = self.str("unit topic")?;
                self.need("unit partition", 4)?;
                let partition = self.0.get_i32();
                Ok(Unit::Partition {
                    flow,
                    topic,
                    partition,
                })
            }
            tag => Err(CodecError::UnitTag { tag }),
        }
    }

    fn units(&mut self) -> Result<Vec<Unit>, CodecError> {
        let n = self.count("units", 1, MAX_UNITS)?;
        (0..n).map(|_| self.unit()).collect()
    }

    fn version(&mut self) -> Result<u16, CodecError> {
        let version = self.u16("version")?;
        if version < 1 {
            return Err(CodecError::Version { version });
        }
        Ok(version)
    }
}

impl MemberMetadata {
    pub fn encode(&self) -> Bytes {
        let mut b = BytesMut::new();
        b.put_u16(VERSION);
        b.put_u64(self.digest);
        let keys = &self.keys[..self.keys.len().min(MAX_KEYS)];
        b.put_u32(keys.len() as u32);
        for (k, d) in keys {
            put_str(&mut b, k);
            b.put_u64(*d);
        }
        b.put_u64(self.throughput);
        put_units(&mut b, &self.owned);
        b.freeze()
    }

    pub fn decode(bytes: &[u8]) -> Result<MemberMetadata, CodecError> {
        let mut r = Reader(bytes);
        r.version()?;
        let digest = r.u64("digest")?;
        let n = r.count("keys", 10, MAX_KEYS)?;
        let mut keys = Vec::with_capacity(n);
        for _ in 0..n {
            let k = r.str("key")?;
            keys.push((k, r.u64("key digest")?));
        }
        let throughput = r.u64("throughput")?;
        let owned = r.units()?;
        Ok(MemberMetadata {
            digest,
            keys,
            throughput,
            owned,
        })
    }
}

impl Assignment {
    pub fn encode(&self) -> Bytes {
        let mut b = BytesMut::new();
        b.put_u16(VERSION);
        match &self.error {
            Some(e) => {
                let e = &e.as_bytes()[..e.len().min(MAX_ERROR_BYTES)];
                b.put_u8(1);
                b.put_u32(e.len() as u32);
                b.put_slice(e);
            }
            None => b.put_u8(0),
        }
        put_units(&mut b, &self.units);
        let members = &self.members[..self.members.len().min(MAX_UNITS)];
        b.put_u32(members.len() as u32);
        for m in members {
            put_str(&mut b, &m.member_id);
            b.put_u32(m.units);
            b.put_u64(m.throughput);
        }
        b.freeze()
    }

    pub fn decode(bytes: &[u8]) -> Result<Assignment, CodecError> {
        let mut r = Reader(bytes);
        r.version()?;
        let error = match r.u8("refused")? {
            0 => None,
            _ => {
                let len = r.u32("error")? as usize;
                if len > MAX_ERROR_BYTES {
                    return Err(CodecError::TooMany {
                        what: "error bytes",
                        count: len,
                        max: MAX_ERROR_BYTES,
                    });
                }
                Some(r.bytes_str("error", len)?)
            }
        };
        let units = r.units()?;
        let n = r.count("members", 14, MAX_UNITS)?;
        let mut members = Vec::with_capacity(n);
        for _ in 0..n {
            let member_id = r.str("member id")?;
            let units = r.u32("member units")?;
            let throughput = r.u64("member throughput")?;
            members.push(MemberSummary {
                member_id,
                units,
                throughput,
            });
        }
        Ok(Assignment {
            error,
            units,
            members,
        })
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn unit() -> impl Strategy<Value = Unit> {
        prop_oneof![
            Just(Unit::Singleton),
            ("[a-z]{1,3}->[a-z]{1,3}", "[a-z.é_-]{0,20}", any::<i32>())
                .prop_map(|(f, t, p)| Unit::partition(&f, &t, p)),
        ]
    }

    fn metadata() -> impl Strategy<Value = MemberMetadata> {
        (
            any::<u64>(),
            prop::collection::vec(("[a-z.>-]{0,30}", any::<u64>()), 0..20),
            any::<u64>(),
            prop::collection::vec(unit(), 0..30),
        )
            .prop_map(|(digest, keys, throughput, owned)| MemberMetadata {
                digest,
                keys,
                throughput,
                owned,
            })
    }

    fn assignment() -> impl Strategy<Value = Assignment> {
        (
            prop::option::of(".{0,80}"),
            prop::collection::vec(unit(), 0..30),
            prop::collection::vec(("[a-z0-9-]{0,40}", any::<u32>(), any::<u64>()), 0..5),
        )
            .prop_map(|(error, units, members)| Assignment {
                error,
                units,
                members: members
                    .into_iter()
                    .map(|(member_id, units, throughput)| MemberSummary {
                        member_id,
                        units,
                        throughput,
                    })
                    .collect(),
            })
    }

    proptest! {
        #[test]
        fn metadata_round_trips(m in metadata()) {
            prop_assert_eq!(MemberMetadata::decode(&m.encode()).unwrap(), m);
        }

        #[test]
        fn assignments_round_trip(a in assignment()) {
            prop_assert_eq!(Assignment::decode(&a.encode()).unwrap(), a);
        }

        /// Any prefix, any garbage: an error or a value, never a panic or a huge allocation.
        #[test]
        fn hostile_bytes_are_refused_not_trusted(
            m in metadata(),
            cut in 0usize..400,
            garbage in prop::collection::vec(any::<u8>(), 0..200),
        ) {
            let bytes = m.encode();
            let cut = cut.min(bytes.len());
            if cut < bytes.len() {
                prop_assert!(MemberMetadata::decode(&bytes[..cut]).is_err());
            }
            let _ = MemberMetadata::decode(&garbage);
            let _ = Assignment::decode(&garbage);
        }
    }

    #[test]
    fn a_huge_count_is_refused_before_allocating() {
        let mut b = BytesMut::new();
        b.put_u16(1);
        b.put_u8(0);
        b.put_u32(u32::MAX);
        assert!(matches!(
            Assignment::decode(&b),
            Err(CodecError::TooMany { what: "units", .. })
        ));
        let mut b = BytesMut::new();
        b.put_u16(1);
        b.put_u8(0);
        b.put_u32(1000);
        b.put_u8(0);
        assert!(matches!(
            Assignment::decode(&b),
            Err(CodecError::Truncated { what: "units", .. })
        ));
        assert!(matches!(
            MemberMetadata::decode(&[0, 0]),
            Err(CodecError::Version { version: 0 })
        ));
    }

    #[test]
    fn a_newer_version_may_append_fields() {
        let m = MemberMetadata {
            digest: 7,
            ..MemberMetadata::default()
        };
        let mut b = BytesMut::from(&m.encode()[..]);
        b[1] = 2;
        b.put_slice(b"future");
        assert_eq!(MemberMetadata::decode(&b).unwrap(), m);
    }
}
