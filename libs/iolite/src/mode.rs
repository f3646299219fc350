//! Copy modes: the zero-copy design and two honest conventional baselines.
//!
//! One build option selects the mode for the whole system (CMake's
//! `COPY_MODE`, reaching this crate as `IOLITE_COPY_MODE`, see build.rs). Channels apply it at
//! the receiving end: when the mode says a [`Boundary`] copies, the receiver
//! copies the aggregate into a private buffer of its own pool (counted in
//! [`Stats::bytes_copied`](crate::Stats::bytes_copied)) and releases the
//! sender's buffers at once, which is what `read(2)`/`write(2)` into a
//! private buffer cost.

/// Which copy discipline the system uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CopyMode {
    /// IO-Lite: no payload copies at any boundary.
    IoLite,
    /// Flash (mmap-based server): the file cache is shared with the server
    /// without copying, but data is copied at every other boundary: into the
    /// TCP send buffer, out of the network, and across the CGI pipe.
    Flash,
    /// POSIX read/write: every boundary copies into a private buffer.
    Posix,
}

/// A kind of component boundary a channel crosses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Boundary {
    /// File cache → application (web server, CGI): `read` of a file.
    FileCacheToApp,
    /// Application → file cache: `write` of a file.
    AppToFileCache,
    /// Application → TCP/IP stack: socket send buffer.
    AppToNet,
    /// TCP/IP stack → application: socket receive.
    NetToApp,
    /// CGI → web server: the CGI pipe.
    CgiToApp,
    /// Any other pipe between components.
    Pipe,
}

impl CopyMode {
    /// The mode's name as the build option spells it: `iolite`, `flash`,
    /// `posix`.
    pub const fn name(self) -> &'static str {
        match self {
            CopyMode::IoLite => "iolite",
            CopyMode::Flash => "flash",
            CopyMode::Posix => "posix",
        }
    }

    /// The number counter pages publish for the mode (`copy_mode`,
    /// `tcp_copy_mode`): 0 iolite, 1 flash, 2 posix.
    pub const fn number(self) -> u64 {
        match self {
            CopyMode::IoLite => 0,
            CopyMode::Flash => 1,
            CopyMode::Posix => 2,
        }
    }

    /// Whether this mode copies the payload at boundary `b`.
    pub const fn copies(self, b: Boundary) -> bool {
        match self {
            CopyMode::IoLite => false,
            CopyMode::Posix => true,
            CopyMode::Flash => !matches!(b, Boundary::FileCacheToApp),
        }
    }
}

/// The copy mode selected at build time (IOLITE_COPY_MODE).
pub const BUILD_COPY_MODE: CopyMode = if cfg!(iolite_copy_mode = "posix") {
    CopyMode::Posix
} else if cfg!(iolite_copy_mode = "flash") {
    CopyMode::Flash
} else {
    CopyMode::IoLite
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copy_matrix() {
        use Boundary::*;
        let all = [FileCacheToApp, AppToFileCache, AppToNet, NetToApp, CgiToApp, Pipe];
        assert!(all.iter().all(|&b| !CopyMode::IoLite.copies(b)));
        assert!(all.iter().all(|&b| CopyMode::Posix.copies(b)));
        assert!(!CopyMode::Flash.copies(FileCacheToApp));
        assert!(CopyMode::Flash.copies(AppToNet));
        assert!(CopyMode::Flash.copies(CgiToApp));
        let modes = [CopyMode::IoLite, CopyMode::Flash, CopyMode::Posix];
        assert_eq!(modes.map(CopyMode::name), ["iolite", "flash", "posix"]);
        assert_eq!(modes.map(CopyMode::number), [0, 1, 2]);
    }
}
