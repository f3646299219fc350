//! Host tests of `/metrics` (the Prometheus text format).

use std::string::String;
use std::vec::Vec;

use iolite::testing::bytes;

use super::{env_for, frags, setup, CGI_POOL};
use crate::programs::Programs;

use crate::metrics::{is_gauge, to_metrics};
use crate::stats::{Component, Counters};

fn sample() -> Counters {
    let mut c = Counters { uptime_ms: 61_500, components: Vec::new(), devices: Vec::new() };
    let mut h = Component::new("httpd").with("requests", 12).with("connections_active", 2).with("bytes_copied", 0);
    h.describe("requests", " Complete requests parsed \\ (including rejected ones).");
    c.push(h);
    c.push(Component::new("netstack").with("bytes_copied", 40).with("tcp_connections", 3));
    c.push(
        Component::new("supervisor")
            .with("untyped_free_now", 4096)
            .with("deaths_cgi", 2)
            .with("settled_cgi", 1)
            .with("up_cgi", 1)
            .with("deaths_fs", 0),
    );
    c
}

#[test]
fn metrics_are_families_with_help_type_and_component_labels() {
    let m = to_metrics(&sample());
    let want = "\
# HELP iolite_uptime_seconds Time since boot.
# TYPE iolite_uptime_seconds gauge
iolite_uptime_seconds 61.500
# HELP iolite_requests_total Complete requests parsed \\\\ (including rejected ones).
# TYPE iolite_requests_total counter
iolite_requests_total{component=\"httpd\"} 12
# HELP iolite_connections_active connections_active of the httpd component (see /cgi-bin/stats).
# TYPE iolite_connections_active gauge
iolite_connections_active{component=\"httpd\"} 2
# HELP iolite_bytes_copied_total bytes_copied of the httpd component (see /cgi-bin/stats).
# TYPE iolite_bytes_copied_total counter
iolite_bytes_copied_total{component=\"httpd\"} 0
iolite_bytes_copied_total{component=\"netstack\"} 40
# HELP iolite_tcp_connections tcp_connections of the netstack component (see /cgi-bin/stats).
# TYPE iolite_tcp_connections gauge
iolite_tcp_connections{component=\"netstack\"} 3
# HELP iolite_untyped_free_now The supervisor's free untyped memory, bytes.
# TYPE iolite_untyped_free_now gauge
iolite_untyped_free_now{component=\"supervisor\"} 4096
# HELP iolite_component_deaths_total Deaths of the component (fault, exit, restart on request), from the supervisor.
# TYPE iolite_component_deaths_total counter
iolite_component_deaths_total{component=\"cgi\"} 2
iolite_component_deaths_total{component=\"fs\"} 0
# HELP iolite_component_deaths_settled_total The highest death of the component every peer has settled.
# TYPE iolite_component_deaths_settled_total counter
iolite_component_deaths_settled_total{component=\"cgi\"} 1
# HELP iolite_component_up 1 while the component runs and is not held down, else 0.
# TYPE iolite_component_up gauge
iolite_component_up{component=\"cgi\"} 1
";
    assert_eq!(m, want);
}

#[test]
fn gauges_are_levels_and_settings_counters_the_rest() {
    for g in ["connections_active", "pages_in_use", "cache_budget_now", "tcp_copy_mode", "heap_used", "drv_link_up"] {
        assert!(is_gauge(g), "{g}");
    }
    for c in ["requests", "bytes_copied", "tcp_csum_bytes_cached", "tcp_rx_paused_conn_pages", "drv_rx_frames"] {
        assert!(!is_gauge(c), "{c}");
    }
}

#[test]
fn the_program_answers_with_the_format_s_content_type() {
    let d = setup();
    let mut p = Programs::new(d, CGI_POOL, frags(d));
    let out = p.run(&env_for("/cgi-bin/metrics", "GET", ""), None, &sample()).unwrap();
    let text = String::from_utf8(bytes(&out)).unwrap();
    let (head, body) = text.split_once("\r\n\r\n").expect("a CGI header");
    assert_eq!(head, "Content-Type: text/plain; version=0.0.4; charset=utf-8\r\nCache-Control: no-store");
    assert!(body.contains("iolite_metrics_requests_total{component=\"cgi\"} 1\n"), "{body}");
    assert!(body.contains("iolite_requests_total{component=\"httpd\"} 12\n"));
}
