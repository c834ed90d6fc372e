//! Every log line of this test binary, captured for secrecy checks.

use std::io::Write;
use std::sync::{Arc, Mutex, OnceLock};

static LOGS: OnceLock<Arc<Mutex<Vec<u8>>>> = OnceLock::new();

/// Everything logged so far by this test binary (every test in it, at `debug`).
pub fn captured_logs() -> String {
    String::from_utf8_lossy(&LOGS.get_or_init(Default::default).lock().unwrap()).into_owned()
}

#[derive(Clone)]
struct LogBuffer(Arc<Mutex<Vec<u8>>>);

impl Write for LogBuffer {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Installs the capturing subscriber once per test binary.
pub(crate) fn capture_logs() {
    static INIT: OnceLock<()> = OnceLock::new();
    INIT.get_or_init(|| {
        let buffer = LogBuffer(LOGS.get_or_init(Default::default).clone());
        let _ = tracing_subscriber::fmt()
            .with_env_filter("debug")
            .with_ansi(false)
            .with_writer(move || buffer.clone())
            .try_init();
    });
}
