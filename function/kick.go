package function

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"cloud.google.com/go/pubsub/v2"
	"google.golang.org/api/option"

	"github.com/tpu-autoheal/autoheal/internal/events"
	"github.com/tpu-autoheal/autoheal/internal/remediate"
)

// KickEvent is jsonPayload.event of the diagnostic lines about follow
// kicks (published, or not): remediate's, which writes them.
const KickEvent = remediate.KickEvent

// Kicker publishes a follow kick (events.FollowKick(nonce), the nonce kept
// in the ledger first: control.go) to the events topic, so that the push subscription delivers it to a function instance,
// which then follows the unfinished recoveries (remediate.Handler.Follow).
type Kicker interface {
	Kick(ctx context.Context, nonce string) error
}

// WithKicker uses k for follow kicks instead of the Pub/Sub publisher that
// AUTOHEAL_KICK_TOPIC would build (tests). Kicks are published only when
// AUTOHEAL_SWEEP_FOLLOW is above zero: a follow run follows for that long.
func WithKicker(k Kicker) Option { return func(d *deps) { d.kicker = k } }

// WithPubSubOptions passes client options to the Pub/Sub client the kicks
// are published with.
func WithPubSubOptions(opts ...option.ClientOption) Option {
	return func(d *deps) { d.pubsub = append(d.pubsub, opts...) }
}

// pubsubKicker publishes kicks to one topic. Its client is built on the
// first kick, not in New: an instance that never kicks never opens a
// Pub/Sub connection, and a client that could not be built is tried again
// on the next kick (the error is the kick's, logged, never the delivery's).
type pubsubKicker struct {
	topic   string // projects/P/topics/T
	project string
	opts    []option.ClientOption

	mu     sync.Mutex
	client *pubsub.Client
	pub    *pubsub.Publisher
}

func newPubSubKicker(topic string, opts []option.ClientOption) *pubsubKicker {
	// topic is valid (Config.Validate): projects/P/topics/T.
	project := strings.Split(topic, "/")[1]
	return &pubsubKicker{topic: topic, project: project, opts: opts}
}

func (k *pubsubKicker) publisher(ctx context.Context) (*pubsub.Publisher, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.pub != nil {
		return k.pub, nil
	}
	c, err := pubsub.NewClient(context.WithoutCancel(ctx), k.project, k.opts...)
	if err != nil {
		return nil, fmt.Errorf("pubsub client for %s: %w", k.topic, err)
	}
	k.client, k.pub = c, c.Publisher(k.topic)
	// One kick at a time: send it now rather than batch for 10 ms.
	k.pub.PublishSettings.CountThreshold = 1
	return k.pub, nil
}

// Kick implements Kicker.
func (k *pubsubKicker) Kick(ctx context.Context, nonce string) error {
	pub, err := k.publisher(ctx)
	if err != nil {
		return err
	}
	// rest: pubsub.projects.topics.publish
	if _, err := pub.Publish(ctx, &pubsub.Message{Data: []byte(events.FollowKick(nonce))}).Get(ctx); err != nil {
		return fmt.Errorf("publish to %s: %w", k.topic, err)
	}
	return nil
}

// Close stops the publisher and closes the client, when they were built.
func (k *pubsubKicker) Close() error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.pub == nil {
		return nil
	}
	k.pub.Stop()
	err := k.client.Close()
	k.pub, k.client = nil, nil
	return err
}

// nonceKicker is the engine's Kicker (remediate.Deps.Kicker): it keeps a
// fresh nonce in the ledger (control.go), then publishes the kick carrying
// it. The kick policy (when to kick, the claim, what a failure does) is the
// engine's (remediate/kick.go).
type nonceKicker struct {
	f *Function
	k Kicker
}

func (n nonceKicker) Kick(ctx context.Context) error {
	nonce, err := n.f.issueNonce(ctx)
	if err != nil {
		return err
	}
	return n.k.Kick(ctx, nonce)
}

// handleFollow answers a follow kick: it follows the unfinished recoveries
// for up to SweepFollow under the follower lease, and chains one more kick
// when its window ended with looks still due. It never fails: a follow
// message is always acknowledged, never redelivered into the dead-letter
// topic (the minute sweep covers whatever it could not do).
func (f *Function) handleFollow(ctx context.Context) {
	res, err := f.handler.Follow(ctx, f.follow)
	if err != nil {
		f.diag.Warn("follow failed; the next sweep follows instead", "event", KickEvent, "records", len(res.Records), "error", err.Error())
	} else if res.Followed {
		f.diag.Info(fmt.Sprintf("follow: %d records", len(res.Records)), "event", KickEvent, "records", len(res.Records), "chain", res.Chain)
	}
	f.handler.KickChain(ctx, res.Chain)
}
