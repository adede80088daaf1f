// weft_bench_resp_go: the Go peer of R9 (bench/compare/io/r9.py), a small
// Redis-compatible server built the way weft's examples/17_redis_server.cpp
// is, so that redis-benchmark can drive both:
//
//   - a goroutine per connection, a bufio.Reader and a bufio.Writer of
//     16 KiB each, TCP_NODELAY on (Go's default for TCP);
//   - the same RESP2 subset with the same replies, byte for byte: PING [msg],
//     ECHO msg, GET k, SET k v [EX s | PX ms], DEL k..., INCR k, EXPIRE k s,
//     TTL k, DBSIZE, COMMAND (an empty array), CONFIG GET p, QUIT; inline
//     commands split at spaces and tabs; the same protocol errors, after
//     which the connection is closed;
//   - pipelining: every command already buffered is answered into the
//     writer, which is flushed only when the reader is about to wait for the
//     socket, so a batch of N pipelined commands costs one write;
//   - a keyspace of 16 shards, each a map under its own sync.Mutex, never
//     held across IO; expiry is lazy (a command that finds an expired key
//     erases it) plus one sweeper goroutine that wakes every 100 ms and looks
//     at a bounded number of entries per shard (no timer per key). Go maps
//     have no bucket cursor; a range over a map starts at a random place, so
//     each sweep looks at up to 64 entries per shard from a random start;
//   - the same limits: a line of at most 64 KiB, at most 1M arguments, a
//     command's arguments at most -max-bulk bytes in all; a command, once
//     begun, has 30 s to arrive and a reply 30 s to be written (deadlines
//     are renewed at most once a second, so that they cost no timer update
//     per request); an idle connection is never closed unless
//     -idle-timeout is set.
//
// Flags: -port P (127.0.0.1; 0: any free port), -max-bulk BYTES,
// -idle-timeout SECONDS, -max-seconds S (exits 1 after S seconds without a
// signal: a bound for a forgotten server), -version. GOMAXPROCS comes from
// the environment (Go's default: every CPU). Prints "listening on PORT" once
// ready. SIGTERM or SIGINT: stop accepting, wake idle connections, wait up
// to 5 s for the rest, print "shutdown: N commands served", exit 0.
// Standard library only.
package main

