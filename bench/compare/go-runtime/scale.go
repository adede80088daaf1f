// The scale scenarios of issue 26 (sc*) and issue 42 (sh*, idle tasks
// shrink without a trace) (bench/compare/scale_report.py documents them;
// weft's, Tokio's and Boost.Fiber's candidates have the same shapes). sh1
// and sh2 are sc1's code, sh3 sc4's and sh4 sc5's, with parameters:
// --count N, --idle-ms MS (sc1, sc3, sc4, sh1-sh3), --period-ms MS and
// --run-ms MS (sh4).
//
//	sc1  1,000,000 goroutines (quick: 100,000) each blocked receiving from one
//	     channel; after all have started and --idle-ms (300) idle, VmRSS and
//	     VmPTE growth per goroutine; then the channel is closed (every receiver
//	     wakes) and a WaitGroup waits for all. extra.woke must be the count.
//	sc3  the same shape for a count given with --count (the driver does not
//	     run Go at 10,000,000: it would need about 27 GiB).
//	sc4  10,000 goroutines each waiting on a channel of its own (capacity 1);
//	     after --idle-ms (300) idle, main pings them one at a time and receives
//	     each reply (i+1) on one shared channel (capacity 1). Timed: the round
//	     trips.
//	sc5  100,000 goroutines (quick: 10,000) loop { time.Sleep(10 ms) } for
//	     2 s (quick: 0.5 s); CPU (getrusage user+sys) per wake and wakes/s.
//	sc6  1-byte reads from a loopback TCP connection that holds data, each
//	     { SetReadDeadline(now + 30 s); Read; SetReadDeadline(zero) };
//	     rounds of { write 65,536 bytes; 65,536 timed reads }, 16 rounds
//	     (quick: 2). Timed: the reads.
//	sh1  sc1's shape, --count goroutines (1,000,000; quick 20,000): timed
//	     from the first spawn until the last has started (it closes a
//	     channel main waits on): extra.parked_ms; after --idle-ms (0) the
//	     channel is closed and all are waited for: extra.wake_join_ms.
//	sh2  the same with --idle-ms 2,000 (quick 200) by default.
//	sh3  sc4 after --idle-ms (300).
//	sh4  sc5 with --count (1,000) goroutines each sleeping --period-ms
//	     (1,000) in a loop for --run-ms (10,000; quick 1,000);
//	     extra.cpu_fraction = CPU / wall.
//
// Issue 43's rows, timers without a goroutine (weft::timer's peer is Go's
// time.AfterFunc with Reset and Stop):
//
//	sc10 --count timers (100,000; quick 10,000), each time.AfterFunc(1 h, f)
//	     with f adding one to a counter (it never runs), the *time.Timer kept
//	     in a slice; VmRSS and VmPTE before the first, after all are armed,
//	     and after 10 rounds of Reset(1 h + round s) of every timer; then all
//	     are stopped (every Stop must report a pending timer) and none must
//	     have fired. No forced collection.
//	sc11 --count timers (100,000; quick 10,000), each time.AfterFunc whose f
//	     adds one to an atomic counter and re-arms its own timer with Reset
//	     at its previous deadline + 10 ms (deadlines do not drift; missed
//	     ones are skipped, as weft's reset_every), for 2 s (quick 0.5 s),
//	     then all stopped. CPU (getrusage user+sys) from before the first
//	     timer until all are stopped, per fire; fires per s between the end
//	     of arming and the start of stopping. Go runs every AfterFunc f in a
//	     goroutine of its own: that is the API's cost, not a harness choice.
package main

import (
	"fmt"
	"net"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// scaleCount is --count (0: the scenario's own).
var scaleCount int64

// idleMs, periodMs, runMs are --idle-ms, --period-ms, --run-ms (-1: the
// scenario's own).
var idleMs, periodMs, runMs int64 = -1, -1, -1

// msOr returns arg milliseconds, or fallback when arg < 0.
func msOr(arg, fallback int64) time.Duration {
	if arg < 0 {
		arg = fallback
	}
	return time.Duration(arg) * time.Millisecond
}

// countOr returns --count, or fallback when it was not given.
func countOr(fallback int64) int64 {
	if scaleCount > 0 {
		return scaleCount
	}
	return fallback
}

// statusKiB returns a "kB" field of /proc/self/status ("VmRSS:"), or -1.
func statusKiB(field string) int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, field) {
			f := strings.Fields(line[len(field):])
			if len(f) > 0 {
				if v, err := strconv.ParseInt(f[0], 10, 64); err == nil {
					return v
				}
			}
		}
	}
	return -1
}

