//! The leader's assignment: balanced, sticky and incremental cooperative (as Kafka's KIP-429).
//!
//! - **Balanced:** every accepted member gets `n / m` units, and `n % m` of them one more: the
//!   members that already hold the most (fewer moves), then the ones that reported the least
//!   throughput (bytes/s), then by member id. So counts differ by at most one.
//! - **Sticky:** a member keeps what it holds, up to its quota.
//! - **Incremental cooperative:** a unit that must move is only taken away from its holder in
//!   this generation; nobody gets it until a member reports that it no longer holds it (the
//!   holder rejoins after revoking, which starts the next generation). A unit nobody holds is
//!   assigned at once. So no unit is ever held by two members, and units that do not move are
//!   never revoked.
//! - A unit claimed by two members (a member that came back late) stays with the first by
//!   member id; the other must revoke it.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet};

use super::Unit;
use super::codec::{Assignment, CodecError, MemberMetadata, MemberSummary};
use super::digest::refusal;
use super::membership::JoinedMember;

/// One member as the leader sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberInput {
    pub member_id: String,
    /// What it holds now (its JoinGroup metadata).
    pub owned: Vec<Unit>,
    /// Bytes per second it copied lately.
    pub throughput: u64,
}

/// The assignment of one generation.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Plan {
    /// Every member's units.
    pub units: BTreeMap<String, BTreeSet<Unit>>,
    /// Units taken from their holder this generation, assigned in the next one.
    pub moving: BTreeSet<Unit>,
}

/// Assigns `units` to `members` (the accepted ones; refused members get nothing and are not
/// passed here).
pub fn assign(members: &[MemberInput], units: &BTreeSet<Unit>) -> Plan {
    let mut plan = Plan::default();
    let mut members: Vec<&MemberInput> = members.iter().collect();
    members.sort_by(|a, b| a.member_id.cmp(&b.member_id));
    members.dedup_by(|a, b| a.member_id == b.member_id);
    if members.is_empty() {
        return plan;
    }
    let mut claimed: BTreeSet<&Unit> = BTreeSet::new();
    let mut keep: Vec<Vec<Unit>> = vec![Vec::new(); members.len()];
    for (i, m) in members.iter().enumerate() {
        let mut owned: Vec<&Unit> = m.owned.iter().filter(|u| units.contains(*u)).collect();
        owned.sort();
        owned.dedup();
        for u in owned {
            if claimed.insert(u) {
                keep[i].push(u.clone());
            }
        }
    }
    let (base, extra) = (units.len() / members.len(), units.len() % members.len());
    let mut order: Vec<usize> = (0..members.len()).collect();
    order.sort_by_key(|&i| (Reverse(keep[i].len()), members[i].throughput, i));
    let mut quota = vec![base; members.len()];
    for &i in order.iter().take(extra) {
        quota[i] += 1;
    }
    for (i, k) in keep.iter_mut().enumerate() {
        if k.len() > quota[i] {
            plan.moving.extend(k.split_off(quota[i]));
        }
    }
    for u in units.iter().filter(|u| !claimed.contains(u)) {
        let room = (0..members.len())
            .filter(|&i| keep[i].len() < quota[i])
            .min_by_key(|&i| (keep[i].len(), i));
        if let Some(i) = room {
            keep[i].push(u.clone());
        }
    }
    for (m, k) in members.iter().zip(keep) {
        plan.units
            .insert(m.member_id.clone(), k.into_iter().collect());
    }
    plan
}

