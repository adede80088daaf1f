// weft_runtime_go: the Go peer of the runtime section of the peer report
// (bench/compare/runtime_report.py, which documents the protocol).
//
//	weft_runtime_go r1|r2|r2s|r3|r3b|r4|r5|r5b|r6|r6s|r7|idle|sc1|sc3|sc4|sc5|sc6|sc10|sc11|sh1|sh2|sh3|sh4 --workers W [--quick]
//	                [--count N] [--idle-ms MS] [--period-ms MS] [--run-ms MS]
//
// (sc1-sc6, sc10, sc11 and sh1-sh4, the scale scenarios: scale.go)
//
// The driver sets GOMAXPROCS=W in the environment; --workers is checked
// against runtime.GOMAXPROCS(0) and echoed in the output. Prints exactly one
// line of JSON on stdout:
//
//	{"scenario":"r1","workers":1,"seconds":...,"ops":...,"per_op_ns":...,"peak_rss_kib":...,"extra":{...}}
//
// (peak_rss_kib: VmHWM of /proc/self/status after the scenario) and exits
// non-zero (message on stderr) if a result does not verify.
//
//	r1   skynet: a 10-ary tree of goroutines, 1,000,000 leaves (quick:
//	     10,000); each inner goroutine starts 10 children and sums what they
//	     send back on its unbuffered channel (the classic skynet benchmark);
//	     leaf i sends i. ops = all goroutines (1,111,111), extra.sum checked.
//	r2   spawn+join: main starts 100,000 goroutines (quick: 10,000), each
//	     stores its index in its own slot and calls wg.Done(); main waits on
//	     the sync.WaitGroup and sums the slots. ops = goroutines.
//	r2s  spawn+join, sequential: main, 1,000,000 times (quick: 10,000),
//	     starts a goroutine that sends i on an unbuffered channel (one
//	     channel, reused: only one child lives at a time) and receives it
//	     at once, adding it to the sum. ops = goroutines.
//	r3   yield ring: 1,000 goroutines (quick: 100) each calling
//	     runtime.Gosched() 1,000 times (quick: 100); main waits on a
//	     WaitGroup. ops = total yields; the time includes starting and
//	     joining the goroutines.
//	r3b  ping-pong hog: a hog goroutine loops {64 xorshift steps; count;
//	     runtime.Gosched()} until stopped, while main and a partner goroutine
//	     exchange a value over two unbuffered channels 1,000,000 times (quick:
//	     10,000). ops = exchanges (round trips), extra.hog_per_exchange = hog
//	     iterations completed during the exchanges / exchanges.
//	r4   channel ping-pong: two goroutines exchange a value over two
//	     unbuffered channels (one each way), 500,000 round trips (quick:
//	     5,000). ops = messages (a send+recv each), 1,000,000 (10,000).
//	r5   buffered channel throughput: one producer, one consumer, a channel
//	     of capacity 1,024, 4,000,000 items (quick: 40,000); the consumer
//	     sums what it receives. ops = items.
//	r5b  the same with four producers and four consumers on one channel.
//	r6   mutex contention: 1,000 goroutines (quick: 100) each lock a
//	     sync.Mutex, increment a shared counter and unlock, 1,000 times
//	     (quick: 100). ops = lock/unlock pairs.
//	r6s  the same with 4 goroutines x 250,000 (quick: 2,500).
//	r7   timers: 1,000,000 goroutines (quick: 10,000) each time.Sleep a
//	     fixed-seed random 10-100 ms and check that the monotonic clock has
//	     passed its deadline on waking. extra: early (count; non-zero exits
//	     1 after printing the line), over_ms (wall time beyond the longest
//	     sleep), cpu_us_per_task (user+sys CPU of the process over the timed
//	     region / tasks).
//	idle nothing to do: main calls time.Sleep(2 s) (quick: 0.2 s);
//	     extra.cpu_percent = (user+sys CPU of the process over the sleep) /
//	     wall time * 100, i.e. % of one core.
package main

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

func die(format string, a ...any) {
	fmt.Fprintf(os.Stderr, "weft_runtime_go: "+format+"\n", a...)
	os.Exit(1)
}

