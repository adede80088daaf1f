// weft_bench_loadgen: the R8 echo load generator, one program for every
// server (bench/compare/io/r8.py runs it). Standard library only.
//
// It opens -conns TCP connections to -addr. Every message is -size bytes:
// the first 8 carry a per-connection sequence number (message k of
// connection i carries k ^ i<<40), the rest a per-connection pattern; every
// reply is checked byte for byte against the message of the same sequence
// number, so replies must come back whole and in order.
//
//   - -pipeline 1 (the default), ping-pong: each connection writes a
//     message, reads -size bytes back, checks them, and again (one
//     goroutine per connection, one request in flight).
//   - -pipeline N > 1 (and -pipeline 1 with -size above 64 KiB, where a
//     single goroutine that writes a whole message before it reads could
//     fill both sockets' buffers and stall against a server that writes
//     back as it reads): a writer and a reader goroutine per connection.
//     The writer takes one of N tokens, notes the time and writes the next
//     message (one write per message: the client does not batch); the
//     reader reads each reply in sequence, checks it and gives its token
//     back, so up to N requests are in flight on every connection. The
//     reader waits only on its socket, never on its writer (see pipelined:
//     otherwise Go's scheduler lets one connection's pair run back to back
//     while other connections' replies wait unread). At the end the writer
//     stops, waits for all its tokens (every reply read) and wakes the
//     reader with a read deadline in the past.
//
// Latency of a request: from just before its message is written to its
// reply's last byte read (with -pipeline N that includes the time it waits
// behind the requests before it on its connection). The first -warmup is
// not recorded; then for -duration (or until -max-requests replies):
//
//   - "completed": replies whose last byte arrived inside the window (what
//     rps is computed from, and what the driver divides CPU time by);
//   - "requests": the requests that started and ended inside the window
//     (their latencies are the percentiles).
//
// Stdout: "measure-start" when the window opens, "measure-end" when it
// closes (the driver samples the server's CPU time at these two lines),
// then one JSON line:
//
//	{"rps":..,"p50_us":..,"p99_us":..,"requests":..,"completed":..,"errors":..,...}
//
// Every loop is bounded: the window by -duration and -max-requests, each
// socket operation by a deadline (-io-timeout past the window), every wait
// of one goroutine on the other by that goroutine's end, and the whole
// program by a watchdog. Exit status 1 if any connection failed (connect,
// read, write, short or wrong echo) or nothing was measured.
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
	Completed  int64   `json:"completed"`
	Errors     int64   `json:"errors"`
	Conns      int     `json:"conns"`
	Size       int     `json:"size"`
	Pipeline   int     `json:"pipeline"`
	Mode       string  `json:"mode"`
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

// shared is what every connection's goroutines report into.
type shared struct {
	phase       int32 // phaseWarmup, phaseMeasure, phaseStop
	completed   int64 // replies completed inside the window
	maxRequests int64
	capCh       chan struct{}
	capOnce     sync.Once
	errors      int64
	firstErr    atomic.Value
}

func (g *shared) fail(err error) {
	atomic.AddInt64(&g.errors, 1)
	g.firstErr.CompareAndSwap(nil, err.Error())
}

// done records one reply completed; p0 is the phase when its request
// started. It returns true when the request's latency is to be kept.
func (g *shared) done(p0 int32) bool {
	if atomic.LoadInt32(&g.phase) != phaseMeasure {
		return false
	}
	if atomic.AddInt64(&g.completed, 1) >= g.maxRequests {
		g.capOnce.Do(func() { close(g.capCh) })
	}
	return p0 == phaseMeasure
}

// conn is one connection's buffers and checks.
type conn struct {
	i       int
	c       net.Conn
	size    int
	pattern []byte // the message without its sequence number
}

func newConn(i int, c net.Conn, size int) *conn {
	p := make([]byte, size)
	for k := range p {
		p[k] = byte('a' + (i+k)%26)
	}
	return &conn{i: i, c: c, size: size, pattern: p}
}

func (k *conn) tag(seq uint64) uint64 { return seq ^ uint64(k.i)<<40 }

// fill writes message seq into out.
func (k *conn) fill(out []byte, seq uint64) {
	copy(out, k.pattern)
	if k.size >= 8 {
		binary.LittleEndian.PutUint64(out, k.tag(seq))
	}
}

