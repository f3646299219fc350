//! Content-Type by file name extension.
//!
//! The table covers every extension of nginx's default `mime.types`, so a
//! site moved from nginx keeps its types, plus a few newer ones nginx's
//! list lacks (`mjs`, `md`, `csv`, `webmanifest`, ...). Where this table
//! differs from nginx it follows the current registrations: JavaScript is
//! `text/javascript` (RFC 9239; nginx still says `application/javascript`)
//! and XML is `application/xml` (RFC 7303's recommendation over
//! `text/xml`). Every `text/*` type carries `charset=utf-8`, because a
//! browser otherwise guesses a legacy encoding for it.

/// (extension, media type), sorted by extension (lower case, byte order)
/// so that [`content_type`] finds one by binary search; a host test keeps
/// it sorted and free of duplicates.
const TABLE: &[(&str, &str)] = &[
    ("3gp", "video/3gpp"),
    ("3gpp", "video/3gpp"),
    ("7z", "application/x-7z-compressed"),
    ("aac", "audio/aac"),
    ("ai", "application/postscript"),
    ("apng", "image/apng"),
    ("asf", "video/x-ms-asf"),
    ("asx", "video/x-ms-asf"),
    ("atom", "application/atom+xml"),
    ("avi", "video/x-msvideo"),
    ("avif", "image/avif"),
    ("bin", "application/octet-stream"),
    ("bmp", "image/x-ms-bmp"),
    ("cco", "application/x-cocoa"),
    ("crt", "application/x-x509-ca-cert"),
    ("css", "text/css; charset=utf-8"),
    ("csv", "text/csv; charset=utf-8"),
    ("deb", "application/octet-stream"),
    ("der", "application/x-x509-ca-cert"),
    ("dll", "application/octet-stream"),
    ("dmg", "application/octet-stream"),
    ("doc", "application/msword"),
    ("docx", "application/vnd.openxmlformats-officedocument.wordprocessingml.document"),
    ("ear", "application/java-archive"),
    ("eot", "application/vnd.ms-fontobject"),
    ("eps", "application/postscript"),
    ("epub", "application/epub+zip"),
    ("exe", "application/octet-stream"),
    ("flac", "audio/flac"),
    ("flv", "video/x-flv"),
    ("gif", "image/gif"),
    ("gz", "application/gzip"),
    ("hqx", "application/mac-binhex40"),
    ("htc", "text/x-component; charset=utf-8"),
    ("htm", "text/html; charset=utf-8"),
    ("html", "text/html; charset=utf-8"),
    ("ico", "image/x-icon"),
    ("ics", "text/calendar; charset=utf-8"),
    ("img", "application/octet-stream"),
    ("iso", "application/octet-stream"),
    ("jad", "text/vnd.sun.j2me.app-descriptor; charset=utf-8"),
    ("jar", "application/java-archive"),
    ("jardiff", "application/x-java-archive-diff"),
    ("jng", "image/x-jng"),
    ("jnlp", "application/x-java-jnlp-file"),
    ("jpeg", "image/jpeg"),
    ("jpg", "image/jpeg"),
    ("js", "text/javascript; charset=utf-8"),
    ("json", "application/json"),
    ("jsonld", "application/ld+json"),
    ("kar", "audio/midi"),
    ("kml", "application/vnd.google-earth.kml+xml"),
    ("kmz", "application/vnd.google-earth.kmz"),
    ("m3u8", "application/vnd.apple.mpegurl"),
    ("m4a", "audio/x-m4a"),
    ("m4v", "video/x-m4v"),
    ("md", "text/markdown; charset=utf-8"),
    ("mid", "audio/midi"),
    ("midi", "audio/midi"),
    ("mjs", "text/javascript; charset=utf-8"),
    ("mml", "text/mathml; charset=utf-8"),
    ("mng", "video/x-mng"),
    ("mov", "video/quicktime"),
    ("mp3", "audio/mpeg"),
    ("mp4", "video/mp4"),
    ("mpeg", "video/mpeg"),
    ("mpg", "video/mpeg"),
    ("msi", "application/octet-stream"),
    ("msm", "application/octet-stream"),
    ("msp", "application/octet-stream"),
    ("odg", "application/vnd.oasis.opendocument.graphics"),
    ("odp", "application/vnd.oasis.opendocument.presentation"),
    ("ods", "application/vnd.oasis.opendocument.spreadsheet"),
    ("odt", "application/vnd.oasis.opendocument.text"),
    ("oga", "audio/ogg"),
    ("ogg", "audio/ogg"),
    ("ogv", "video/ogg"),
    ("opus", "audio/ogg"),
    ("otf", "font/otf"),
    ("pdb", "application/x-pilot"),
    ("pdf", "application/pdf"),
    ("pem", "application/x-x509-ca-cert"),
    ("pl", "application/x-perl"),
    ("pm", "application/x-perl"),
    ("png", "image/png"),
    ("ppt", "application/vnd.ms-powerpoint"),
    ("pptx", "application/vnd.openxmlformats-officedocument.presentationml.presentation"),
    ("prc", "application/x-pilot"),
    ("ps", "application/postscript"),
    ("ra", "audio/x-realaudio"),
    ("rar", "application/x-rar-compressed"),
    ("rpm", "application/x-redhat-package-manager"),
    ("rss", "application/rss+xml"),
    ("rtf", "application/rtf"),
    ("run", "application/x-makeself"),
    ("sea", "application/x-sea"),
    ("shtml", "text/html; charset=utf-8"),
    ("sit", "application/x-stuffit"),
    ("svg", "image/svg+xml"),
    ("svgz", "image/svg+xml"),
    ("swf", "application/x-shockwave-flash"),
    ("tar", "application/x-tar"),
    ("tcl", "application/x-tcl"),
    ("tif", "image/tiff"),
    ("tiff", "image/tiff"),
    ("tk", "application/x-tcl"),
    ("ts", "video/mp2t"),
    ("ttf", "font/ttf"),
    ("txt", "text/plain; charset=utf-8"),
    ("vtt", "text/vtt; charset=utf-8"),
    ("war", "application/java-archive"),
    ("wasm", "application/wasm"),
    ("wav", "audio/wav"),
    ("wbmp", "image/vnd.wap.wbmp"),
    ("weba", "audio/webm"),
    ("webm", "video/webm"),
    ("webmanifest", "application/manifest+json"),
    ("webp", "image/webp"),
    ("wml", "text/vnd.wap.wml; charset=utf-8"),
    ("wmlc", "application/vnd.wap.wmlc"),
    ("wmv", "video/x-ms-wmv"),
    ("woff", "font/woff"),
    ("woff2", "font/woff2"),
    ("xhtml", "application/xhtml+xml"),
    ("xls", "application/vnd.ms-excel"),
    ("xlsx", "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"),
    ("xml", "application/xml"),
    ("xpi", "application/x-xpinstall"),
    ("xspf", "application/xspf+xml"),
    ("yaml", "application/yaml"),
    ("yml", "application/yaml"),
    ("zip", "application/zip"),
];