// vmHWM returns the peak resident set size of this process image (VmHWM of
// /proc/self/status, in KiB), or -1. Unlike getrusage's ru_maxrss it does not
// include what the parent had resident when it forked this process.
func vmHWM() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "VmHWM:") {
			f := strings.Fields(line[len("VmHWM:"):])
			if len(f) > 0 {
				if v, err := strconv.ParseInt(f[0], 10, 64); err == nil {
					return v
				}
			}
		}
	}
	return -1
}

func emit(scenario string, workers int, d time.Duration, ops int64, extra string) {
	secs := d.Seconds()
	perOp := "null"
	if ops > 0 {
		perOp = strconv.FormatFloat(float64(d.Nanoseconds())/float64(ops), 'g', 6, 64)
	}
	rt := fmt.Sprintf("\"runtime\":%q", runtime.Version()+" GOMAXPROCS="+strconv.Itoa(runtime.GOMAXPROCS(0)))
	if extra != "" {
		extra = rt + "," + extra
	} else {
		extra = rt
	}
	fmt.Printf("{\"scenario\":%q,\"workers\":%d,\"seconds\":%s,\"ops\":%d,\"per_op_ns\":%s,\"peak_rss_kib\":%d,\"extra\":{%s}}\n",
		scenario, workers, strconv.FormatFloat(secs, 'g', 6, 64), ops, perOp, vmHWM(), extra)
}

// ---- r1: skynet -------------------------------------------------------------

func skynet(c chan int64, num, size, div int64) {
	if size == 1 {
		c <- num
		return
	}
	rc := make(chan int64)
	var sum int64
	for i := int64(0); i < div; i++ {
		sub := num + i*(size/div)
		go skynet(rc, sub, size/div, div)
	}
	for i := int64(0); i < div; i++ {
		sum += <-rc
	}
	c <- sum
}

func r1(workers int, quick bool) {
	leaves := int64(1_000_000)
	if quick {
		leaves = 10_000
	}
	tasks := int64(0)
	for n := leaves; n >= 1; n /= 10 {
		tasks += n
	}
	t0 := time.Now()
	c := make(chan int64)
	go skynet(c, 0, leaves, 10)
	sum := <-c
	d := time.Since(t0)
	if want := leaves * (leaves - 1) / 2; sum != want {
		die("r1: skynet sum %d, want %d", sum, want)
	}
	emit("r1", workers, d, tasks, fmt.Sprintf("\"sum\":%d,\"leaves\":%d", sum, leaves))
}

// ---- r2: spawn + join ----------------------------------------------------------

func r2(workers int, quick bool) {
	n := 100_000
	if quick {
		n = 10_000
	}
	slots := make([]int64, n)
	for i := range slots { // fault the pages in before the clock starts
		slots[i] = -1
	}
	var wg sync.WaitGroup
	t0 := time.Now()
	wg.Add(n)
	for i := 0; i < n; i++ {
		go func(i int) {
			slots[i] = int64(i)
			wg.Done()
		}(i)
	}
	wg.Wait()
	d := time.Since(t0)
	var sum int64
	for _, v := range slots {
		sum += v
	}
	if want := int64(n) * int64(n-1) / 2; sum != want {
		die("r2: sum %d, want %d", sum, want)
	}
	emit("r2", workers, d, int64(n), fmt.Sprintf("\"sum\":%d", sum))
}

// ---- r2s: spawn + join, sequential ---------------------------------------------

func r2s(workers int, quick bool) {
	n := 1_000_000
	if quick {
		n = 10_000
	}
	ch := make(chan int64)
	var sum int64
	t0 := time.Now()
	for i := 0; i < n; i++ {
		go func(i int64) {
			ch <- i
		}(int64(i))
		sum += <-ch
	}
	d := time.Since(t0)
	if want := int64(n) * int64(n-1) / 2; sum != want {
		die("r2s: sum %d, want %d", sum, want)
	}
	emit("r2s", workers, d, int64(n), fmt.Sprintf("\"sum\":%d", sum))
}

// ---- r3: yield ring -------------------------------------------------------------

