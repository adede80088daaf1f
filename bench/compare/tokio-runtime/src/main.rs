//! weft_runtime_tokio: the Tokio peer of weft's scale section
//! (bench/compare/scale_report.py documents the scenarios; the candidate
//! protocol is runtime_report.py's).
//!
//!     weft_runtime_tokio sc1|sc3|sc4|sc5|sc6 --workers W [--quick] [--count N]
//!
//! Every scenario runs in a multi_thread runtime with exactly W worker
//! threads (also for W = 1: the current_thread runtime is another scheduler,
//! without the work-stealing queues and cross-thread wakes the other
//! candidates pay), enable_all(); the scenario's root is a spawned task (a
//! future given to block_on would run on the main thread, which is not a
//! worker). Prints one JSON line on stdout; exits 1 (message on stderr) if a
//! result does not verify.
//!
//!   sc1  1,000,000 tasks (quick: 100,000) each awaiting one
//!        tokio::sync::Notify (registered with Notified::enable() before
//!        counting itself started); after all started and 300 ms idle, VmRSS
//!        and VmPTE growth per task; then notify_waiters() wakes all and a
//!        counter + Notify waits for their ends (no JoinHandles kept).
//!   sc3  the same for --count N.
//!   sc4  10,000 tasks each awaiting a tokio::sync::mpsc::channel(1) of its
//!        own; after 300 ms idle the root pings them one at a time and awaits
//!        each reply (i+1) on one shared mpsc::channel(1). Timed: the trips.
//!   sc5  100,000 tasks (quick: 10,000) loop { tokio::time::sleep(10 ms) }
//!        for 2 s (quick: 0.5 s); CPU (getrusage user+sys) per wake, wakes/s.
//!   sc6  1-byte reads from a loopback TCP connection that holds data, each
//!        tokio::time::timeout(30 s, stream.read(&mut b)); rounds of { write
//!        65,536 bytes; 65,536 timed reads }, 16 rounds (quick: 2). Timed:
//!        the reads.
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::{mpsc, Notify};

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
    let mut ru = Rusage { utime: Timeval { sec: 0, usec: 0 }, stime: Timeval { sec: 0, usec: 0 }, rest: [0; 14] };
    // SAFETY: ru is a writable struct rusage (x86_64 / aarch64 Linux layout).
    if unsafe { getrusage(0, &mut ru) } != 0 {
        die("getrusage failed");
    }
    let tv = |t: &Timeval| t.sec as f64 + t.usec as f64 / 1e6;
    tv(&ru.utime) + tv(&ru.stime)
}

fn emit(scenario: &str, workers: usize, secs: f64, ops: i64, extra: &str) {
    let per = if ops > 0 { format!("{}", secs * 1e9 / ops as f64) } else { "null".into() };
    let rt = format!(
        "\"runtime\":\"tokio {} multi_thread worker_threads={}\"",
        env!("WEFT_TOKIO_VERSION"),
        workers
    );
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

async fn sc_idle(scenario: &'static str, workers: usize, n: i64) {
    let idle = Duration::from_millis(300);
    let go = Arc::new(Notify::new());
    let done = Arc::new(Notify::new());
    let started = Arc::new(AtomicI64::new(0));
    let woke = Arc::new(AtomicI64::new(0));
    let left = Arc::new(AtomicI64::new(n));
    let (rss0, pte0) = (status_kib("VmRSS:"), status_kib("VmPTE:"));
    let t0 = Instant::now();
    for i in 0..n {
        let (go, done, started, woke, left) = (go.clone(), done.clone(), started.clone(), woke.clone(), left.clone());
        drop(tokio::spawn(async move {
            let wait = go.notified();
            tokio::pin!(wait);
            wait.as_mut().enable();
            started.fetch_add(1, Ordering::Relaxed);
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
    wait_started(&started, n).await;
    tokio::time::sleep(idle).await;
    let (rss1, pte1) = (status_kib("VmRSS:"), status_kib("VmPTE:"));
    go.notify_waiters();
    if tokio::time::timeout(Duration::from_secs(600), done.notified()).await.is_err() {
        die(&format!("{scenario}: {} of {n} woke after 600 s", woke.load(Ordering::Relaxed)));
    }
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
             \"rss_before_kib\":{rss0},\"rss_idle_kib\":{rss1},\"pte_before_kib\":{pte0},\"pte_idle_kib\":{pte1},\"spawn_ms\":{}",
            idle.as_millis(),
            (rss1 - rss0) as f64 * 1024.0 / n as f64,
            (pte1 - pte0) as f64 * 1024.0 / n as f64,
            spawn.as_secs_f64() * 1e3
        ),
    );
}

async fn sc4(workers: usize, count: i64) {
    let n = if count > 0 { count } else { 10_000 };
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
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut bad = 0;
    let t0 = Instant::now();
    for (i, tx) in senders.iter().enumerate() {
        if tx.send(i as i64).await.is_err() {
            die("sc4: send failed");
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
        die(&format!("sc4: {bad} wrong replies"));
    }
    emit("sc4", workers, d.as_secs_f64(), n, &format!("\"tasks\":{n},\"idle_ms\":300,\"replies_ok\":{n}"));
}

async fn sc5(workers: usize, quick: bool, count: i64) {
    let (mut n, run) = if quick { (10_000, Duration::from_millis(500)) } else { (100_000, Duration::from_secs(2)) };
    if count > 0 {
        n = count;
    }
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
                tokio::time::sleep(Duration::from_millis(10)).await;
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
        die("sc5: no wakes");
    }
    emit(
        "sc5",
        workers,
        d,
        n,
        &format!(
            "\"tasks\":{n},\"wakes\":{w},\"cpu_s\":{cpu},\"cpu_ns_per_wake\":{},\"wakes_per_s\":{},\"ideal_wakes_per_s\":{},\"run_ms\":{}",
            cpu * 1e9 / w as f64,
            w as f64 / d,
            n as f64 * 100.0,
            run.as_millis()
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

fn main() {
    let usage = "usage: weft_runtime_tokio sc1|sc3|sc4|sc5|sc6 --workers W [--quick] [--count N]";
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (mut scenario, mut workers, mut quick, mut count) = (String::new(), 0usize, false, 0i64);
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
            "sc1" | "sc3" | "sc4" | "sc5" | "sc6" => scenario = args[i].clone(),
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
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_all()
        .build()
        .unwrap_or_else(|e| die(&format!("runtime: {e}")));
    let root = async move {
        match scenario.as_str() {
            "sc1" => sc_idle("sc1", workers, if count > 0 { count } else if quick { 100_000 } else { 1_000_000 }).await,
            "sc3" => {
                if count <= 0 {
                    die("sc3: give --count");
                }
                sc_idle("sc3", workers, count).await
            }
            "sc4" => sc4(workers, count).await,
            "sc5" => sc5(workers, quick, count).await,
            _ => sc6(workers, quick).await,
        }
    };
    let h = rt.spawn(root);
    if rt.block_on(h).is_err() {
        die("the root task failed");
    }
}
