//! Content-Type by file name extension.

/// The media type of a path, from its extension (case-insensitive);
/// `application/octet-stream` when unknown. Text types carry
/// `charset=utf-8`.
pub fn content_type(path: &str) -> &'static str {
    let name = path.rsplit('/').next().unwrap_or("");
    let ext = match name.rsplit_once('.') {
        Some((stem, ext)) if !stem.is_empty() => ext,
        _ => return "application/octet-stream",
    };
    const TABLE: &[(&str, &str)] = &[
        ("html", "text/html; charset=utf-8"),
        ("htm", "text/html; charset=utf-8"),
        ("css", "text/css; charset=utf-8"),
        ("js", "text/javascript; charset=utf-8"),
        ("mjs", "text/javascript; charset=utf-8"),
        ("json", "application/json"),
        ("txt", "text/plain; charset=utf-8"),
        ("md", "text/markdown; charset=utf-8"),
        ("csv", "text/csv; charset=utf-8"),
        ("xml", "application/xml"),
        ("svg", "image/svg+xml"),
        ("png", "image/png"),
        ("jpg", "image/jpeg"),
        ("jpeg", "image/jpeg"),
        ("gif", "image/gif"),
        ("webp", "image/webp"),
        ("ico", "image/x-icon"),
        ("wasm", "application/wasm"),
        ("pdf", "application/pdf"),
        ("woff2", "font/woff2"),
        ("bin", "application/octet-stream"),
    ];
    TABLE.iter().find(|(e, _)| e.eq_ignore_ascii_case(ext)).map_or("application/octet-stream", |(_, t)| t)
}

#[cfg(test)]
mod tests {
    #[test]
    fn by_extension() {
        use super::content_type as ct;
        assert_eq!(ct("/index.html"), "text/html; charset=utf-8");
        assert_eq!(ct("/a/STYLE.CSS"), "text/css; charset=utf-8");
        assert_eq!(ct("/chart.js"), "text/javascript; charset=utf-8");
        assert_eq!(ct("/file-1m.bin"), "application/octet-stream");
        assert_eq!(ct("/file-1k.txt"), "text/plain; charset=utf-8");
        assert_eq!(ct("/noext"), "application/octet-stream");
        assert_eq!(ct("/.hidden"), "application/octet-stream");
        assert_eq!(ct("/dir.html/x"), "application/octet-stream");
    }
}
