//! weft_bench_echo_tokio: R8's Tokio peer (bench/compare/io/r8.py), the echo
//! server a Tokio user would write: one TcpListener, tokio::spawn per
//! connection, each task reading what is there into a 16 KiB buffer and
//! writing it back whole (read, write_all), as the other servers do;
//! TCP_NODELAY on every connection (Go's default). A current_thread runtime
//! for --workers 1 (the one-core row), a multi_thread runtime with W worker
//! threads otherwise, enable_all() either way, as in the runtime section.
//!
//!     weft_bench_echo_tokio [--port P] [--workers W] [--max-seconds S]
//!
//! Prints "listening on <port>" when ready; exits after --max-seconds (a
//! plain thread sleeps and exits the process).

use std::io::Write;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

async fn session(mut stream: TcpStream) {
    let _ = stream.set_nodelay(true);
    let mut buf = vec![0u8; 16 << 10];
    loop {
        let n = match stream.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        if stream.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
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
                eprintln!("usage: weft_bench_echo_tokio [--port P] [--workers W] [--max-seconds S]");
                std::process::exit(2);
            }
        }
        i += 2;
    }
    if port == u16::MAX || workers == 0 || workers > 64 || max_seconds == 0 {
        eprintln!("weft_bench_echo_tokio: bad --port, --workers or --max-seconds");
        std::process::exit(2);
    }
    std::thread::spawn(move || {
        std::thread::sleep(std::time::Duration::from_secs(max_seconds));
        std::process::exit(0);
    });
    let rt = if workers == 1 {
        tokio::runtime::Builder::new_current_thread().enable_all().build()
    } else {
        tokio::runtime::Builder::new_multi_thread().worker_threads(workers).enable_all().build()
    };
    let rt = match rt {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("weft_bench_echo_tokio: runtime: {e}");
            std::process::exit(1);
        }
    };
    rt.block_on(async move {
        let listener = match TcpListener::bind(("127.0.0.1", port)).await {
            Ok(l) => l,
            Err(e) => {
                eprintln!("weft_bench_echo_tokio: bind 127.0.0.1:{port}: {e}");
                std::process::exit(1);
            }
        };
        let bound = listener.local_addr().map(|a| a.port()).unwrap_or(0);
        println!("listening on {bound}");
        let _ = std::io::stdout().flush();
        loop {
            match listener.accept().await {
                Ok((stream, _)) => {
                    tokio::spawn(session(stream));
                }
                Err(_) => {
                    // EMFILE and the like: wait a little and go on.
                    tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                }
            }
        }
    });
}
