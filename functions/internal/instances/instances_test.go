package instances

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
)

// TestFrontOneRequestPerInstance: however many requests arrive at once, no
// instance ever handles two at a time, and every request is answered by one.
func TestFrontOneRequestPerInstance(t *testing.T) {
	const instances, requests = 3, 60
	var (
		mu       sync.Mutex
		inFlight = map[int]int{}
		overlap  atomic.Bool
		served   = map[int]int{}
	)
	var backends []*url.URL
	for i := range instances {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			inFlight[i]++
			if inFlight[i] > 1 {
				overlap.Store(true)
			}
			served[i]++
			mu.Unlock()
			io.Copy(io.Discard, r.Body)
			fmt.Fprint(w, i)
			mu.Lock()
			inFlight[i]--
			mu.Unlock()
		}))
		t.Cleanup(srv.Close)
		u, _ := url.Parse(srv.URL)
		backends = append(backends, u)
	}
	front := httptest.NewServer(Front(backends))
	t.Cleanup(front.Close)

	var wg sync.WaitGroup
	var failed atomic.Int32
	for range requests {
		wg.Go(func() {
			resp, err := http.Post(front.URL+"/incrementPostCount", "application/protobuf", nil)
			if err != nil || resp.StatusCode != http.StatusOK {
				failed.Add(1)
				return
			}
			resp.Body.Close()
		})
	}
	wg.Wait()
	if n := failed.Load(); n != 0 {
		t.Fatalf("%d of %d requests failed", n, requests)
	}
	if overlap.Load() {
		t.Fatal("an instance handled two requests at once")
	}
	total := 0
	for _, n := range served {
		total += n
	}
	if total != requests {
		t.Fatalf("instances served %d requests, want %d", total, requests)
	}
}
