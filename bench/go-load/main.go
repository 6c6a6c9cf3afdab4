// Command go-load is oxcd-bench's second load generator: the core request-response
// workloads (put, range, txn-put) driven through Go's clientv3, the client
// Kubernetes and most etcd tools use, so that a figure does not depend on oxcd's own
// Rust client. Built in GOPATH mode over Debian's golang-etcd-server-dev
// (bench/go-load/build.sh); `oxcd-bench compare --go-load <binary>` runs it.
//
// Shape as oxcd-bench's driver: `-clients` goroutines share `-conns` clientv3 clients
// (goroutine i uses client i % conns), take request numbers from one counter until
// `-total`, and time each request. Request n's keys are the same as oxcd-bench's:
// SplitMix64(n) modulo the key space, as zero-padded decimal of `-key-size` bytes.
//
// Output: one JSON object on stdout: the latency of every successful request (µs),
// failures by message, the run's wall time and this process's CPU time (s).
package main

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

type result struct {
	LatenciesUs []float64         `json:"latencies_us"`
	Errors      map[string]uint64 `json:"errors"`
	ElapsedSecs float64           `json:"elapsed_secs"`
	CPUSecs     float64           `json:"cpu_secs"`
}

func mix(n uint64) uint64 {
	z := n + 0x9e3779b97f4a7c15
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

type keys struct {
	size  int
	space uint64
}

func (k keys) key(n uint64) string {
	num := mix(n) % k.space
	dec := fmt.Sprintf("%0*d", k.size, num)
	if len(dec) == k.size {
		return dec
	}
	out := make([]byte, k.size)
	var be [8]byte
	binary.BigEndian.PutUint64(be[:], num)
	copy(out[max(0, k.size-8):], be[max(0, 8-k.size):])
	return string(out)
}

func cpuSecs() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	tv := func(t syscall.Timeval) float64 { return float64(t.Sec) + float64(t.Usec)/1e6 }
	return tv(ru.Utime) + tv(ru.Stime)
}

func main() {
	endpoints := flag.String("endpoints", "127.0.0.1:2379", "comma-separated endpoints")
	workload := flag.String("workload", "put", "put, range or txn-put")
	clients := flag.Int("clients", 1, "concurrent requests")
	conns := flag.Int("conns", 1, "clientv3 clients (one gRPC connection each)")
	total := flag.Uint64("total", 1000, "requests in all")
	keySize := flag.Int("key-size", 8, "key size in bytes")
	valSize := flag.Int("val-size", 256, "value size in bytes")
	keySpace := flag.Uint64("key-space-size", 100000, "distinct keys written")
	txnOps := flag.Uint64("txn-ops", 4, "puts per txn (txn-put)")
	rangeKey := flag.String("range-key", "bench-range-key", "the key ranged over (range)")
	consistency := flag.String("consistency", "l", "l (linearizable) or s (serializable)")
	timeout := flag.Duration("request-timeout", 30*time.Second, "per request")
	flag.Parse()

	eps := strings.Split(*endpoints, ",")
	cs := make([]*clientv3.Client, 0, *conns)
	for i := 0; i < max(1, *conns); i++ {
		// Client i starts at endpoint i, so the connections spread over the members as
		// oxcd-bench's do (clientv3 picks the first endpoint it reaches).
		rot := append(append([]string{}, eps[i%len(eps):]...), eps[:i%len(eps)]...)
		c, err := clientv3.New(clientv3.Config{
			Endpoints:   rot,
			DialTimeout: 10 * time.Second,
			Logger:      zap.NewNop(),
		})
		if err != nil {
			fmt.Fprintf(os.Stderr, "go-load: connecting to %v: %v\n", rot, err)
			os.Exit(2)
		}
		defer c.Close()
		cs = append(cs, c)
	}
	k := keys{size: *keySize, space: max(1, *keySpace)}
	value := strings.Repeat("v", *valSize)
	var issue func(n uint64, c *clientv3.Client, ctx context.Context) error
	switch *workload {
	case "put":
		issue = func(n uint64, c *clientv3.Client, ctx context.Context) error {
			_, err := c.Put(ctx, k.key(n), value)
			return err
		}
	case "range":
		var opts []clientv3.OpOption
		switch *consistency {
		case "s", "S":
			opts = append(opts, clientv3.WithSerializable())
		case "l", "L":
		default:
			fmt.Fprintf(os.Stderr, "go-load: consistency must be l or s, not %q\n", *consistency)
			os.Exit(2)
		}
		issue = func(n uint64, c *clientv3.Client, ctx context.Context) error {
			_, err := c.Get(ctx, *rangeKey, opts...)
			return err
		}
	case "txn-put":
		ops := max(1, *txnOps)
		issue = func(n uint64, c *clientv3.Client, ctx context.Context) error {
			seen := map[string]bool{}
			var puts []clientv3.Op
			for i := n * ops; i < n*ops+ops; i++ {
				key := k.key(i)
				if !seen[key] { // etcd refuses a txn that puts one key twice
					seen[key] = true
					puts = append(puts, clientv3.OpPut(key, value))
				}
			}
			_, err := c.Txn(ctx).Then(puts...).Commit()
			return err
		}
	default:
		fmt.Fprintf(os.Stderr, "go-load: unknown workload %q\n", *workload)
		os.Exit(2)
	}

	var next atomic.Uint64
	var mu sync.Mutex
	out := result{Errors: map[string]uint64{}}
	var wg sync.WaitGroup
	cpu0 := cpuSecs()
	start := time.Now()
	for g := 0; g < max(1, *clients); g++ {
		wg.Add(1)
		go func(c *clientv3.Client) {
			defer wg.Done()
			lat := make([]float64, 0, *total/uint64(max(1, *clients))+1)
			errs := map[string]uint64{}
			for {
				n := next.Add(1) - 1
				if n >= *total {
					break
				}
				ctx, cancel := context.WithTimeout(context.Background(), *timeout)
				t := time.Now()
				err := issue(n, c, ctx)
				d := time.Since(t)
				cancel()
				if err != nil {
					errs[err.Error()]++
				} else {
					lat = append(lat, float64(d.Nanoseconds())/1e3)
				}
			}
			mu.Lock()
			out.LatenciesUs = append(out.LatenciesUs, lat...)
			for e, n := range errs {
				out.Errors[e] += n
			}
			mu.Unlock()
		}(cs[g%len(cs)])
	}
	wg.Wait()
	out.ElapsedSecs = time.Since(start).Seconds()
	out.CPUSecs = cpuSecs() - cpu0
	if err := json.NewEncoder(os.Stdout).Encode(out); err != nil {
		fmt.Fprintf(os.Stderr, "go-load: writing the result: %v\n", err)
		os.Exit(1)
	}
}
