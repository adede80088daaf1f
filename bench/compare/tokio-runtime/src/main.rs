//! weft_runtime_tokio: the Tokio peer of weft's runtime and scale sections
//! (bench/compare/runtime_report.py has the candidate protocol and the
//! runtime scenarios; bench/compare/scale_report.py the scale scenarios).
//!
//!     weft_runtime_tokio r1|r2|r2s|r3|r3b|r4|r5|r5b|r6|r6s|r7|idle --workers W [--quick]
//!     weft_runtime_tokio sc1|sc3|sc4|sc5|sc6|sc10|sc11|sh1|sh2|sh3|sh4 --workers W [--quick] [--count N]
//!                        [--idle-ms MS] [--period-ms MS] [--run-ms MS]
//!
//! Prints one JSON line on stdout; exits 1 (message on stderr) if a result
//! does not verify. peak_rss_kib is VmHWM of /proc/self/status; every
//! scenario's root is a spawned task, awaited from block_on. extra.runtime
//! names the runtime.
//!
//! The runtime scenarios run in a current_thread runtime at W = 1 (the thread
//! calling main is the one worker) and in a multi_thread runtime with W
//! worker threads otherwise, enable_all() either way. Task = tokio::spawn,
//! join = awaiting the JoinHandle, yield = tokio::task::yield_now().
//!
//!   r1   skynet: a 10-ary tree of tasks over 1,000,000 leaves (quick:
//!        10,000); leaf i returns i, every inner task spawns 10 children and
//!        sums their JoinHandles. The recursive future is boxed (Box::pin).
//!   r2   one task spawns 100,000 (10,000) tasks (task i returns i), then
//!        awaits every JoinHandle and sums.
//!   r2s  one task spawns a task returning i and awaits its JoinHandle at
//!        once, 1,000,000 (10,000) times.
//!   r3   1,000 (100) tasks x 1,000 (100) yield_now().
//!   r3b  ping-pong with a hog: a hog task loops {64 xorshift64 steps; count;
//!        yield_now()} while the root and a partner exchange a value
//!        1,000,000 (10,000) times over two mpsc::channel(1).
//!   r4   two tasks exchange a value over two mpsc::channel(1), one each way,
//!        500,000 (5,000) round trips; ops = messages.
//!   r5   one producer, one consumer, mpsc::channel(1024), 4,000,000
//!        (40,000) items.
//!   r5b  four producers, four consumers on one mpsc::channel(1024).
//!   r6   1,000 (100) tasks x 1,000 (100) locks of one tokio::sync::Mutex
//!        guarding the counter.
//!   r6s  the same with 4 tasks x 250,000 (2,500) locks.
//!   r7   1,000,000 (10,000) tasks each tokio::time::sleep a fixed-seed
//!        random 10-100 ms (splitmix64, as in every candidate) and compare
//!        Instant::now() with its deadline on waking; an early wake exits 1
//!        after the line is printed.
//!   idle the root task sleeps 2 s (0.2 s) with tokio::time::sleep;
//!        extra.cpu_percent.
//!
//! Differences from the other candidates (harness choices):
//!   * Tokio has no rendezvous (unbuffered) channel: r3b and r4 use
//!     mpsc::channel(1), the closest it has (a send completes once the value
//!     is in the one-slot buffer, without waiting for the receiver).
//!   * Tokio's mpsc channel has one Receiver: r5b's four consumers share it
//!     behind a tokio::sync::Mutex, each holding the lock across its
//!     recv().await. That serialises the consumers and costs a lock per item,
//!     so it may disfavour Tokio.
//!   * r1's boxed futures cost one allocation per task on top of the task's.
//!   * yield_now() is Tokio's own yield, which does not requeue the task at
//!     once: it defers the wake until the worker next polls its driver (when
//!     its run queue is empty, or every event_interval = 61 ticks). r3's and
//!     r3b's yields are that; in r3b the ping-pong pair keeps the queue
//!     busy, so the hog runs about once per 61 ticks (hog_per_exchange
//!     around 0.03 at W = 1): a property of Tokio, not of this harness.
//!
//! The scale scenarios run in a multi_thread runtime with exactly W worker
//! threads (also for W = 1: the current_thread runtime is another scheduler,
//! without the work-stealing queues and cross-thread wakes the other
//! candidates pay), enable_all(); the scenario's root is a spawned task (a
//! future given to block_on would run on the main thread, which is not a
//! worker).
//!
//!   sc1  1,000,000 tasks (quick: 100,000) each awaiting one
//!        tokio::sync::Notify (registered with Notified::enable() before
//!        counting itself started); after all started and --idle-ms (300) idle, VmRSS
//!        and VmPTE growth per task; then notify_waiters() wakes all and a
//!        counter + Notify waits for their ends (no JoinHandles kept).
//!   sc3  the same for --count N.
//!   sc4  10,000 tasks each awaiting a tokio::sync::mpsc::channel(1) of its
//!        own; after --idle-ms (300) idle the root pings them one at a time and awaits
//!        each reply (i+1) on one shared mpsc::channel(1). Timed: the trips.
//!   sc5  100,000 tasks (quick: 10,000) loop { tokio::time::sleep(10 ms) }
//!        for 2 s (quick: 0.5 s); CPU (getrusage user+sys) per wake, wakes/s.
//!   sc6  1-byte reads from a loopback TCP connection that holds data, each
//!        tokio::time::timeout(30 s, stream.read(&mut b)); rounds of { write
//!        65,536 bytes; 65,536 timed reads }, 16 rounds (quick: 2). Timed:
//!        the reads.
//!
//! Issue 42's scenarios (idle tasks shrink without a trace) are sc1's, sc4's
//! and sc5's code with parameters (--count, --idle-ms, --period-ms, --run-ms):
//!
//!   sh1  sc1's shape, --count tasks (1,000,000; quick 20,000): timed from the
//!        first spawn until the last has started (it notify_one()s a Notify
//!        the root awaits): extra.parked_ms; after --idle-ms (0),
//!        notify_waiters() and the wait for all ends: extra.wake_join_ms.
//!   sh2  the same with --idle-ms 2,000 (quick 200) by default.
//!   sh3  sc4 after --idle-ms (300).
//!   sh4  sc5 with --count (1,000) tasks each sleeping --period-ms (1,000) in
//!        a loop for --run-ms (10,000; quick 1,000); extra.cpu_fraction = CPU
//!        / wall.
//!
//! Issue 43's rows, timers without a task. Tokio has no callback timer
//! (nothing like Go's time.AfterFunc or weft::timer runs a function at a
//! deadline without a task of its own); the shape a Tokio user takes for
//! many cancellable, re-armable timers that are not tasks is
//! tokio_util::time::DelayQueue: one queue (its own hierarchical wheel over a
//! slab) holding a key per timer, reset(key, ...) and remove(key) in O(1),
//! and one task that awaits poll_expired() and runs the "callback" for each
//! key that comes out. A task per timer (tokio::time::interval or a sleep in
//! a spawned task, with an AbortHandle to stop it) is what sc5 already
//! measures: the issue asks for timers, not sleeping tasks.
//!
//!   sc10 --count timers (100,000; quick 10,000) inserted into one
//!        DelayQueue<u32> (with_capacity(n)) 1 h out, the Keys kept in a
//!        Vec; VmRSS and VmPTE before the queue is made, after all are
//!        inserted, and after 10 rounds of reset(key, 1 h + round s) of every
//!        key; the queue is polled once after each phase (as its driving task
//!        would: that registers its one Sleep with the runtime) and every
//!        expired key would count as a fire (none must). Then every key is
//!        removed (try_remove must find each).
//!   sc11 --count timers (100,000; quick 10,000) in one DelayQueue driven by
//!        one spawned task: each expired key adds one to an atomic counter (the
//!        callback) and is inserted again at its deadline + 10 ms (missed
//!        deadlines skipped, as weft's reset_every; "now" is read once every
//!        64 fires for that check), for 2 s (quick 0.5 s); then the driver
//!        clears the queue. CPU (getrusage user+sys) from before the queue
//!        is made until it is cleared, per fire; fires per s between the end
//!        of the inserts and the stop. One queue is one task: at W=2 its
//!        fires run on one worker at a time (a queue per worker could use
//!        both).
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use std::task::Poll;
use tokio::sync::{mpsc, Notify};
use tokio_util::time::DelayQueue;

