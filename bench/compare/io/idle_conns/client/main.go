// weft_bench_idle_conns_client: SC7's client (bench/compare/io/idle_conns/
// sc7.py runs one or more of them, each a process of its own: each process
// has the same RLIMIT_NOFILE as the server). Standard library only;
// loopback only (-addr and every -src must be in 127.0.0.0/8).
//
// It opens -count TCP connections to -addr, each bound before connect to
// one of the -src addresses in turn (127.x.y.z, port 0: so that many
// connections fit in the ephemeral ports), at most -dial-concurrency
// connects at a time, and prints one JSON line:
//
//	{"phase":"connected","ok":..,"failed":..,"seconds":..,"first_error":..}
//
// Then it waits for commands on stdin, one a line:
//
//	echo   every connection writes one -size byte message (its index, a
//	       nonce, a pattern), reads it back and checks it: all at once, each
//	       connection in a goroutine of its own; latency is write start to
//	       last byte read. A message whose echo is not back and correct
//	       within -lost-ms is lost (as is one that failed to write, came back
//	       wrong, or whose connection failed); one back later than -late-ms
//	       is late. Prints {"phase":"echo","sent":..,"ok":..,"late":..,
//	       "lost":..,"lat_us":[...],...} (lat_us: every echo that came back).
//	close  closes every connection with SO_LINGER 0 (a reset: no TIME_WAIT
//	       left behind), prints {"phase":"closed"} and exits 0.
//
// End of stdin is "close". Bounded: every connect by -connect-timeout-ms,
// every echo by -lost-ms, the whole program by -max-seconds (a watchdog
// that exits 3).
package main

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

func emit(v interface{}) {
	b, err := json.Marshal(v)
	if err != nil {
		fmt.Fprintln(os.Stderr, "idle_conns_client:", err)
		os.Exit(1)
	}
	os.Stdout.Write(append(b, '\n'))
}

func loopback(ip net.IP) bool {
	v4 := ip.To4()
	return v4 != nil && v4[0] == 127
}

func main() {
	addr := flag.String("addr", "", "server address, 127.x.y.z:port")
	count := flag.Int("count", 1000, "connections to open")
	srcList := flag.String("src", "127.0.0.1", "source addresses (comma-separated, 127.0.0.0/8), used in turn")
	size := flag.Int("size", 64, "message size, bytes (>= 16)")
	lateMs := flag.Int("late-ms", 5000, "an echo later than this is late")
	lostMs := flag.Int("lost-ms", 20000, "an echo not back within this is lost")
	dialConc := flag.Int("dial-concurrency", 64, "connects in flight at a time")
	connectTimeoutMs := flag.Int("connect-timeout-ms", 10000, "bound of one connect")
	maxSeconds := flag.Int("max-seconds", 600, "exit (status 3) after this many seconds")
	flag.Parse()

	if *count < 1 || *count > 200000 || *size < 16 || *size > 65536 || *lateMs < 1 || *lostMs < *lateMs ||
		*dialConc < 1 || *dialConc > 4096 || *connectTimeoutMs < 1 || *maxSeconds < 1 {
		fmt.Fprintln(os.Stderr, "idle_conns_client: bad arguments")
		os.Exit(2)
	}
	raddr, err := net.ResolveTCPAddr("tcp4", *addr)
	if err != nil || !loopback(raddr.IP) {
		fmt.Fprintln(os.Stderr, "idle_conns_client: -addr must be 127.x.y.z:port")
		os.Exit(2)
	}
	var srcs []*net.TCPAddr
	for _, s := range strings.Split(*srcList, ",") {
		ip := net.ParseIP(strings.TrimSpace(s))
		if ip == nil || !loopback(ip) {
			fmt.Fprintf(os.Stderr, "idle_conns_client: -src %q is not in 127.0.0.0/8\n", s)
			os.Exit(2)
		}
		srcs = append(srcs, &net.TCPAddr{IP: ip})
	}
	time.AfterFunc(time.Duration(*maxSeconds)*time.Second, func() {
		fmt.Fprintf(os.Stderr, "idle_conns_client: watchdog: still running after %d s, exiting\n", *maxSeconds)
		os.Exit(3)
	})

	// ---- connect ----
	conns := make([]*net.TCPConn, *count)
	var failed int64
	var firstErr atomic.Value
	start := time.Now()
	var next int64 = -1
	var wg sync.WaitGroup
	for w := 0; w < *dialConc && w < *count; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(atomic.AddInt64(&next, 1))
				if i >= *count {
					return
				}
				d := net.Dialer{LocalAddr: srcs[i%len(srcs)], Timeout: time.Duration(*connectTimeoutMs) * time.Millisecond}
				c, err := d.Dial("tcp4", raddr.String())
				if err != nil {
					atomic.AddInt64(&failed, 1)
					firstErr.CompareAndSwap(nil, err.Error())
					continue
				}
				conns[i] = c.(*net.TCPConn)
			}
		}()
	}
	wg.Wait()
	fe, _ := firstErr.Load().(string)
	emit(map[string]interface{}{"phase": "connected", "ok": int64(*count) - failed, "failed": failed,
		"seconds": time.Since(start).Seconds(), "first_error": fe})

	closeAll := func() {
		for _, c := range conns {
			if c != nil {
				c.SetLinger(0)
				c.Close()
			}
		}
		emit(map[string]string{"phase": "closed"})
	}

	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		switch strings.TrimSpace(in.Text()) {
		case "echo":
			echo(conns, *size, time.Duration(*lateMs)*time.Millisecond, time.Duration(*lostMs)*time.Millisecond)
		case "close":
			closeAll()
			os.Exit(0)
		case "":
		default:
			fmt.Fprintf(os.Stderr, "idle_conns_client: unknown command %q\n", in.Text())
		}
	}
	closeAll()
}

