//! Kafka's classic group protocol for strait's own groups: JoinGroup, SyncGroup, Heartbeat and
//! LeaveGroup through the group's coordinator (FindCoordinator, key type group). The answers
//! are handed to the member's state machine ([`crate::group::membership`]) as they are,
//! Kafka error codes included: rebalancing and fencing are the machine's business. A call that
//! gets no answer is a [`ClusterError`] naming the group, the member and the generation.
//!
//! These calls block on the broker for as long as a rebalance takes: use a `Cluster` of their
//! own (its own connections), so that the control plane's admin calls never queue behind them.

use bytes::Bytes;
use kafka_protocol::ResponseError;
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::leave_group_request::MemberIdentity;
use kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment;
use kafka_protocol::messages::{
    GroupId, HeartbeatRequest, JoinGroupRequest, LeaveGroupRequest, SyncGroupRequest,
};
use kafka_protocol::protocol::{Request, StrBytes};

use super::{Cluster, ClusterError, Context, Result, sb};
use crate::group::membership::{JoinedMember, Response, Timings};
use crate::group::{PROTOCOL_NAME, PROTOCOL_TYPE};

/// Who is asking: the group, the member and its generation (for errors).
#[derive(Debug, Clone, Copy)]
pub struct GroupCall<'a> {
    pub group: &'a str,
    pub member_id: &'a str,
    pub generation: i32,
    /// The static member id (KIP-345), sent where the API version has it (JoinGroup v5+,
    /// SyncGroup, Heartbeat and LeaveGroup v3+); an older coordinator gets a dynamic member.
    pub instance_id: Option<&'a str>,
}

impl GroupCall<'_> {
    fn instance(&self, version: i16, since: i16) -> Option<StrBytes> {
        self.instance_id.filter(|_| version >= since).map(sb)
    }
}

impl Cluster {
    fn group_ctx(&self, api: &'static str, call: &GroupCall<'_>) -> Context {
        self.ctx(api)
            .group(call.group)
            .member(call.member_id, call.generation)
    }

    /// Sends `req` to the group's coordinator once; a routing error forgets the coordinator.
    async fn coordinator_call<R: Request>(
        &self,
        api: &'static str,
        call: &GroupCall<'_>,
        build: impl FnOnce(i16) -> R,
    ) -> Result<R::Response> {
        let conn = self.coordinator_conn(call.group, api).await?;
        let ctx = self.group_ctx(api, call).broker(conn.broker());
        let version = conn
            .version_for::<R>()
            .map_err(|e| ClusterError::wire(ctx.clone(), e))?;
        let req = build(version);
        let resp = conn.send(&req, version).await;
        let resp = match resp {
            Ok(p) => p.decode::<R>().await,
            Err(e) => Err(e),
        };
        resp.map_err(|e| {
            self.coordinators.borrow_mut().remove(call.group);
            ClusterError::wire(ctx, e)
        })
    }

    /// Forgets the coordinator after an error code that says it moved.
    fn check_coordinator(&self, group: &str, code: i16) {
        if matches!(
            ResponseError::try_from_code(code),
            Some(ResponseError::NotCoordinator | ResponseError::CoordinatorNotAvailable)
        ) {
            self.coordinators.borrow_mut().remove(group);
        }
    }

    /// JoinGroup with strait's protocol type and one protocol carrying `metadata`.
    pub async fn join_group(
        &self,
        call: &GroupCall<'_>,
        timings: &Timings,
        metadata: Bytes,
        reason: &str,
    ) -> Result<Response> {
        let resp = self
            .coordinator_call("JoinGroup", call, |version| {
                JoinGroupRequest::default()
                    .with_group_id(GroupId(sb(call.group)))
                    .with_session_timeout_ms(millis(timings.session_timeout))
                    .with_rebalance_timeout_ms(millis(timings.rebalance_timeout))
                    .with_member_id(sb(call.member_id))
                    .with_group_instance_id(call.instance(version, 5))
                    .with_protocol_type(sb(PROTOCOL_TYPE))
                    .with_protocols(vec![
                        JoinGroupRequestProtocol::default()
                            .with_name(sb(PROTOCOL_NAME))
                            .with_metadata(metadata),
                    ])
                    .with_reason((version >= 8).then(|| sb(reason)))
            })
            .await?;
        self.check_coordinator(call.group, resp.error_code);
        Ok(Response::Joined {
            error: resp.error_code,
            member_id: resp.member_id.to_string(),
            generation: resp.generation_id,
            leader: resp.leader.to_string(),
            members: resp
                .members
                .into_iter()
                .map(|m| JoinedMember {
                    member_id: m.member_id.to_string(),
                    metadata: m.metadata,
                })
                .collect(),
        })
    }

    /// SyncGroup; the leader sends every member's assignment, the others none.
    pub async fn sync_group(
        &self,
        call: &GroupCall<'_>,
        assignments: Vec<(String, Bytes)>,
    ) -> Result<Response> {
        let resp = self
            .coordinator_call("SyncGroup", call, |version| {
                let mut req = SyncGroupRequest::default()
                    .with_group_id(GroupId(sb(call.group)))
                    .with_generation_id(call.generation)
                    .with_member_id(sb(call.member_id))
                    .with_group_instance_id(call.instance(version, 3))
                    .with_assignments(
                        assignments
                            .into_iter()
                            .map(|(m, a)| {
                                SyncGroupRequestAssignment::default()
                                    .with_member_id(sb(&m))
                                    .with_assignment(a)
                            })
                            .collect(),
                    );
                if version >= 5 {
                    req = req
                        .with_protocol_type(Some(sb(PROTOCOL_TYPE)))
                        .with_protocol_name(Some(sb(PROTOCOL_NAME)));
                }
                req
            })
            .await?;
        self.check_coordinator(call.group, resp.error_code);
        Ok(Response::Synced {
            error: resp.error_code,
            assignment: resp.assignment,
        })
    }

    pub async fn heartbeat(&self, call: &GroupCall<'_>) -> Result<Response> {
        let resp = self
            .coordinator_call("Heartbeat", call, |version| {
                HeartbeatRequest::default()
                    .with_group_id(GroupId(sb(call.group)))
                    .with_generation_id(call.generation)
                    .with_member_id(sb(call.member_id))
                    .with_group_instance_id(call.instance(version, 3))
            })
            .await?;
        self.check_coordinator(call.group, resp.error_code);
        Ok(Response::Heartbeat {
            error: resp.error_code,
        })
    }

    /// LeaveGroup (v3+ names the member in a list; before, in the request).
    pub async fn leave_group(&self, call: &GroupCall<'_>, reason: &str) -> Result<Response> {
        let resp = self
            .coordinator_call("LeaveGroup", call, |version| {
                let req = LeaveGroupRequest::default().with_group_id(GroupId(sb(call.group)));
                if version >= 3 {
                    req.with_members(vec![
                        MemberIdentity::default()
                            .with_member_id(sb(call.member_id))
                            .with_group_instance_id(call.instance(version, 3))
                            .with_reason((version >= 5).then(|| sb(reason))),
                    ])
                } else {
                    req.with_member_id(sb(call.member_id))
                }
            })
            .await?;
        if let Some(e) =
            ClusterError::kafka(self.group_ctx("LeaveGroup", call), resp.error_code, None)
        {
            // The member is gone either way (its session ends); say why it was not clean.
            tracing::debug!("leaving the group: {e}");
        }
        Ok(Response::Left)
    }
}

fn millis(d: std::time::Duration) -> i32 {
    i32::try_from(d.as_millis()).unwrap_or(i32::MAX)
}