// scIdle is sc1 / sc3 / sh1 / sh2: timed (sh1, sh2) waits for the last
// goroutine's start on a channel it closes (no polling) and times the spawn
// (parked_ms) and the wake + join (wake_join_ms).
func scIdle(scenario string, workers int, n int64, idle time.Duration, timed bool) {
	ch := make(chan struct{})
	allStarted := make(chan struct{})
	var wg sync.WaitGroup
	var started, woke atomic.Int64
	rss0, pte0 := statusKiB("VmRSS:"), statusKiB("VmPTE:")
	t0 := time.Now()
	wg.Add(int(n))
	for i := int64(0); i < n; i++ {
		go func() {
			if started.Add(1) == n {
				close(allStarted)
			}
			<-ch
			woke.Add(1)
			wg.Done()
		}()
		if i&0xffff == 0xffff {
			runtime.Gosched()
		}
	}
	spawn := time.Since(t0)
	if timed {
		<-allStarted
	} else {
		for k := 0; k < 600_000 && started.Load() < n; k++ {
			time.Sleep(time.Millisecond)
		}
	}
	parked := time.Since(t0)
	if idle > 0 {
		time.Sleep(idle)
	}
	rss1, pte1 := statusKiB("VmRSS:"), statusKiB("VmPTE:")
	t1 := time.Now()
	close(ch)
	wg.Wait()
	wake := time.Since(t1)
	d := time.Since(t0)
	if woke.Load() != n {
		die("%s: %d of %d woke", scenario, woke.Load(), n)
	}
	emit(scenario, workers, d, n, fmt.Sprintf("\"tasks\":%d,\"woke\":%d,\"idle_ms\":%d,\"rss_bytes_per_task\":%g,"+
		"\"pte_bytes_per_task\":%g,\"rss_before_kib\":%d,\"rss_idle_kib\":%d,\"pte_before_kib\":%d,\"pte_idle_kib\":%d,"+
		"\"spawn_ms\":%g,\"parked_ms\":%g,\"wake_join_ms\":%g", n, woke.Load(), idle.Milliseconds(),
		float64(rss1-rss0)*1024/float64(n), float64(pte1-pte0)*1024/float64(n), rss0, rss1, pte0, pte1,
		spawn.Seconds()*1e3, parked.Seconds()*1e3, wake.Seconds()*1e3))
}

