// weft_bench_echo_go: the R8 echo server in Go, the peer a Go user would
// write: net.Listen, a goroutine per connection, a plain read / write loop
// on a 16 KiB buffer (what arrives is written back whole). GOMAXPROCS is
// set by the caller (bench/compare/io/r8.py: the server's core count).
//
// Prints "listening on <port>" when ready; exits after -max-seconds.
package main

import (
	"flag"
	"fmt"
	"net"
	"os"
	"time"
)

func session(c net.Conn) {
	defer c.Close()
	buf := make([]byte, 16<<10)
	for {
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

func main() {
	port := flag.Int("port", 0, "TCP port on 127.0.0.1 (0: any free port)")
	maxSeconds := flag.Int("max-seconds", 3600, "exit after this many seconds")
	flag.Parse()
	time.AfterFunc(time.Duration(*maxSeconds)*time.Second, func() { os.Exit(0) })

	l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", *port))
	if err != nil {
		fmt.Fprintln(os.Stderr, "echo_go:", err)
		os.Exit(1)
	}
	fmt.Printf("listening on %d\n", l.Addr().(*net.TCPAddr).Port)
	for {
		c, err := l.Accept()
		if err != nil {
			// EMFILE and the like: wait a little and go on.
			time.Sleep(10 * time.Millisecond)
			continue
		}
		go session(c)
	}
}