func echo(conns []*net.TCPConn, size int, late, lost time.Duration) {
	nonce := uint64(time.Now().UnixNano())
	lat := make([]int64, len(conns)) // -1: lost
	errs := make([]string, len(conns))
	var sent int64
	var wg sync.WaitGroup
	start := time.Now()
	for i, c := range conns {
		if c == nil {
			lat[i] = -1
			errs[i] = "not connected"
			continue
		}
		wg.Add(1)
		go func(i int, c *net.TCPConn) {
			defer wg.Done()
			msg := make([]byte, size)
			binary.LittleEndian.PutUint64(msg[0:8], uint64(i))
			binary.LittleEndian.PutUint64(msg[8:16], nonce)
			for j := 16; j < size; j++ {
				msg[j] = byte(i + j)
			}
			got := make([]byte, size)
			t0 := time.Now()
			c.SetDeadline(t0.Add(lost))
			if _, err := c.Write(msg); err != nil {
				lat[i], errs[i] = -1, "write: "+err.Error()
				return
			}
			atomic.AddInt64(&sent, 1)
			if _, err := io.ReadFull(c, got); err != nil {
				lat[i], errs[i] = -1, "read: "+err.Error()
				return
			}
			d := time.Since(t0)
			if !bytes.Equal(got, msg) {
				lat[i], errs[i] = -1, "wrong echo"
				return
			}
			lat[i] = d.Microseconds()
		}(i, c)
	}
	wg.Wait()
	var ok, lateN, lostN int64
	var got []int64
	first := ""
	for i, l := range lat {
		if l < 0 {
			lostN++
			if first == "" {
				first = errs[i]
			}
			continue
		}
		ok++
		got = append(got, l)
		if time.Duration(l)*time.Microsecond > late {
			lateN++
		}
	}
	emit(map[string]interface{}{"phase": "echo", "conns": len(conns), "sent": sent, "ok": ok, "late": lateN,
		"lost": lostN, "seconds": time.Since(start).Seconds(), "first_error": first, "lat_us": got})
}