// sc4 is sc4 / sh3.
func sc4(scenario string, workers int, n int64, idle time.Duration) {
	in := make([]chan int64, n)
	for i := range in {
		in[i] = make(chan int64, 1)
	}
	reply := make(chan int64, 1)
	var wg sync.WaitGroup
	var started atomic.Int64
	wg.Add(int(n))
	for i := int64(0); i < n; i++ {
		go func(c chan int64) {
			started.Add(1)
			v := <-c
			reply <- v + 1
			wg.Done()
		}(in[i])
	}
	for k := 0; k < 60_000 && started.Load() < n; k++ {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(idle)
	bad := 0
	t0 := time.Now()
	for i := int64(0); i < n; i++ {
		in[i] <- i
		if r := <-reply; r != i+1 {
			bad++
		}
	}
	d := time.Since(t0)
	wg.Wait()
	if bad != 0 {
		die("%s: %d wrong replies", scenario, bad)
	}
	emit(scenario, workers, d, n, fmt.Sprintf("\"tasks\":%d,\"idle_ms\":%d,\"replies_ok\":%d", n,
		idle.Milliseconds(), n))
}

// sc5 is sc5 / sh4: n goroutines loop { time.Sleep(period) } until a stop
// flag raised after run.
func sc5(scenario string, workers int, n int64, period, run time.Duration) {
	var stop atomic.Bool
	var wakes atomic.Int64
	var wg sync.WaitGroup
	u0, s0 := cpuSeconds()
	t0 := time.Now()
	wg.Add(int(n))
	for i := int64(0); i < n; i++ {
		go func() {
			w := int64(0)
			for k := 0; k < 100_000 && !stop.Load(); k++ {
				time.Sleep(period)
				w++
			}
			wakes.Add(w)
			wg.Done()
		}()
	}
	time.Sleep(run)
	stop.Store(true)
	wg.Wait()
	d := time.Since(t0)
	u1, s1 := cpuSeconds()
	cpu := (u1 - u0) + (s1 - s0)
	w := wakes.Load()
	if w <= 0 {
		die("%s: no wakes", scenario)
	}
	emit(scenario, workers, d, n, fmt.Sprintf("\"tasks\":%d,\"wakes\":%d,\"cpu_s\":%g,\"cpu_ns_per_wake\":%g,"+
		"\"wakes_per_s\":%g,\"ideal_wakes_per_s\":%g,\"run_ms\":%d,\"period_ms\":%d,\"cpu_fraction\":%g", n, w, cpu,
		cpu*1e9/float64(w), float64(w)/d.Seconds(), float64(n)*float64(time.Second)/float64(period),
		run.Milliseconds(), period.Milliseconds(), cpu/d.Seconds()))
}

func sc6(workers int, quick bool) {
	const chunk = 65_536
	rounds := 16
	if quick {
		rounds = 2
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		die("sc6: listen: %v", err)
	}
	defer l.Close()
	w, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		die("sc6: dial: %v", err)
	}
	defer w.Close()
	r, err := l.Accept()
	if err != nil {
		die("sc6: accept: %v", err)
	}
	defer r.Close()
	data := make([]byte, chunk)
	for i := range data {
		data[i] = 0x5a
	}
	var b [1]byte
	var d time.Duration
	got := int64(0)
	for k := 0; k < rounds; k++ {
		if _, err := w.Write(data); err != nil {
			die("sc6: write: %v", err)
		}
		t0 := time.Now()
		for i := 0; i < chunk; i++ {
			if err := r.SetReadDeadline(time.Now().Add(30 * time.Second)); err != nil {
				die("sc6: SetReadDeadline: %v", err)
			}
			m, err := r.Read(b[:])
			if err != nil || m != 1 || b[0] != 0x5a {
				die("sc6: read: %d bytes, %v", m, err)
			}
			if err := r.SetReadDeadline(time.Time{}); err != nil {
				die("sc6: SetReadDeadline: %v", err)
			}
			got++
		}
		d += time.Since(t0)
	}
	emit("sc6", workers, d, got, fmt.Sprintf("\"reads\":%d,\"deadline_s\":30,\"transport\":\"tcp loopback\","+
		"\"api\":\"SetReadDeadline(now+30s); Read; SetReadDeadline(zero)\"", got))
}

// sc10: n pending AfterFunc timers, their memory, and its growth after
// re-arming all of them `rounds` times.
func sc10(workers int, n int64, rounds int) {
	var fired atomic.Int64
	rss0, pte0 := statusKiB("VmRSS:"), statusKiB("VmPTE:")
	t0 := time.Now()
	ts := make([]*time.Timer, n)
	for i := range ts {
		ts[i] = time.AfterFunc(time.Hour, func() { fired.Add(1) })
	}
	arm := time.Since(t0)
	rss1, pte1 := statusKiB("VmRSS:"), statusKiB("VmPTE:")
	t1 := time.Now()
	pending := int64(0)
	for r := 1; r <= rounds; r++ {
		for _, t := range ts {
			if t.Reset(time.Hour + time.Duration(r)*time.Second) {
				pending++
			}
		}
	}
	rearm := time.Since(t1)
	rss2, pte2 := statusKiB("VmRSS:"), statusKiB("VmPTE:")
	stopped := int64(0)
	for _, t := range ts {
		if t.Stop() {
			stopped++
		}
	}
	if f := fired.Load(); f != 0 || stopped != n || pending != n*int64(rounds) {
		die("sc10: %d fired, %d of %d stopped while pending, %d re-arms of a pending timer", f, stopped, n, pending)
	}
	dn := float64(n)
	emit("sc10", workers, arm, n, fmt.Sprintf("\"timers\":%d,\"rounds\":%d,\"fired\":%d,\"stopped\":%d,"+
		"\"rss_bytes_per_timer\":%g,\"pte_bytes_per_timer\":%g,\"rss_growth_bytes_per_timer\":%g,"+
		"\"pte_growth_bytes_per_timer\":%g,\"rss_before_kib\":%d,\"rss_armed_kib\":%d,\"rss_rearmed_kib\":%d,"+
		"\"pte_before_kib\":%d,\"pte_armed_kib\":%d,\"pte_rearmed_kib\":%d,\"rearm_ns_per_reset\":%g,"+
		"\"api\":\"time.AfterFunc(1h, f); t.Reset(1h + k s); t.Stop()\"", n, rounds, fired.Load(), stopped,
		float64(rss1-rss0)*1024/dn, float64(pte1-pte0)*1024/dn, float64(rss2-rss1)*1024/dn, float64(pte2-pte1)*1024/dn,
		rss0, rss1, rss2, pte0, pte1, pte2, float64(rearm.Nanoseconds())/(dn*float64(rounds))))
	runtime.KeepAlive(ts)
}

