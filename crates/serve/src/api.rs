//! The routes under `/api/v1/`: `status`, `files`, `query` (pcap),
//! `count`, `histogram`. Every error is a status code and one sentence
//! (`{"error": "..."}`), the CLI's own where the CLI has one.

use crate::export::{self, Selection};
use crate::server::State;
use axum::body::Body;
use axum::extract::{Query, State as Ax};
use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use std::collections::HashMap;
use std::sync::Arc;

/// A failed request, as a status code and one sentence.
#[derive(Debug)]
pub(crate) enum ApiError {
    BadRequest(String),
    Unauthorized(String),
    NotFound(String),
    Busy(String),
    /// The store cannot be read now (503, without Retry-After).
    Unavailable(String),
    /// Addressed to a name this server does not answer (421: DNS rebinding).
    Misdirected(String),
    /// No node of a fleet answered (502).
    BadGateway(String),
    Internal(String),
    /// The client went away before the answer started (with how far the
    /// query got, when it was stopped).
    Gone(String),
}

impl ApiError {
    /// A query error: the user's input (filter, mixed link types) is 400, the rest 500.
    pub fn from_query(e: wv_query::QueryError) -> ApiError {
        use wv_query::QueryError as Q;
        match e {
            Q::BadExpression { .. } | Q::MixedLinktypes { .. } => ApiError::BadRequest(e.to_string()),
            Q::Cancelled { .. } => ApiError::gone(&e),
            other => ApiError::Internal(other.to_string()),
        }
    }

    /// The client went away; `e` (a cancelled query) says how far it got.
    pub fn gone(e: &wv_query::QueryError) -> ApiError {
        match e {
            wv_query::QueryError::Cancelled { .. } => ApiError::Gone(format!(" ({e})")),
            _ => ApiError::Gone(String::new()),
        }
    }

    pub fn status(&self) -> StatusCode {
        match self {
            ApiError::BadRequest(_) => StatusCode::BAD_REQUEST,
            ApiError::Unauthorized(_) => StatusCode::UNAUTHORIZED,
            ApiError::NotFound(_) => StatusCode::NOT_FOUND,
            ApiError::Busy(_) | ApiError::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
            ApiError::Misdirected(_) => StatusCode::MISDIRECTED_REQUEST,
            ApiError::BadGateway(_) => StatusCode::BAD_GATEWAY,
            ApiError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
            ApiError::Gone(_) => StatusCode::from_u16(499).unwrap_or(StatusCode::BAD_REQUEST),
        }
    }
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ApiError::BadRequest(s)
            | ApiError::Unauthorized(s)
            | ApiError::NotFound(s)
            | ApiError::Busy(s)
            | ApiError::Unavailable(s)
            | ApiError::Misdirected(s)
            | ApiError::BadGateway(s)
            | ApiError::Internal(s) => f.write_str(s),
            ApiError::Gone(how) => write!(f, "the client went away{how}"),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut r = (self.status(), Json(serde_json::json!({ "error": self.to_string() }))).into_response();
        match self {
            ApiError::Unauthorized(_) => {
                r.headers_mut().insert("www-authenticate", HeaderValue::from_static("Bearer realm=\"wirevault\""));
            }
            ApiError::Busy(_) => {
                r.headers_mut().insert("retry-after", HeaderValue::from_static("5"));
            }
            _ => {}
        }
        r
    }
}

/// Checks the query string: only `allowed` names, each once.
pub(crate) fn params(q: &[(String, String)], allowed: &[&str]) -> Result<HashMap<String, String>, ApiError> {
    let mut m = HashMap::new();
    for (k, v) in q {
        if !allowed.contains(&k.as_str()) {
            return Err(ApiError::BadRequest(format!(
                "unknown parameter {k:?}; this endpoint takes {}",
                allowed.join(", ")
            )));
        }
        if m.insert(k.clone(), v.clone()).is_some() {
            return Err(ApiError::BadRequest(format!("parameter {k:?} given twice")));
        }
    }
    Ok(m)
}

fn now_ns() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64)
}

