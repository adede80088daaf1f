// weft_bench_loadgen: the R8 echo load generator, one program for every
// server (bench/compare/io/r8.py runs it). Standard library only.
//
// It opens -conns TCP connections to -addr, then each connection does
// ping-pong: write -size bytes, read -size bytes back, check them (the first
// 8 bytes carry a per-connection sequence number, the rest a pattern), and
// again. The first -warmup is not recorded; then for -duration (or until
// -max-requests requests) every request that started and ended inside the
// window is counted and its latency (write start to last byte read) kept.
//
// Stdout: "measure-start" when the window opens, "measure-end" when it
// closes (the driver samples the server's CPU time at these two lines),
// then one JSON line:
//
//	{"rps":..,"p50_us":..,"p99_us":..,"requests":..,"errors":..,...}
//
// Every loop is bounded: the window by -duration and -max-requests, each
// socket operation by a deadline (-io-timeout past the window), and the
// whole program by a watchdog. Exit status 1 if any connection failed
// (connect, read, write, short or wrong echo) or nothing was measured.
package main

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"sort"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

const (
	phaseWarmup  = 0
	phaseMeasure = 1
	phaseStop    = 2
)

type result struct {
	RPS        float64 `json:"rps"`
	P50us      float64 `json:"p50_us"`
	P99us      float64 `json:"p99_us"`
	P999us     float64 `json:"p999_us"`
	MaxUs      float64 `json:"max_us"`
	Requests   int64   `json:"requests"`
	Errors     int64   `json:"errors"`
	Conns      int     `json:"conns"`
	Size       int     `json:"size"`
	WindowS    float64 `json:"window_s"`
	ClientCPUS float64 `json:"client_cpu_s"`
	FirstError string  `json:"first_error,omitempty"`
	Connected  int     `json:"connected"`
	CapReached bool    `json:"cap_reached"`
}

func cpuSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	tv := func(t syscall.Timeval) float64 { return float64(t.Sec) + float64(t.Usec)/1e6 }
	return tv(ru.Utime) + tv(ru.Stime)
}

func percentile(sorted []int64, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	// nearest rank
	k := int(p*float64(len(sorted))+0.999999) - 1
	if k < 0 {
		k = 0
	}
	if k >= len(sorted) {
		k = len(sorted) - 1
	}
	return float64(sorted[k]) / 1e3
}