// periodic is sc11's timer: an AfterFunc that re-arms itself at its
// previous deadline + period.
type periodic struct {
	t    *time.Timer
	next time.Time
}

// sc11: n periodic AfterFunc timers for `run`.
func sc11(workers int, n int64, period, run time.Duration) {
	var fires atomic.Int64
	var stop atomic.Bool
	u0, s0 := cpuSeconds()
	t0 := time.Now()
	ps := make([]*periodic, n)
	for i := range ps {
		p := &periodic{}
		// Made far away and armed once p.t is set: f reads p.t.
		p.t = time.AfterFunc(time.Hour, func() {
			fires.Add(1)
			if stop.Load() {
				return
			}
			p.next = p.next.Add(period)
			d := time.Until(p.next)
			for d <= 0 { // more than a period late: skip the missed deadlines
				p.next = p.next.Add(period)
				d += period
			}
			p.t.Reset(d)
		})
		p.next = time.Now().Add(period)
		p.t.Reset(period)
		ps[i] = p
	}
	t1 := time.Now()
	fArmed := fires.Load()
	time.Sleep(run)
	fWindow := fires.Load() - fArmed
	window := time.Since(t1)
	stop.Store(true)
	for _, p := range ps {
		p.t.Stop()
	}
	d := time.Since(t0)
	u1, s1 := cpuSeconds()
	cpu := (u1 - u0) + (s1 - s0)
	f := fires.Load()
	if f <= 0 {
		die("sc11: no timer fired")
	}
	emit("sc11", workers, d, n, fmt.Sprintf("\"timers\":%d,\"fires\":%d,\"cpu_s\":%g,\"cpu_ns_per_fire\":%g,"+
		"\"fires_per_s\":%g,\"ideal_fires_per_s\":%g,\"run_ms\":%d,\"period_ms\":%d,\"cpu_fraction\":%g,"+
		"\"api\":\"time.AfterFunc(d, f), f re-arms with t.Reset(next - now)\"", n, f, cpu, cpu*1e9/float64(f),
		float64(fWindow)/window.Seconds(), float64(n)*float64(time.Second)/float64(period), run.Milliseconds(),
		period.Milliseconds(), cpu/d.Seconds()))
}

// scale runs a scale scenario; false if s is none. The sizes are the
// scenarios' own unless --count, --idle-ms, --period-ms, --run-ms say
// otherwise (scale_report.py passes them).
func scale(s string, workers int, quick bool) bool {
	q := func(full, quick_ int64) int64 {
		if quick {
			return quick_
		}
		return full
	}
	switch s {
	case "sc1":
		scIdle("sc1", workers, countOr(q(1_000_000, 100_000)), msOr(idleMs, 300), false)
	case "sc3":
		if scaleCount <= 0 {
			die("sc3: give --count (10,000,000 goroutines need about 27 GiB)")
		}
		scIdle("sc3", workers, scaleCount, msOr(idleMs, 300), false)
	case "sc4":
		sc4("sc4", workers, countOr(10_000), msOr(idleMs, 300))
	case "sc5":
		sc5("sc5", workers, countOr(q(100_000, 10_000)), 10*time.Millisecond, msOr(-1, q(2000, 500)))
	case "sc6":
		sc6(workers, quick)
	case "sc10":
		sc10(workers, countOr(q(100_000, 10_000)), 10)
	case "sc11":
		sc11(workers, countOr(q(100_000, 10_000)), 10*time.Millisecond, msOr(-1, q(2000, 500)))
	case "sh1":
		scIdle("sh1", workers, countOr(q(1_000_000, 20_000)), msOr(idleMs, 0), true)
	case "sh2":
		scIdle("sh2", workers, countOr(q(1_000_000, 20_000)), msOr(idleMs, q(2000, 200)), true)
	case "sh3":
		sc4("sh3", workers, countOr(10_000), msOr(idleMs, 300))
	case "sh4":
		sc5("sh4", workers, countOr(1_000), msOr(periodMs, 1000), msOr(runMs, q(10_000, 1000)))
	default:
		return false
	}
	return true
}