/// `from`, `to` (RFC 3339, epoch seconds, `10m ago`, as the CLI), `filter`, `limit`.
pub(crate) fn selection(m: &HashMap<String, String>) -> Result<Selection, ApiError> {
    let now = now_ns();
    let time = |k: &str| {
        m.get(k)
            .filter(|v| !v.is_empty())
            .map(|v| wv_query::parse_time(v, now).map_err(|e| ApiError::BadRequest(e.to_string())))
            .transpose()
    };
    let (from, to) = (time("from")?, time("to")?);
    if let (Some(a), Some(b)) = (from, to) {
        if a >= b {
            return Err(ApiError::BadRequest("from must be earlier than to".into()));
        }
    }
    let limit = match m.get("limit").filter(|v| !v.is_empty()) {
        None => None,
        Some(v) => Some(
            wv_units::parse_count(v)
                .filter(|n| *n > 0)
                .ok_or_else(|| ApiError::BadRequest(wv_units::count_error("limit", v)))?,
        ),
    };
    Ok(Selection { from, to, expr: m.get("filter").cloned().unwrap_or_default(), limit, cancel: Arc::default() })
}

pub(crate) type Params = Query<Vec<(String, String)>>;

/// `GET /api/v1/query`: nanosecond pcap, streamed.
pub(crate) async fn query(
    Ax(state): Ax<Arc<State>>,
    conn: Option<axum::Extension<crate::conn::Conn>>,
    Query(q): Params,
) -> Result<Response, ApiError> {
    let sel = selection(&params(&q, &["from", "to", "filter", "limit"])?)?;
    let permit = export::permit(&state).await?;
    let started = std::time::Instant::now();
    let (ready_tx, ready_rx) = tokio::sync::oneshot::channel();
    let (body_tx, body_rx) = tokio::sync::mpsc::channel(4);
    let what = sel.to_string();
    // Armed before the first pass that settles the headers: a client that
    // leaves during it (this future dropped) stops the scan too.
    let cancel = export::CancelOnDrop(sel.cancel.clone());
    let link = conn.map(|c| c.0 .0);
    let done = export::spawn(&state, permit, move |st| {
        let r = export::export(st, &sel, ready_tx, body_tx, link.as_deref());
        st.metrics.query_done("query", started.elapsed());
        let packets = r.packets.map_or(String::new(), |n| format!("{n} packets, "));
        (st.cfg.log)(
            crate::LogLevel::Info,
            &format!(
                "api: query {what}: {}, {packets}{} bytes in {:.3} s",
                r.outcome,
                r.bytes,
                started.elapsed().as_secs_f64()
            ),
        );
    })?;
    drop(done);
    let head = ready_rx.await.map_err(|_| ApiError::Internal("the query thread ended without an answer".into()))??;
    // The body dropped (the client disconnected) stops the query between files.
    let stream = Chunks { rx: tokio_stream::wrappers::ReceiverStream::new(body_rx), _cancel: cancel };
    let mut r = Response::new(Body::from_stream(stream));
    for (k, v) in head.headers {
        if let Ok(v) = HeaderValue::from_str(&v) {
            // Appended: several warnings are several headers.
            r.headers_mut().append(k, v);
        }
    }
    Ok(r)
}

/// The body of an export: the query thread's chunks; dropping it cancels the query.
struct Chunks {
    rx: tokio_stream::wrappers::ReceiverStream<std::io::Result<bytes::Bytes>>,
    _cancel: export::CancelOnDrop,
}

impl tokio_stream::Stream for Chunks {
    type Item = std::io::Result<bytes::Bytes>;

    fn poll_next(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Self::Item>> {
        std::pin::Pin::new(&mut self.rx).poll_next(cx)
    }
}

/// Runs `work` on a query thread and waits for its answer.
pub(crate) async fn on_query_thread<T: Send + 'static>(
    state: &Arc<State>,
    endpoint: &'static str,
    work: impl FnOnce(&State) -> Result<T, ApiError> + Send + 'static,
) -> Result<T, ApiError> {
    let permit = export::permit(state).await?;
    let started = std::time::Instant::now();
    let rx = export::spawn(state, permit, move |st| {
        let r = work(st);
        st.metrics.query_done(endpoint, started.elapsed());
        r
    })?;
    rx.await.map_err(|_| ApiError::Internal("the query thread ended without an answer".into()))?
}

/// `GET /api/v1/count`: the number of matching packets, as JSON.
pub(crate) async fn count(Ax(state): Ax<Arc<State>>, Query(q): Params) -> Result<Response, ApiError> {
    let sel = selection(&params(&q, &["from", "to", "filter", "limit"])?)?;
    let _cancel = export::CancelOnDrop(sel.cancel.clone());
    let c = on_query_thread(&state, "count", move |st| export::count(st, &sel)).await?;
    let mut r = Json(&c).into_response();
    if let Some(why) = &c.outside {
        if let Ok(v) = HeaderValue::from_str(why) {
            r.headers_mut().insert("x-wirevault-empty", v);
        }
    }
    Ok(r)
}

