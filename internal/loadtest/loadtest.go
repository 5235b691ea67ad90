// Package loadtest posts bursts of deliveries at a local HTTP endpoint the way
// Pub/Sub push does — many at once, and most of them given up on after a few
// milliseconds, as a push subscription does past its ack deadline — and
// reports what went unanswered. Tests use it to show that a server never
// wedges. It sends only to the URL it is given (tests pass loopback URLs),
// and every loop is bounded in count and time.
package loadtest

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"sync"
	"time"
)

// Burst describes one burst of posts.
type Burst struct {
	URL    string
	Bodies [][]byte // posted round robin
	Posts  int      // how many posts in all
	// Parallel posts at once.
	Parallel int
	// Impatient is the share of posts (0..1) whose client gives up after a
	// random 1–10 ms; the others wait up to Patience for their answer.
	Impatient float64
	Patience  time.Duration
}

// Result is what a burst saw.
type Result struct {
	Posts, Answered, GaveUp int
	// Unanswered are the patient posts that got no answer within Patience:
	// each one is a wedge.
	Unanswered []string
	Statuses   map[int]int
}

// Run posts the burst and returns when every post has been answered or given
// up on.
func Run(ctx context.Context, b Burst) Result {
	res := Result{Posts: b.Posts, Statuses: map[int]int{}}
	var mu sync.Mutex
	next := make(chan int)
	var wg sync.WaitGroup
	// Impatient posts never share a connection with the others: a client
	// that gives up mid-request can poison the connection it was on, and a
	// later request reusing it would fail through no fault of the server.
	transport := &http.Transport{MaxIdleConnsPerHost: b.Parallel}
	defer transport.CloseIdleConnections()
	impatientTransport := &http.Transport{DisableKeepAlives: true}
	defer impatientTransport.CloseIdleConnections()
	for w := 0; w < b.Parallel; w++ {
		wg.Add(1)
		go func(seed uint64) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, 7))
			for i := range next {
				impatient := rng.Float64() < b.Impatient
				timeout, tr := b.Patience, transport
				if impatient {
					timeout, tr = time.Duration(1+rng.IntN(10))*time.Millisecond, impatientTransport
				}
				code, err := post(ctx, tr, b.URL, b.Bodies[i%len(b.Bodies)], timeout)
				mu.Lock()
				switch {
				case err == nil:
					res.Answered++
					res.Statuses[code]++
				case impatient:
					res.GaveUp++
				default:
					res.Unanswered = append(res.Unanswered, fmt.Sprintf("post %d: %v", i, err))
				}
				mu.Unlock()
			}
		}(uint64(w))
	}
	for i := 0; i < b.Posts; i++ {
		select {
		case next <- i:
		case <-ctx.Done():
			i = b.Posts
		}
	}
	close(next)
	wg.Wait()
	return res
}

func post(ctx context.Context, tr http.RoundTripper, url string, body []byte, timeout time.Duration) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return 0, err
	}
	return resp.StatusCode, nil
}

// Sequential posts body n times, one after another, each allowed timeout,
// and returns the first failure: the server still answers after a burst.
func Sequential(ctx context.Context, url string, body []byte, n int, timeout time.Duration) error {
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	for i := 0; i < n; i++ {
		if _, err := post(ctx, tr, url, body, timeout); err != nil {
			return fmt.Errorf("sequential post %d of %d after the burst: %w", i+1, n, err)
		}
	}
	return nil
}