func r3(workers int, quick bool) {
	tasks, yields := 1000, 1000
	if quick {
		tasks, yields = 100, 100
	}
	var wg sync.WaitGroup
	var total atomic.Int64
	t0 := time.Now()
	wg.Add(tasks)
	for i := 0; i < tasks; i++ {
		go func() {
			k := 0
			for ; k < yields; k++ {
				runtime.Gosched()
			}
			total.Add(int64(k))
			wg.Done()
		}()
	}
	wg.Wait()
	d := time.Since(t0)
	if got := total.Load(); got != int64(tasks*yields) {
		die("r3: %d yields, want %d", got, tasks*yields)
	}
	emit("r3", workers, d, int64(tasks*yields), fmt.Sprintf("\"tasks\":%d,\"yields_each\":%d", tasks, yields))
}

// ---- r3b: ping-pong with a hog -------------------------------------------------

var hogSink atomic.Uint64

func r3b(workers int, quick bool) {
	n := 1_000_000
	if quick {
		n = 10_000
	}
	var stop atomic.Bool
	var hogIters atomic.Int64
	hogDone := make(chan struct{})
	go func() {
		x := uint64(88172645463325252)
		var it int64
		for !stop.Load() {
			for k := 0; k < 64; k++ { // the little work: 64 xorshift64 steps
				x ^= x << 13
				x ^= x >> 7
				x ^= x << 17
			}
			it++
			hogIters.Store(it)
			runtime.Gosched()
		}
		hogSink.Store(x)
		close(hogDone)
	}()
	ping, pong := make(chan int), make(chan int)
	partnerDone := make(chan struct{})
	go func() {
		for v := range ping {
			pong <- v + 1
		}
		close(partnerDone)
	}()
	h0 := hogIters.Load()
	t0 := time.Now()
	var sum int64
	for i := 0; i < n; i++ {
		ping <- i
		sum += int64(<-pong)
	}
	d := time.Since(t0)
	h := hogIters.Load() - h0
	stop.Store(true)
	close(ping)
	<-partnerDone
	<-hogDone
	if want := int64(n) * int64(n+1) / 2; sum != want {
		die("r3b: sum %d, want %d", sum, want)
	}
	emit("r3b", workers, d, int64(n), fmt.Sprintf("\"hog_iters\":%d,\"hog_per_exchange\":%g", h, float64(h)/float64(n)))
}

// ---- r4: channel ping-pong --------------------------------------------------------

func r4(workers int, quick bool) {
	msgs := 1_000_000
	if quick {
		msgs = 10_000
	}
	trips := msgs / 2
	ping, pong := make(chan int64), make(chan int64)
	var sum int64
	var wg sync.WaitGroup
	t0 := time.Now()
	wg.Add(2)
	go func() { // the pinger: sends i, receives i+1
		for i := 0; i < trips; i++ {
			ping <- int64(i)
			sum += <-pong
		}
		close(ping)
		wg.Done()
	}()
	go func() { // the ponger
		for v := range ping {
			pong <- v + 1
		}
		wg.Done()
	}()
	wg.Wait()
	d := time.Since(t0)
	if want := int64(trips) * int64(trips+1) / 2; sum != want {
		die("r4: sum %d, want %d", sum, want)
	}
	emit("r4", workers, d, int64(msgs), fmt.Sprintf("\"sum\":%d,\"round_trips\":%d", sum, trips))
}

// ---- r5 / r5b: buffered channel throughput ----------------------------------------

// throughput runs p producers and c consumers over one channel of capacity
// 1,024; producer k sends k, k+p, k+2p, ... below n (so all of 0..n-1 go
// through once); each consumer sums what it receives until the channel is
// closed, which happens once every producer is done.
func throughput(scenario string, workers, p, c int, quick bool) {
	n := 4_000_000
	if quick {
		n = 40_000
	}
	ch := make(chan int64, 1024)
	sums := make([]int64, c)
	var prod, cons sync.WaitGroup
	t0 := time.Now()
	prod.Add(p)
	cons.Add(c)
	for k := 0; k < c; k++ {
		go func(k int) {
			var s int64
			for v := range ch {
				s += v
			}
			sums[k] = s
			cons.Done()
		}(k)
	}
	for k := 0; k < p; k++ {
		go func(k int) {
			for v := k; v < n; v += p {
				ch <- int64(v)
			}
			prod.Done()
		}(k)
	}
	prod.Wait()
	close(ch)
	cons.Wait()
	d := time.Since(t0)
	var sum int64
	for _, s := range sums {
		sum += s
	}
	if want := int64(n) * int64(n-1) / 2; sum != want {
		die("%s: sum %d, want %d", scenario, sum, want)
	}
	emit(scenario, workers, d, int64(n), fmt.Sprintf("\"sum\":%d,\"producers\":%d,\"consumers\":%d,\"capacity\":1024", sum, p, c))
}