import (
	"bufio"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"hash/maphash"
	"io"
	"math"
	"net"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

const (
	bufSize     = 16 << 10
	maxLine     = 64 << 10
	maxArgs     = 1 << 20
	maxArgBytes = 512 << 20
	ioTimeout   = 30 * time.Second
	sweepEvery  = 100 * time.Millisecond
	sweepPer    = 64
)

var (
	maxBulk     int64 = 64 << 20
	idleTimeout time.Duration
	commands    int64
	epoch       = time.Now()
)

// now is monotonic nanoseconds since the start (never 0: 0 means "no expiry").
func now() int64 { return int64(time.Since(epoch)) + 1 }

// ---- the keyspace ----------------------------------------------------------

type entry struct {
	value   string
	expires int64 // 0: no expiry
}

func (e *entry) expired(t int64) bool { return e.expires != 0 && e.expires <= t }

type shard struct {
	mu   sync.Mutex
	keys map[string]*entry
}

type keyspace struct {
	seed   maphash.Seed
	shards [16]shard
}

func newKeyspace() *keyspace {
	k := &keyspace{seed: maphash.MakeSeed()}
	for i := range k.shards {
		k.shards[i].keys = make(map[string]*entry)
	}
	return k
}

func (k *keyspace) shard(key []byte) *shard {
	return &k.shards[maphash.Bytes(k.seed, key)%uint64(len(k.shards))]
}

// live is the key's entry, or nil if absent or expired (then erased now: the
// lazy half of expiry). Called with the shard's lock held.
func (s *shard) live(key []byte, t int64) *entry {
	e, ok := s.keys[string(key)]
	if !ok {
		return nil
	}
	if e.expired(t) {
		delete(s.keys, string(key))
		return nil
	}
	return e
}

// sweep is the active half of expiry: bounded work per shard per call.
func (k *keyspace) sweep() {
	for i := range k.shards {
		s := &k.shards[i]
		s.mu.Lock()
		t := now()
		n := 0
		for key, e := range s.keys { // deleting during a range is allowed
			if e.expired(t) {
				delete(s.keys, key)
			}
			if n++; n >= sweepPer {
				break
			}
		}
		s.mu.Unlock()
	}
}

func (k *keyspace) size() int64 { // DBSIZE: keys not yet erased, expired or not
	var n int64
	for i := range k.shards {
		s := &k.shards[i]
		s.mu.Lock()
		n += int64(len(s.keys))
		s.mu.Unlock()
	}
	return n
}

// ---- one connection --------------------------------------------------------

var (
	errProtocol = errors.New("protocol error")
	errClosed   = errors.New("closed")
)

type conn struct {
	nc   net.Conn
	ks   *keyspace
	r    *bufio.Reader
	w    *bufio.Writer
	err  error  // the first write error
	why  string // a protocol error's reason
	long []byte // a line longer than the reader's buffer, put together here
	// arg bytes of the current command, and where each argument is in it
	arena []byte
	spans [][2]int
	args  [][]byte
	num   []byte
	// deadlines: the read deadline in force (0: none) and when the write
	// deadline was last renewed
	readDL  time.Time
	writeDL time.Time
}

func (c *conn) raw(b []byte) {
	if c.err == nil {
		_, c.err = c.w.Write(b)
	}
}
func (c *conn) str(s string) {
	if c.err == nil {
		_, c.err = c.w.WriteString(s)
	}
}
func (c *conn) simple(t string) { c.str("+"); c.str(t); c.str("\r\n") }
func (c *conn) error(t string)  { c.str("-"); c.str(t); c.str("\r\n") }
func (c *conn) integer(v int64) {
	c.num = strconv.AppendInt(append(c.num[:0], ':'), v, 10)
	c.num = append(c.num, '\r', '\n')
	c.raw(c.num)
}
func (c *conn) bulk(b []byte) {
	c.num = append(c.num[:0], '$')
	c.num = strconv.AppendInt(c.num, int64(len(b)), 10)
	c.num = append(c.num, '\r', '\n')
	c.raw(c.num)
	c.raw(b)
	c.str("\r\n")
}
func (c *conn) bulkString(s string) {
	c.num = append(c.num[:0], '$')
	c.num = strconv.AppendInt(c.num, int64(len(s)), 10)
	c.num = append(c.num, '\r', '\n')
	c.raw(c.num)
	c.str(s)
	c.str("\r\n")
}
func (c *conn) nil_() { c.str("$-1\r\n") }

func (c *conn) flush() bool {
	if c.err == nil && c.w.Buffered() > 0 {
		t := time.Now()
		if t.Sub(c.writeDL) > time.Second { // a reply has 30 s (at least 29) to go out
			c.nc.SetWriteDeadline(t.Add(ioTimeout))
			c.writeDL = t
		}
		c.err = c.w.Flush()
	}
	return c.err == nil
}

// willWait is called before a read that may wait for the socket: the
// replies go out first (the pipelining rule), and the read deadline is
// the idle one between commands, 30 s inside one.
func (c *conn) willWait(idle bool) bool {
	if !c.flush() {
		return false
	}
	var want time.Time
	if idle {
		if idleTimeout > 0 {
			want = time.Now().Add(idleTimeout)
		}
	} else {
		want = time.Now().Add(ioTimeout)
		if !c.readDL.IsZero() && want.Sub(c.readDL) < time.Second {
			return true // renewed less than a second ago
		}
	}
	if want != c.readDL {
		c.nc.SetReadDeadline(want)
		c.readDL = want
	}
	return true
}

func (c *conn) bad(why string) error {
	c.why = why
	return errProtocol
}

// line reads one line, "\r\n" or "\n" stripped; the result is valid until
// the next read.
func (c *conn) line(first bool) ([]byte, error) {
	if b, _ := c.r.Peek(c.r.Buffered()); bytes.IndexByte(b, '\n') < 0 {
		if !c.willWait(first && len(b) == 0) {
			return nil, errClosed
		}
	}
	l, err := c.r.ReadSlice('\n')
	if err == bufio.ErrBufferFull {
		c.long = append(c.long[:0], l...)
		for err == bufio.ErrBufferFull {
			if len(c.long) > maxLine {
				return nil, c.bad("too big inline request")
			}
			if !c.willWait(false) {
				return nil, errClosed
			}
			l, err = c.r.ReadSlice('\n')
			c.long = append(c.long, l...)
		}
		l = c.long
	}
	if len(l) > maxLine && err == nil {
		return nil, c.bad("too big inline request")
	}
	if err != nil {
		return nil, errClosed // closed, broken, or cut off
	}
	l = l[:len(l)-1]
	if len(l) > 0 && l[len(l)-1] == '\r' {
		l = l[:len(l)-1]
	}
	return l, nil
}

// parseInt: all of s, decimal, an optional '-', no '+', within int64
// (weft's parse_int, std::from_chars). By hand: strconv.ParseInt would want
// a string, and one that ends up in its error escapes to the heap.
func parseInt(s []byte) (int64, bool) {
	if len(s) == 0 || len(s) > 20 {
		return 0, false
	}
	neg := s[0] == '-'
	if neg {
		s = s[1:]
		if len(s) == 0 {
			return 0, false
		}
	}
	var u uint64
	for _, ch := range s {
		if ch < '0' || ch > '9' {
			return 0, false
		}
		if u > (1<<63)/10 {
			return 0, false
		}
		u = u*10 + uint64(ch-'0')
		if u > 1<<63 {
			return 0, false
		}
	}
	if neg {
		return -int64(u), true // -(1<<63) wraps to itself: math.MinInt64
	}
	if u > math.MaxInt64 {
		return 0, false
	}
	return int64(u), true
}

// argument reads a bulk string of n bytes and its "\r\n" into the arena, in
// steps of at most 1 MiB (a client announcing 64 MiB and sending nothing has
// not made the server allocate 64 MiB).
func (c *conn) argument(n int) error {
	if c.r.Buffered() < n+2 && !c.willWait(false) {
		return errClosed
	}
	start := len(c.arena)
	for got := 0; got < n; {
		step := n - got
		if step > 1<<20 {
			step = 1 << 20
		}
		at := len(c.arena)
		if cap(c.arena)-at < step {
			grown := make([]byte, at, 2*cap(c.arena)+step)
			copy(grown, c.arena)
			c.arena = grown
		}
		c.arena = c.arena[:at+step]
		if _, err := io.ReadFull(c.r, c.arena[at:]); err != nil {
			return errClosed
		}
		got += step
	}
	var crlf [2]byte
	if _, err := io.ReadFull(c.r, crlf[:]); err != nil {
		return errClosed
	}
	if crlf[0] != '\r' || crlf[1] != '\n' {
		return c.bad("expected CRLF after a bulk string")
	}
	c.spans = append(c.spans, [2]int{start, len(c.arena)})
	return nil
}

// command reads the next command into c.args (empty: nothing to do).
func (c *conn) command() error {
	c.arena, c.spans = c.arena[:0], c.spans[:0]
	defer func() {
		c.args = c.args[:0]
		for _, s := range c.spans {
			c.args = append(c.args, c.arena[s[0]:s[1]:s[1]])
		}
	}()
	l, err := c.line(true)
	if err != nil {
		return err
	}
	if len(l) == 0 || l[0] != '*' { // inline: words separated by spaces or tabs
		for i := 0; i < len(l); {
			j := i
			for j < len(l) && l[j] != ' ' && l[j] != '\t' {
				j++
			}
			if j > i {
				start := len(c.arena)
				c.arena = append(c.arena, l[i:j]...)
				c.spans = append(c.spans, [2]int{start, len(c.arena)})
			}
			i = j + 1
		}
		return nil
	}
	n, ok := parseInt(l[1:])
	if !ok || n > maxArgs {
		return c.bad("invalid multibulk length")
	}
	var total int64
	for i := int64(0); i < n; i++ {
		if l, err = c.line(false); err != nil {
			return err
		}
		if len(l) == 0 || l[0] != '$' {
			got := ""
			if len(l) > 0 {
				got = string(l[:1])
			}
			return c.bad("expected '$', got '" + got + "'")
		}
		size, ok := parseInt(l[1:])
		if !ok || size < 0 || size > maxArgBytes {
			return c.bad("invalid bulk length")
		}
		if total += size; total > maxBulk {
			return c.bad("request larger than --max-bulk " + strconv.FormatInt(maxBulk, 10) + " bytes")
		}
		if err = c.argument(int(size)); err != nil {
			return err
		}
	}
	return nil
}

// ---- the commands ----------------------------------------------------------

func upper(b []byte, into []byte) []byte {
	into = into[:0]
	for _, ch := range b {
		if 'a' <= ch && ch <= 'z' {
			ch -= 'a' - 'A'
		}
		into = append(into, ch)
	}
	return into
}

// expireAt: false if the amount is beyond about 31 years.
func expireAt(amount int64, millis bool, t int64) (int64, bool) {
	limit := int64(1_000_000_000_000)
	if !millis {
		limit /= 1000
	}
	if amount > limit {
		return 0, false
	}
	if millis {
		return t + amount*int64(time.Millisecond), true
	}
	return t + amount*int64(time.Second), true
}

func (c *conn) execute(a [][]byte) (quit bool) {
	var nameBuf, optBuf [16]byte
	name := a[0]
	if len(name) <= len(nameBuf) {
		name = upper(name, nameBuf[:0])
	} else {
		name = nil // longer than any command: unknown
	}
	n := len(a)
	arity := func(ok bool) bool {
		if !ok {
			c.error("ERR wrong number of arguments for '" + string(a[0]) + "' command")
		}
		return ok
	}
	ks := c.ks
	switch string(name) {
	case "PING":
		if arity(n <= 2) {
			if n == 1 {
				c.simple("PONG")
			} else {
				c.bulk(a[1])
			}
		}
	case "ECHO":
		if arity(n == 2) {
			c.bulk(a[1])
		}
	case "GET":
		if !arity(n == 2) {
			return
		}
		s := ks.shard(a[1])
		s.mu.Lock()
		var value string
		e := s.live(a[1], now())
		if e != nil {
			value = e.value
		}
		s.mu.Unlock()
		if e != nil {
			c.bulkString(value)
		} else {
			c.nil_()
		}
	case "SET":
		if !arity(n >= 3) {
			return
		}
		var at int64
		var opt []byte
		if n == 5 && len(a[3]) == 2 {
			opt = upper(a[3], optBuf[:0])
		}
		if string(opt) == "EX" || string(opt) == "PX" {
			v, ok := parseInt(a[4])
			if ok && v > 0 {
				at, ok = expireAt(v, string(opt) == "PX", now())
			}
			if !ok || v <= 0 {
				c.error("ERR invalid expire time in 'set' command")
				return
			}
		} else if n != 3 {
			c.error("ERR syntax error")
			return
		}
		s := ks.shard(a[1])
		s.mu.Lock()
		if e, ok := s.keys[string(a[1])]; ok { // the entry is reused, expired or not
			e.value, e.expires = string(a[2]), at
		} else {
			s.keys[string(a[1])] = &entry{value: string(a[2]), expires: at}
		}
		s.mu.Unlock()
		c.simple("OK")
	case "DEL":
		if !arity(n >= 2) {
			return
		}
		var v int64
		for _, k := range a[1:] { // each key atomically; not all of them at once
			s := ks.shard(k)
			s.mu.Lock()
			if s.live(k, now()) != nil {
				delete(s.keys, string(k))
				v++
			}
			s.mu.Unlock()
		}
		c.integer(v)
	case "INCR":
		if !arity(n == 2) {
			return
		}
		var v int64
		errText := ""
		s := ks.shard(a[1])
		s.mu.Lock()
		e := s.live(a[1], now())
		ok := true
		if e != nil {
			v, ok = parseInt([]byte(e.value))
		}
		switch {
		case !ok:
			errText = "ERR value is not an integer or out of range"
		case v == math.MaxInt64:
			errText = "ERR increment or decrement would overflow"
		default:
			v++
			if e != nil {
				e.value = strconv.FormatInt(v, 10) // the expiry stays, as in Redis
			} else {
				s.keys[string(a[1])] = &entry{value: strconv.FormatInt(v, 10)}
			}
		}
		s.mu.Unlock()
		if errText != "" {
			c.error(errText)
		} else {
			c.integer(v)
		}
	case "EXPIRE":
		if !arity(n == 3) {
			return
		}
		v, ok := parseInt(a[2])
		if !ok {
			c.error("ERR value is not an integer or out of range")
			return
		}
		var at int64
		if v > 0 {
			if at, ok = expireAt(v, false, now()); !ok {
				c.error("ERR invalid expire time in 'expire' command")
				return
			}
		}
		s := ks.shard(a[1])
		s.mu.Lock()
		e := s.live(a[1], now())
		if e != nil && v <= 0 {
			delete(s.keys, string(a[1])) // an expiry in the past deletes the key
		} else if e != nil {
			e.expires = at
		}
		s.mu.Unlock()
		if e != nil {
			c.integer(1)
		} else {
			c.integer(0)
		}
	case "TTL":
		if !arity(n == 2) {
			return
		}
		s := ks.shard(a[1])
		s.mu.Lock()
		t := now()
		var ttl int64
		if e := s.live(a[1], t); e == nil {
			ttl = -2
		} else if e.expires == 0 {
			ttl = -1
		} else {
			ttl = (e.expires - t + int64(500*time.Millisecond)) / int64(time.Millisecond) / 1000
		}
		s.mu.Unlock()
		c.integer(ttl)
	case "DBSIZE":
		if arity(n == 1) {
			c.integer(ks.size())
		}
	case "COMMAND":
		c.str("*0\r\n") // no command table; clients cope
	case "CONFIG":
		// redis-benchmark asks for "save" and "appendonly": answered as a
		// server without persistence; other parameters are unknown (empty).
		if n != 3 || len(a[1]) != 3 || string(upper(a[1], optBuf[:0])) != "GET" {
			c.error("ERR only CONFIG GET parameter is supported")
		} else if string(a[2]) == "save" {
			c.str("*2\r\n")
			c.bulkString("save")
			c.bulkString("")
		} else if string(a[2]) == "appendonly" {
			c.str("*2\r\n")
			c.bulkString("appendonly")
			c.bulkString("no")
		} else {
			c.str("*0\r\n")
		}
	case "QUIT":
		c.simple("OK")
		return true
	default:
		c.error("ERR unknown command '" + string(a[0]) + "'")
	}
	return false
}

// serve reads a command, answers it, until the client leaves, a protocol
// error, QUIT, an idle timeout or the shutdown; replies are flushed whenever
// the reader runs dry.
func serve(nc net.Conn, ks *keyspace) {
	defer nc.Close()
	c := &conn{nc: nc, ks: ks, r: bufio.NewReaderSize(nc, bufSize), w: bufio.NewWriterSize(nc, bufSize)}
	for c.err == nil {
		if err := c.command(); err != nil {
			break
		}
		if len(c.args) == 0 {
			continue
		}
		quit := c.execute(c.args)
		atomic.AddInt64(&commands, 1)
		if quit {
			break
		}
	}
	if c.why != "" {
		c.error("ERR Protocol error: " + c.why)
	}
	c.flush()
}

// ---- the server ------------------------------------------------------------

type registry struct {
	mu       sync.Mutex
	conns    map[net.Conn]struct{}
	stopping bool
	wg       sync.WaitGroup
}

func main() {
	port := flag.Int("port", 0, "TCP port on 127.0.0.1 (0: any free port)")
	flag.Int64Var(&maxBulk, "max-bulk", maxBulk, "most bytes of arguments in one command")
	idle := flag.Int64("idle-timeout", 0, "close a connection idle this many seconds (0: never)")
	maxSeconds := flag.Int("max-seconds", 3600, "exit (status 1) after this many seconds without a signal")
	version := flag.Bool("version", false, "print the Go version this was built with and exit")
	flag.Parse()
	if *version {
		fmt.Println(runtime.Version())
		return
	}
	if maxBulk <= 0 || *idle < 0 {
		fmt.Fprintln(os.Stderr, "resp_go: -max-bulk must be positive, -idle-timeout not negative")
		os.Exit(2)
	}
	idleTimeout = time.Duration(*idle) * time.Second
	time.AfterFunc(time.Duration(*maxSeconds)*time.Second, func() {
		fmt.Fprintln(os.Stderr, "resp_go: -max-seconds passed without a signal")
		os.Exit(1)
	})
	stop := make(chan os.Signal, 1) // made before anything can send the signal
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)

	l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", *port))
	if err != nil {
		fmt.Fprintln(os.Stderr, "resp_go:", err)
		os.Exit(1)
	}
	ks := newKeyspace()
	done := make(chan struct{})
	go func() { // the sweeper
		t := time.NewTicker(sweepEvery)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				ks.sweep()
			}
		}
	}()

	reg := &registry{conns: make(map[net.Conn]struct{})}
	go func() {
		for {
			nc, err := l.Accept()
			if err != nil {
				if ne, ok := err.(net.Error); ok && ne.Timeout() {
					continue
				}
				if errors.Is(err, net.ErrClosed) {
					return
				}
				time.Sleep(10 * time.Millisecond) // EMFILE and the like
				continue
			}
			reg.mu.Lock()
			if reg.stopping {
				reg.mu.Unlock()
				nc.Close()
				continue
			}
			reg.conns[nc] = struct{}{}
			reg.wg.Add(1)
			reg.mu.Unlock()
			go func() {
				serve(nc, ks)
				reg.mu.Lock()
				delete(reg.conns, nc)
				reg.mu.Unlock()
				reg.wg.Done()
			}()
		}
	}()
	fmt.Printf("listening on %d\n", l.Addr().(*net.TCPAddr).Port)
	os.Stdout.Sync()

	sig := <-stop
	fmt.Printf("signal %d: stopping\n", sig)
	l.Close()
	close(done)
	reg.mu.Lock()
	reg.stopping = true
	for nc := range reg.conns { // wakes the idle readers; the connections end
		nc.SetReadDeadline(time.Now())
	}
	reg.mu.Unlock()
	finished := make(chan struct{})
	go func() { reg.wg.Wait(); close(finished) }()
	select {
	case <-finished:
	case <-time.After(5 * time.Second):
	}
	fmt.Printf("shutdown: %d commands served\n", atomic.LoadInt64(&commands))
}
