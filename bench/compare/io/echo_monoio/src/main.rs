//! weft_bench_echo_monoio: R8's monoio peer (bench/compare/io/r8.py), the
//! echo server a monoio user would write: monoio is a thread-per-core
//! runtime on io_uring, so W workers are W threads, each with its own
//! runtime (the io_uring driver, monoio's defaults otherwise) and its own
//! listener on the same port (SO_REUSEPORT: the kernel spreads the
//! connections), a task per connection reading what is there into a 16 KiB
//! buffer and writing it back whole, as the other servers do; TCP_NODELAY on
//! every connection (Go's default).
//!
//!     weft_bench_echo_monoio [--port P] [--workers W] [--max-seconds S]
//!
//! Prints "listening on <port>" once every worker listens; exits after
//! --max-seconds (a plain thread sleeps and exits the process).

use std::io::Write;
use std::sync::mpsc;

use monoio::io::{AsyncReadRent, AsyncWriteRentExt};
use monoio::net::{ListenerOpts, TcpListener, TcpStream};

async fn session(mut stream: TcpStream) {
    let _ = stream.set_nodelay(true);
    let mut buf: Vec<u8> = Vec::with_capacity(16 << 10);
    loop {
        let (res, b) = stream.read(buf).await;
        buf = b;
        match res {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        let (res, b) = stream.write_all(buf).await;
        buf = b;
        if res.is_err() {
            return;
        }
        buf.clear();
    }
}

/// One worker: binds its listener (port 0 picks one; the others share it),
/// reports the port (or the error) on `ready`, then accepts forever.
fn worker(port: u16, ready: mpsc::Sender<Result<u16, String>>) {
    let mut rt = match monoio::RuntimeBuilder::<monoio::IoUringDriver>::new().build() {
        Ok(rt) => rt,
        Err(e) => {
            let _ = ready.send(Err(format!("io_uring runtime: {e}")));
            return;
        }
    };
    rt.block_on(async move {
        let opts = ListenerOpts::new().reuse_port(true).reuse_addr(true);
        let listener = match TcpListener::bind_with_config(("127.0.0.1", port), &opts) {
            Ok(l) => l,
            Err(e) => {
                let _ = ready.send(Err(format!("bind 127.0.0.1:{port}: {e}")));
                return;
            }
        };
        let bound = listener.local_addr().map(|a| a.port()).unwrap_or(0);
        let _ = ready.send(Ok(bound));
        loop {
            match listener.accept().await {
                Ok((stream, _)) => {
                    monoio::spawn(session(stream));
                }
                Err(_) => {
                    // EMFILE and the like: wait a little and go on.
                    std::thread::sleep(std::time::Duration::from_millis(10));
                }
            }
        }
    });
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (mut port, mut workers, mut max_seconds) = (0u16, 1usize, 3600u64);
    let mut i = 0;
    while i < args.len() {
        let value = args.get(i + 1).cloned().unwrap_or_default();
        match args[i].as_str() {
            "--port" => port = value.parse().unwrap_or(u16::MAX),
            "--workers" | "--threads" => workers = value.parse().unwrap_or(0),
            "--max-seconds" => max_seconds = value.parse().unwrap_or(0),
            _ => {
                eprintln!("usage: weft_bench_echo_monoio [--port P] [--workers W] [--max-seconds S]");
                std::process::exit(2);
            }
        }
        i += 2;
    }
    if port == u16::MAX || workers == 0 || workers > 64 || max_seconds == 0 {
        eprintln!("weft_bench_echo_monoio: bad --port, --workers or --max-seconds");
        std::process::exit(2);
    }
    std::thread::spawn(move || {
        std::thread::sleep(std::time::Duration::from_secs(max_seconds));
        std::process::exit(0);
    });
    let mut threads = Vec::new();
    for k in 0..workers {
        let (tx, rx) = mpsc::channel();
        let p = port;
        threads.push(std::thread::spawn(move || worker(p, tx)));
        match rx.recv() {
            Ok(Ok(bound)) => {
                if k == 0 {
                    port = bound;
                }
            }
            Ok(Err(e)) => {
                eprintln!("weft_bench_echo_monoio: worker {k}: {e}");
                std::process::exit(1);
            }
            Err(_) => {
                eprintln!("weft_bench_echo_monoio: worker {k} ended before it listened");
                std::process::exit(1);
            }
        }
    }
    println!("listening on {port}");
    let _ = std::io::stdout().flush();
    for t in threads {
        let _ = t.join();
    }
}
