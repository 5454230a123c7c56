//! A TCP proxy in front of a real service (PostgreSQL, Redis, a model),
//! switched between behaving and failing the ways a dependency fails in
//! production:
//!
//! - [`Mode::Pass`]: bytes flow both ways.
//! - [`Mode::Refuse`]: a new connection is closed as soon as it is accepted,
//!   and open ones are cut.
//! - [`Mode::BlackHole`]: every connection, new or open, is kept open and
//!   read from, and nothing comes back: the server "accepts and never
//!   answers".
//!
//! Switching back to `Pass` restores service for new connections at once;
//! connections that were black-holed stay dead, as they would in life.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};
use std::time::Duration;

/// How the proxy behaves now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Pass = 0,
    Refuse = 1,
    BlackHole = 2,
}

impl Mode {
    fn from(v: u8) -> Mode {
        match v {
            1 => Mode::Refuse,
            2 => Mode::BlackHole,
            _ => Mode::Pass,
        }
    }
}

pub struct FaultProxy {
    /// `127.0.0.1:port` the proxy listens on.
    pub addr: String,
    mode: Arc<AtomicU8>,
}

impl FaultProxy {
    /// Listens on a free loopback port and forwards to `upstream` (`host:port`).
    pub fn start(upstream: &str) -> FaultProxy {
        let listener = TcpListener::bind("127.0.0.1:0").expect("binding the fault proxy");
        let addr = listener.local_addr().unwrap().to_string();
        let mode = Arc::new(AtomicU8::new(Mode::Pass as u8));
        let (m, up) = (mode.clone(), upstream.to_string());
        std::thread::spawn(move || {
            for client in listener.incoming() {
                let Ok(client) = client else { continue };
                let (m, up) = (m.clone(), up.clone());
                std::thread::spawn(move || serve(client, &up, &m));
            }
        });
        FaultProxy { addr, mode }
    }

    pub fn set(&self, mode: Mode) {
        self.mode.store(mode as u8, Ordering::SeqCst);
    }

    pub fn mode(&self) -> Mode {
        Mode::from(self.mode.load(Ordering::SeqCst))
    }

    /// The port, for variables that take `host:port` apart.
    pub fn port(&self) -> u16 {
        self.addr.rsplit(':').next().unwrap().parse().unwrap()
    }
}

fn serve(client: TcpStream, upstream: &str, mode: &Arc<AtomicU8>) {
    match Mode::from(mode.load(Ordering::SeqCst)) {
        Mode::Refuse => {
            let _ = client.shutdown(Shutdown::Both);
            return;
        }
        Mode::BlackHole => return swallow(client, mode, None),
        Mode::Pass => {}
    }
    let Ok(server) = TcpStream::connect(upstream) else {
        let _ = client.shutdown(Shutdown::Both);
        return;
    };
    let (c2, s2) = (client.try_clone().unwrap(), server.try_clone().unwrap());
    let m2 = mode.clone();
    std::thread::spawn(move || pump(s2, c2, &m2));
    pump(client, server, mode);
}

/// Copies `from` to `to` while the mode is `Pass`; on `Refuse` cuts both,
/// on `BlackHole` stops forwarding and only reads.
fn pump(mut from: TcpStream, mut to: TcpStream, mode: &Arc<AtomicU8>) {
    let _ = from.set_read_timeout(Some(Duration::from_millis(50)));
    let mut buf = [0u8; 16 * 1024];
    loop {
        match Mode::from(mode.load(Ordering::SeqCst)) {
            Mode::Pass => {}
            Mode::Refuse => {
                let _ = from.shutdown(Shutdown::Both);
                let _ = to.shutdown(Shutdown::Both);
                return;
            }
            Mode::BlackHole => return swallow(from, mode, Some(to)),
        }
        match from.read(&mut buf) {
            Ok(0) => {
                let _ = to.shutdown(Shutdown::Write);
                return;
            }
            // The mode may have changed while the read waited: what it
            // brought is forwarded only if the proxy still passes.
            Ok(_) if Mode::from(mode.load(Ordering::SeqCst)) != Mode::Pass => {}
            Ok(n) => {
                if to.write_all(&buf[..n]).is_err() {
                    return;
                }
            }
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {}
            Err(_) => return,
        }
    }
}

/// Reads and drops whatever `conn` sends, answering nothing, until the
/// peer closes or the mode becomes `Refuse`. `keep` (the other side of a
/// connection that was passing) is held open and silent meanwhile.
fn swallow(mut conn: TcpStream, mode: &Arc<AtomicU8>, keep: Option<TcpStream>) {
    let _ = conn.set_read_timeout(Some(Duration::from_millis(200)));
    let mut buf = [0u8; 16 * 1024];
    loop {
        if Mode::from(mode.load(Ordering::SeqCst)) == Mode::Refuse {
            let _ = conn.shutdown(Shutdown::Both);
            return;
        }
        match conn.read(&mut buf) {
            Ok(0) => break,
            Ok(_) => {}
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {}
            Err(_) => break,
        }
    }
    drop(keep);
}
