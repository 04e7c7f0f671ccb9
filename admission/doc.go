// Package admission is the ordered chain of checks a request passes before
// it is proposed: wire limits, the site's QOS and partition names, task
// fit, the request prepared (vCluster resolved, defaults applied), limits, validation,
// array size, authorization (tenant, QOS ceiling, who may keep a request
// that never fits) and never-fits. Each check returns nil or a *Refusal
// carrying its reason Code; the first refusal ends the chain.
//
// The checks are pure functions of the request, the caller's identity, the
// site's Settings and a read view of committed state (a Chain's View);
// they propose nothing. Submit, SubmitBatch (Chain.Submit for each
// request), DAG submit (Chain.Stage per stage, then Chain.Authorize) and
// Update (Chain.Walltime, Chain.QOS, Chain.RaisePriority) share them. The
// gRPC layer maps a Refusal to a status (Code → gRPC code).
package admission