/// The type of anything not in the table: a download, never rendered.
const UNKNOWN: &str = "application/octet-stream";

/// The media type of a path, from its extension (case-insensitive);
/// `application/octet-stream` when unknown. Text types carry
/// `charset=utf-8`.
pub fn content_type(path: &str) -> &'static str {
    let name = path.rsplit('/').next().unwrap_or("");
    let ext = match name.rsplit_once('.') {
        Some((stem, ext)) if !stem.is_empty() => ext.as_bytes(),
        _ => return UNKNOWN,
    };
    TABLE
        .binary_search_by(|(e, _)| {
            // Compares the lower-case table entry with the extension as if
            // lower-cased, without allocating a lower-case copy.
            e.bytes().cmp(ext.iter().map(u8::to_ascii_lowercase))
        })
        .map_or(UNKNOWN, |i| TABLE[i].1)
}

#[cfg(test)]
mod tests {
    use super::{content_type as ct, TABLE};

    #[test]
    fn by_extension() {
        assert_eq!(ct("/index.html"), "text/html; charset=utf-8");
        assert_eq!(ct("/a/STYLE.CSS"), "text/css; charset=utf-8");
        assert_eq!(ct("/chart.js"), "text/javascript; charset=utf-8");
        assert_eq!(ct("/file-1m.bin"), "application/octet-stream");
        assert_eq!(ct("/file-1k.txt"), "text/plain; charset=utf-8");
        assert_eq!(ct("/noext"), "application/octet-stream");
        assert_eq!(ct("/.hidden"), "application/octet-stream");
        assert_eq!(ct("/dir.html/x"), "application/octet-stream");
        assert_eq!(ct("/a.tar.GZ"), "application/gzip");
        assert_eq!(ct("/x.Pdf"), "application/pdf");
        assert_eq!(ct("/trailing."), "application/octet-stream");
        assert_eq!(ct("/x.htmlx"), "application/octet-stream");
        assert_eq!(ct("/x.ht"), "application/octet-stream");
        assert_eq!(ct("/3gp"), "application/octet-stream");
        assert_eq!(ct("/clip.3GP"), "video/3gpp");
        assert_eq!(ct("/app.webmanifest"), "application/manifest+json");
        assert_eq!(ct("/z.zip"), "application/zip");
        assert_eq!(ct("/é.Ä"), "application/octet-stream");
    }

