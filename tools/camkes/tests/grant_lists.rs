//! Grant lists (`attribute string <channel>_refs[]`): a channel end may
//! only grant its sender references to pools the sender maps.

use camkes::imports::MemoryFiles;
use std::path::Path;

/// netstack-like `Net` (owns `hdr`, reads `app`), httpd-like `App` (owns
/// `app`); `client` is their channel, `hdr` and `app` IO-Lite pools.
/// `settings` go in the configuration.
fn system(settings: &str) -> String {
    format!(
        r#"import <std_connector.camkes>;
component Net {{
    control;
    dataport Buf hdr;
    dataport Buf app;
    dataport Buf client;
    attribute string client_refs[];
}}
component App {{
    control;
    dataport Buf app;
    dataport Buf client;
    attribute string client_refs[];
}}
component Other {{ control; dataport Buf hdr; maybe dataport Buf client; }}
assembly {{ composition {{
    component Net net; component App web; component Other other;
    connection seL4SharedData hdr(from net.hdr, to other.hdr);
    connection seL4SharedData app(from web.app, to net.app);
    connection seL4SharedData client(from net.client, to web.client);
}} configuration {{
{settings}
    hdr.pool = true; app.pool = true;
}} }}"#
    )
}

fn compile(source: &str) -> Result<camkes::Output, String> {
    let mut files = MemoryFiles::default();
    files.add("sys/main.camkes", source);
    camkes::compile(Path::new("sys/main.camkes"), &[], &files).map_err(|d| d.to_string())
}

#[test]
fn a_grant_list_of_pools_the_sender_maps_becomes_a_glue_constant() {
    let out = compile(&system(r#"    net.client_refs = ["app"]; web.client_refs = ["app"];"#)).expect("compiles");
    let (_, glue) = out.glue.iter().find(|(name, _)| name == "net.rs").expect("glue for Net");
    assert!(glue.contains(r#"pub const CLIENT_REFS: &[&str] = &["app"];"#), "{glue}");
    // The same list as the pools' derived ids (hdr is 1, app 2), so a
    // component can set it without looking names up.
    assert!(glue.contains("pub const CLIENT_REFS_IDS: &[u32] = &[2];"), "{glue}");
    assert!(glue.contains("pub const APP: u32 = 2;"), "{glue}");
}

#[test]
fn a_pool_the_sender_does_not_map_is_refused() {
    let e = compile(&system(r#"    net.client_refs = ["app", "hdr"];"#)).unwrap_err();
    assert!(
        e.contains("'net.client_refs' names 'hdr', which 'web' (the sender on 'client') does not map (it is no end of 'hdr'): a sender may reference only pools it maps"),
        "{e}"
    );
    assert!(e.starts_with("sys/main.camkes:22:31: error:"), "{e}");
}

#[test]
fn malformed_grant_lists_are_refused() {
    for (setting, want) in [
        (r#"net.client_refs = ["app", "app"];"#, "'net.client_refs' names 'app' twice"),
        (r#"net.client_refs = ["nope"];"#, "'net.client_refs' names 'nope', which is not a dataport of 'Net'"),
        (r#"net.client_refs = ["client"];"#, "'net.client_refs' names the channel 'client' itself"),
        (r#"net.client_refs = [1];"#, "must be a string"),
    ] {
        let e = compile(&system(setting)).unwrap_err();
        assert!(e.contains(want), "{setting}: {e}");
    }
    // Shared with the sender, but no IO-Lite pool: nothing to reference.
    let not_a_pool = system(r#"net.client_refs = ["app"];"#).replace("app.pool = true;", "");
    let e = compile(&not_a_pool).unwrap_err();
    assert!(
        e.contains("'net.client_refs' names 'app', which is not an IO-Lite pool: a grant list names pools, and 'app' is one only with 'app.pool = true'"),
        "{e}"
    );
    assert!(e.starts_with("sys/main.camkes:22:20: error:"), "{e}");
    // A channel joins two instances, no more.
    let three = system(r#"net.client_refs = ["app"];"#).replace("to web.client);", "to web.client, to other.client);");
    let e = compile(&three).unwrap_err();
    assert!(e.contains("channel 'client' must join 'net' and exactly one other instance"), "{e}");
}

#[test]
fn an_unconnected_optional_channel_keeps_its_default_list_unchecked() {
    // Net gains an optional second channel with a default (empty) list.
    let optional = |settings: &str| {
        system(settings).replace(
            "    attribute string client_refs[];\n}\ncomponent App",
            "    attribute string client_refs[];\n    maybe dataport Buf client2;\n    attribute string client2_refs[] = [];\n}\ncomponent App",
        )
    };
    let src = optional(r#"    net.client_refs = ["app"];"#);
    assert!(src.contains("client2_refs"), "{src}");
    let out = compile(&src).expect("compiles: nobody sends on client2");
    let (_, glue) = out.glue.iter().find(|(name, _)| name == "net.rs").expect("glue for Net");
    assert!(glue.contains(r#"pub const CLIENT2_REFS: &[&str] = &[];"#), "{glue}");
    // A list the assembly sets for it is checked all the same.
    let e = compile(&optional(r#"    net.client_refs = ["app"]; net.client2_refs = ["app"];"#)).unwrap_err();
    assert!(e.contains("'net.client2_refs': 'client2' is not connected by seL4SharedData, so it is no channel"), "{e}");
}