/// `GET /api/v1/histogram`: packets and bytes per bucket.
pub(crate) async fn histogram(Ax(state): Ax<Arc<State>>, Query(q): Params) -> Result<Response, ApiError> {
    let m = params(&q, &["from", "to", "filter", "step"])?;
    let sel = selection(&m)?;
    let step = m.get("step").filter(|s| !s.is_empty()).map(|s| crate::histogram::parse_step(s)).transpose()?;
    let _cancel = export::CancelOnDrop(sel.cancel.clone());
    let h = on_query_thread(&state, "histogram", move |st| crate::histogram::histogram(st, &sel, step)).await?;
    Ok(Json(h).into_response())
}

/// `GET /api/v1/files`: the catalog and the files being written, optionally only the files
/// overlapping `from`..`to`.
pub(crate) async fn files(Ax(state): Ax<Arc<State>>, Query(q): Params) -> Result<Response, ApiError> {
    let sel = selection(&params(&q, &["from", "to"])?)?;
    let cat = state.view.catalog().map_err(ApiError::Unavailable)?;
    let (from, to) = (sel.from.unwrap_or(0), sel.to.unwrap_or(u64::MAX));
    let live = cat.files() - cat.live.len();
    let files: Vec<serde_json::Value> = cat
        .entries()
        .enumerate()
        .filter(|(_, e)| e.packets > 0 && wv_query::time::overlaps(e.first_ns, e.last_ns, from, to))
        .map(|(i, e)| {
            serde_json::json!({
                "file": e.file,
                // Still being written (or waiting for its catalog line): `file`
                // is the `NAME.part`, and its figures are its valid prefix's.
                "live": i >= live,
                "stream": e.stream,
                "format": e.format.map(|f| f.name()),
                "indexed": e.index.is_some(),
                "first_ns": e.first_ns,
                "last_ns": e.last_ns,
                "first": crate::store_view::time(e.first_ns),
                "last": crate::store_view::time(e.last_ns),
                "packets": e.packets,
                "bytes": e.bytes,
            })
        })
        .collect();
    Ok(Json(serde_json::json!({ "files": files })).into_response())
}

/// `GET /api/v1/flows`: the store's flow records with a packet in `from`..`to` that `filter`
/// (a flow expression: host, net, port, proto, vlan, and/or/not) matches, sorted by `sort`
/// (start, bytes, packets), at most `limit`: as `wirevault flows --json`, each with the
/// `/api/v1/query` URL of its packets.
pub(crate) async fn flows(Ax(state): Ax<Arc<State>>, Query(q): Params) -> Result<Response, ApiError> {
    let m = params(&q, &["from", "to", "filter", "sort", "limit"])?;
    let sel = selection(&m)?;
    let filter = wv_flows::filter::Expr::parse(&sel.expr).map_err(|e| ApiError::BadRequest(e.0))?;
    let sort = match m.get("sort").filter(|s| !s.is_empty()) {
        None => wv_flows::find::Sort::Start,
        Some(s) => wv_flows::find::Sort::parse(s)
            .ok_or_else(|| ApiError::BadRequest(format!("sort {s:?} is not one of start, bytes, packets")))?,
    };
    let find = wv_flows::find::Find {
        filter,
        from_ns: sel.from,
        to_ns: sel.to,
        sort,
        limit: sel.limit.map(|n| usize::try_from(n).unwrap_or(usize::MAX)),
    };
    let store = state.cfg.store.clone();
    let found = on_query_thread(&state, "flows", move |_| Ok(wv_flows::find::find(&store, &find))).await?;
    let flows: Vec<serde_json::Value> = found
        .records
        .iter()
        .map(|r| {
            let mut v = wv_flows::find::to_json(r);
            v["packets_url"] = packets_url(r).into();
            v
        })
        .collect();
    let unreadable: Vec<String> =
        found.unreadable.iter().map(|(f, why)| format!("{}: {why}; its records are left out", f.display())).collect();
    Ok(Json(serde_json::json!({ "flows": flows, "matched": found.matched, "unreadable": unreadable })).into_response())
}