    /// Binary search needs the table sorted by the lower-case extension;
    /// a duplicate would make one of its two types unreachable.
    #[test]
    fn table_is_sorted_lower_case_and_unique() {
        for (e, t) in TABLE {
            assert!(!e.is_empty() && e.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit()), "{e}");
            assert!(t.contains('/'), "{e}: {t}");
            assert_eq!(t.starts_with("text/"), t.ends_with("; charset=utf-8"), "{e}: {t}");
        }
        for w in TABLE.windows(2) {
            assert!(w[0].0 < w[1].0, "{} before {}", w[0].0, w[1].0);
        }
    }

    /// Every extension of nginx's default `mime.types` (1.22), with the
    /// type nginx gives it. Ours must match, apart from the charset we
    /// add to text types and the two deliberate updates in the module doc.
    #[test]
    fn covers_nginx_default_types() {
        const NGINX: &[(&str, &[&str])] = &[
            ("text/html", &["html", "htm", "shtml"]),
            ("text/css", &["css"]),
            ("text/xml", &["xml"]),
            ("image/gif", &["gif"]),
            ("image/jpeg", &["jpeg", "jpg"]),
            ("application/javascript", &["js"]),
            ("application/atom+xml", &["atom"]),
            ("application/rss+xml", &["rss"]),
            ("text/mathml", &["mml"]),
            ("text/plain", &["txt"]),
            ("text/vnd.sun.j2me.app-descriptor", &["jad"]),
            ("text/vnd.wap.wml", &["wml"]),
            ("text/x-component", &["htc"]),
            ("image/avif", &["avif"]),
            ("image/png", &["png"]),
            ("image/svg+xml", &["svg", "svgz"]),
            ("image/tiff", &["tif", "tiff"]),
            ("image/vnd.wap.wbmp", &["wbmp"]),
            ("image/webp", &["webp"]),
            ("image/x-icon", &["ico"]),
            ("image/x-jng", &["jng"]),
            ("image/x-ms-bmp", &["bmp"]),
            ("font/woff", &["woff"]),
            ("font/woff2", &["woff2"]),
            ("application/java-archive", &["jar", "war", "ear"]),
            ("application/json", &["json"]),
            ("application/mac-binhex40", &["hqx"]),
            ("application/msword", &["doc"]),
            ("application/pdf", &["pdf"]),
            ("application/postscript", &["ps", "eps", "ai"]),
            ("application/rtf", &["rtf"]),
            ("application/vnd.apple.mpegurl", &["m3u8"]),
            ("application/vnd.google-earth.kml+xml", &["kml"]),
            ("application/vnd.google-earth.kmz", &["kmz"]),
            ("application/vnd.ms-excel", &["xls"]),
            ("application/vnd.ms-fontobject", &["eot"]),
            ("application/vnd.ms-powerpoint", &["ppt"]),
            ("application/vnd.oasis.opendocument.graphics", &["odg"]),
            ("application/vnd.oasis.opendocument.presentation", &["odp"]),
            ("application/vnd.oasis.opendocument.spreadsheet", &["ods"]),
            ("application/vnd.oasis.opendocument.text", &["odt"]),
            ("application/vnd.openxmlformats-officedocument.presentationml.presentation", &["pptx"]),
            ("application/vnd.openxmlformats-officedocument.spreadsheetml.sheet", &["xlsx"]),
            ("application/vnd.openxmlformats-officedocument.wordprocessingml.document", &["docx"]),
            ("application/vnd.wap.wmlc", &["wmlc"]),
            ("application/wasm", &["wasm"]),
            ("application/x-7z-compressed", &["7z"]),
            ("application/x-cocoa", &["cco"]),
            ("application/x-java-archive-diff", &["jardiff"]),
            ("application/x-java-jnlp-file", &["jnlp"]),
            ("application/x-makeself", &["run"]),
            ("application/x-perl", &["pl", "pm"]),
            ("application/x-pilot", &["prc", "pdb"]),
            ("application/x-rar-compressed", &["rar"]),
            ("application/x-redhat-package-manager", &["rpm"]),
            ("application/x-sea", &["sea"]),
            ("application/x-shockwave-flash", &["swf"]),
            ("application/x-stuffit", &["sit"]),
            ("application/x-tcl", &["tcl", "tk"]),
            ("application/x-x509-ca-cert", &["der", "pem", "crt"]),
            ("application/x-xpinstall", &["xpi"]),
            ("application/xhtml+xml", &["xhtml"]),
            ("application/xspf+xml", &["xspf"]),
            ("application/zip", &["zip"]),
            ("application/octet-stream", &["bin", "exe", "dll", "deb", "dmg", "iso", "img", "msi", "msp", "msm"]),
            ("audio/midi", &["mid", "midi", "kar"]),
            ("audio/mpeg", &["mp3"]),
            ("audio/ogg", &["ogg"]),
            ("audio/x-m4a", &["m4a"]),
            ("audio/x-realaudio", &["ra"]),
            ("video/3gpp", &["3gpp", "3gp"]),
            ("video/mp2t", &["ts"]),
            ("video/mp4", &["mp4"]),
            ("video/mpeg", &["mpeg", "mpg"]),
            ("video/quicktime", &["mov"]),
            ("video/webm", &["webm"]),
            ("video/x-flv", &["flv"]),
            ("video/x-m4v", &["m4v"]),
            ("video/x-mng", &["mng"]),
            ("video/x-ms-asf", &["asx", "asf"]),
            ("video/x-ms-wmv", &["wmv"]),
            ("video/x-msvideo", &["avi"]),
        ];
        let mut n = 0;
        for (nginx, exts) in NGINX {
            for e in *exts {
                assert!(TABLE.iter().any(|(t, _)| t == e), "nginx's .{e} missing");
                let ours = ct(&format!("/f.{}", e.to_ascii_uppercase()));
                let want = match *e {
                    "js" => "text/javascript; charset=utf-8".to_string(),
                    "xml" => "application/xml".to_string(),
                    _ if nginx.starts_with("text/") => format!("{nginx}; charset=utf-8"),
                    _ => nginx.to_string(),
                };
                assert_eq!(ours, want, ".{e}");
                n += 1;
            }
        }
        assert_eq!(n, 110, "nginx's list has 110 extensions");
    }
}
