package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"regexp"

	"cloud.google.com/go/pubsub/v2"

	"github.com/tpu-autoheal/autoheal/internal/events"
)

const publishHelp = `Usage: autoheal publish --topic projects/P/topics/T FILE... | -
       autoheal publish --topic projects/P/topics/T --sweep

Publishes log entries to the function's Pub/Sub topic, one message per entry,
exactly as the log sink would (the LogEntry JSON; Pub/Sub push bodies and
CloudEvents are unwrapped first), so the deployed function reacts to them.
Input forms are those of replay. Entries the function will reject are
published anyway, with a warning. --sweep publishes the sweep message Cloud
Scheduler sends instead. Waits for every publish and prints one message id
per line, in input order. Uses Application Default Credentials, or the
emulator named by PUBSUB_EMULATOR_HOST.

` + exitCodesHelp + `
Flags:
`

var topicName = regexp.MustCompile(`^projects/([^/]+)/topics/([^/]+)$`)

func runPublish(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := newFlagSet("publish", publishHelp, stderr)
	topic := fs.String("topic", "", "the topic, projects/`P`/topics/T")
	sweep := fs.Bool("sweep", false, "publish the sweep message instead of entries")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	m := topicName.FindStringSubmatch(*topic)
	if m == nil {
		return usagef("--topic %q: want projects/PROJECT/topics/TOPIC", *topic)
	}
	var src *fileSource
	if *sweep {
		if fs.NArg() > 0 {
			return usagef("--sweep publishes no entries: give no FILE arguments (got %q)", fs.Args())
		}
	} else {
		var err error
		if src, err = openInputs(fs.Args(), stdin, events.Options{}); err != nil {
			return err
		}
		defer src.Close()
	}

	client, err := pubsub.NewClient(ctx, m[1])
	if err != nil {
		return setupf("pubsub client for %s (Application Default Credentials, or PUBSUB_EMULATOR_HOST): %v", *topic, err)
	}
	defer client.Close()
	pub := client.Publisher(*topic)
	defer pub.Stop()

	var results []*pubsub.PublishResult
	if *sweep {
		results = append(results, pub.Publish(ctx, &pubsub.Message{Data: []byte(events.SweepMessage)}))
	} else {
		for {
			it, err := src.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return fmt.Errorf("read %s: %w", it.name, err)
			}
			msg, warn := messageOf(it.Item)
			if warn != "" {
				at := it.at
				if at == "" {
					at = fmt.Sprintf("%s entry %d", it.name, it.Index+1)
				}
				fmt.Fprintf(stderr, "%s: %s\n", at, warn)
			}
			if msg == nil {
				continue
			}
			results = append(results, pub.Publish(ctx, msg))
		}
	}
	var failed int
	for i, r := range results {
		id, err := r.Get(ctx)
		if err != nil {
			failed++
			fmt.Fprintf(stderr, "message %d: publish to %s: %v\n", i+1, *topic, err)
			continue
		}
		fmt.Fprintln(stdout, id)
	}
	if failed > 0 {
		return fmt.Errorf("%d of %s not published to %s", failed, plural(len(results), "message", "messages"), *topic)
	}
	fmt.Fprintf(stderr, "published %s to %s\n", plural(len(results), "message", "messages"), *topic)
	return nil
}

// messageOf is the message the log sink would publish for the entry: the
// LogEntry JSON, envelope stripped (its attributes kept). It returns a
// warning for entries the function will reject, and a nil message for an
// empty one, which Pub/Sub does not accept.
func messageOf(it events.Item) (*pubsub.Message, string) {
	data, attrs := it.Data, map[string]string(nil)
	if payload, a, err := events.Unwrap(it.Data); err == nil {
		data, attrs = payload, a
	}
	if len(data) == 0 {
		return nil, "empty entry: not published"
	}
	warn := ""
	if it.Err != nil {
		warn = fmt.Sprintf("published, but the function will reject it (%s): %v", rejectCode(it.Err), it.Err)
	}
	return &pubsub.Message{Data: data, Attributes: attrs}, warn
}

// plural is "1 message", "2 messages".
func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}