/// The query of a flow's packets: its key's expression from its first to its last packet.
fn packets_url(r: &wv_flows::FlowRecord) -> String {
    let epoch = wv_wire::time::epoch_text;
    let filter = wv_flows::find::packet_filter(r);
    let filter = percent_encoding::utf8_percent_encode(&filter, percent_encoding::NON_ALPHANUMERIC);
    format!("/api/v1/query?from={}&to={}&filter={filter}", epoch(r.first_ns), epoch(r.last_ns.saturating_add(1)))
}

/// `GET /api/v1/status` (no parameter, as the other endpoints refuse the
/// ones they do not take).
pub(crate) async fn status(Ax(state): Ax<Arc<State>>, Query(q): Params) -> Result<Response, ApiError> {
    if let Some((k, _)) = q.first() {
        return Err(ApiError::BadRequest(format!("unknown parameter {k:?}; this endpoint takes none")));
    }
    Ok(Json(state.status()?).into_response())
}

/// Anything else under `/api/`.
pub(crate) async fn unknown_api() -> ApiError {
    ApiError::NotFound(
        "no such API endpoint; the endpoints are /api/v1/status, files, query, count, histogram, packets, flows".into(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    fn bad(r: Result<impl std::fmt::Debug, ApiError>) -> String {
        match r {
            Err(ApiError::BadRequest(s)) => s,
            other => panic!("not a 400: {other:?}"),
        }
    }

    fn sel(pairs: &[(&str, &str)]) -> Result<Selection, ApiError> {
        selection(&params(&q(pairs), &["from", "to", "filter", "limit"])?)
    }

    // For `bad`'s message when an answer is not the 400 expected.
    impl std::fmt::Debug for Selection {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(f, "{self}")
        }
    }

    #[test]
    fn params_take_each_allowed_name_once() {
        let m = params(&q(&[("from", "1"), ("filter", "tcp")]), &["from", "filter"]).unwrap();
        assert_eq!((m["from"].as_str(), m["filter"].as_str(), m.len()), ("1", "tcp", 2));
        assert_eq!(
            bad(params(&q(&[("form", "1")]), &["from", "to"])),
            "unknown parameter \"form\"; this endpoint takes from, to"
        );
        assert_eq!(bad(params(&q(&[("to", "1"), ("to", "2")]), &["from", "to"])), "parameter \"to\" given twice");
    }

    #[test]
    fn a_selection_reads_epoch_seconds_and_takes_empty_values_as_absent() {
        let s = sel(&[("from", "1700000000"), ("to", "1700000000.5"), ("filter", "udp"), ("limit", "10k")]).unwrap();
        assert_eq!(
            (s.from, s.to, s.expr.as_str(), s.limit),
            (Some(1_700_000_000_000_000_000), Some(1_700_000_000_500_000_000), "udp", Some(10_000))
        );
        let s = sel(&[("from", ""), ("to", ""), ("limit", "")]).unwrap();
        assert_eq!((s.from, s.to, s.expr.as_str(), s.limit), (None, None, "", None));
    }

    #[test]
    fn a_selection_refuses_an_empty_range() {
        assert_eq!(bad(sel(&[("from", "200"), ("to", "100")])), "from must be earlier than to");
        assert_eq!(bad(sel(&[("from", "100"), ("to", "100")])), "from must be earlier than to");
        assert!(sel(&[("from", "100"), ("to", "100.000000001")]).is_ok());
    }

    #[test]
    fn a_limit_is_a_count_above_zero() {
        for v in ["0", "-1", "ten", "1.5"] {
            assert_eq!(bad(sel(&[("limit", v)])), wv_units::count_error("limit", v), "{v}");
        }
        assert!(bad(sel(&[("from", "yesterday-ish")])).contains("yesterday-ish"));
    }

    #[test]
    fn each_error_has_its_status() {
        let codes: Vec<u16> = [
            ApiError::BadRequest(String::new()),
            ApiError::Unauthorized(String::new()),
            ApiError::NotFound(String::new()),
            ApiError::Busy(String::new()),
            ApiError::Unavailable(String::new()),
            ApiError::Misdirected(String::new()),
            ApiError::BadGateway(String::new()),
            ApiError::Internal(String::new()),
            ApiError::Gone(String::new()),
        ]
        .iter()
        .map(|e| e.status().as_u16())
        .collect();
        assert_eq!(codes, [400, 401, 404, 503, 503, 421, 502, 500, 499]);
        assert_eq!(ApiError::Gone(" (cancelled)".into()).to_string(), "the client went away (cancelled)");
    }
}
