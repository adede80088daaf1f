// weft_bench_idle_conns_go: SC7's server in Go, the peer a Go user would
// write: net.Listen on 127.0.0.1, a goroutine per connection, and before
// every Read a 60 s read deadline (SetReadDeadline); what arrives is
// written back whole, then it reads again. It ends on end of stream, an
// error or the deadline. The read buffer is allocated per connection
// (make([]byte, -buf), 4096 by default: the same size as weft's server's
// stack buffer). GOMAXPROCS and GOGC are the caller's (sc7.py: GOMAXPROCS=1,
// GOGC unset).
//
// -shape real (SC9, issue 43) serves each connection the way a real Go
// server does instead: a bufio.Reader and a bufio.Writer of 16 KiB each, the
// read deadline before every fill, and one pending time.AfterFunc (an idle
// timer of 300 s, Reset on every request, that would close the connection):
// what arrives is written back through the writer and flushed.
//
// It raises its RLIMIT_NOFILE soft limit to the hard limit (Go 1.19 and
// later do so at start-up anyway). Prints "runtime <go version> ..." and
// "listening on <port>" when ready; exits after -max-seconds.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"net"
	"os"
	"runtime"
	"syscall"
	"time"
)

var readTimeout time.Duration

func session(c net.Conn, size int) {
	defer c.Close()
	buf := make([]byte, size)
	for {
		if err := c.SetReadDeadline(time.Now().Add(readTimeout)); err != nil {
			return
		}
		n, err := c.Read(buf)
		if n > 0 {
			if _, werr := c.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func realSession(c net.Conn) {
	defer c.Close()
	r := bufio.NewReaderSize(c, 16*1024)
	w := bufio.NewWriterSize(c, 16*1024)
	idle := time.AfterFunc(300*time.Second, func() { c.Close() })
	defer idle.Stop()
	for {
		if err := c.SetReadDeadline(time.Now().Add(readTimeout)); err != nil {
			return
		}
		if _, err := r.Peek(1); err != nil {
			return
		}
		idle.Reset(300 * time.Second)
		b, _ := r.Peek(r.Buffered())
		if _, err := w.Write(b); err != nil {
			return
		}
		r.Discard(len(b))
		if err := w.Flush(); err != nil {
			return
		}
	}
}

func main() {
	port := flag.Int("port", 0, "TCP port on 127.0.0.1 (0: any free port)")
	size := flag.Int("buf", 4096, "read buffer per connection, bytes")
	timeout := flag.Int("read-timeout", 60, "read deadline, seconds")
	maxSeconds := flag.Int("max-seconds", 3600, "exit after this many seconds")
	shape := flag.String("shape", "bare", "bare: a read buffer per connection; real: bufio 16 KiB each way and an idle timer")
	flag.Parse()
	if *shape != "bare" && *shape != "real" {
		fmt.Fprintln(os.Stderr, "idle_conns_go: -shape is bare or real")
		os.Exit(2)
	}
	if *size <= 0 || *size > 1<<20 || *timeout <= 0 || *maxSeconds <= 0 {
		fmt.Fprintln(os.Stderr, "idle_conns_go: bad -buf, -read-timeout or -max-seconds")
		os.Exit(2)
	}
	readTimeout = time.Duration(*timeout) * time.Second
	time.AfterFunc(time.Duration(*maxSeconds)*time.Second, func() { os.Exit(0) })

	var rl syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl) == nil && rl.Cur < rl.Max {
		rl.Cur = rl.Max
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
			fmt.Fprintln(os.Stderr, "idle_conns_go: setrlimit:", err)
		}
	}

	l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", *port))
	if err != nil {
		fmt.Fprintln(os.Stderr, "idle_conns_go:", err)
		os.Exit(1)
	}
	fmt.Printf("runtime %s GOMAXPROCS=%d buf=%d read-timeout=%v shape=%s\n", runtime.Version(), runtime.GOMAXPROCS(0), *size, readTimeout, *shape)
	fmt.Printf("listening on %d\n", l.Addr().(*net.TCPAddr).Port)
	for {
		c, err := l.Accept()
		if err != nil {
			// EMFILE and the like: wait a little and go on.
			time.Sleep(10 * time.Millisecond)
			continue
		}
		if *shape == "real" {
			go realSession(c)
		} else {
			go session(c, *size)
		}
	}
}
