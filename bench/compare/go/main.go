// weft_bench_go: the Go peer of the weft report (bench/compare/report.py),
// with the same command line and JSON-lines output as weft_bench_report.
// Run it with GOMAXPROCS=1 (the driver does): every figure is single-thread.
//
//	weft_bench_go --scenario NAME --candidate go-chan|go-gosched --count N [--rounds R] [--target-ms T]
//	weft_bench_go --m1 --candidate go --count N
//
// go-chan: each goroutine owns a pair of unbuffered channels; a resume is
// "send on in, receive on out" (two transfers of control). create = make
// the channels and the go statement; entry = the first handshake (the
// goroutine's first scheduling); destroy = close(in) and wait for the
// goroutine to close out and exit.
// go-gosched: N goroutines and main all loop on runtime.Gosched(); each
// call is one transfer of control. Only the switch figure.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// state is the 64-byte piece of state each goroutine owns and touches.
type state [8]uint64

var sink uint64

func touch(s *state) {
	for i := range s {
		s[i]++
	}
	if s[0] == 0 { // never: keeps the stores
		sink = s[1]
	}
}

func emit(scenario, candidate, metric string, value float64, unit string) {
	fmt.Printf("{\"scenario\":%q,\"candidate\":%q,\"metric\":%q,\"value\":%g,\"unit\":%q}\n",
		scenario, candidate, metric, value, unit)
}

type co struct {
	in, out chan struct{}
}

func chanBody(c *co) {
	var s state
	for range c.in {
		touch(&s)
		c.out <- struct{}{}
	}
	close(c.out)
}

func clockOverhead() float64 {
	d := make([]int64, 2001)
	for i := range d {
		a := time.Now()
		d[i] = int64(time.Since(a))
	}
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	return float64(d[1000])
}

func runChan(scenario string, n, rounds int, targetMs float64) {
	ovh := clockOverhead()
	cs := make([]co, n)
	per := func(d time.Duration) float64 {
		v := float64(d) - ovh
		if v < 0 {
			v = 0
		}
		return v / float64(n)
	}
	create := func() {
		for i := range cs {
			cs[i].in = make(chan struct{})
			cs[i].out = make(chan struct{})
			go chanBody(&cs[i])
		}
	}
	resume := func(i int) {
		cs[i].in <- struct{}{}
		<-cs[i].out
	}
	destroy := func() {
		for i := range cs {
			close(cs[i].in)
			<-cs[i].out
		}
	}
	var warm [3]float64
	for r := 0; r < rounds; r++ {
		t0 := time.Now()
		create()
		t1 := time.Now()
		for i := range cs {
			resume(i)
		}
		t2 := time.Now()
		destroy()
		t3 := time.Now()
		v := [3]float64{per(t1.Sub(t0)), per(t2.Sub(t1)), per(t3.Sub(t2))}
		if r == 0 {
			emit(scenario, "go-chan", "create_cold", v[0], "ns")
			emit(scenario, "go-chan", "entry_cold", v[1], "ns")
			emit(scenario, "go-chan", "destroy_cold", v[2], "ns")
		} else {
			for j := range v {
				warm[j] += v[j]
			}
		}
	}
	if rounds > 1 {
		w := float64(rounds - 1)
		emit(scenario, "go-chan", "create_warm", warm[0]/w, "ns")
		emit(scenario, "go-chan", "entry_warm", warm[1]/w, "ns")
		emit(scenario, "go-chan", "destroy_warm", warm[2]/w, "ns")
	}
	create()
	for i := range cs {
		resume(i)
	}
	pass := func(passes int) time.Duration {
		t0 := time.Now()
		for p := 0; p < passes; p++ {
			for i := range cs {
				resume(i)
			}
		}
		return time.Since(t0)
	}
	pass(1)
	passes := 1
	t := pass(passes)
	for float64(t) < targetMs*1e5 {
		passes *= 2
		t = pass(passes)
	}
	passes = int(float64(passes) * targetMs * 1e6 / float64(t))
	if passes < 1 {
		passes = 1
	}
	t = pass(passes)
	emit(scenario, "go-chan", "switch", float64(t)/(float64(passes)*float64(n)*2), "ns")
	destroy()
}