fn die(msg: &str) -> ! {
    eprintln!("weft_runtime_tokio: {msg}");
    std::process::exit(1);
}

fn status_kib(field: &str) -> i64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    for line in s.lines() {
        if let Some(rest) = line.strip_prefix(field) {
            if let Some(v) = rest.split_whitespace().next() {
                return v.parse().unwrap_or(-1);
            }
        }
    }
    -1
}

#[repr(C)]
struct Timeval {
    sec: i64,
    usec: i64,
}
#[repr(C)]
struct Rusage {
    utime: Timeval,
    stime: Timeval,
    rest: [i64; 14],
}
extern "C" {
    fn getrusage(who: i32, usage: *mut Rusage) -> i32;
}

/// user + sys CPU seconds of the whole process.
fn cpu_seconds() -> f64 {
    let (u, s) = cpu_user_sys();
    u + s
}

/// (user, sys) CPU seconds of the whole process.
fn cpu_user_sys() -> (f64, f64) {
    let mut ru = Rusage { utime: Timeval { sec: 0, usec: 0 }, stime: Timeval { sec: 0, usec: 0 }, rest: [0; 14] };
    // SAFETY: ru is a writable struct rusage (x86_64 / aarch64 Linux layout).
    if unsafe { getrusage(0, &mut ru) } != 0 {
        die("getrusage failed");
    }
    let tv = |t: &Timeval| t.sec as f64 + t.usec as f64 / 1e6;
    (tv(&ru.utime), tv(&ru.stime))
}

/// The runtime the scenario ran in, for extra.runtime (set once in main).
static RUNTIME_LABEL: std::sync::OnceLock<String> = std::sync::OnceLock::new();

fn emit(scenario: &str, workers: usize, secs: f64, ops: i64, extra: &str) {
    let per = if ops > 0 { format!("{}", secs * 1e9 / ops as f64) } else { "null".into() };
    let label = RUNTIME_LABEL.get().cloned().unwrap_or_else(|| {
        format!("tokio {} multi_thread worker_threads={}", env!("WEFT_TOKIO_VERSION"), workers)
    });
    let rt = format!("\"runtime\":\"{label}\"");
    let extra = if extra.is_empty() { rt } else { format!("{rt},{extra}") };
    println!(
        "{{\"scenario\":\"{scenario}\",\"workers\":{workers},\"seconds\":{secs},\"ops\":{ops},\"per_op_ns\":{per},\"peak_rss_kib\":{},\"extra\":{{{extra}}}}}",
        status_kib("VmHWM:")
    );
}

async fn wait_started(started: &AtomicI64, n: i64) {
    let mut k = 0;
    while started.load(Ordering::Relaxed) < n && k < 600_000 {
        tokio::time::sleep(Duration::from_millis(1)).await;
        k += 1;
    }
}