/// The leader's whole decision for one generation: every member's [`Assignment`]. A member
/// whose metadata cannot be read, or whose configuration digest differs from the leader's, is
/// refused (nothing assigned, the reason in the assignment); the others share `units`. The
/// second value is the number of units moving (revoked now, assigned in the next generation).
pub fn lead(
    leader_id: &str,
    members: &[JoinedMember],
    units: &BTreeSet<Unit>,
) -> (Vec<(String, Assignment)>, usize) {
    let decoded: Vec<(&str, Result<MemberMetadata, CodecError>)> = members
        .iter()
        .map(|m| (m.member_id.as_str(), MemberMetadata::decode(&m.metadata)))
        .collect();
    let leader = decoded
        .iter()
        .find(|(id, _)| *id == leader_id)
        .and_then(|(_, md)| md.as_ref().ok())
        .cloned()
        .unwrap_or_default();
    let mut refused: BTreeMap<&str, String> = BTreeMap::new();
    let mut inputs = Vec::new();
    for (id, md) in &decoded {
        match md {
            Err(e) => {
                refused.insert(
                    id,
                    format!("the group leader cannot read this member's metadata ({e}): a different strait version?"),
                );
            }
            Ok(md) => match refusal(&leader, md) {
                Some(why) => {
                    refused.insert(id, why);
                }
                None => inputs.push(MemberInput {
                    member_id: id.to_string(),
                    owned: md.owned.clone(),
                    throughput: md.throughput,
                }),
            },
        }
    }
    let plan = assign(&inputs, units);
    let summary: Vec<MemberSummary> = inputs
        .iter()
        .map(|m| MemberSummary {
            member_id: m.member_id.clone(),
            units: plan.units.get(&m.member_id).map_or(0, |u| u.len() as u32),
            throughput: m.throughput,
        })
        .collect();
    let out = decoded
        .iter()
        .map(|(id, _)| {
            let a = match refused.get(id) {
                Some(why) => Assignment {
                    error: Some(why.clone()),
                    units: Vec::new(),
                    members: summary.clone(),
                },
                None => Assignment {
                    error: None,
                    units: plan
                        .units
                        .get(*id)
                        .map(|u| u.iter().cloned().collect())
                        .unwrap_or_default(),
                    members: summary.clone(),
                },
            };
            (id.to_string(), a)
        })
        .collect();
    (out, plan.moving.len())
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn units(n: usize) -> BTreeSet<Unit> {
        let mut u: BTreeSet<Unit> = (0..n)
            .map(|p| Unit::partition("A->B", "t", p as i32))
            .collect();
        u.insert(Unit::Singleton);
        u
    }

    fn member(id: &str, owned: &BTreeSet<Unit>) -> MemberInput {
        MemberInput {
            member_id: id.to_string(),
            owned: owned.iter().cloned().collect(),
            throughput: 0,
        }
    }

    /// Runs generations until nothing moves; checks every generation's invariants on the way.
    fn converge(
        ids: &[String],
        owned: &mut BTreeMap<String, BTreeSet<Unit>>,
        all: &BTreeSet<Unit>,
    ) -> usize {
        for round in 0..4 {
            let inputs: Vec<MemberInput> = ids
                .iter()
                .map(|id| member(id, owned.get(id).unwrap_or(&BTreeSet::new())))
                .collect();
            let plan = assign(&inputs, all);
            check_generation(&inputs, &plan, all);
            let next: BTreeMap<String, BTreeSet<Unit>> = plan.units.clone();
            if &next == owned && plan.moving.is_empty() {
                return round;
            }
            *owned = next;
        }
        panic!("no convergence in 4 generations");
    }

    /// No unit twice; only known units; a unit given to a member was its own or nobody's.
    fn check_generation(inputs: &[MemberInput], plan: &Plan, all: &BTreeSet<Unit>) {
        let mut seen = BTreeSet::new();
        for (id, us) in &plan.units {
            for u in us {
                assert!(all.contains(u));
                assert!(seen.insert(u.clone()), "{u} assigned twice");
                let mine = inputs
                    .iter()
                    .any(|m| &m.member_id == id && m.owned.contains(u));
                let someones = inputs.iter().any(|m| m.owned.contains(u));
                assert!(
                    mine || !someones,
                    "{u} given to {id} while another holds it"
                );
            }
        }
    }

    fn balanced(owned: &BTreeMap<String, BTreeSet<Unit>>, all: &BTreeSet<Unit>) {
        let counts: Vec<usize> = owned.values().map(BTreeSet::len).collect();
        let (lo, hi) = (counts.iter().min().unwrap(), counts.iter().max().unwrap());
        assert!(hi - lo <= 1, "unbalanced: {counts:?}");
        assert_eq!(counts.iter().sum::<usize>(), all.len());
    }

    #[test]
    fn one_member_then_two_more() {
        let all = units(12);
        let mut owned = BTreeMap::new();
        let mut ids = vec!["a".to_string()];
        converge(&ids, &mut owned, &all);
        assert_eq!(owned["a"].len(), 13);
        ids.extend(["b".to_string(), "c".to_string()]);
        let rounds = converge(&ids, &mut owned, &all);
        balanced(&owned, &all);
        // One generation to revoke, one to assign what was revoked, one to see it is stable.
        assert_eq!(rounds, 2);
        // "a" kept its share: what moved is only what had to.
        assert!(owned["a"].len() >= 4);
    }

    #[test]
    fn a_member_that_leaves_hands_its_units_over_at_once() {
        let all = units(9);
        let ids: Vec<String> = ["a", "b", "c"].iter().map(|s| s.to_string()).collect();
        let mut owned = BTreeMap::new();
        converge(&ids, &mut owned, &all);
        let before = owned.clone();
        owned.remove("b");
        let rest = vec!["a".to_string(), "c".to_string()];
        // Nobody holds b's units: they are assigned in the first generation.
        assert_eq!(converge(&rest, &mut owned, &all), 1);
        balanced(&owned, &all);
        for id in &rest {
            assert!(before[id].is_subset(&owned[id]), "{id} lost units");
        }
    }

    #[test]
    fn extra_units_go_to_the_least_busy_member() {
        let all = units(2);
        let members = vec![
            MemberInput {
                member_id: "busy".into(),
                owned: vec![],
                throughput: 1_000_000,
            },
            MemberInput {
                member_id: "idle".into(),
                owned: vec![],
                throughput: 10,
            },
        ];
        let plan = assign(&members, &all);
        assert_eq!(plan.units["idle"].len(), 2);
        assert_eq!(plan.units["busy"].len(), 1);
    }

    #[test]
    fn a_unit_claimed_twice_stays_with_one_member() {
        let all = units(2);
        let both: BTreeSet<Unit> = all.clone();
        let members = vec![member("a", &both), member("b", &both)];
        let plan = assign(&members, &all);
        check_generation(&members, &plan, &all);
        assert!(plan.units["b"].is_empty());
        assert_eq!(plan.moving.len(), 1);
    }

    #[test]
    fn the_leader_refuses_a_member_with_another_configuration() {
        let md = |topics: &str| {
            let (digest, keys) = crate::group::digest::of_properties(
                &crate::config::properties::parse_str(&format!("clusters=A,B\ntopics={topics}\n")),
            );
            MemberMetadata {
                digest,
                keys,
                ..MemberMetadata::default()
            }
            .encode()
        };
        let members = vec![
            JoinedMember {
                member_id: "a".into(),
                metadata: md("t.*"),
            },
            JoinedMember {
                member_id: "b".into(),
                metadata: md("other"),
            },
            JoinedMember {
                member_id: "c".into(),
                metadata: bytes::Bytes::from_static(b"\x00"),
            },
        ];
        let (out, _) = lead("a", &members, &units(3));
        let by: BTreeMap<_, _> = out.into_iter().collect();
        assert_eq!(by["a"].units.len(), 4);
        assert!(by["b"].units.is_empty());
        assert!(
            by["b"]
                .error
                .as_deref()
                .unwrap()
                .contains("topics (different value)")
        );
        assert!(by["c"].error.as_deref().unwrap().contains("cannot read"));
    }

    proptest! {
        #[test]
        fn any_history_stays_safe_balanced_and_sticky(
            n in 0usize..40,
            steps in prop::collection::vec((0usize..5, any::<bool>()), 1..8),
        ) {
            let all = units(n);
            let names = ["a", "b", "c", "d", "e"];
            let mut ids: Vec<String> = vec!["a".into()];
            let mut owned = BTreeMap::new();
            converge(&ids, &mut owned, &all);
            for (who, join) in steps {
                let id = names[who].to_string();
                if join && !ids.contains(&id) {
                    ids.push(id);
                } else if !join && ids.len() > 1 && ids.contains(&id) {
                    ids.retain(|i| i != &id);
                    owned.remove(&id);
                }
                let before = owned.clone();
                converge(&ids, &mut owned, &all);
                balanced(&owned, &all);
                // Sticky: a member keeps at least what it held up to its fair share.
                let fair = all.len() / ids.len();
                for id in &ids {
                    if let Some(b) = before.get(id) {
                        let kept = b.intersection(&owned[id]).count();
                        prop_assert!(kept >= b.len().min(fair), "{} kept {} of {}", id, kept, b.len());
                    }
                }
            }
        }
    }
}