// ---- r6: mutex contention ---------------------------------------------------------

func mutexBench(scenario string, workers, tasks, each int) {
	var mu sync.Mutex
	var counter int64
	var wg sync.WaitGroup
	t0 := time.Now()
	wg.Add(tasks)
	for i := 0; i < tasks; i++ {
		go func() {
			for k := 0; k < each; k++ {
				mu.Lock()
				counter++
				mu.Unlock()
			}
			wg.Done()
		}()
	}
	wg.Wait()
	d := time.Since(t0)
	if want := int64(tasks * each); counter != want {
		die("%s: counter %d, want %d", scenario, counter, want)
	}
	emit(scenario, workers, d, int64(tasks*each), fmt.Sprintf("\"counter\":%d,\"tasks\":%d,\"locks_each\":%d", counter, tasks, each))
}

// ---- r7: timers ---------------------------------------------------------------------

// sleepUs is task i's sleep in microseconds, 10,000..100,000: splitmix64 of
// a fixed seed plus i (the same sequence in every candidate).
func sleepUs(i int) int64 {
	z := uint64(0x5eed_0000_0000_0007) + uint64(i)*0x9e3779b97f4a7c15
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	z ^= z >> 31
	return 10_000 + int64(z%90_001)
}

func r7(workers int, quick bool) {
	n := 1_000_000
	if quick {
		n = 10_000
	}
	late := make([]int64, n) // ns woken after the deadline (negative: early)
	for i := range late {
		late[i] = 0
	}
	var maxUs int64
	for i := 0; i < n; i++ {
		if s := sleepUs(i); s > maxUs {
			maxUs = s
		}
	}
	var wg sync.WaitGroup
	u0, s0 := cpuSeconds()
	t0 := time.Now()
	wg.Add(n)
	for i := 0; i < n; i++ {
		go func(i int) {
			d := time.Duration(sleepUs(i)) * time.Microsecond
			deadline := time.Now().Add(d)
			time.Sleep(d)
			late[i] = int64(time.Since(deadline)) // time.Now() is monotonic
			wg.Done()
		}(i)
	}
	wg.Wait()
	d := time.Since(t0)
	u1, s1 := cpuSeconds()
	early, maxLate, sumLate := 0, int64(0), int64(0)
	firstEarly := int64(0)
	for _, l := range late {
		if l < 0 {
			if early == 0 {
				firstEarly = l
			}
			early++
		}
		if l > maxLate {
			maxLate = l
		}
		sumLate += l
	}
	cpu := (u1 - u0) + (s1 - s0)
	emit("r7", workers, d, int64(n), fmt.Sprintf("\"early\":%d,\"max_sleep_ms\":%g,\"over_ms\":%g,\"cpu_us_per_task\":%g,"+
		"\"user_s\":%g,\"sys_s\":%g,\"late_ms_max\":%g,\"late_ms_mean\":%g",
		early, float64(maxUs)/1e3, d.Seconds()*1e3-float64(maxUs)/1e3, cpu*1e6/float64(n), u1-u0, s1-s0,
		float64(maxLate)/1e6, float64(sumLate)/float64(n)/1e6))
	if early > 0 {
		die("r7: %d of %d timers fired early (e.g. %d ns before the deadline)", early, n, -firstEarly)
	}
}

// ---- idle --------------------------------------------------------------------------

func cpuSeconds() (float64, float64) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		die("getrusage: %v", err)
	}
	tv := func(t syscall.Timeval) float64 { return float64(t.Sec) + float64(t.Usec)/1e6 }
	return tv(ru.Utime), tv(ru.Stime)
}