func main() {
	addr := flag.String("addr", "127.0.0.1:9000", "server address (loopback)")
	conns := flag.Int("conns", 50, "connections")
	size := flag.Int("size", 64, "message size in bytes")
	duration := flag.Duration("duration", 3*time.Second, "measured window (at most 60s)")
	warmup := flag.Duration("warmup", 500*time.Millisecond, "unrecorded ping-pong before the window (at most 10s)")
	maxRequests := flag.Int64("max-requests", 50_000_000, "end the window early after this many requests")
	ioTimeout := flag.Duration("io-timeout", 5*time.Second, "how long a socket operation may wait past the window's end")
	connectTimeout := flag.Duration("connect-timeout", 5*time.Second, "per-connection dial timeout")
	flag.Parse()

	if *conns < 1 || *conns > 100000 || *size < 1 || *size > 1<<20 {
		fmt.Fprintln(os.Stderr, "loadgen: -conns must be 1..100000 and -size 1..1048576")
		os.Exit(2)
	}
	if *duration <= 0 || *duration > 60*time.Second || *warmup < 0 || *warmup > 10*time.Second {
		fmt.Fprintln(os.Stderr, "loadgen: -duration must be in (0, 60s], -warmup in [0, 10s]")
		os.Exit(2)
	}
	// Watchdog: whatever happens, the program ends.
	limit := *connectTimeout*2 + *warmup + *duration + 2**ioTimeout + 10*time.Second
	time.AfterFunc(limit, func() {
		fmt.Fprintf(os.Stderr, "loadgen: watchdog: still running after %v, exiting\n", limit)
		os.Exit(3)
	})

	var errors int64
	var firstErr atomic.Value
	fail := func(err error) {
		atomic.AddInt64(&errors, 1)
		firstErr.CompareAndSwap(nil, err.Error())
	}

	// Connect everything first (in parallel batches of 100, so that 1,000
	// connections do not overflow a small backlog all at once).
	cs := make([]net.Conn, *conns)
	var dialWG sync.WaitGroup
	for i := 0; i < *conns; i += 100 {
		for j := i; j < i+100 && j < *conns; j++ {
			dialWG.Add(1)
			go func(j int) {
				defer dialWG.Done()
				c, err := net.DialTimeout("tcp", *addr, *connectTimeout)
				if err != nil {
					fail(err)
					return
				}
				c.(*net.TCPConn).SetNoDelay(true)
				cs[j] = c
			}(j)
		}
		dialWG.Wait()
	}
	connected := 0
	for _, c := range cs {
		if c != nil {
			connected++
		}
	}

	var phase int32 = phaseWarmup
	var measured int64
	capCh := make(chan struct{})
	var capOnce sync.Once
	lat := make([][]int64, *conns)
	ioDeadline := time.Now().Add(*warmup + *duration + *ioTimeout)

	var wg sync.WaitGroup
	for i, c := range cs {
		if c == nil {
			continue
		}
		wg.Add(1)
		go func(i int, c net.Conn) {
			defer wg.Done()
			defer c.Close()
			c.SetDeadline(ioDeadline)
			out := make([]byte, *size)
			in := make([]byte, *size)
			for k := range out {
				out[k] = byte('a' + (i+k)%26)
			}
			var samples []int64
			for seq := uint64(0); ; seq++ {
				p0 := atomic.LoadInt32(&phase)
				if p0 == phaseStop {
					break
				}
				if *size >= 8 {
					binary.LittleEndian.PutUint64(out, seq^uint64(i)<<40)
				}
				t0 := time.Now()
				if _, err := c.Write(out); err != nil {
					fail(fmt.Errorf("conn %d write: %w", i, err))
					return
				}
				if _, err := io.ReadFull(c, in); err != nil {
					fail(fmt.Errorf("conn %d read: %w", i, err))
					return
				}
				d := time.Since(t0)
				if !bytes.Equal(in, out) {
					fail(fmt.Errorf("conn %d: echo differs from what was sent", i))
					return
				}
				if p0 == phaseMeasure && atomic.LoadInt32(&phase) == phaseMeasure {
					samples = append(samples, int64(d))
					if atomic.AddInt64(&measured, 1) >= *maxRequests {
						capOnce.Do(func() { close(capCh) })
					}
				}
			}
			lat[i] = samples
		}(i, c)
	}

	time.Sleep(*warmup)
	cpu0 := cpuSeconds()
	start := time.Now()
	atomic.StoreInt32(&phase, phaseMeasure)
	fmt.Println("measure-start")
	capReached := false
	select {
	case <-time.After(*duration):
	case <-capCh:
		capReached = true
	}
	atomic.StoreInt32(&phase, phaseStop)
	window := time.Since(start)
	cpu1 := cpuSeconds()
	fmt.Println("measure-end")
	wg.Wait()

	var all []int64
	for _, s := range lat {
		all = append(all, s...)
	}
	sort.Slice(all, func(a, b int) bool { return all[a] < all[b] })
	r := result{
		RPS:        float64(len(all)) / window.Seconds(),
		P50us:      percentile(all, 0.50),
		P99us:      percentile(all, 0.99),
		P999us:     percentile(all, 0.999),
		Requests:   int64(len(all)),
		Errors:     atomic.LoadInt64(&errors),
		Conns:      *conns,
		Size:       *size,
		WindowS:    window.Seconds(),
		ClientCPUS: cpu1 - cpu0,
		Connected:  connected,
		CapReached: capReached,
	}
	if len(all) > 0 {
		r.MaxUs = float64(all[len(all)-1]) / 1e3
	}
	if v := firstErr.Load(); v != nil {
		r.FirstError = v.(string)
	}
	b, _ := json.Marshal(r)
	fmt.Println(string(b))
	if r.Errors > 0 || r.Requests == 0 {
		os.Exit(1)
	}
}
