// Package computefake is a simulated Compute Engine for tests, replays and
// `autoheal simulate`: an httptest server speaking the Compute Engine v1 REST
// protocol, so the real google.golang.org/api/compute/v1 client talks to it
// unchanged. It keeps a fleet of TPU VM instances and zonal managed instance
// groups in memory, runs every mutating call as a zone operation that ends on
// the server's (virtual) clock, repairs the instances of its managed instance
// groups, plays the platform's part (host errors, Spot preemption,
// maintenance, a person's stop or delete, each with its audit log entry), and
// injects faults: error codes, hangs, lost answers, malformed bodies, calls
// that fail and still take effect (now or later), operations that end in
// error with or without their effect, capacity errors, read lag and paging
// anomalies, chosen per call or drawn from a seed so a run replays exactly.
//
// Requests are served under /compute/v1/, as on compute.googleapis.com: the
// generated client appends "projects/…" to its base path, so an endpoint must
// be given as URL+"/compute/v1/" (with the trailing slash; without it the
// client resolves "projects/…" against "/compute/" and the fake answers 404
// naming the path it expected). Service and ClientOptions do that.
//
// It implements what a TPU-VM backend calls: instances get, list (filter on
// labels, name and status; paging), aggregatedList, insert, delete, start,
// stop, setMetadata, setLabels, performMaintenance, getGuestAttributes and
// reportHostAsFaulty; zoneOperations get and wait; instanceGroupManagers
// get, listManagedInstances and recreateInstances. Anything else is answered
// 501 naming the path. It must never reach the network beyond its own
// loopback listener, and nothing outside tests, replay and simulate may
// depend on it.
//
// Why google.golang.org/api/compute/v1 and not cloud.google.com/go/compute/apiv1:
// the project already depends on the google.golang.org/api module (the TPU v2
// client comes from it), so the REST client adds no module; its requests and
// resources are the documented REST ones (the same JSON a fleet file, gcloud
// --format=json and the audit log's request/response carry), which this fake
// serves with an httptest server as the TPU fake does; and the apiv1 client,
// although it also speaks REST to Compute Engine, wraps the same calls in
// protobuf types and its own operation type, which would make the fake and
// the fleet files translate between the two. Nothing is lost: both clients
// reach the same methods, reportHostAsFaulty included.
package computefake
