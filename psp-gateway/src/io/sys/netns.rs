//! Network namespaces: moving the calling thread into one (`setns` through `nix`; no
//! hand-written `unsafe`).

use std::fs::File;
use std::io;

use nix::sched::{CloneFlags, setns};

/// Moves the **calling thread** into the network namespace `/run/netns/NAME` (as made by
/// `ip netns add NAME`): sockets and TAP devices it creates afterwards live there. Other
/// threads are unaffected.
///
/// Public for the integration tests and test harnesses, which build their own namespaces.
///
/// # Errors
/// Bad name, missing namespace, or no CAP_SYS_ADMIN.
pub fn enter_netns(name: &str) -> io::Result<()> {
    if name.is_empty() || name.contains('/') || name == "." || name == ".." {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("bad namespace name {name:?}"),
        ));
    }
    let path = format!("/run/netns/{name}");
    let ns = File::open(&path).map_err(|e| io::Error::new(e.kind(), format!("{path}: {e}")))?;
    setns(&ns, CloneFlags::CLONE_NEWNET).map_err(|e| {
        let e = io::Error::from(e);
        io::Error::new(e.kind(), format!("setns {path}: {e}"))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_bad_names() {
        for bad in ["", ".", "..", "a/b"] {
            assert_eq!(
                enter_netns(bad).unwrap_err().kind(),
                io::ErrorKind::InvalidInput,
                "{bad:?}"
            );
        }
        assert_eq!(
            enter_netns("psp-no-such-namespace").unwrap_err().kind(),
            io::ErrorKind::NotFound
        );
    }
}