/// sc1 / sc3 / sh1 / sh2. timed (sh1, sh2): the task whose start makes the
/// count n notify_one()s a Notify the root awaits (no polling); parked_ms
/// and wake_join_ms time the spawn and the wake + join.
async fn sc_idle(scenario: &'static str, workers: usize, n: i64, idle: Duration, timed: bool) {
    let go = Arc::new(Notify::new());
    let all_started = Arc::new(Notify::new());
    let done = Arc::new(Notify::new());
    let started = Arc::new(AtomicI64::new(0));
    let woke = Arc::new(AtomicI64::new(0));
    let left = Arc::new(AtomicI64::new(n));
    let (rss0, pte0) = (status_kib("VmRSS:"), status_kib("VmPTE:"));
    let t0 = Instant::now();
    for i in 0..n {
        let (go, done, started, woke, left) = (go.clone(), done.clone(), started.clone(), woke.clone(), left.clone());
        let all_started = all_started.clone();
        drop(tokio::spawn(async move {
            let wait = go.notified();
            tokio::pin!(wait);
            wait.as_mut().enable();
            if started.fetch_add(1, Ordering::Relaxed) + 1 == n {
                all_started.notify_one();
            }
            wait.await;
            woke.fetch_add(1, Ordering::Relaxed);
            if left.fetch_sub(1, Ordering::AcqRel) == 1 {
                done.notify_one();
            }
        }));
        if i & 0xffff == 0xffff {
            tokio::task::yield_now().await;
        }
    }
    let spawn = t0.elapsed();
    if timed {
        all_started.notified().await;
    } else {
        wait_started(&started, n).await;
    }
    let parked = t0.elapsed();
    if !idle.is_zero() {
        tokio::time::sleep(idle).await;
    }
    let (rss1, pte1) = (status_kib("VmRSS:"), status_kib("VmPTE:"));
    let t1 = Instant::now();
    go.notify_waiters();
    if tokio::time::timeout(Duration::from_secs(600), done.notified()).await.is_err() {
        die(&format!("{scenario}: {} of {n} woke after 600 s", woke.load(Ordering::Relaxed)));
    }
    let wake = t1.elapsed();
    let d = t0.elapsed();
    let w = woke.load(Ordering::Relaxed);
    if w != n {
        die(&format!("{scenario}: {w} of {n} woke"));
    }
    emit(
        scenario,
        workers,
        d.as_secs_f64(),
        n,
        &format!(
            "\"tasks\":{n},\"woke\":{w},\"idle_ms\":{},\"rss_bytes_per_task\":{},\"pte_bytes_per_task\":{},\
             \"rss_before_kib\":{rss0},\"rss_idle_kib\":{rss1},\"pte_before_kib\":{pte0},\"pte_idle_kib\":{pte1},\"spawn_ms\":{},\
             \"parked_ms\":{},\"wake_join_ms\":{}",
            idle.as_millis(),
            (rss1 - rss0) as f64 * 1024.0 / n as f64,
            (pte1 - pte0) as f64 * 1024.0 / n as f64,
            spawn.as_secs_f64() * 1e3,
            parked.as_secs_f64() * 1e3,
            wake.as_secs_f64() * 1e3
        ),
    );
}

/// sc4 / sh3.
async fn sc4(scenario: &'static str, workers: usize, n: i64, idle: Duration) {
    let (reply_tx, mut reply_rx) = mpsc::channel::<i64>(1);
    let started = Arc::new(AtomicI64::new(0));
    let mut senders = Vec::with_capacity(n as usize);
    let mut handles = Vec::with_capacity(n as usize);
    for _ in 0..n {
        let (tx, mut rx) = mpsc::channel::<i64>(1);
        senders.push(tx);
        let (reply, started) = (reply_tx.clone(), started.clone());
        handles.push(tokio::spawn(async move {
            started.fetch_add(1, Ordering::Relaxed);
            let v = rx.recv().await.unwrap_or(-2);
            let _ = reply.send(v + 1).await;
        }));
    }
    wait_started(&started, n).await;
    tokio::time::sleep(idle).await;
    let mut bad = 0;
    let t0 = Instant::now();
    for (i, tx) in senders.iter().enumerate() {
        if tx.send(i as i64).await.is_err() {
            die(&format!("{scenario}: send failed"));
        }
        match reply_rx.recv().await {
            Some(r) if r == i as i64 + 1 => {}
            _ => bad += 1,
        }
    }
    let d = t0.elapsed();
    for h in handles {
        let _ = h.await;
    }
    if bad != 0 {
        die(&format!("{scenario}: {bad} wrong replies"));
    }
    emit(
        scenario,
        workers,
        d.as_secs_f64(),
        n,
        &format!("\"tasks\":{n},\"idle_ms\":{},\"replies_ok\":{n}", idle.as_millis()),
    );
}

/// sc5 / sh4: n tasks loop { sleep(period) } until a stop flag raised after run.
async fn sc5(scenario: &'static str, workers: usize, n: i64, period: Duration, run: Duration) {
    let stop = Arc::new(AtomicBool::new(false));
    let wakes = Arc::new(AtomicI64::new(0));
    let c0 = cpu_seconds();
    let t0 = Instant::now();
    let mut handles = Vec::with_capacity(n as usize);
    for _ in 0..n {
        let (stop, wakes) = (stop.clone(), wakes.clone());
        handles.push(tokio::spawn(async move {
            let mut w = 0i64;
            let mut k = 0;
            while k < 100_000 && !stop.load(Ordering::Relaxed) {
                tokio::time::sleep(period).await;
                w += 1;
                k += 1;
            }
            wakes.fetch_add(w, Ordering::Relaxed);
        }));
    }
    tokio::time::sleep(run).await;
    stop.store(true, Ordering::Relaxed);
    for h in handles {
        let _ = h.await;
    }
    let d = t0.elapsed().as_secs_f64();
    let cpu = cpu_seconds() - c0;
    let w = wakes.load(Ordering::Relaxed);
    if w <= 0 {
        die(&format!("{scenario}: no wakes"));
    }
    emit(
        scenario,
        workers,
        d,
        n,
        &format!(
            "\"tasks\":{n},\"wakes\":{w},\"cpu_s\":{cpu},\"cpu_ns_per_wake\":{},\"wakes_per_s\":{},\"ideal_wakes_per_s\":{},\"run_ms\":{},\
             \"period_ms\":{},\"cpu_fraction\":{}",
            cpu * 1e9 / w as f64,
            w as f64 / d,
            n as f64 / period.as_secs_f64(),
            run.as_millis(),
            period.as_millis(),
            cpu / d
        ),
    );
}

