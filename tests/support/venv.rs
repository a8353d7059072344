//! Python tools from PyPI for the tests, each in a virtualenv made once under `target/` from a
//! pinned requirements file, and made again when that file changes.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;

/// The python of the virtualenv `target/NAME` with `requirements` installed (a test fails,
/// saying why, when it cannot be made).
pub fn python(name: &str, requirements: &Path) -> PathBuf {
    // One test at a time makes or checks a virtualenv: two would install into one directory.
    static MAKING: Mutex<()> = Mutex::new(());
    let _making = MAKING.lock().unwrap_or_else(|e| e.into_inner());
    let venv = Path::new(env!("CARGO_MANIFEST_DIR")).join("target").join(name);
    let python = venv.join("bin/python");
    let stamp = venv.join("requirements.txt");
    if std::fs::read(&stamp).ok() != std::fs::read(requirements).ok() {
        let run = |cmd: &mut Command| {
            let out = cmd.output().unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
            assert!(out.status.success(), "{cmd:?} failed:\n{}", String::from_utf8_lossy(&out.stderr));
        };
        run(Command::new("python3").args(["-m", "venv", "--clear"]).arg(&venv));
        run(Command::new(&python).args(["-m", "pip", "install", "-q", "--no-deps", "-r"]).arg(requirements));
        std::fs::copy(requirements, &stamp).unwrap();
    }
    python
}
