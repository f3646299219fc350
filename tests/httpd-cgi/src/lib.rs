//! httpd against the real CGI programs, on the host (the tests are in
//! `tests/`): requests go through `httpd::Server` (on the fixtures of
//! `httpd::testing`), over the `cgi_api::wire` format to `cgi::Programs`,
//! and their output back into responses, as between the two components.
//! Kept out of both crates so that neither links the other.

use iolite::{Aggregate, Domain};

/// A fragment source without fragments (the page program's includes are
/// the cgi crate's own tests' business).
pub struct NoFrags;

impl<'d> cgi::FragmentSource<'d> for NoFrags {
    fn version(&mut self, _: &str) -> Option<u64> {
        None
    }
    fn read(&mut self, _: &str) -> Option<Aggregate<'d>> {
        None
    }
}

/// The CGI programs, writing their output into `httpd::testing::CGI_POOL`.
pub fn programs(d: &Domain) -> cgi::Programs<'_, NoFrags> {
    cgi::Programs::new(d, httpd::testing::CGI_POOL, NoFrags)
}