async fn sc6(workers: usize, quick: bool) {
    const CHUNK: usize = 65_536;
    let rounds = if quick { 2 } else { 16 };
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap_or_else(|e| die(&format!("sc6: bind: {e}")));
    let addr = l.local_addr().unwrap_or_else(|e| die(&format!("sc6: local_addr: {e}")));
    let mut w = tokio::net::TcpStream::connect(addr).await.unwrap_or_else(|e| die(&format!("sc6: connect: {e}")));
    let (mut r, _) = l.accept().await.unwrap_or_else(|e| die(&format!("sc6: accept: {e}")));
    let data = vec![0x5au8; CHUNK];
    let mut b = [0u8; 1];
    let mut d = 0.0;
    let mut got = 0i64;
    for _ in 0..rounds {
        w.write_all(&data).await.unwrap_or_else(|e| die(&format!("sc6: write: {e}")));
        let t0 = Instant::now();
        for _ in 0..CHUNK {
            match tokio::time::timeout(Duration::from_secs(30), r.read(&mut b)).await {
                Ok(Ok(1)) if b[0] == 0x5a => got += 1,
                other => die(&format!("sc6: read: {other:?}")),
            }
        }
        d += t0.elapsed().as_secs_f64();
    }
    emit(
        "sc6",
        workers,
        d,
        got,
        &format!(
            "\"reads\":{got},\"deadline_s\":30,\"transport\":\"tcp loopback\",\"api\":\"tokio::time::timeout(30s, stream.read(&mut b))\""
        ),
    );
}

// ==== the runtime section (runtime_report.py) ====================================
//
// Each scenario below is the body of the root task (spawned by main); it
// times its own region with std::time::Instant (a steady clock).

fn want_sum(n: i64) -> i64 {
    n * (n - 1) / 2
}

// ---- r1: skynet ----

/// The subtree of `size` leaves starting at leaf `first`: a task per node.
/// A recursive async fn needs a boxed future (its type would contain itself).
fn skynet(first: i64, size: i64) -> std::pin::Pin<Box<dyn std::future::Future<Output = i64> + Send>> {
    Box::pin(async move {
        if size == 1 {
            return first;
        }
        let part = size / 10;
        let mut children = Vec::with_capacity(10);
        for i in 0..10 {
            children.push(tokio::spawn(skynet(first + i * part, part)));
        }
        let mut sum = 0;
        for c in children {
            sum += c.await.unwrap_or_else(|e| die(&format!("r1: a task failed: {e}")));
        }
        sum
    })
}

async fn r1(workers: usize, quick: bool) {
    let leaves: i64 = if quick { 10_000 } else { 1_000_000 };
    let mut tasks = 0;
    let mut n = leaves;
    while n >= 1 {
        tasks += n;
        n /= 10;
    }
    let t0 = Instant::now();
    let sum = tokio::spawn(skynet(0, leaves)).await.unwrap_or_else(|e| die(&format!("r1: root failed: {e}")));
    let d = t0.elapsed().as_secs_f64();
    if sum != want_sum(leaves) {
        die(&format!("r1: skynet sum {sum}, want {}", want_sum(leaves)));
    }
    emit("r1", workers, d, tasks, &format!("\"sum\":{sum},\"leaves\":{leaves}"));
}

// ---- r2: spawn + join; r2s: spawn + join one at a time ----

async fn r2(workers: usize, quick: bool) {
    let n: i64 = if quick { 10_000 } else { 100_000 };
    let t0 = Instant::now();
    let mut hs = Vec::with_capacity(n as usize);
    for i in 0..n {
        hs.push(tokio::spawn(async move { i }));
    }
    let mut sum = 0;
    for h in hs {
        sum += h.await.unwrap_or_else(|e| die(&format!("r2: a task failed: {e}")));
    }
    let d = t0.elapsed().as_secs_f64();
    if sum != want_sum(n) {
        die(&format!("r2: sum {sum}, want {}", want_sum(n)));
    }
    emit("r2", workers, d, n, &format!("\"sum\":{sum}"));
}

async fn r2s(workers: usize, quick: bool) {
    let n: i64 = if quick { 10_000 } else { 1_000_000 };
    let t0 = Instant::now();
    let mut sum = 0;
    for i in 0..n {
        sum += tokio::spawn(async move { i }).await.unwrap_or_else(|e| die(&format!("r2s: a task failed: {e}")));
    }
    let d = t0.elapsed().as_secs_f64();
    if sum != want_sum(n) {
        die(&format!("r2s: sum {sum}, want {}", want_sum(n)));
    }
    emit("r2s", workers, d, n, &format!("\"sum\":{sum}"));
}

// ---- r3: yield ring ----

async fn r3(workers: usize, quick: bool) {
    let (tasks, yields): (i64, i64) = if quick { (100, 100) } else { (1000, 1000) };
    let count = Arc::new(AtomicI64::new(0));
    let t0 = Instant::now();
    let mut hs = Vec::with_capacity(tasks as usize);
    for _ in 0..tasks {
        let count = count.clone();
        hs.push(tokio::spawn(async move {
            for _ in 0..yields {
                tokio::task::yield_now().await;
            }
            count.fetch_add(yields, Ordering::Relaxed);
        }));
    }
    for h in hs {
        h.await.unwrap_or_else(|e| die(&format!("r3: a task failed: {e}")));
    }
    let d = t0.elapsed().as_secs_f64();
    let got = count.load(Ordering::Relaxed);
    if got != tasks * yields {
        die(&format!("r3: {got} yields, want {}", tasks * yields));
    }
    emit("r3", workers, d, tasks * yields, &format!("\"tasks\":{tasks},\"yields_each\":{yields}"));
}

// ---- r3b: ping-pong with a hog ----

static HOG_SINK: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