// check says whether in is message seq.
func (k *conn) check(in []byte, seq uint64) error {
	if k.size >= 8 {
		if got := binary.LittleEndian.Uint64(in); got != k.tag(seq) {
			return fmt.Errorf("conn %d: reply %d carries sequence tag %#x, want %#x (out of order, lost or corrupted)",
				k.i, seq, got, k.tag(seq))
		}
		if !bytes.Equal(in[8:], k.pattern[8:]) {
			return fmt.Errorf("conn %d: reply %d differs from what was sent", k.i, seq)
		}
		return nil
	}
	if !bytes.Equal(in, k.pattern) {
		return fmt.Errorf("conn %d: reply %d differs from what was sent", k.i, seq)
	}
	return nil
}

// pingPong: one goroutine, one request in flight.
func (k *conn) pingPong(g *shared) []int64 {
	out := make([]byte, k.size)
	in := make([]byte, k.size)
	var samples []int64
	for seq := uint64(0); ; seq++ {
		p0 := atomic.LoadInt32(&g.phase)
		if p0 == phaseStop {
			break
		}
		k.fill(out, seq)
		t0 := time.Now()
		if _, err := k.c.Write(out); err != nil {
			g.fail(fmt.Errorf("conn %d write: %w", k.i, err))
			return samples
		}
		if _, err := io.ReadFull(k.c, in); err != nil {
			g.fail(fmt.Errorf("conn %d read: %w", k.i, err))
			return samples
		}
		d := time.Since(t0)
		if err := k.check(in, seq); err != nil {
			g.fail(err)
			return samples
		}
		if g.done(p0) {
			samples = append(samples, int64(d))
		}
	}
	return samples
}

type started struct {
	t0 time.Time
	p0 int32
}

// pipelined: a writer and a reader goroutine, depth requests in flight.
//
// The reader only ever waits on the socket (never on the writer): a reader
// woken by a channel send from its own writer would run next on the Go
// scheduler, and one connection's pair could then pass the processor back
// and forth while the other connections' replies wait unread.
func (k *conn) pipelined(g *shared, depth int) []int64 {
	slots := make(chan struct{}, depth) // a token per request that may start
	for j := 0; j < depth; j++ {
		slots <- struct{}{}
	}
	sent := make(chan started, depth) // requests written, not yet read back
	quit := make(chan struct{})       // closed at the connection's failure
	drained := make(chan struct{})    // closed once the writer stopped and every reply is in
	writerDone := make(chan struct{})
	var failOnce sync.Once
	// The first failure of either side is this connection's one error; it
	// closes the socket, which ends the other side's socket call.
	failConn := func(err error) {
		failOnce.Do(func() {
			g.fail(err)
			close(quit)
			k.c.Close()
		})
	}

	go func() { // the writer
		defer close(writerDone)
		out := make([]byte, k.size)
		held := 0 // tokens taken and not spent on a request
		for seq := uint64(0); ; seq++ {
			select {
			case <-slots:
				held++
			case <-quit:
				return
			}
			p0 := atomic.LoadInt32(&g.phase)
			if p0 == phaseStop {
				break
			}
			k.fill(out, seq)
			sent <- started{time.Now(), p0} // never blocks: at most depth unread
			held--
			if _, err := k.c.Write(out); err != nil {
				failConn(fmt.Errorf("conn %d write: %w", k.i, err))
				return
			}
		}
		// Stopped: every token back means every reply read; then the
		// reader, waiting for a reply that will not come, is woken by a
		// read deadline in the past.
		for held < depth {
			select {
			case <-slots:
				held++
			case <-quit:
				return
			}
		}
		close(drained)
		k.c.SetReadDeadline(time.Now())
	}()

	in := make([]byte, k.size)
	var samples []int64
	for seq := uint64(0); ; seq++ {
		n, err := io.ReadFull(k.c, in)
		if err != nil {
			if n == 0 {
				select {
				case <-drained: // the end: every reply is in
					<-writerDone
					return samples
				default:
				}
			}
			failConn(fmt.Errorf("conn %d read: %w", k.i, err))
			break
		}
		var s started
		select {
		case s = <-sent: // queued before the message was written
		default:
			failConn(fmt.Errorf("conn %d: reply %d came before its request was written", k.i, seq))
		}
		if s.t0.IsZero() {
			break
		}
		d := time.Since(s.t0)
		if err := k.check(in, seq); err != nil {
			failConn(err)
			break
		}
		if g.done(s.p0) {
			samples = append(samples, int64(d))
		}
		slots <- struct{}{} // never blocks: one token per request read
	}
	<-writerDone // ends: quit is closed and so is the socket
	return samples
}