// gosched runs n goroutines and main, each calling runtime.Gosched() k
// times (main) or until stopped (the others); returns the time of main's k
// calls, during which k*(n+1) switches happen.
func gosched(n, k int) time.Duration {
	var stop atomic.Bool
	var wg sync.WaitGroup
	start := make(chan struct{})
	wg.Add(n)
	for i := 0; i < n; i++ {
		go func() {
			defer wg.Done()
			var s state
			<-start
			for !stop.Load() {
				touch(&s)
				runtime.Gosched()
			}
		}()
	}
	close(start)
	runtime.Gosched() // let them all reach their loops
	t0 := time.Now()
	for i := 0; i < k; i++ {
		runtime.Gosched()
	}
	t := time.Since(t0)
	stop.Store(true)
	wg.Wait()
	return t
}

func runGosched(scenario string, n int, targetMs float64) {
	gosched(n, 2)
	k := 1
	t := gosched(n, k)
	for float64(t) < targetMs*1e5 {
		k *= 2
		t = gosched(n, k)
	}
	k = int(float64(k) * targetMs * 1e6 / float64(t))
	if k < 1 {
		k = 1
	}
	t = gosched(n, k)
	emit(scenario, "go-gosched", "switch", float64(t)/(float64(k)*float64(n+1)), "ns")
}

func statusKiB(key string) float64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return -1
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, key+":") {
			fields := strings.Fields(line[len(key)+1:])
			if len(fields) > 0 {
				v, _ := strconv.ParseFloat(fields[0], 64)
				return v
			}
		}
	}
	return -1
}

// m1 parks n goroutines, each with ~100 bytes of live locals (its 64-byte
// state and 40 bytes more), on a channel receive.
func m1(n int) {
	base := statusKiB("VmRSS")
	block := make(chan uint64)
	var wg sync.WaitGroup
	wg.Add(n)
	for i := 0; i < n; i++ {
		go func() {
			var s state
			var extra [5]uint64
			touch(&s)
			extra[0] = s[0]
			wg.Done()
			v := <-block
			s[1] += v + extra[0]
			sink = s[1]
		}()
	}
	wg.Wait()
	hwm := statusKiB("VmHWM")
	bytes := (hwm - base) * 1024
	emit("M1", "go", "m1_peak_rss", bytes, "bytes")
	emit("M1", "go", "m1_bytes_per_coroutine", bytes/float64(n), "bytes")
	emit("M1", "go", "m1_baseline_rss", base*1024, "bytes")
	os.Stdout.Sync()
	os.Exit(0)
}

func main() {
	scenario := flag.String("scenario", "", "scenario name")
	isM1 := flag.Bool("m1", false, "M1: memory per parked goroutine")
	list := flag.Bool("list", false, "print the candidates")
	candidate := flag.String("candidate", "go-chan", "go-chan, go-gosched (scenarios) or go (M1)")
	count := flag.Int("count", 1, "goroutines")
	rounds := flag.Int("rounds", 2, "lifecycle rounds (the first is cold)")
	targetMs := flag.Float64("target-ms", 50, "time spent on switch passes")
	flag.Int("stack", 0, "ignored: goroutine stacks grow on demand")
	flag.Parse()
	switch {
	case *list:
		fmt.Printf("{\"go\":%q,\"candidates\":[\"go-chan\",\"go-gosched\"]}\n", runtime.Version())
	case *isM1:
		m1(*count)
	case *scenario != "" && *candidate == "go-chan":
		runChan(*scenario, *count, *rounds, *targetMs)
	case *scenario != "" && *candidate == "go-gosched":
		runGosched(*scenario, *count, *targetMs)
	default:
		fmt.Fprintln(os.Stderr, "usage: weft_bench_go --scenario NAME --candidate go-chan|go-gosched --count N | --m1 --count N")
		os.Exit(2)
	}
}