async fn r3b(workers: usize, quick: bool) {
    let n: i64 = if quick { 10_000 } else { 1_000_000 };
    let stop = Arc::new(AtomicBool::new(false));
    let hog_iters = Arc::new(AtomicI64::new(0));
    let hog = {
        let (stop, hog_iters) = (stop.clone(), hog_iters.clone());
        tokio::spawn(async move {
            let mut x: u64 = 88172645463325252;
            let mut it = 0i64;
            while !stop.load(Ordering::Relaxed) {
                for _ in 0..64 {
                    // the little work: 64 xorshift64 steps
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                }
                it += 1;
                hog_iters.store(it, Ordering::Relaxed);
                tokio::task::yield_now().await;
            }
            HOG_SINK.store(x, Ordering::Relaxed);
        })
    };
    // Tokio has no rendezvous channel: mpsc::channel(1) is the closest (a
    // send completes once the value is in the one-slot buffer).
    let (ping_tx, mut ping_rx) = mpsc::channel::<i64>(1);
    let (pong_tx, mut pong_rx) = mpsc::channel::<i64>(1);
    let partner = tokio::spawn(async move {
        while let Some(v) = ping_rx.recv().await {
            if pong_tx.send(v + 1).await.is_err() {
                die("r3b: pong closed");
            }
        }
    });
    let h0 = hog_iters.load(Ordering::Relaxed);
    let t0 = Instant::now();
    let mut sum = 0i64;
    for i in 0..n {
        if ping_tx.send(i).await.is_err() {
            die("r3b: ping closed");
        }
        sum += pong_rx.recv().await.unwrap_or_else(|| die("r3b: pong closed"));
    }
    let d = t0.elapsed().as_secs_f64();
    let h = hog_iters.load(Ordering::Relaxed) - h0;
    stop.store(true, Ordering::Relaxed);
    drop(ping_tx);
    partner.await.unwrap_or_else(|e| die(&format!("r3b: partner failed: {e}")));
    hog.await.unwrap_or_else(|e| die(&format!("r3b: hog failed: {e}")));
    if sum != n * (n + 1) / 2 {
        die(&format!("r3b: sum {sum}, want {}", n * (n + 1) / 2));
    }
    emit("r3b", workers, d, n, &format!("\"hog_iters\":{h},\"hog_per_exchange\":{}", h as f64 / n as f64));
}

// ---- r4: channel ping-pong ----

async fn r4(workers: usize, quick: bool) {
    let msgs: i64 = if quick { 10_000 } else { 1_000_000 };
    let trips = msgs / 2;
    // Unbuffered in the other candidates; Tokio has no rendezvous channel, so
    // mpsc::channel(1), one each way.
    let (ping_tx, mut ping_rx) = mpsc::channel::<i64>(1);
    let (pong_tx, mut pong_rx) = mpsc::channel::<i64>(1);
    let t0 = Instant::now();
    let pinger = tokio::spawn(async move {
        let mut sum = 0i64;
        for i in 0..trips {
            if ping_tx.send(i).await.is_err() {
                die("r4: ping closed");
            }
            sum += pong_rx.recv().await.unwrap_or_else(|| die("r4: pong closed"));
        }
        drop(ping_tx); // closes ping: the ponger's loop ends
        sum
    });
    let ponger = tokio::spawn(async move {
        while let Some(v) = ping_rx.recv().await {
            if pong_tx.send(v + 1).await.is_err() {
                die("r4: pong closed");
            }
        }
    });
    let sum = pinger.await.unwrap_or_else(|e| die(&format!("r4: pinger failed: {e}")));
    ponger.await.unwrap_or_else(|e| die(&format!("r4: ponger failed: {e}")));
    let d = t0.elapsed().as_secs_f64();
    if sum != trips * (trips + 1) / 2 {
        die(&format!("r4: sum {sum}, want {}", trips * (trips + 1) / 2));
    }
    emit("r4", workers, d, msgs, &format!("\"sum\":{sum},\"round_trips\":{trips}"));
}

// ---- r5 / r5b: buffered channel throughput ----

/// p producers and c consumers over one mpsc::channel(1024): producer k sends
/// k, k+p, k+2p, ... below n; each consumer sums what it receives until the
/// channel is closed and drained; the root closes it (drops the last Sender)
/// once it has joined every producer. Tokio's mpsc has a single Receiver:
/// with c > 1 the consumers share it behind a tokio::sync::Mutex, each
/// holding the lock across its recv().await (a harness choice: it serialises
/// the consumers and adds a lock per item).
async fn throughput(scenario: &'static str, workers: usize, p: i64, c: i64, quick: bool) {
    let n: i64 = if quick { 40_000 } else { 4_000_000 };
    let (tx, rx) = mpsc::channel::<i64>(1024);
    let t0 = Instant::now();
    let mut consumers = Vec::with_capacity(c as usize);
    if c == 1 {
        let mut rx = rx;
        consumers.push(tokio::spawn(async move {
            let mut s = 0i64;
            while let Some(v) = rx.recv().await {
                s += v;
            }
            s
        }));
    } else {
        let rx = Arc::new(tokio::sync::Mutex::new(rx));
        for _ in 0..c {
            let rx = rx.clone();
            consumers.push(tokio::spawn(async move {
                let mut s = 0i64;
                loop {
                    let v = rx.lock().await.recv().await;
                    match v {
                        Some(v) => s += v,
                        None => break,
                    }
                }
                s
            }));
        }
    }
    let mut producers = Vec::with_capacity(p as usize);
    for k in 0..p {
        let tx = tx.clone();
        producers.push(tokio::spawn(async move {
            let mut v = k;
            while v < n {
                if tx.send(v).await.is_err() {
                    die("channel closed under a producer");
                }
                v += p;
            }
        }));
    }
    for h in producers {
        h.await.unwrap_or_else(|e| die(&format!("{scenario}: a producer failed: {e}")));
    }
    drop(tx); // the last Sender: closes the channel
    let mut sum = 0i64;
    for h in consumers {
        sum += h.await.unwrap_or_else(|e| die(&format!("{scenario}: a consumer failed: {e}")));
    }
    let d = t0.elapsed().as_secs_f64();
    if sum != want_sum(n) {
        die(&format!("{scenario}: sum {sum}, want {}", want_sum(n)));
    }
    emit(
        scenario,
        workers,
        d,
        n,
        &format!("\"sum\":{sum},\"producers\":{p},\"consumers\":{c},\"capacity\":1024"),
    );
}