func main() {
	addr := flag.String("addr", "127.0.0.1:9000", "server address (loopback)")
	conns := flag.Int("conns", 50, "connections")
	size := flag.Int("size", 64, "message size in bytes")
	pipeline := flag.Int("pipeline", 1, "requests in flight per connection (1: ping-pong)")
	duration := flag.Duration("duration", 3*time.Second, "measured window (at most 60s)")
	warmup := flag.Duration("warmup", 500*time.Millisecond, "unrecorded traffic before the window (at most 10s)")
	maxRequests := flag.Int64("max-requests", 50_000_000, "end the window early after this many replies")
	ioTimeout := flag.Duration("io-timeout", 5*time.Second, "how long a socket operation may wait past the window's end")
	connectTimeout := flag.Duration("connect-timeout", 5*time.Second, "per-connection dial timeout")
	flag.Parse()

	if *conns < 1 || *conns > 100000 || *size < 1 || *size > 1<<20 || *pipeline < 1 || *pipeline > 1024 {
		fmt.Fprintln(os.Stderr, "loadgen: -conns must be 1..100000, -size 1..1048576 and -pipeline 1..1024")
		os.Exit(2)
	}
	if *duration <= 0 || *duration > 60*time.Second || *warmup < 0 || *warmup > 10*time.Second || *maxRequests < 1 {
		fmt.Fprintln(os.Stderr, "loadgen: -duration must be in (0, 60s], -warmup in [0, 10s], -max-requests >= 1")
		os.Exit(2)
	}
	// Watchdog: whatever happens, the program ends.
	limit := *connectTimeout*2 + *warmup + *duration + 2**ioTimeout + 10*time.Second
	time.AfterFunc(limit, func() {
		fmt.Fprintf(os.Stderr, "loadgen: watchdog: still running after %v, exiting\n", limit)
		os.Exit(3)
	})

	g := &shared{maxRequests: *maxRequests, capCh: make(chan struct{})}

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
					g.fail(err)
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

	mode := "ping-pong"
	if *pipeline > 1 || *size > 64<<10 {
		mode = "pipelined"
	}
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
			k := newConn(i, c, *size)
			if mode == "ping-pong" {
				lat[i] = k.pingPong(g)
			} else {
				lat[i] = k.pipelined(g, *pipeline)
			}
		}(i, c)
	}

	time.Sleep(*warmup)
	cpu0 := cpuSeconds()
	start := time.Now()
	atomic.StoreInt32(&g.phase, phaseMeasure)
	fmt.Println("measure-start")
	capReached := false
	select {
	case <-time.After(*duration):
	case <-g.capCh:
		capReached = true
	}
	atomic.StoreInt32(&g.phase, phaseStop)
	window := time.Since(start)
	cpu1 := cpuSeconds()
	fmt.Println("measure-end")
	wg.Wait()
	// Every reply counted saw the window open when it completed.
	completed := atomic.LoadInt64(&g.completed)

	var all []int64
	for _, s := range lat {
		all = append(all, s...)
	}
	sort.Slice(all, func(a, b int) bool { return all[a] < all[b] })
	r := result{
		RPS:        float64(completed) / window.Seconds(),
		P50us:      percentile(all, 0.50),
		P99us:      percentile(all, 0.99),
		P999us:     percentile(all, 0.999),
		Requests:   int64(len(all)),
		Completed:  completed,
		Errors:     atomic.LoadInt64(&g.errors),
		Conns:      *conns,
		Size:       *size,
		Pipeline:   *pipeline,
		Mode:       mode,
		WindowS:    window.Seconds(),
		ClientCPUS: cpu1 - cpu0,
		Connected:  connected,
		CapReached: capReached,
	}
	if len(all) > 0 {
		r.MaxUs = float64(all[len(all)-1]) / 1e3
	}
	if v := g.firstErr.Load(); v != nil {
		r.FirstError = v.(string)
	}
	b, _ := json.Marshal(r)
	fmt.Println(string(b))
	if r.Errors > 0 || r.Requests == 0 {
		os.Exit(1)
	}
}