func idle(workers int, quick bool) {
	sleep := 2 * time.Second
	if quick {
		sleep = 200 * time.Millisecond
	}
	u0, s0 := cpuSeconds()
	t0 := time.Now()
	time.Sleep(sleep)
	d := time.Since(t0)
	u1, s1 := cpuSeconds()
	cpu := (u1 - u0) + (s1 - s0)
	emit("idle", workers, d, 0, fmt.Sprintf("\"cpu_percent\":%g,\"user_s\":%g,\"sys_s\":%g",
		cpu/d.Seconds()*100, u1-u0, s1-s0))
}

func main() {
	usage := "usage: weft_runtime_go r1|r2|r2s|r3|r3b|r4|r5|r5b|r6|r6s|r7|idle|sc1|sc3|sc4|sc5|sc6|sc10|sc11|sh1|sh2|sh3|sh4 --workers W [--quick]\n" +
		"       [--count N (sc*, sh*)] [--idle-ms MS (sc1, sc3, sc4, sh1-sh3)] [--period-ms MS] [--run-ms MS (sh4)] (set GOMAXPROCS=W)"
	scenario, workers, quick := "", 0, false
	args := os.Args[1:]
	for i := 0; i < len(args); i++ {
		switch a := args[i]; a {
		case "--quick":
			quick = true
		case "--workers":
			if i+1 >= len(args) {
				fmt.Fprintln(os.Stderr, usage)
				os.Exit(2)
			}
			i++
			w, err := strconv.Atoi(args[i])
			if err != nil || w < 1 {
				fmt.Fprintln(os.Stderr, usage)
				os.Exit(2)
			}
			workers = w
		case "r1", "r2", "r2s", "r3", "r3b", "r4", "r5", "r5b", "r6", "r6s", "r7", "idle", "sc1", "sc3", "sc4", "sc5", "sc6",
			"sc10", "sc11", "sh1", "sh2", "sh3", "sh4":
			scenario = a
		case "--count":
			if i+1 >= len(args) {
				fmt.Fprintln(os.Stderr, usage)
				os.Exit(2)
			}
			i++
			c, err := strconv.ParseInt(args[i], 10, 64)
			if err != nil || c < 1 {
				fmt.Fprintln(os.Stderr, usage)
				os.Exit(2)
			}
			scaleCount = c
		case "--idle-ms", "--period-ms", "--run-ms":
			if i+1 >= len(args) {
				fmt.Fprintln(os.Stderr, usage)
				os.Exit(2)
			}
			i++
			v, err := strconv.ParseInt(args[i], 10, 64)
			if err != nil || v < 0 || (a == "--period-ms" && v == 0) {
				fmt.Fprintln(os.Stderr, usage)
				os.Exit(2)
			}
			switch a {
			case "--idle-ms":
				idleMs = v
			case "--period-ms":
				periodMs = v
			default:
				runMs = v
			}
		default:
			fmt.Fprintf(os.Stderr, "weft_runtime_go: unknown argument %q\n%s\n", a, usage)
			os.Exit(2)
		}
	}
	if scenario == "" || workers == 0 {
		fmt.Fprintln(os.Stderr, usage)
		os.Exit(2)
	}
	if p := runtime.GOMAXPROCS(0); p != workers {
		// The driver sets GOMAXPROCS=W; run by hand without it, follow --workers.
		if os.Getenv("GOMAXPROCS") != "" {
			die("GOMAXPROCS=%s but --workers %d", os.Getenv("GOMAXPROCS"), workers)
		}
		runtime.GOMAXPROCS(workers)
	}
	if scale(scenario, workers, quick) {
		return
	}
	switch scenario {
	case "r1":
		r1(workers, quick)
	case "r2":
		r2(workers, quick)
	case "r3":
		r3(workers, quick)
	case "r3b":
		r3b(workers, quick)
	case "r4":
		r4(workers, quick)
	case "r5":
		throughput("r5", workers, 1, 1, quick)
	case "r5b":
		throughput("r5b", workers, 4, 4, quick)
	case "r2s":
		r2s(workers, quick)
	case "r6":
		if quick {
			mutexBench("r6", workers, 100, 100)
		} else {
			mutexBench("r6", workers, 1000, 1000)
		}
	case "r6s":
		if quick {
			mutexBench("r6s", workers, 4, 2_500)
		} else {
			mutexBench("r6s", workers, 4, 250_000)
		}
	case "r7":
		r7(workers, quick)
	case "idle":
		idle(workers, quick)
	}
}