// ---- r6 / r6s: mutex contention ----

/// `tasks` tasks each lock one tokio::sync::Mutex (guarding the shared
/// counter), increment the counter and unlock, `each` times.
async fn lock_loop(tasks: i64, each: i64) -> (f64, i64) {
    let m = Arc::new(tokio::sync::Mutex::new(0i64));
    let t0 = Instant::now();
    let mut hs = Vec::with_capacity(tasks as usize);
    for _ in 0..tasks {
        let m = m.clone();
        hs.push(tokio::spawn(async move {
            for _ in 0..each {
                *m.lock().await += 1;
            }
        }));
    }
    for h in hs {
        h.await.unwrap_or_else(|e| die(&format!("mutex: a task failed: {e}")));
    }
    let d = t0.elapsed().as_secs_f64();
    let counter = *m.lock().await;
    (d, counter)
}

async fn r6(workers: usize, quick: bool) {
    let (tasks, each): (i64, i64) = if quick { (100, 100) } else { (1000, 1000) };
    let (d, counter) = lock_loop(tasks, each).await;
    if counter != tasks * each {
        die(&format!("r6: counter {counter}, want {}", tasks * each));
    }
    emit("r6", workers, d, tasks * each, &format!("\"counter\":{counter},\"tasks\":{tasks},\"locks_each\":{each}"));
}

async fn r6s(workers: usize, quick: bool) {
    let (tasks, each): (i64, i64) = if quick { (4, 2_500) } else { (4, 250_000) };
    let (d, counter) = lock_loop(tasks, each).await;
    if counter != tasks * each {
        die(&format!("r6s: counter {counter}, want {}", tasks * each));
    }
    emit("r6s", workers, d, tasks * each, &format!("\"counter\":{counter},\"tasks\":{tasks},\"locks\":{each}"));
}

// ---- r7: timers ----

/// Task i's sleep in microseconds, 10,000..100,000: splitmix64 of a fixed
/// seed plus i (the same sequence in every candidate).
fn sleep_us(i: u64) -> u64 {
    let mut z = 0x5eed_0000_0000_0007u64.wrapping_add(i.wrapping_mul(0x9e37_79b9_7f4a_7c15));
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^= z >> 31;
    10_000 + z % 90_001
}

async fn r7(workers: usize, quick: bool) {
    let n: u64 = if quick { 10_000 } else { 1_000_000 };
    let max_us = (0..n).map(sleep_us).max().unwrap_or(0);
    let (u0, s0) = cpu_user_sys();
    let t0 = Instant::now();
    let mut hs = Vec::with_capacity(n as usize);
    for i in 0..n {
        hs.push(tokio::spawn(async move {
            let d = Duration::from_micros(sleep_us(i));
            let deadline = Instant::now() + d;
            tokio::time::sleep(d).await;
            // ns woken after the deadline (negative: early)
            let now = Instant::now();
            if now >= deadline {
                (now - deadline).as_nanos() as i64
            } else {
                -((deadline - now).as_nanos() as i64)
            }
        }));
    }
    let mut late = Vec::with_capacity(n as usize);
    for h in hs {
        late.push(h.await.unwrap_or_else(|e| die(&format!("r7: a task failed: {e}"))));
    }
    let d = t0.elapsed().as_secs_f64();
    let (u1, s1) = cpu_user_sys();
    let (mut early, mut first_early, mut max_late, mut sum_late) = (0u64, 0i64, 0i64, 0f64);
    for &l in &late {
        if l < 0 {
            if early == 0 {
                first_early = l;
            }
            early += 1;
        }
        max_late = max_late.max(l);
        sum_late += l as f64;
    }
    let cpu = (u1 - u0) + (s1 - s0);
    emit(
        "r7",
        workers,
        d,
        n as i64,
        &format!(
            "\"early\":{early},\"max_sleep_ms\":{},\"over_ms\":{},\"cpu_us_per_task\":{},\
             \"user_s\":{},\"sys_s\":{},\"late_ms_max\":{},\"late_ms_mean\":{}",
            max_us as f64 / 1e3,
            d * 1e3 - max_us as f64 / 1e3,
            cpu * 1e6 / n as f64,
            u1 - u0,
            s1 - s0,
            max_late as f64 / 1e6,
            sum_late / n as f64 / 1e6
        ),
    );
    if early > 0 {
        die(&format!("r7: {early} of {n} timers fired early (e.g. {} ns before the deadline)", -first_early));
    }
}

// ---- idle ----

async fn idle(workers: usize, quick: bool) {
    let sleep = if quick { Duration::from_millis(200) } else { Duration::from_secs(2) };
    let (u0, s0) = cpu_user_sys();
    let t0 = Instant::now();
    tokio::time::sleep(sleep).await;
    let d = t0.elapsed().as_secs_f64();
    let (u1, s1) = cpu_user_sys();
    let cpu = (u1 - u0) + (s1 - s0);
    emit("idle", workers, d, 0, &format!("\"cpu_percent\":{},\"user_s\":{},\"sys_s\":{}", cpu / d * 100.0, u1 - u0, s1 - s0));
}

