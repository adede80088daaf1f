// weft_bench_http_go: the Go peer of the HTTP row (bench/compare/io/http.py),
// the server a Go user would write next to weft's HTTP example
// (examples/16_http_server.cpp): net/http, the same four routes with the
// same bodies, a second in-process TCP service behind /backend, graceful
// shutdown on SIGTERM or SIGINT. Standard library only.
//
//	/         "hello from weft\n" (weft's body, byte for byte: the same bytes go out)
//	/sleep    sleeps 50 ms, "slept 50 ms\n"
//	/fanout   10 goroutines each add up a tenth of 0 .. 99,999 (each yields
//	          once, runtime.Gosched, as weft's subtasks do), a sync.WaitGroup
//	          waits for them: "fanout sum 4999950000\n"
//	/backend  dials the backend, writes "ping\n", reads a line (the backend
//	          answers each line in capitals): "backend said PING\n"
//	other     404, "no route for PATH\n"
//
// Flags: --port P (127.0.0.1; 0: any free port), --procs N (GOMAXPROCS,
// default 1), --max-seconds S (exits 1 after S seconds if no signal came: a
// bound for a forgotten server), --version (prints runtime.Version()).
// Prints "listening on PORT" once ready; on SIGTERM or SIGINT it stops
// accepting, lets requests in flight finish (http.Server.Shutdown, 5 s),
// prints "shutdown: N requests served" and exits 0.
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

var served int64

// backend answers each line it reads with the line in capitals.
func backend(l net.Listener) {
	for {
		c, err := l.Accept()
		if err != nil {
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				continue
			}
			return // closed: stopping
		}
		go func(c net.Conn) {
			defer c.Close()
			in := bufio.NewReader(c)
			for {
				_ = c.SetDeadline(time.Now().Add(5 * time.Second))
				line, err := in.ReadString('\n')
				if err != nil {
					return
				}
				if _, err := c.Write([]byte(strings.ToUpper(line))); err != nil {
					return
				}
			}
		}(c)
	}
}

func askBackend(addr string) (string, error) {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write([]byte("ping\n")); err != nil {
		return "", err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return "", err
	}
	return strings.TrimSuffix(line, "\n"), nil
}

func fanOut() int64 {
	var part [10]int64
	var wg sync.WaitGroup
	for i := 0; i < 10; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			var sum int64
			for v := int64(i) * 10000; v < int64(i+1)*10000; v++ {
				sum += v
			}
			runtime.Gosched() // let the others interleave (weft's subtasks yield once)
			part[i] = sum
		}(i)
	}
	wg.Wait()
	var total int64
	for _, p := range part {
		total += p
	}
	return total
}

func reply(w http.ResponseWriter, code int, body string) {
	atomic.AddInt64(&served, 1)
	w.Header().Set("Content-Type", "text/plain")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(code)
	_, _ = w.Write([]byte(body))
}

func main() {
	port := flag.Int("port", 0, "TCP port on 127.0.0.1 (0: any free port)")
	procs := flag.Int("procs", 1, "GOMAXPROCS")
	maxSeconds := flag.Int("max-seconds", 3600, "exit (status 1) after this many seconds without a signal")
	version := flag.Bool("version", false, "print the Go version this was built with and exit")
	flag.Parse()
	if *version {
		fmt.Println(runtime.Version())
		return
	}
	if *procs < 1 {
		fmt.Fprintln(os.Stderr, "http_go: --procs must be at least 1")
		os.Exit(2)
	}
	runtime.GOMAXPROCS(*procs)
	time.AfterFunc(time.Duration(*maxSeconds)*time.Second, func() {
		fmt.Fprintln(os.Stderr, "http_go: --max-seconds passed without a signal")
		os.Exit(1)
	})

	// Made before anything can send the signal.
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)

	bl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, "http_go: backend:", err)
		os.Exit(1)
	}
	go backend(bl)
	backendAddr := bl.Addr().String()

	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/" {
			reply(w, http.StatusNotFound, "no route for "+r.URL.Path+"\n")
			return
		}
		reply(w, http.StatusOK, "hello from weft\n")
	})
	mux.HandleFunc("/sleep", func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(50 * time.Millisecond)
		reply(w, http.StatusOK, "slept 50 ms\n")
	})
	mux.HandleFunc("/fanout", func(w http.ResponseWriter, r *http.Request) {
		reply(w, http.StatusOK, "fanout sum "+strconv.FormatInt(fanOut(), 10)+"\n")
	})
	mux.HandleFunc("/backend", func(w http.ResponseWriter, r *http.Request) {
		answer, err := askBackend(backendAddr)
		if err != nil {
			reply(w, http.StatusBadGateway, "backend failed: "+err.Error()+"\n")
			return
		}
		reply(w, http.StatusOK, "backend said "+answer+"\n")
	})

	l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", *port))
	if err != nil {
		fmt.Fprintln(os.Stderr, "http_go:", err)
		os.Exit(1)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 60 * time.Second}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(l) }()
	fmt.Printf("listening on %d\n", l.Addr().(*net.TCPAddr).Port)

	select {
	case sig := <-stop:
		fmt.Printf("signal %d: stopping\n", sig)
	case err := <-done:
		fmt.Fprintln(os.Stderr, "http_go: serve:", err)
		os.Exit(1)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err = srv.Shutdown(ctx) // closes the listener and idle connections, waits for the busy ones
	_ = bl.Close()
	fmt.Printf("shutdown: %d requests served\n", atomic.LoadInt64(&served))
	if err != nil {
		fmt.Fprintln(os.Stderr, "http_go: shutdown:", err)
		os.Exit(1)
	}
}
