//! The web console: static assets built into the binary (no Node build to
//! run it), served without authentication (they hold no data; the API
//! calls they make carry the token).

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};

/// Every asset: path, content type, bytes.
const ASSETS: [(&str, &str, &[u8]); 3] = [
    ("/", "text/html; charset=utf-8", include_bytes!("../assets/index.html")),
    ("/console.js", "text/javascript; charset=utf-8", include_bytes!("../assets/console.js")),
    ("/console.css", "text/css; charset=utf-8", include_bytes!("../assets/console.css")),
];

/// The asset at `path` exactly (no path is resolved: nothing else can be read).
pub(crate) fn asset(path: &str) -> Response {
    match ASSETS.iter().find(|(p, _, _)| *p == path) {
        Some((_, kind, bytes)) => {
            let mut r = (StatusCode::OK, *bytes).into_response();
            r.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static(kind));
            r.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
            r.headers_mut().insert(
                header::CONTENT_SECURITY_POLICY,
                HeaderValue::from_static(
                    "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'",
                ),
            );
            r.headers_mut().insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
            r
        }
        None => (StatusCode::NOT_FOUND, "not found\n").into_response(),
    }
}