/// Runs a runtime-section scenario: W = 1 in a current_thread runtime (the
/// thread calling main is the one worker), W > 1 in a multi_thread runtime
/// with W worker threads; enable_all() either way. The scenario's root is a
/// spawned task, awaited from block_on.
fn run_runtime_scenario(scenario: String, workers: usize, quick: bool) {
    let version = env!("WEFT_TOKIO_VERSION");
    let (rt, label) = if workers == 1 {
        (tokio::runtime::Builder::new_current_thread().enable_all().build(), format!("tokio {version} current_thread"))
    } else {
        (
            tokio::runtime::Builder::new_multi_thread().worker_threads(workers).enable_all().build(),
            format!("tokio {version} multi_thread({workers})"),
        )
    };
    let rt = rt.unwrap_or_else(|e| die(&format!("runtime: {e}")));
    let _ = RUNTIME_LABEL.set(label);
    let root = async move {
        match scenario.as_str() {
            "r1" => r1(workers, quick).await,
            "r2" => r2(workers, quick).await,
            "r2s" => r2s(workers, quick).await,
            "r3" => r3(workers, quick).await,
            "r3b" => r3b(workers, quick).await,
            "r4" => r4(workers, quick).await,
            "r5" => throughput("r5", workers, 1, 1, quick).await,
            "r5b" => throughput("r5b", workers, 4, 4, quick).await,
            "r6" => r6(workers, quick).await,
            "r6s" => r6s(workers, quick).await,
            "r7" => r7(workers, quick).await,
            _ => idle(workers, quick).await,
        }
    };
    let h = rt.spawn(root);
    if rt.block_on(h).is_err() {
        die("the root task failed");
    }
}

/// Polls q once (what its driving task would do on a wake): the number of
/// keys that came out expired (each runs its "callback").
async fn poll_once(q: &mut DelayQueue<u32>) -> i64 {
    std::future::poll_fn(|cx| {
        let mut k = 0i64;
        while let Poll::Ready(Some(_)) = q.poll_expired(cx) {
            k += 1;
        }
        Poll::Ready(k)
    })
    .await
}

/// sc10: n pending timers (keys of one DelayQueue), their memory, and its
/// growth after re-arming every key `rounds` times.
async fn sc10(workers: usize, n: i64, rounds: u64) {
    let (rss0, pte0) = (status_kib("VmRSS:"), status_kib("VmPTE:"));
    let t0 = Instant::now();
    let mut q: DelayQueue<u32> = DelayQueue::with_capacity(n as usize);
    let mut keys = Vec::with_capacity(n as usize);
    for i in 0..n {
        keys.push(q.insert(i as u32, Duration::from_secs(3600)));
    }
    let mut fired = poll_once(&mut q).await;
    let arm = t0.elapsed().as_secs_f64();
    let (rss1, pte1) = (status_kib("VmRSS:"), status_kib("VmPTE:"));
    let t1 = Instant::now();
    for r in 1..=rounds {
        for k in &keys {
            q.reset(k, Duration::from_secs(3600 + r)); // panics (aborts) on a key no longer in the queue
        }
    }
    fired += poll_once(&mut q).await;
    let rearm = t1.elapsed().as_secs_f64();
    let (rss2, pte2) = (status_kib("VmRSS:"), status_kib("VmPTE:"));
    let mut stopped = 0i64;
    for k in &keys {
        if q.try_remove(k).is_some() {
            stopped += 1;
        }
    }
    if fired != 0 || stopped != n || !q.is_empty() {
        die(&format!("sc10: {fired} fired, {stopped} of {n} removed while pending"));
    }
    let dn = n as f64;
    emit(
        "sc10",
        workers,
        arm,
        n,
        &format!(
            "\"timers\":{n},\"rounds\":{rounds},\"fired\":{fired},\"stopped\":{stopped},\"rss_bytes_per_timer\":{},\
             \"pte_bytes_per_timer\":{},\"rss_growth_bytes_per_timer\":{},\"pte_growth_bytes_per_timer\":{},\
             \"rss_before_kib\":{rss0},\"rss_armed_kib\":{rss1},\"rss_rearmed_kib\":{rss2},\"pte_before_kib\":{pte0},\
             \"pte_armed_kib\":{pte1},\"pte_rearmed_kib\":{pte2},\"rearm_ns_per_reset\":{},\
             \"api\":\"tokio_util DelayQueue: insert(i, 1h); reset(key, 1h + k s); try_remove(key)\"",
            (rss1 - rss0) as f64 * 1024.0 / dn,
            (pte1 - pte0) as f64 * 1024.0 / dn,
            (rss2 - rss1) as f64 * 1024.0 / dn,
            (pte2 - pte1) as f64 * 1024.0 / dn,
            rearm * 1e9 / (dn * rounds as f64)
        ),
    );
}

/// sc11: n periodic timers in one DelayQueue driven by one task, for `run`.
async fn sc11(workers: usize, n: i64, period: Duration, run: Duration) {
    let fires = Arc::new(AtomicI64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let armed = Arc::new(Notify::new());
    let c0 = cpu_seconds();
    let t0 = Instant::now();
    let driver = {
        let (fires, stop, armed) = (fires.clone(), stop.clone(), armed.clone());
        tokio::spawn(async move {
            let mut q: DelayQueue<u32> = DelayQueue::with_capacity(n as usize);
            for i in 0..n {
                q.insert(i as u32, period);
            }
            armed.notify_one();
            let mut now = tokio::time::Instant::now();
            let mut k = 0u32;
            while !stop.load(Ordering::Relaxed) {
                let Some(e) = std::future::poll_fn(|cx| q.poll_expired(cx)).await else { break };
                fires.fetch_add(1, Ordering::Relaxed); // the callback
                k = k.wrapping_add(1);
                if k % 64 == 0 {
                    now = tokio::time::Instant::now();
                }
                let mut next = e.deadline() + period;
                if next <= now {
                    now = tokio::time::Instant::now();
                    while next <= now {
                        next += period; // more than a period late: skip the missed deadlines
                    }
                }
                q.insert_at(e.into_inner(), next);
            }
            q.clear();
        })
    };
    armed.notified().await;
    let t1 = Instant::now();
    let f_armed = fires.load(Ordering::Relaxed);
    tokio::time::sleep(run).await;
    let f_window = fires.load(Ordering::Relaxed) - f_armed;
    let window = t1.elapsed().as_secs_f64();
    stop.store(true, Ordering::Relaxed);
    if driver.await.is_err() {
        die("sc11: the driving task failed");
    }
    let d = t0.elapsed().as_secs_f64();
    let cpu = cpu_seconds() - c0;
    let f = fires.load(Ordering::Relaxed);
    if f <= 0 {
        die("sc11: no timer fired");
    }
    emit(
        "sc11",
        workers,
        d,
        n,
        &format!(
            "\"timers\":{n},\"fires\":{f},\"cpu_s\":{cpu},\"cpu_ns_per_fire\":{},\"fires_per_s\":{},\"ideal_fires_per_s\":{},\
             \"run_ms\":{},\"period_ms\":{},\"cpu_fraction\":{},\
             \"api\":\"tokio_util DelayQueue, one task: poll_expired(), insert_at(deadline + 10ms)\"",
            cpu * 1e9 / f as f64,
            f_window as f64 / window,
            n as f64 / period.as_secs_f64(),
            run.as_millis(),
            period.as_millis(),
            cpu / d
        ),
    );
}

const RUNTIME_SCENARIOS: [&str; 12] = ["r1", "r2", "r2s", "r3", "r3b", "r4", "r5", "r5b", "r6", "r6s", "r7", "idle"];

fn main() {
    let usage = "usage: weft_runtime_tokio r1|r2|r2s|r3|r3b|r4|r5|r5b|r6|r6s|r7|idle|sc1|sc3|sc4|sc5|sc6|sc10|sc11|sh1|sh2|sh3|sh4 --workers W [--quick]\n       \
                 [--count N (sc*, sh*)] [--idle-ms MS (sc1, sc3, sc4, sh1-sh3)] [--period-ms MS] [--run-ms MS (sh4)]";
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (mut scenario, mut workers, mut quick, mut count) = (String::new(), 0usize, false, 0i64);
    // --idle-ms, --period-ms, --run-ms (-1: the scenario's own)
    let (mut idle_ms, mut period_ms, mut run_ms) = (-1i64, -1i64, -1i64);
    let mut i = 0;
    while i < args.len() {
        match args[i].as_str() {
            "--quick" => quick = true,
            "--workers" if i + 1 < args.len() => {
                i += 1;
                workers = args[i].parse().unwrap_or(0);
            }
            "--count" if i + 1 < args.len() => {
                i += 1;
                count = args[i].parse().unwrap_or(0);
            }
            flag @ ("--idle-ms" | "--period-ms" | "--run-ms") if i + 1 < args.len() => {
                i += 1;
                let v: i64 = args[i].parse().unwrap_or(-1);
                if v < 0 || (flag == "--period-ms" && v == 0) {
                    eprintln!("weft_runtime_tokio: bad {flag} {:?}\n{usage}", args[i]);
                    std::process::exit(2);
                }
                match flag {
                    "--idle-ms" => idle_ms = v,
                    "--period-ms" => period_ms = v,
                    _ => run_ms = v,
                }
            }
            "sc1" | "sc3" | "sc4" | "sc5" | "sc6" | "sc10" | "sc11" | "sh1" | "sh2" | "sh3" | "sh4" => scenario = args[i].clone(),
            s if RUNTIME_SCENARIOS.contains(&s) => scenario = args[i].clone(),
            other => {
                eprintln!("weft_runtime_tokio: unknown argument {other:?}\n{usage}");
                std::process::exit(2);
            }
        }
        i += 1;
    }
    if scenario.is_empty() || workers == 0 {
        eprintln!("{usage}");
        std::process::exit(2);
    }
    if RUNTIME_SCENARIOS.contains(&scenario.as_str()) {
        run_runtime_scenario(scenario, workers, quick);
        return;
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_all()
        .build()
        .unwrap_or_else(|e| die(&format!("runtime: {e}")));
    // The scenarios' own sizes unless --count, --idle-ms, --period-ms,
    // --run-ms say otherwise (scale_report.py passes them).
    let q = move |full: i64, quick_: i64| if quick { quick_ } else { full };
    let n_or = move |fallback: i64| if count > 0 { count } else { fallback };
    let ms_or = move |arg: i64, fallback: i64| Duration::from_millis(if arg >= 0 { arg } else { fallback } as u64);
    let root = async move {
        match scenario.as_str() {
            "sc1" => sc_idle("sc1", workers, n_or(q(1_000_000, 100_000)), ms_or(idle_ms, 300), false).await,
            "sc3" => {
                if count <= 0 {
                    die("sc3: give --count");
                }
                sc_idle("sc3", workers, count, ms_or(idle_ms, 300), false).await
            }
            "sc4" => sc4("sc4", workers, n_or(10_000), ms_or(idle_ms, 300)).await,
            "sc5" => sc5("sc5", workers, n_or(q(100_000, 10_000)), Duration::from_millis(10), ms_or(-1, q(2000, 500))).await,
            "sc10" => sc10(workers, n_or(q(100_000, 10_000)), 10).await,
            "sc11" => sc11(workers, n_or(q(100_000, 10_000)), Duration::from_millis(10), ms_or(-1, q(2000, 500))).await,
            "sh1" => sc_idle("sh1", workers, n_or(q(1_000_000, 20_000)), ms_or(idle_ms, 0), true).await,
            "sh2" => sc_idle("sh2", workers, n_or(q(1_000_000, 20_000)), ms_or(idle_ms, q(2000, 200)), true).await,
            "sh3" => sc4("sh3", workers, n_or(10_000), ms_or(idle_ms, 300)).await,
            "sh4" => sc5("sh4", workers, n_or(1_000), ms_or(period_ms, 1000), ms_or(run_ms, q(10_000, 1000))).await,
            _ => sc6(workers, quick).await,
        }
    };
    let h = rt.spawn(root);
    if rt.block_on(h).is_err() {
        die("the root task failed");
    }
}
